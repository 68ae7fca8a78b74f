"""What every stage command shares when it runs: the Beam stage run, and its summary on stderr."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Sequence

import apache_beam as beam
from trajforge.pipelines.runtime import tables as t
from trajforge.pipelines.runtime.stage_run import run_stage
from trajforge.pipelines.runtime.tables import TableSpec
from trajforge.schemas.params import Params
from trajforge.schemas.rejection import Rejection


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
    sources: Sequence[str] = (),
    set_aside: Sequence[Rejection] = (),
    measure: Callable[[str], dict[str, object]] | None = None,
) -> int:
    """Every stage's run: runner and shards from params, one summary on stderr.

    ``total`` is the number of inputs when it is known up front (it drives the progress bar);
    otherwise inputs are counted as kept + rejected at the end. The output may not be or hold
    any input the command line names, nor one of ``sources`` (local repositories); ``set_aside``
    are input files left out before the run (counted as rejections).
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
        else (lambda reasons, kept: total + len(set_aside)),
        progress_total=total,
        progress_unit=unit,
        protect=[*given_inputs(args), *sources],
        set_aside=set_aside,
        measure=measure,
        workers=params.pipeline.workers,
        scheduler=params.pipeline.dask_scheduler,
        cores=params.pipeline.cores_held(),
        core_hour_price=params.pipeline.core_hour_price,
    )
    print(summary.render(), file=sys.stderr)
    return 0


def given_inputs(args: argparse.Namespace) -> list[str]:
    """Every path the command line gave as an input (``--input``, ``--benchmark``, ``--report``,
    positional paths, ``--params``): an output must never replace one of them."""
    found: list[str] = []
    for name in ("input", "paths", "benchmark", "report"):
        value = getattr(args, name, None) or []
        found.extend(value if isinstance(value, list) else [value])
    if getattr(args, "params", None):
        found.append(args.params)
    return [str(path) for path in found]


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
    measure: Callable[[str], dict[str, object]] | None = None,
) -> int:
    """A stage that starts from source specs (mine, inject: candidates; explore)."""
    if not specs:
        _no_sources(stage, section)
    # A local repository by its absolute path: a worker of a cluster runs in another directory.
    resolved = [os.path.abspath(spec) if os.path.isdir(spec) else spec for spec in specs]
    return run(
        stage, args, params, beam_args,
        tables=tables or {"candidates": t.CANDIDATES, "rejections": t.REJECTIONS},
        build=lambda p: p | "Sources" >> beam.Create(resolved) | stage.title() >> transform,
        kept_table=kept_table,
        unit=unit,
        sources=[spec for spec in specs if os.path.isdir(spec)],
        measure=measure,
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
