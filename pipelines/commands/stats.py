"""``trajforge stats DIR``: counts, yield and rejection reasons of any stage output."""

from __future__ import annotations

import argparse

NAME = "stats"
HELP = "counts, yield and rejection reasons of a stage output"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("directory")


def run(args: argparse.Namespace, beam_args: list[str]) -> int:
    from trajforge.pipelines.report.stats import print_stats

    return print_stats(args.directory)
