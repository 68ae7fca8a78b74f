"""``trajforge janitor``: remove sandbox containers that dead runs left behind."""

from __future__ import annotations

import argparse

NAME = "janitor"
HELP = "remove containers left behind by dead runs (a live run's containers are kept)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """No options: every trajforge container whose owning process is gone is removed.

    A container's owner is its host, pid and the process's start time, so a run that is still
    going keeps its containers, a reused pid does not keep a leftover alive, and another host's
    containers are left to that host.
    """


def run(args: argparse.Namespace, beam_args: list[str]) -> int:
    from trajforge.verifiers.sandbox.docker import sweep

    print(sweep().line())
    return 0
