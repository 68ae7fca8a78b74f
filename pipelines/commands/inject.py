"""``trajforge inject``: a repository snapshot -> bug candidates (procedural mutants)."""

from __future__ import annotations

import argparse

from trajforge.pipelines.commands import options

NAME = "inject"
HELP = "inject bugs into a repository snapshot"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    options.add_source_options(parser)
    parser.add_argument("--commit", help="snapshot to mutate (default: the newest commit)")
    parser.add_argument("--max-candidates", type=options.positive_int, help="mutants per snapshot")
    parser.add_argument("--operators", help="comma-separated operators (default: all)")
    parser.add_argument("--seed", type=int, help="sampling seed (default: params)")
    parser.add_argument("--output", required=True, help="output directory")
    options.add_run_options(parser)


def run(args: argparse.Namespace, beam_args: list[str]) -> int:
    from trajforge.generators.bugs.injector import check_operators
    from trajforge.generators.sources.specs import pypi_spec
    from trajforge.pipelines.commands import stage_command
    from trajforge.pipelines.stages.inject import InjectBugs

    params = options.load(args)
    inject = params.inject
    if args.repo or args.pypi:
        inject.repos, inject.pypi = list(args.repo), list(args.pypi)
    inject.commit = args.commit or inject.commit
    if args.max_candidates is not None:
        inject.max_candidates = args.max_candidates
    if args.operators:
        inject.operators = [o.strip() for o in args.operators.split(",") if o.strip()]
    if args.seed is not None:
        inject.seed = args.seed
    check_operators(inject.operators)
    params.check()
    specs = [*inject.repos, *(pypi_spec(name) for name in inject.pypi)]
    return stage_command.run_from_sources(
        "inject", "inject", specs, InjectBugs(params), params, args, beam_args
    )
