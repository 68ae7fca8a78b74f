"""``trajforge explore``: repositories -> exploration tasks, labeled backward, proven by replay."""

from __future__ import annotations

import argparse

from trajforge.pipelines.commands import options

NAME = "explore"
HELP = "tasks from exploring repositories, proven by replay"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    options.add_source_options(parser)
    parser.add_argument("--commit", help="snapshot to explore (default: the newest commit)")
    parser.add_argument("--output", required=True, help="output directory")
    options.add_endpoint_options(parser)
    options.add_run_options(parser)


def run(args: argparse.Namespace, beam_args: list[str]) -> int:
    from trajforge.generators.llm.client import endpoint_configured
    from trajforge.generators.sources.specs import distinct_sources, pypi_spec
    from trajforge.pipelines.commands import stage_command
    from trajforge.pipelines.commands.measures import image_disk
    from trajforge.pipelines.runtime import tables as t
    from trajforge.pipelines.stages.explore import ExploreRepos

    params = options.load(args)
    options.endpoint_overrides(args, params)
    explore = params.explore
    if args.repo or args.pypi:
        explore.repos, explore.pypi = list(args.repo), list(args.pypi)
    explore.commit = args.commit or explore.commit
    specs = distinct_sources([*explore.repos, *map(pypi_spec, explore.pypi)], options.warn(NAME))
    if not endpoint_configured(params.llm):
        stage_command.say_no_endpoint(
            "explore",
            "running the doc examples of each repository as written, labeled from templates",
        )
    tables = {
        "explore_tasks": t.EXPLORE_TASKS,
        "trajectories": t.TRAJECTORIES,
        "transitions": t.TRANSITIONS,
        "rejections": t.REJECTIONS,
    }
    return stage_command.run_from_sources(
        "explore", "explore", specs, ExploreRepos(params), params, args, beam_args,
        tables=tables, kept_table="explore_tasks", unit="run",
        measure=image_disk(params, "explore_tasks"),
    )  # fmt: skip
