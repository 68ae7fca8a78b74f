"""``trajforge janitor``: remove sandbox containers that dead runs left behind."""

from __future__ import annotations

import argparse
import shutil

NAME = "janitor"
HELP = "remove containers left behind by dead runs (a live run's containers are kept)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Every trajforge container whose owning process is gone is removed, in Docker and (when it
    is installed) podman.

    A container's owner is its host, pid and the process's start time, so a run that is still
    going keeps its containers, a reused pid does not keep a leftover alive, and another host's
    containers are left to that host.
    """
    parser.add_argument(
        "--sandbox", choices=("docker", "podman", "all"), default="all",
        help="which engine to sweep (default: every one installed here)",
    )  # fmt: skip


def run(args: argparse.Namespace, beam_args: list[str]) -> int:
    if args.sandbox in ("docker", "all"):
        from trajforge.verifiers.sandbox.docker import sweep

        print(f"docker: {sweep().line()}")
    if args.sandbox == "podman" or (args.sandbox == "all" and shutil.which("podman")):
        from trajforge.verifiers.sandbox.podman import remove_leftovers

        print(f"podman: {remove_leftovers().line()}")
    return 0
