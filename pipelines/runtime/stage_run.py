"""Run one stage end to end: build the Beam graph, write its tables, publish, summarise."""

from __future__ import annotations

import json
import os
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import apache_beam as beam
import pyarrow as pa
import pyarrow.parquet as pq
from apache_beam.metrics.metric import MetricsFilter
from trajforge.pipelines.runtime import progress
from trajforge.pipelines.runtime.runner import make_pipeline
from trajforge.pipelines.runtime.sinks import WriteTable, ensure_tables, publish, staging_dir
from trajforge.schemas.storage import join, parquet_files, write_bytes_atomic

# Beam counters a stage summary reports when the stage has them.
SUMMARY_COUNTERS = ("cache_hits", "images_built", "llm_calls", "llm_cache_hits", "pruned")


@dataclass(frozen=True)
class TableSpec:
    schema: pa.Schema
    sort_key: Callable[[Any], str]


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
) -> progress.Summary:
    """``build`` wires the stage and returns its named PCollections; each is written as a table."""
    timer = progress.Timer()
    staging = staging_dir(output)
    pipeline = make_pipeline(runner, beam_args)
    outputs = build(pipeline)
    for name, spec in tables.items():
        outputs[name] | WriteTable(staging, name, spec.schema, spec.sort_key, shards)
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
    summary.extra.update(_counters(result, SUMMARY_COUNTERS))
    write_bytes_atomic(
        os.path.join(staging, "summary.json"), json.dumps(summary.as_dict(), indent=2).encode()
    )
    publish(staging, output)
    return summary


def _counters(result: Any, names: tuple[str, ...]) -> dict[str, object]:
    """Beam counters worth a line in the summary (committed values, or attempted ones)."""
    found: dict[str, object] = {}
    for counter in result.metrics().query(MetricsFilter())["counters"]:
        if counter.key.metric.name in names:
            value = counter.committed if counter.committed is not None else counter.attempted
            found[counter.key.metric.name] = found.get(counter.key.metric.name, 0) + value
    return found


def _rows(path: str) -> int:
    return sum(pq.ParquetFile(f).metadata.num_rows for f in parquet_files(path))


def _column(path: str, name: str) -> list[str]:
    values: list[str] = []
    for f in parquet_files(path):
        values.extend(pq.read_table(f, columns=[name]).column(name).to_pylist())
    return values
