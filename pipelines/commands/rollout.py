"""``trajforge rollout``: described tasks -> agent trajectories, each verified in a new sandbox."""

from __future__ import annotations

import argparse

from trajforge.pipelines.commands import options

NAME = "rollout"
HELP = "run agents on tasks and verify their patches"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--input", action="append", required=True, help="a describe output (repeatable)"
    )
    parser.add_argument("--output", required=True, help="output directory")
    parser.add_argument(
        "--attempts", type=options.positive_int, help="runs per task (default: params)"
    )
    parser.add_argument(
        "--sandbox", choices=("docker", "podman", "local"), help="default: sandbox.kind"
    )
    options.add_endpoint_options(parser)
    options.add_run_options(parser)


def run(args: argparse.Namespace, beam_args: list[str]) -> int:
    import apache_beam as beam
    from trajforge.generators.llm.client import endpoint_configured
    from trajforge.pipelines.commands import stage_command
    from trajforge.pipelines.runtime import tables as t
    from trajforge.pipelines.runtime.readers import read_records, record_tables, table_rows
    from trajforge.pipelines.stages.rollout import RolloutTasks, rollout_figures
    from trajforge.schemas.task_instance import TaskInstance

    params = options.load(args)
    options.endpoint_overrides(args, params)
    if args.attempts is not None:
        params.rollout.attempts = args.attempts
    if args.sandbox:
        params.sandbox.kind = args.sandbox
    params.check()
    set_aside: list = []
    task_tables = record_tables("rollout", args.input, "tasks", TaskInstance, True, set_aside)
    configured = endpoint_configured(params.llm)
    if not configured:
        stage_command.say_no_endpoint("rollout", "tasks pass through with no trajectories")

    def build(p: beam.Pipeline) -> dict:
        tasks = read_records(p, "Tasks", task_tables, TaskInstance)
        if not configured:
            return {
                "tasks": tasks,
                "trajectories": p | "NoTrajectories" >> beam.Create([]),
                "transitions": p | "NoTransitions" >> beam.Create([]),
                "rejections": p | "NoRejections" >> beam.Create([]),
            }
        return tasks | "Rollout" >> RolloutTasks(params)

    return stage_command.run(
        "rollout", args, params, beam_args,
        tables={"tasks": t.TASKS, "trajectories": t.TRAJECTORIES, "transitions": t.TRANSITIONS,
                "rejections": t.REJECTIONS},
        build=build,
        kept_table="trajectories",
        unit="run",
        total=table_rows(task_tables) * params.rollout.attempts if configured else 0,
        set_aside=set_aside,
        measure=rollout_figures,
    )  # fmt: skip
