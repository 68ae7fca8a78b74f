"""``trajforge inject``: a repository snapshot -> bug candidates (procedural mutants, model
rewrites of whole functions, or both: ``inject.mode`` / ``--mode``)."""

from __future__ import annotations

import argparse

from trajforge.pipelines.commands import options
from trajforge.schemas.params import CHOICES

NAME = "inject"
HELP = "inject bugs into a repository snapshot"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    options.add_source_options(parser)
    parser.add_argument("--commit", help="snapshot to mutate (default: the newest commit)")
    parser.add_argument("--max-candidates", type=options.positive_int, help="mutants per snapshot")
    parser.add_argument(
        "--operators",
        help="comma-separated operators (default: all; each snapshot takes its language's)",
    )
    parser.add_argument("--seed", type=int, help="sampling seed (default: params)")
    parser.add_argument(
        "--mode",
        choices=CHOICES["inject.mode"],
        help="who writes the bugs: the operators, a model (needs an endpoint), or both "
        "(default: inject.mode)",
    )
    parser.add_argument(
        "--llm-rewrites",
        type=options.positive_int,
        help="functions the model rewrites per snapshot (default: inject.llm_rewrites)",
    )
    parser.add_argument("--output", required=True, help="output directory")
    options.add_endpoint_options(parser)
    options.add_run_options(parser)


def run(args: argparse.Namespace, beam_args: list[str]) -> int:
    from trajforge.generators.bugs.injector import check_operators, uses_llm
    from trajforge.generators.llm.client import endpoint_configured
    from trajforge.generators.sources.specs import distinct_sources, pypi_spec
    from trajforge.pipelines.commands import stage_command
    from trajforge.pipelines.stages.inject import InjectBugs
    from trajforge.schemas.errors import ParamsError

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
    inject.mode = args.mode or inject.mode
    if args.llm_rewrites is not None:
        inject.llm_rewrites = args.llm_rewrites
    check_operators(inject.operators)
    options.endpoint_overrides(args, params)  # then params.check()
    if uses_llm(inject) and not endpoint_configured(params.llm):
        raise ParamsError(
            f"inject: mode {inject.mode} has a model rewrite functions, but no endpoint is "
            "configured; set llm.base_url and llm.model (or --base-url and --model)"
        )
    specs = distinct_sources([*inject.repos, *map(pypi_spec, inject.pypi)], options.warn(NAME))
    return stage_command.run_from_sources(
        "inject", "inject", specs, InjectBugs(params), params, args, beam_args
    )
