"""The release commands: ``export`` (dataset + gates), ``report`` (HTML) and ``publish`` (Hub)."""

from __future__ import annotations

import argparse
import sys

from schemas.errors import UserError
from schemas.params import Params


def run_export(args: argparse.Namespace, params: Params) -> int:
    from pipelines.export import CONFIGS, export_dataset

    configs = tuple(c.strip() for c in args.configs.split(",")) if args.configs else CONFIGS
    result = export_dataset(args.input, args.output, params.export, configs=configs)
    print(result.summary.render(), file=sys.stderr)
    for config, why in sorted(result.omitted.items()):
        print(f"export: config {config} left out: {why}", file=sys.stderr)
    print(f"export: {result.output} version {result.version}", file=sys.stderr)
    return 0


def run_report(args: argparse.Namespace) -> int:
    from pipelines.report import write_report

    stages: dict[str, str] = {}
    for item in args.stage:
        name, sep, directory = item.partition("=")
        if not sep or not name or not directory:
            raise UserError(
                f"report: --stage {item!r} must be NAME=DIR, e.g. validate=data/validate"
            )
        stages[name] = directory
    path = write_report(stages, args.output, args.title)
    print(f"report: {path}", file=sys.stderr)
    return 0


def run_publish(args: argparse.Namespace) -> int:
    from pipelines.publish import publish_dataset

    result = publish_dataset(
        args.directory,
        args.repo_id,
        private=args.private,
        dry_run=args.dry_run,
        token_env=args.token_env,
    )
    print(result.render(), file=sys.stderr)
    return 0
