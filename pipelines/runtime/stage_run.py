"""Run one stage end to end: build the Beam graph, write its tables, publish, summarise."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any

import apache_beam as beam
from apache_beam.metrics.metric import MetricsFilter
from apache_beam.pipeline import AppliedPTransform, PipelineVisitor
from trajforge.pipelines.runtime import audit_line, cost, progress, reach, tally
from trajforge.pipelines.runtime.outputs import column, row_count
from trajforge.pipelines.runtime.runner import make_pipeline
from trajforge.pipelines.runtime.sinks import (
    WriteTable,
    check_output,
    ensure_tables,
    publish,
    staging_dir,
)
from trajforge.pipelines.runtime.stage_fn import StageFn
from trajforge.pipelines.runtime.tables import TableSpec
from trajforge.pipelines.runtime.tally import SUMMARY
from trajforge.schemas.rejection import Rejection
from trajforge.schemas.storage import join, parquet_files, write_bytes_atomic

# Beam counters a stage summary reports when the stage has them.
SUMMARY_COUNTERS = (
    "cache_hits", "images_built", "images_untrusted", "images_pulled", "images_pushed",
    "registry_errors",
    "environments_reused", "reuse_images_built", "reuse_refused", "reuse_audit_agreed",
    "reuse_audit_disagreed",
    "install_fallbacks", "relaxations", "system_packages", "repairs", "excluded_modules",
    "python_moves",
    "agent_rounds", "agent_recipes",
    "llm_calls", "llm_cache_hits", "pruned",
)  # fmt: skip


def run_stage(
    *,
    stage: str,
    output: str,
    runner: str,
    beam_args: list[str],
    shards: int,
    tables: dict[str, TableSpec],
    build: Callable[[beam.Pipeline], dict[str, Any]],
    kept_table: str,
    inputs: Callable[[Counter, int], int],
    progress_total: int | None,
    progress_unit: str,
    protect: Sequence[str] = (),
    set_aside: Sequence[Rejection] = (),
    measure: Callable[[str], dict[str, object]] | None = None,
    workers: int = 2,
    scheduler: str | None = None,
    cores: int = 1,
    core_hour_price: float | None = None,
) -> progress.Summary:
    """``build`` wires the stage and returns its named PCollections; each is written as a table.

    ``output`` is checked first (``sinks.check_output``: never the working directory, one of
    ``protect`` or a directory trajforge did not write); ``set_aside`` are rejections found before
    the pipeline (unreadable input files), written with the stage's own. ``measure`` adds
    figures read from the written tables (its argument: the directory they are in). ``workers``
    and ``scheduler`` are the Dask runner's (``runtime/runner.py``); ``cores`` (held for the
    run) and ``core_hour_price`` make the cost lines (``runtime/cost.py``).

    Every table's write ends in the shard paths it wrote, and the paths of all tables meet in one
    final Flatten: a runner that computes only the pipeline's last branch (Beam's own DaskRunner
    does) still writes every table."""
    check_output(stage, output, protect)
    timer = progress.Timer()
    staging = staging_dir(output)
    pipeline = make_pipeline(runner, beam_args, workers=workers, scheduler=scheduler)
    outputs = build(pipeline)
    tallies = join(staging, tally.FOLDER)
    if set_aside:
        early = pipeline | "SetAside" >> beam.Create(list(set_aside))
        outputs["rejections"] = (outputs["rejections"], early) | "WithSetAside" >> beam.Flatten()
    written = [
        outputs[name] | WriteTable(staging, name, spec.schema, spec.sort_key, shards)
        for name, spec in tables.items()
    ]
    written | "Written" >> beam.Flatten()
    pipeline.visit(_TallyInto(tallies))
    progress.start(stage, progress_total, progress_unit)
    try:
        result = pipeline.run()
        result.wait_until_finish()
    finally:
        progress.stop()
    ensure_tables(staging, {name: spec.schema for name, spec in tables.items()})
    reasons = Counter(_column(join(staging, "rejections"), "reason"))
    kept = _rows(join(staging, kept_table))
    summary = progress.Summary(stage, inputs(reasons, kept), kept, reasons, timer.elapsed())
    summary.kept_table = kept_table  # readers of the output count this table as kept
    summary.extra.update(summary_counters(result, tallies))
    reach.fold(summary.extra)
    audit_line.fold(summary.extra)
    cost.fold(summary, cores, core_hour_price)
    tally.remove(tallies)
    if measure is not None:
        summary.extra.update(measure(staging))
    write_bytes_atomic(
        join(staging, "summary.json"), json.dumps(summary.as_dict(), indent=2).encode()
    )
    publish(staging, output)
    return summary


class _TallyInto(PipelineVisitor):
    """Points every StageFn of the pipeline at the run's tally folder before it is pickled."""

    def __init__(self, directory: str) -> None:
        self.directory = directory

    def visit_transform(self, node: AppliedPTransform) -> None:
        fn = getattr(node.transform, "fn", None)
        if isinstance(fn, StageFn):
            fn.tally_dir = self.directory


def summary_counters(result: Any, tallies: str) -> dict[str, object]:
    """The summary's counters from Beam's metrics; from the tally files where the runner kept no
    metrics (then ``counted_from: tally`` says so)."""
    if _query(result, MetricsFilter()):
        return {**_counters(result, SUMMARY_COUNTERS), **_summary_metrics(result)}
    counts, texts = tally.read(tallies)
    found: dict[str, object] = {"counted_from": "tally"}
    for (_, name), value in sorted(counts.items()):
        if name in SUMMARY_COUNTERS:
            found[name] = found.get(name, 0) + value  # type: ignore[operator]
    for (namespace, name), values in sorted(texts.items()):
        if namespace == SUMMARY:
            found[name] = next(iter(values)) if len(values) == 1 else sorted(values)
    for (namespace, name), value in sorted(counts.items()):
        if namespace == SUMMARY:
            found[name] = value
    return found


def _counters(result: Any, names: tuple[str, ...]) -> dict[str, object]:
    """Beam counters worth a line in the summary (committed values, or attempted ones)."""
    found: dict[str, object] = {}
    for counter in _query(result, MetricsFilter()).get("counters", []):
        if counter.key.metric.name in names:
            value = counter.committed if counter.committed is not None else counter.attempted
            found[counter.key.metric.name] = found.get(counter.key.metric.name, 0) + value
    return found


def _summary_metrics(result: Any) -> dict[str, object]:
    """Metrics in the ``SUMMARY`` namespace by name: string sets first (one value, or a sorted
    list), then counters (summed over steps)."""
    metrics = _query(result, MetricsFilter().with_namespace(SUMMARY))
    texts: dict[str, set[str]] = {}
    for metric in metrics.get("string_sets", []):
        value = metric.committed if metric.committed is not None else metric.attempted
        texts.setdefault(metric.key.metric.name, set()).update(value)
    found: dict[str, object] = {
        name: next(iter(values)) if len(values) == 1 else sorted(values)
        for name, values in sorted(texts.items())
    }
    counts: dict[str, int] = {}
    for metric in metrics.get("counters", []):
        value = metric.committed if metric.committed is not None else metric.attempted
        counts[metric.key.metric.name] = counts.get(metric.key.metric.name, 0) + value
    found.update(sorted(counts.items()))
    return found


def _query(result: Any, wanted: MetricsFilter) -> dict[str, list]:
    """The run's metrics; none where the runner keeps none (Beam's own DaskRunner raises; the
    one ``runtime/dask_runner.py`` completes keeps them)."""
    try:
        return result.metrics().query(wanted)
    except NotImplementedError:
        return {}


def _rows(path: str) -> int:
    return row_count(parquet_files(path))


def _column(path: str, name: str) -> list[str]:
    return column(parquet_files(path), name)
