"""``trajforge export``: curated runs -> a versioned Hugging Face dataset directory, gated; or,
with ``--format harbor``, one Harbor task folder per task (``pipelines/release/harbor.py``)."""

from __future__ import annotations

import argparse
import sys

from trajforge.pipelines.commands import options

NAME = "export"
HELP = "write a Hugging Face dataset (or Harbor task folders) from curated runs"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--input", action="append", required=True, help="a curate output (repeatable)"
    )
    parser.add_argument("--output", required=True, help="the dataset directory")
    parser.add_argument(
        "--format",
        choices=("hf", "harbor"),
        default="hf",
        help="hf: a Hugging Face dataset (default); harbor: one Harbor task folder per task",
    )
    parser.add_argument(
        "--harbor-image",
        choices=("recipe", "digest"),
        default="recipe",
        help="harbor: build each environment from its recipe (default), or start from the "
        "task's image by registry digest where it has one",
    )
    parser.add_argument("--configs", help="comma-separated configs (default: all)")
    parser.add_argument("--params", help="params YAML (default: ./params.yaml if present)")


def run(args: argparse.Namespace, beam_args: list[str]) -> int:
    params = options.load(args)
    if args.format == "harbor":
        return _harbor(args, params)
    from trajforge.pipelines.stages.export import CONFIGS, export_dataset

    configs = tuple(c.strip() for c in args.configs.split(",")) if args.configs else CONFIGS
    result = export_dataset(
        args.input, args.output, params.export, configs=configs, beam_args=beam_args
    )
    print(result.summary.render(), file=sys.stderr)
    for config, why in sorted(result.omitted.items()):
        print(f"export: config {config} left out: {why}", file=sys.stderr)
    print(f"export: {result.output} version {result.version}", file=sys.stderr)
    return 0


def _harbor(args: argparse.Namespace, params) -> int:
    from trajforge.pipelines.release.harbor import TASK_SCHEMA, export_harbor

    result = export_harbor(args.input, args.output, params, image=args.harbor_image)
    print(result.summary.render(), file=sys.stderr)
    print(
        f"export: {result.output}: {len(result.tasks)} Harbor tasks (task schema {TASK_SCHEMA})",
        file=sys.stderr,
    )
    return 0
