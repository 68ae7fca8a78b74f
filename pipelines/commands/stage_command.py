"""What every stage command shares: its options, params with overrides, the run and its summary."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable

import apache_beam as beam
from trajforge.pipelines.runtime import tables as t
from trajforge.pipelines.runtime.stage_run import run_stage
from trajforge.pipelines.runtime.tables import TableSpec
from trajforge.schemas.params import Params, load_params


def add_run_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--params", help="params YAML (default: ./params.yaml if present)")
    parser.add_argument(
        "--runner", help="local (default), DataflowRunner, FlinkRunner, SparkRunner"
    )
    parser.add_argument("--shards", type=int, help="Parquet files per output table")


def add_endpoint_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--base-url", help="OpenAI-compatible endpoint (default: llm.base_url)")
    parser.add_argument("--model", help="served model name (default: llm.model)")


def load(args: argparse.Namespace) -> Params:
    """The params file (``--params``, else ./params.yaml, else defaults) with run overrides."""
    path = getattr(args, "params", None)
    if path is None and os.path.exists("params.yaml"):
        path = "params.yaml"
    params = load_params(path)
    if getattr(args, "runner", None):
        params.pipeline.runner = args.runner
    if getattr(args, "shards", None):
        params.pipeline.shards = args.shards
    return params


def endpoint_overrides(args: argparse.Namespace, params: Params) -> None:
    if args.base_url:
        params.llm.base_url = args.base_url
    if args.model:
        params.llm.model = args.model
    params.check()


def run(
    stage: str,
    args: argparse.Namespace,
    params: Params,
    beam_args: list[str],
    *,
    tables: dict[str, TableSpec],
    build: Callable[[beam.Pipeline], dict],
    kept_table: str,
    unit: str,
    total: int | None = None,
) -> int:
    """Every stage's run: runner and shards from params, one summary on stderr.

    ``total`` is the number of inputs when it is known up front (it drives the progress bar);
    otherwise inputs are counted as kept + rejected at the end.
    """
    summary = run_stage(
        stage=stage,
        output=args.output,
        runner=params.pipeline.runner,
        beam_args=beam_args,
        shards=params.pipeline.shards,
        tables=tables,
        build=build,
        kept_table=kept_table,
        inputs=(lambda reasons, kept: kept + sum(reasons.values()))
        if total is None
        else (lambda reasons, kept: total),
        progress_total=total,
        progress_unit=unit,
    )
    print(summary.render(), file=sys.stderr)
    return 0


def run_from_sources(
    stage: str,
    section: str,
    specs: list[str],
    transform: beam.PTransform,
    params: Params,
    args: argparse.Namespace,
    beam_args: list[str],
    tables: dict[str, TableSpec] | None = None,
    kept_table: str = "candidates",
    unit: str = "candidate",
) -> int:
    """A stage that starts from source specs (mine, inject: candidates; explore)."""
    if not specs:
        _no_sources(stage, section)
    return run(
        stage, args, params, beam_args,
        tables=tables or {"candidates": t.CANDIDATES, "rejections": t.REJECTIONS},
        build=lambda p: p | "Sources" >> beam.Create(specs) | stage.title() >> transform,
        kept_table=kept_table,
        unit=unit,
    )  # fmt: skip


def _no_sources(stage: str, section: str) -> None:
    """Nothing configured is a valid choice in a pipeline (empty tables), and worth one line."""
    print(
        f"{stage}: no sources in params ({section}.repos / {section}.pypi) and none on the "
        "command line (--repo, --pypi); writing empty tables",
        file=sys.stderr,
    )


def say_no_endpoint(stage: str, consequence: str) -> None:
    print(
        f"{stage}: no endpoint configured (llm.base_url, llm.model); {consequence}",
        file=sys.stderr,
    )
