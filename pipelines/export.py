"""``trajforge export``: curated tables -> a Hugging Face dataset directory, gated and versioned.

Input: one or more curated run directories, each with ``tasks/*.parquet`` and optionally
``trajectories/*.parquet`` (the layout ``pipelines.sinks`` writes). Output::

    OUTPUT/README.md                                   dataset card (YAML configs + docs)
    OUTPUT/version.json                                content hash of the data files, counts
    OUTPUT/<config>/<split>-XXXXX-of-YYYYY.parquet     configs tasks, sft, sft_xml, rl
    OUTPUT/data_docs/index.html                        great-expectations Data Docs

The tables are streamed in batches: a first pass reads only ids, repos and verdicts to decide the
split of every repository and the number of shards; the second pass renders rows and writes
shards. Everything goes to a staging directory beside OUTPUT, the quality gates run on it, and
only a passing export replaces OUTPUT; a failing one leaves OUTPUT as it was and its Data Docs at
``OUTPUT.failed-data_docs/``.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import shutil
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from importlib import metadata
from typing import TypeVar

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from filters.quality_gates import GateResult, enforce, profile, run_quality_gates
from generators.rl_prompt import DEFAULT_SYSTEM_PROMPT
from pipelines import progress
from pipelines.dataset_card import CardFacts, SplitFacts, render_card
from pipelines.export_tables import (
    rl_table,
    sft_table,
    sft_xml_table,
    tasks_schema,
    tasks_table,
)
from pipelines.repo_split import assign_splits
from pipelines.sinks import publish, staging_dir
from schemas.errors import UserError
from schemas.params import ExportParams
from schemas.records import from_table
from schemas.storage import (
    is_local,
    join,
    parquet_files,
    read_bytes,
    table_to_parquet_bytes,
    write_bytes_atomic,
)
from schemas.task_instance import TaskInstance
from schemas.trajectory import Trajectory

CONFIGS = ("tasks", "sft", "sft_xml", "rl")
TRAJECTORY_CONFIGS = ("sft", "sft_xml")
TASK_INDEX = ["instance_id", "repo", "origin", "scores"]  # what the first pass reads
RUN_INDEX = ["instance_id", "resolved", "origin", "model"]
R = TypeVar("R")


@dataclass
class ExportResult:
    output: str
    version: str
    counts: dict[str, dict[str, int]]  # config -> split -> rows (non-empty configs only)
    omitted: dict[str, str]  # config -> why it has no rows
    dropped: Counter  # reason -> input rows left out
    summary: progress.Summary


@dataclass
class _Inputs:
    """What the first pass learns without reading patches or messages."""

    task_files: list[str]
    trajectory_files: list[str]
    repo_of: dict[str, str] = field(default_factory=dict)  # instance_id -> repo
    task_repos: Counter = field(default_factory=Counter)  # repo -> task rows (duplicates too)
    score_names: set[str] = field(default_factory=set)
    task_origins: Counter = field(default_factory=Counter)
    sft_repos: Counter = field(default_factory=Counter)  # repo -> exportable trajectories
    trajectory_origins: Counter = field(default_factory=Counter)
    models: Counter = field(default_factory=Counter)
    dropped: Counter = field(default_factory=Counter)
    tasks_read: int = 0
    trajectories_read: int = 0


def export_dataset(
    inputs: Sequence[str],
    output: str,
    params: ExportParams,
    *,
    configs: Sequence[str] = CONFIGS,
    system_prompt: str = DEFAULT_SYSTEM_PROMPT,
    batch_rows: int = 512,
) -> ExportResult:
    """Export curated runs ``inputs`` to the dataset directory ``output`` (see module doc).

    Raises ``UserError`` for bad inputs or params and ``QualityGateError`` (a UserError) when a
    suite fails; in both cases ``output`` is left as it was."""
    timer = progress.Timer()
    _check_arguments(inputs, output, params, configs)
    found = _scan(inputs, want_trajectories=any(c in configs for c in TRAJECTORY_CONFIGS))
    config_repos = {
        c: set(found.task_repos) if c in ("tasks", "rl") else set(found.sft_repos) for c in configs
    }
    split_of = assign_splits(config_repos, params.validation_fraction, params.seed)
    counts = {c: n for c, n in _counts(found, configs, split_of).items() if n}
    omitted = {c: _why_empty(c) for c in configs if c not in counts}
    staging = staging_dir(output)
    try:
        writers = {
            (c, s): _ShardWriter(staging, c, s, n, params.shard_rows)
            for c, splits in counts.items()
            for s, n in splits.items()
        }
        progress.start("export", sum(sum(s.values()) for s in counts.values()), "row")
        try:
            _write_rows(found, writers, split_of, system_prompt, batch_rows)
        finally:
            progress.stop()
        for writer in writers.values():
            writer.close()
        gates = _gate(staging, output, writers)
        version, digests = _content_version(staging, writers.values())
        facts = CardFacts(
            name=params.name,
            license=params.license,
            version=version,
            trajforge_version=_trajforge_version(),
            splits={c: {s: writers[(c, s)].facts() for s in counts[c]} for c in counts},
            schemas={c: _schema(writers, c) for c in counts},
            omitted=omitted,
            repo_splits=split_of,
            repo_tasks=found.task_repos,
            task_origins=found.task_origins,
            trajectory_origins=found.trajectory_origins,
            models=found.models,
            dropped=found.dropped,
            gates={g.suite: g.expectations for g in gates},
            inputs=[os.path.basename(os.path.normpath(i)) for i in inputs],
        )
        _write_card(staging, facts, counts, digests)
        publish(staging, output)
    finally:
        shutil.rmtree(staging, ignore_errors=True)  # gone already when published
    read = found.tasks_read + found.trajectories_read
    summary = progress.Summary(
        "export", read, read - sum(found.dropped.values()), found.dropped, timer.elapsed()
    )
    summary.extra.update({f"{c} rows": sum(s.values()) for c, s in counts.items()})
    summary.extra["version"] = version
    return ExportResult(os.path.abspath(output), version, counts, omitted, found.dropped, summary)


def _gate(
    staging: str, output: str, writers: dict[tuple[str, str], _ShardWriter]
) -> list[GateResult]:
    """Run the suites on the shards' profiles; on failure move Data Docs out and raise."""
    frames: dict[str, list[pd.DataFrame]] = defaultdict(list)
    for (config, _), writer in writers.items():
        frames[config].extend(writer.profiles)
    docs = os.path.join(staging, "data_docs")
    gates = run_quality_gates({c: pd.concat(f) for c, f in frames.items()}, docs)
    failed_docs = f"{os.path.abspath(output)}.failed-data_docs"
    shutil.rmtree(failed_docs, ignore_errors=True)
    if not all(g.success for g in gates):
        os.replace(docs, failed_docs)
        enforce(gates, os.path.join(failed_docs, "index.html"))
    return gates


def _write_card(
    staging: str, facts: CardFacts, counts: dict[str, dict[str, int]], digests: dict[str, str]
) -> None:
    write_bytes_atomic(os.path.join(staging, "README.md"), render_card(facts).encode())
    manifest = {
        "version": facts.version,
        "trajforge": facts.trajforge_version,
        "counts": counts,
        "omitted": facts.omitted,
        "files": digests,
    }
    data = json.dumps(manifest, indent=2, sort_keys=True).encode()
    write_bytes_atomic(os.path.join(staging, "version.json"), data)


def _schema(writers: dict[tuple[str, str], _ShardWriter], config: str) -> pa.Schema:
    return next(w.schema for (c, _), w in writers.items() if c == config and w.schema is not None)


def _check_arguments(
    inputs: Sequence[str], output: str, params: ExportParams, configs: Sequence[str]
) -> None:
    if not inputs:
        raise UserError("export: no inputs; pass --input with a curated run directory")
    if not is_local(output):
        raise UserError(f"export: {output} must be a local directory (publish pushes it)")
    unknown = [c for c in configs if c not in CONFIGS]
    if unknown or not configs:
        raise UserError(f"export: unknown configs {unknown}; choose from {', '.join(CONFIGS)}")
    if params.shard_rows < 1:
        raise UserError(f"params: export.shard_rows must be at least 1, got {params.shard_rows}")
    if not 0.0 <= params.validation_fraction < 1.0:
        raise UserError(
            "params: export.validation_fraction must be in [0, 1), "
            f"got {params.validation_fraction}"
        )


def _scan(inputs: Sequence[str], want_trajectories: bool) -> _Inputs:
    found = _Inputs(
        task_files=[f for i in inputs for f in parquet_files(join(i, "tasks"))],
        trajectory_files=[f for i in inputs for f in parquet_files(join(i, "trajectories"))]
        if want_trajectories
        else [],
    )
    if not found.task_files:
        raise UserError(
            f"export: no tasks/*.parquet under {', '.join(inputs)}; pass curated run directories"
        )
    for batch in _batches(found.task_files, TaskInstance.ARROW_SCHEMA, 4096, TASK_INDEX):
        for row in batch.to_pylist():
            found.repo_of[row["instance_id"]] = row["repo"]
            found.task_repos[row["repo"]] += 1
            found.task_origins[row["origin"]] += 1
            found.score_names.update(k for k, _ in row["scores"] or ())
            found.tasks_read += 1
    for batch in _batches(found.trajectory_files, Trajectory.ARROW_SCHEMA, 4096, RUN_INDEX):
        for row in batch.to_pylist():
            found.trajectories_read += 1
            reason = _trajectory_drop(row["instance_id"], row["resolved"], found.repo_of)
            if reason:
                found.dropped[reason] += 1
                continue
            found.sft_repos[found.repo_of[row["instance_id"]]] += 1
            found.trajectory_origins[row["origin"]] += 1
            found.models[row["model"]] += 1
    return found


def _trajectory_drop(instance_id: str, resolved: bool | None, repo_of: dict[str, str]) -> str:
    """Why a trajectory is not an SFT row ("" when it is one)."""
    if instance_id not in repo_of:
        return "trajectory_without_task"
    if resolved is None:
        return "trajectory_unverified"
    return "" if resolved else "trajectory_unresolved"


def _counts(
    found: _Inputs, configs: Sequence[str], split_of: dict[str, str]
) -> dict[str, dict[str, int]]:
    per_repo = {"tasks": found.task_repos, "sft": found.sft_repos}
    per_repo["rl"], per_repo["sft_xml"] = per_repo["tasks"], per_repo["sft"]
    counts: dict[str, dict[str, int]] = {}
    for config in configs:
        splits: Counter = Counter()
        for repo, n in per_repo[config].items():
            splits[split_of[repo]] += n
        counts[config] = {s: splits[s] for s in ("train", "validation") if splits[s]}
    return counts


def _why_empty(config: str) -> str:
    if config in TRAJECTORY_CONFIGS:
        return "no resolved trajectory of an exported task in the inputs"
    return "no tasks in the inputs"


def _write_rows(
    found: _Inputs,
    writers: dict[tuple[str, str], _ShardWriter],
    split_of: dict[str, str],
    system_prompt: str,
    batch_rows: int,
) -> None:
    schema = tasks_schema(found.score_names)
    render_tasks: dict[str, Callable[[list[TaskInstance]], pa.Table]] = {
        "tasks": lambda ts: tasks_table(ts, schema),
        "rl": lambda ts: rl_table(ts, system_prompt),
    }
    for batch in _batches(found.task_files, TaskInstance.ARROW_SCHEMA, batch_rows):
        tasks = from_table(TaskInstance, batch)
        _route(tasks, lambda t: split_of[t.repo], render_tasks, writers)
    if not any(c in TRAJECTORY_CONFIGS for c, _ in writers):
        return
    repo_of = found.repo_of
    render_trajectories: dict[str, Callable[[list[Trajectory]], pa.Table]] = {
        "sft": lambda ts: sft_table(ts, repo_of),
        "sft_xml": lambda ts: sft_xml_table(ts, repo_of),
    }
    for batch in _batches(found.trajectory_files, Trajectory.ARROW_SCHEMA, batch_rows):
        kept = [
            t
            for t in from_table(Trajectory, batch)
            if not _trajectory_drop(t.instance_id, t.resolved, repo_of)
        ]
        _route(kept, lambda t: split_of[repo_of[t.instance_id]], render_trajectories, writers)


def _route(
    records: list[R],
    split: Callable[[R], str],
    render: dict[str, Callable[[list[R]], pa.Table]],
    writers: dict[tuple[str, str], _ShardWriter],
) -> None:
    """Group one batch of records by split and hand each config's rows to its writer."""
    by_split: dict[str, list[R]] = defaultdict(list)
    for record in records:
        by_split[split(record)].append(record)
    for name, group in sorted(by_split.items()):
        for config, make in render.items():
            if (config, name) in writers:
                writers[(config, name)].add(make(group))
                progress.tick(config, len(group))


class _ShardWriter:
    """Rows of one config and split -> ``<config>/<split>-XXXXX-of-YYYYY.parquet``.

    The row count is known up front, so the shard count is too, and shards are equal in size
    to within one row."""

    def __init__(self, root: str, config: str, split: str, total: int, shard_rows: int) -> None:
        shards = max(1, -(-total // shard_rows))
        self.sizes = [total // shards + (1 if i < total % shards else 0) for i in range(shards)]
        self.root, self.config, self.split = root, config, split
        self.pending: list[pa.Table] = []
        self.pending_rows = 0
        self.paths: list[str] = []
        self.profiles: list[pd.DataFrame] = []
        self.schema: pa.Schema | None = None
        self.num_bytes = 0
        self.download_size = 0

    def add(self, table: pa.Table) -> None:
        self.schema = table.schema
        self.pending.append(table)
        self.pending_rows += table.num_rows
        while (
            len(self.paths) < len(self.sizes) and self.pending_rows >= self.sizes[len(self.paths)]
        ):
            self._flush(self.sizes[len(self.paths)])

    def _flush(self, rows: int) -> None:
        table = pa.concat_tables(self.pending)
        shard, rest = table.slice(0, rows), table.slice(rows)
        self.pending = [rest] if rest.num_rows else []
        self.pending_rows -= rows
        name = f"{self.split}-{len(self.paths):05d}-of-{len(self.sizes):05d}.parquet"
        path = os.path.join(self.root, self.config, name)
        data = table_to_parquet_bytes(shard.combine_chunks())
        write_bytes_atomic(path, data)
        self.paths.append(path)
        self.profiles.append(profile(self.config, shard))
        self.num_bytes += shard.nbytes
        self.download_size += len(data)

    def close(self) -> None:
        if self.pending_rows or len(self.paths) != len(self.sizes):
            raise RuntimeError(
                f"export: {self.config}/{self.split} got a different row count than counted"
            )

    def facts(self) -> SplitFacts:
        return SplitFacts(sum(self.sizes), self.num_bytes, self.download_size, len(self.paths))


def _batches(
    files: list[str], schema: pa.Schema, rows: int, columns: list[str] | None = None
) -> Iterator[pa.Table]:
    """Batches of every file, as ``schema`` (or its ``columns``); a file that lacks a column is
    one clear error naming it."""
    names = columns or schema.names
    target = pa.schema([schema.field(n) for n in names])
    for path in files:
        handle = pq.ParquetFile(path if is_local(path) else io.BytesIO(read_bytes(path)))
        missing = [n for n in names if n not in handle.schema_arrow.names]
        if missing:
            raise UserError(
                f"export: {path} lacks columns {', '.join(missing)}; re-run curate with this "
                "trajforge version"
            )
        for batch in handle.iter_batches(batch_size=rows, columns=names):
            table = pa.Table.from_batches([batch]).select(names)
            try:
                yield table.cast(target)
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
                raise UserError(
                    f"export: {path} does not match the record schema ({exc})"
                ) from None


def _content_version(staging: str, writers: Iterable[_ShardWriter]) -> tuple[str, dict[str, str]]:
    """sha256 over every data file's path and bytes: the same data gives the same version."""
    digests = {}
    for writer in writers:
        for path in writer.paths:
            with open(path, "rb") as handle:
                digests[os.path.relpath(path, staging)] = hashlib.sha256(handle.read()).hexdigest()
    lines = "".join(f"{p}\t{d}\n" for p, d in sorted(digests.items()))
    return hashlib.sha256(lines.encode()).hexdigest()[:16], dict(sorted(digests.items()))


def _trajforge_version() -> str:
    try:
        return metadata.version("trajforge")
    except metadata.PackageNotFoundError:
        return "unknown"
