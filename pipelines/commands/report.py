"""``trajforge report``: one self-contained HTML page with the run's yield, reasons and plots."""

from __future__ import annotations

import argparse
import sys

NAME = "report"
HELP = "one HTML page with the run's yield and plots"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--stage", action="append", required=True, metavar="NAME=DIR", help="in pipeline order"
    )
    parser.add_argument("--output", required=True, help="the HTML file")
    parser.add_argument("--title", default="trajforge run report")


def run(args: argparse.Namespace, beam_args: list[str]) -> int:
    from trajforge.pipelines.report.html import write_report
    from trajforge.schemas.errors import UserError

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
