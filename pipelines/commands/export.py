"""``trajforge export``: curated runs -> a versioned Hugging Face dataset directory, gated."""

from __future__ import annotations

import argparse
import sys

from trajforge.pipelines.commands import options

NAME = "export"
HELP = "write a Hugging Face dataset from curated runs"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--input", action="append", required=True, help="a curate output (repeatable)"
    )
    parser.add_argument("--output", required=True, help="the dataset directory")
    parser.add_argument("--configs", help="comma-separated configs (default: all)")
    parser.add_argument("--params", help="params YAML (default: ./params.yaml if present)")


def run(args: argparse.Namespace, beam_args: list[str]) -> int:
    from trajforge.pipelines.stages.export import CONFIGS, export_dataset

    params = options.load(args)
    configs = tuple(c.strip() for c in args.configs.split(",")) if args.configs else CONFIGS
    result = export_dataset(
        args.input, args.output, params.export, configs=configs, beam_args=beam_args
    )
    print(result.summary.render(), file=sys.stderr)
    for config, why in sorted(result.omitted.items()):
        print(f"export: config {config} left out: {why}", file=sys.stderr)
    print(f"export: {result.output} version {result.version}", file=sys.stderr)
    return 0
