"""``trajforge import-trajectories``: other agents' runs (SWE-agent, mini-swe-agent, nebius rows)
as a trajforge trajectories table, optionally graded by SWE-bench reports."""

from __future__ import annotations

import argparse
import sys

from trajforge.generators.trajectories.importer import READERS
from trajforge.pipelines.commands import options

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
    options.add_run_options(parser)


def run(args: argparse.Namespace, beam_args: list[str]) -> int:
    import apache_beam as beam
    from trajforge.pipelines.commands import stage_command
    from trajforge.pipelines.runtime import tables as t
    from trajforge.pipelines.runtime.outputs import column, table_files
    from trajforge.pipelines.stages.import_trajectories import (
        ImportTrajectories,
        input_files,
        load_reports,
    )

    params = options.load(args)
    verdicts = load_reports(args.report)
    files, missing = input_files(args.format, args.paths)

    def build(p: beam.Pipeline) -> dict:
        numbered = p | "Files" >> beam.Create(list(enumerate(files)))
        imported = numbered | "Import" >> ImportTrajectories(args.format, verdicts)
        not_found = p | "PathsWithoutFiles" >> beam.Create(missing)
        rejections = (imported["rejections"], not_found) | "AllRejections" >> beam.Flatten()
        return {"trajectories": imported["trajectories"], "rejections": rejections}

    code = stage_command.run(
        "import", args, params, beam_args,
        tables={"trajectories": t.TRAJECTORIES, "rejections": t.REJECTIONS},
        build=build,
        kept_table="trajectories",
        unit="run",
    )  # fmt: skip
    if verdicts:  # read from the table written: runners without metrics say it too
        imported = column(table_files(args.output, "trajectories"), "instance_id")
        if not verdicts.keys() & set(imported):
            print(
                "import: no imported instance_id is in the report(s); check that they grade "
                "this run",
                file=sys.stderr,
            )
    return code
