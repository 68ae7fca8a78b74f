"""``trajforge mine``: repositories -> candidate tasks (commits that change code and its tests)."""

from __future__ import annotations

import argparse

from trajforge.pipelines.commands import options

NAME = "mine"
HELP = "mine candidate tasks from repositories"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    options.add_source_options(parser)
    parser.add_argument("--commits", help="comma-separated SHAs to mine (default: the log)")
    parser.add_argument("--since", help="only commits after this date")
    parser.add_argument("--until", help="only commits before this date")
    parser.add_argument(
        "--max-commits", type=options.positive_int, help="newest N first-parent commits per repo"
    )
    parser.add_argument("--output", required=True, help="output directory")
    options.add_run_options(parser)


def run(args: argparse.Namespace, beam_args: list[str]) -> int:
    from trajforge.generators.mining.commits import check_date
    from trajforge.generators.sources.specs import distinct_sources, pypi_spec
    from trajforge.pipelines.commands import stage_command
    from trajforge.pipelines.stages.mine import MineRepos

    params = options.load(args)
    if args.repo or args.pypi:
        params.sources.repos, params.sources.pypi = list(args.repo), list(args.pypi)
    if args.commits:
        params.mine.commits = [c.strip() for c in args.commits.split(",") if c.strip()]
    if args.max_commits is not None:
        params.mine.max_commits = args.max_commits
    params.mine.since = args.since or params.mine.since
    params.mine.until = args.until or params.mine.until
    check_date("--since" if args.since else "mine.since", params.mine.since)
    check_date("--until" if args.until else "mine.until", params.mine.until)
    specs = distinct_sources(
        [*params.sources.repos, *map(pypi_spec, params.sources.pypi)], options.warn(NAME)
    )
    return stage_command.run_from_sources(
        "mine", "sources", specs, MineRepos(params), params, args, beam_args
    )
