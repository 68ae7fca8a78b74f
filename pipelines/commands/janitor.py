"""``trajforge janitor``: remove sandbox containers that killed runs left behind."""

from __future__ import annotations

import argparse

NAME = "janitor"
HELP = "remove containers left behind by killed runs"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """No options: every trajforge container whose run is over is removed."""


def run(args: argparse.Namespace, beam_args: list[str]) -> int:
    from trajforge.verifiers.sandbox.docker import janitor

    print(f"removed {janitor(only_dead_owners=False)} container(s)")
    return 0
