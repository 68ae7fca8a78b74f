"""``trajforge base-image``: the sandbox's base image per Python, pulled or built offline."""

from __future__ import annotations

import argparse

from trajforge.pipelines.commands import options

NAME = "base-image"
HELP = "build or pull the base image(s) for the sandbox"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--python",
        action="append",
        help="Python version (default: every environment.pythons; a build makes any it lacks)",
    )
    parser.add_argument("--params", help="params YAML (default: ./params.yaml if present)")
    parser.add_argument(
        "--sandbox",
        choices=("docker", "podman"),
        help="whose image store gets it (default: sandbox.kind; local uses docker's)",
    )


def run(args: argparse.Namespace, beam_args: list[str]) -> int:
    from trajforge.generators.environments.base_image import (
        ensure_base_image,
        ensure_podman_base_image,
    )

    params = options.load(args)
    podman = (args.sandbox or params.sandbox.kind) == "podman"
    for python in args.python or params.environment.pythons:
        if podman:
            ensure_podman_base_image(python)
        else:
            ensure_base_image(python, params.sandbox.docker_host)
    return 0
