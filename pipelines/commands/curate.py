"""``trajforge curate``: proven tasks and runs -> scored, deduplicated, decontaminated."""

from __future__ import annotations

import argparse

from trajforge.pipelines.commands import options
from trajforge.schemas.explore_task import ExploreTask
from trajforge.schemas.task_instance import TaskInstance
from trajforge.schemas.trajectory import Trajectory
from trajforge.schemas.transition import Transition

NAME = "curate"
HELP = "score, dedup and decontaminate proven tasks"
RECORDS = {
    "tasks": TaskInstance,
    "explore_tasks": ExploreTask,
    "trajectories": Trajectory,
    "transitions": Transition,
}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--input", action="append", required=True, help="a validate output (repeatable)"
    )
    parser.add_argument(
        "--benchmark", action="append", default=[], help="SWE-bench-style Parquet/JSONL to avoid"
    )
    parser.add_argument("--output", required=True, help="output directory")
    options.add_run_options(parser)


def run(args: argparse.Namespace, beam_args: list[str]) -> int:
    import apache_beam as beam
    from trajforge.pipelines.commands import stage_command
    from trajforge.pipelines.runtime import tables as t
    from trajforge.pipelines.runtime.readers import read_records, record_tables, table_rows
    from trajforge.pipelines.stages.curate import Curate

    params = options.load(args)
    if args.benchmark:
        params.curate.benchmarks = list(args.benchmark)
    set_aside: list = []
    inputs = {
        name: record_tables("curate", args.input, name, cls, name == "tasks", set_aside)
        for name, cls in RECORDS.items()
    }

    def build(p: beam.Pipeline) -> dict:
        records = {
            name: read_records(p, name.title().replace("_", ""), inputs[name], cls)
            for name, cls in RECORDS.items()
        }
        return records | "Curate" >> Curate(params.curate)

    return stage_command.run(
        "curate", args, params, beam_args,
        tables={"tasks": t.TASKS, "explore_tasks": t.EXPLORE_TASKS,
                "trajectories": t.TRAJECTORIES, "transitions": t.TRANSITIONS,
                "rejections": t.REJECTIONS},
        build=build,
        kept_table="tasks",
        unit="record",
        total=sum(table_rows(found) for found in inputs.values()),
        set_aside=set_aside,
    )  # fmt: skip
