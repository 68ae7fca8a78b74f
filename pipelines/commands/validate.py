"""``trajforge validate``: candidates -> proven tasks, by running their tests in sandboxes."""

from __future__ import annotations

import argparse
import sys

from trajforge.pipelines.commands import options

NAME = "validate"
HELP = "prove candidates by running their tests"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--input", action="append", required=True, help="a mine or inject output (repeatable)"
    )
    parser.add_argument("--output", required=True, help="output directory")
    parser.add_argument(
        "--sandbox", choices=("docker", "podman", "local"), help="default: sandbox.kind"
    )
    parser.add_argument(
        "--workers", type=options.positive_int, help="concurrent sandboxes per Beam worker"
    )
    parser.add_argument("--reruns", type=options.count, help="reruns that a verdict must survive")
    options.add_run_options(parser)


def run(args: argparse.Namespace, beam_args: list[str]) -> int:
    from trajforge.pipelines.commands import stage_command
    from trajforge.pipelines.commands.measures import build_seconds, image_disk, image_sizes
    from trajforge.pipelines.runtime import tables as t
    from trajforge.pipelines.runtime.readers import candidate_files, read_records, table_rows
    from trajforge.pipelines.stages.validate import ValidateCandidates, label_figures
    from trajforge.schemas.candidate import Candidate

    params = options.load(args)
    if args.sandbox:
        params.sandbox.kind = args.sandbox
    if args.workers is not None:
        params.validate.workers = args.workers
    if args.reruns is not None:
        params.validate.reruns = args.reruns
    params.check()
    set_aside: list = []
    inputs = candidate_files("validate", args.input, Candidate, set_aside)
    if params.sandbox.kind == "local":
        from trajforge.verifiers.sandbox.local import WARNING

        print(WARNING, file=sys.stderr)
    disk = image_disk(params, "tasks")
    builds = build_seconds("profiles")
    sizes = image_sizes("profiles")
    return stage_command.run(
        "validate", args, params, beam_args,
        tables={"tasks": t.TASKS, "rejections": t.REJECTIONS, "profiles": t.PROFILES,
                "runs": t.RUNS, "label_check": t.LABEL_CHECK},
        build=lambda p: (
            read_records(p, "Candidates", inputs, Candidate) | ValidateCandidates(params)
        ),
        kept_table="tasks",
        unit="candidate",
        total=table_rows(inputs),
        set_aside=set_aside,
        measure=lambda staging: {
            **disk(staging), **builds(staging), **sizes(staging), **label_figures(staging)
        },
    )  # fmt: skip
