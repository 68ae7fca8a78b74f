"""The ``trajforge`` command line: one subcommand per stage, plus housekeeping.

Every error a user can cause is one line on stderr and exit code 2, never a traceback.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from collections.abc import Sequence

from schemas.errors import UserError
from schemas.params import Params, load_params


def _common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--params", help="params YAML (default: ./params.yaml if present)")
    parser.add_argument(
        "--runner", help="local (default), DataflowRunner, FlinkRunner, SparkRunner"
    )
    parser.add_argument("--shards", type=int, help="Parquet files per output table")


def _endpoint(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--base-url", help="OpenAI-compatible endpoint (default: llm.base_url)")
    parser.add_argument("--model", help="served model name (default: llm.model)")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="trajforge",
        description="Turn code repositories into verified training data for SWE agents.",
        epilog="Beam pipeline options for remote runners go after `--`.",
    )
    sub = parser.add_subparsers(dest="command", required=True)

    mine = sub.add_parser("mine", help="mine candidate tasks from repositories")
    mine.add_argument("--repo", action="append", default=[], help="local path or git URL")
    mine.add_argument("--pypi", action="append", default=[], help="PyPI package name")
    mine.add_argument("--commits", help="comma-separated SHAs to mine (default: the log)")
    mine.add_argument("--since", help="only commits after this date")
    mine.add_argument("--until", help="only commits before this date")
    mine.add_argument("--max-commits", type=int, help="newest N first-parent commits per repo")
    mine.add_argument("--output", required=True, help="output directory")
    _common(mine)

    inject = sub.add_parser("inject", help="inject bugs into a repository snapshot")
    inject.add_argument("--repo", action="append", default=[], help="local path or git URL")
    inject.add_argument("--pypi", action="append", default=[], help="PyPI package name")
    inject.add_argument("--commit", help="snapshot to mutate (default: the newest commit)")
    inject.add_argument("--max-candidates", type=int, help="mutants per snapshot")
    inject.add_argument("--operators", help="comma-separated operators (default: all)")
    inject.add_argument("--seed", type=int, help="sampling seed (default: params)")
    inject.add_argument("--output", required=True, help="output directory")
    _common(inject)

    validate = sub.add_parser("validate", help="prove candidates by running their tests")
    validate.add_argument(
        "--input", action="append", required=True, help="a mine or inject output (repeatable)"
    )
    validate.add_argument("--output", required=True, help="output directory")
    validate.add_argument("--sandbox", choices=("docker", "local"), help="default: docker")
    validate.add_argument("--workers", type=int, help="concurrent sandboxes per Beam worker")
    validate.add_argument("--reruns", type=int, help="reruns that a verdict must survive")
    _common(validate)

    describe = sub.add_parser("describe", help="write each task's issue text (problem_statement)")
    describe.add_argument(
        "--input", action="append", required=True, help="a validate output (repeatable)"
    )
    describe.add_argument("--output", required=True, help="output directory")
    describe.add_argument(
        "--overwrite", action="store_true", help="also rewrite tasks that have a statement"
    )
    _endpoint(describe)
    _common(describe)

    rollout = sub.add_parser("rollout", help="run agents on tasks and verify their patches")
    rollout.add_argument(
        "--input", action="append", required=True, help="a describe output (repeatable)"
    )
    rollout.add_argument("--output", required=True, help="output directory")
    rollout.add_argument("--attempts", type=int, help="runs per task (default: params)")
    rollout.add_argument("--sandbox", choices=("docker", "local"), help="default: docker")
    _endpoint(rollout)
    _common(rollout)

    explore = sub.add_parser("explore", help="tasks from exploring repositories, proven by replay")
    explore.add_argument("--repo", action="append", default=[], help="local path or git URL")
    explore.add_argument("--pypi", action="append", default=[], help="PyPI package name")
    explore.add_argument("--commit", help="snapshot to explore (default: the newest commit)")
    explore.add_argument("--output", required=True, help="output directory")
    _endpoint(explore)
    _common(explore)

    from pipelines.import_trajectories import add_parser as add_import_parser

    add_import_parser(sub)

    curate = sub.add_parser("curate", help="score, dedup and decontaminate proven tasks")
    curate.add_argument(
        "--input", action="append", required=True, help="a validate output (repeatable)"
    )
    curate.add_argument(
        "--benchmark", action="append", default=[], help="SWE-bench-style Parquet/JSONL to avoid"
    )
    curate.add_argument("--output", required=True, help="output directory")
    _common(curate)

    export = sub.add_parser("export", help="write a Hugging Face dataset from curated runs")
    export.add_argument(
        "--input", action="append", required=True, help="a curate output (repeatable)"
    )
    export.add_argument("--output", required=True, help="the dataset directory")
    export.add_argument("--configs", help="comma-separated configs (default: all)")
    export.add_argument("--params")

    report = sub.add_parser("report", help="one HTML page with the run's yield and plots")
    report.add_argument(
        "--stage", action="append", required=True, metavar="NAME=DIR", help="in pipeline order"
    )
    report.add_argument("--output", required=True, help="the HTML file")
    report.add_argument("--title", default="trajforge run report")

    publish = sub.add_parser("publish", help="push an export to the Hugging Face Hub")
    publish.add_argument("directory", help="a `trajforge export` output")
    publish.add_argument("--repo-id", required=True, help="ORG/NAME on the Hub")
    publish.add_argument("--private", action="store_true")
    publish.add_argument("--dry-run", action="store_true", help="write the manifest, push nothing")
    publish.add_argument("--token-env", default="HF_TOKEN", help="variable holding the token")

    base = sub.add_parser("base-image", help="build or pull the base image(s) for the sandbox")
    base.add_argument("--python", action="append", help="Python version (default: params)")
    base.add_argument("--params")

    sub.add_parser("janitor", help="remove containers left behind by killed runs")

    stats = sub.add_parser("stats", help="counts, yield and rejection reasons of a stage output")
    stats.add_argument("directory")
    return parser


def _params(path: str | None) -> Params:
    if path is None and os.path.exists("params.yaml"):
        path = "params.yaml"
    return load_params(path)


def main(argv: Sequence[str] | None = None) -> int:
    args_list = list(sys.argv[1:] if argv is None else argv)
    beam_args: list[str] = []
    if "--" in args_list:
        split = args_list.index("--")
        args_list, beam_args = args_list[:split], args_list[split + 1 :]
    args = build_parser().parse_args(args_list)
    # Beam's optional GCP modules warn at import that apitools is absent; that is not news.
    logging.getLogger().setLevel(logging.ERROR)
    try:
        return _dispatch(args, beam_args)
    except UserError as exc:
        print(f"trajforge: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("trajforge: interrupted; rerun the same command to resume", file=sys.stderr)
        return 130


def _dispatch(args: argparse.Namespace, beam_args: list[str]) -> int:
    if args.command == "janitor":
        from verifiers.docker_sandbox import janitor

        print(f"removed {janitor(only_dead_owners=False)} container(s)")
        return 0
    if args.command == "stats":
        from pipelines.stats import print_stats

        return print_stats(args.directory)
    if args.command == "import-trajectories":
        from pipelines.import_trajectories import run_import

        return run_import(args)
    if args.command in ("report", "publish"):
        from pipelines import release

        return release.run_report(args) if args.command == "report" else release.run_publish(args)
    params = _params(args.params)
    if args.command == "export":
        from pipelines.release import run_export

        return run_export(args, params)
    if args.command == "base-image":
        from generators.base_image import ensure_base_image

        for python in args.python or params.environment.pythons:
            ensure_base_image(python, params.sandbox.docker_host)
        return 0
    if args.runner:
        params.pipeline.runner = args.runner
    if args.shards:
        params.pipeline.shards = args.shards
    from pipelines import commands

    run = {
        "mine": commands.run_mine,
        "inject": commands.run_inject,
        "describe": commands.run_describe,
        "rollout": commands.run_rollout,
        "explore": commands.run_explore,
        "curate": commands.run_curate,
    }.get(args.command, commands.run_validate)
    return run(args, params, beam_args)


if __name__ == "__main__":
    raise SystemExit(main())
