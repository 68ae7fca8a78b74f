"""``trajforge base-image``: the sandbox's base image per Python, pulled or built offline."""

from __future__ import annotations

import argparse

from trajforge.pipelines.commands import options

NAME = "base-image"
HELP = "build or pull the base image(s) for the sandbox"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--python", action="append", help="Python version (default: params)")
    parser.add_argument("--params", help="params YAML (default: ./params.yaml if present)")


def run(args: argparse.Namespace, beam_args: list[str]) -> int:
    from trajforge.generators.environments.base_image import ensure_base_image

    params = options.load(args)
    for python in args.python or params.environment.pythons:
        ensure_base_image(python, params.sandbox.docker_host)
    return 0
