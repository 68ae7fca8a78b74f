"""``trajforge import-trajectories``: other agents' runs (SWE-agent, mini-swe-agent, nebius rows)
as a trajforge trajectories table, optionally graded by SWE-bench reports."""

from __future__ import annotations

import argparse

from trajforge.generators.trajectories.importer import READERS

NAME = "import-trajectories"
HELP = "read SWE-agent, mini-swe-agent or nebius trajectories into trajforge's schema"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.description = "Read existing agent trajectories into a trajforge trajectories table."
    parser.add_argument("--format", required=True, choices=sorted(READERS))
    parser.add_argument(
        "paths",
        nargs="+",
        metavar="PATH",
        help="files, or directories searched for *.traj (swe-agent), *.traj.json "
        "(mini-swe-agent), *.parquet and *.jsonl (nebius)",
    )
    parser.add_argument("--output", required=True, help="output directory")
    parser.add_argument(
        "--report",
        action="append",
        default=[],
        metavar="REPORT_JSON",
        help="SWE-bench evaluation report: sets resolved, reward and test_report (repeatable)",
    )


def run(args: argparse.Namespace, beam_args: list[str]) -> int:
    from trajforge.pipelines.stages.import_trajectories import run_import

    return run_import(args)
