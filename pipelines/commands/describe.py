"""``trajforge describe``: tasks -> tasks with issue text (back-translation, or the template)."""

from __future__ import annotations

import argparse

from trajforge.pipelines.commands import options

NAME = "describe"
HELP = "write each task's issue text (problem_statement)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--input", action="append", required=True, help="a validate output (repeatable)"
    )
    parser.add_argument("--output", required=True, help="output directory")
    parser.add_argument(
        "--overwrite", action="store_true", help="also rewrite tasks that have a statement"
    )
    options.add_endpoint_options(parser)
    options.add_run_options(parser)


def run(args: argparse.Namespace, beam_args: list[str]) -> int:
    import apache_beam as beam
    from trajforge.generators.llm.client import endpoint_configured
    from trajforge.pipelines.commands import stage_command
    from trajforge.pipelines.runtime import tables as t
    from trajforge.pipelines.runtime.readers import read_records, record_tables, table_rows
    from trajforge.pipelines.stages.describe import DescribeTasks
    from trajforge.schemas.task_instance import TaskInstance
    from trajforge.schemas.test_run import TestRun

    params = options.load(args)
    options.endpoint_overrides(args, params)
    params.describe.overwrite = args.overwrite or params.describe.overwrite
    set_aside: list = []
    task_tables = record_tables("describe", args.input, "tasks", TaskInstance, True, set_aside)
    run_tables = record_tables("describe", args.input, "runs", TestRun, False, set_aside)
    if not endpoint_configured(params.llm):
        stage_command.say_no_endpoint(
            "describe",
            "issue text is written from the failing tests' output by the template writer",
        )

    def build(p: beam.Pipeline) -> dict:
        tasks = read_records(p, "Tasks", task_tables, TaskInstance)
        runs = read_records(p, "Runs", run_tables, TestRun)
        return (tasks, runs) | "Describe" >> DescribeTasks(params)

    return stage_command.run(
        "describe", args, params, beam_args,
        tables={"tasks": t.TASKS, "statements": t.STATEMENTS, "rejections": t.REJECTIONS},
        build=build,
        kept_table="tasks",
        unit="task",
        total=table_rows(task_tables),
        set_aside=set_aside,
    )  # fmt: skip
