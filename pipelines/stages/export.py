"""``trajforge export``: curated tables -> a Hugging Face dataset directory, gated and versioned.

Input: one or more curated run directories, each with ``tasks/*.parquet`` and optionally
``explore_tasks/``, ``trajectories/`` and ``transitions/`` (the layout ``pipelines.runtime.sinks``
writes). Output::

    OUTPUT/README.md                                   dataset card (YAML configs + docs)
    OUTPUT/version.json                                content hash of the data files, counts
    OUTPUT/<config>/<split>-XXXXX-of-YYYYY.parquet     configs tasks, sft, sft_xml, rl,
                                                       explore, transitions
    OUTPUT/data_docs/index.html                        great-expectations Data Docs

The tables are streamed in batches: a first pass (``pipelines.release.scan``) reads only ids, repos
and verdicts to decide the split of every repository and the number of shards; the second pass
renders rows and writes shards. Everything goes to a staging directory beside OUTPUT, the quality
gates run on it, and only a passing export replaces OUTPUT; a failing one leaves OUTPUT as it was
and its Data Docs at ``OUTPUT.failed-data_docs/``.

A config with no rows is left out and the card says why. ``explore`` and ``transitions`` come from
tables that curate outputs older than the explore stage lack: inputs without the table at all make
those configs *unavailable* rather than empty (nothing is missing from such a release).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from importlib import metadata
from operator import attrgetter
from typing import Any, NamedTuple

import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
from trajforge.filters.quality_gates import GateResult, enforce, run_quality_gates
from trajforge.generators.trajectories.rl_prompt import DEFAULT_SYSTEM_PROMPT
from trajforge.generators.trajectories.sft import trl_message
from trajforge.pipelines.release.card import CardFacts, render_card
from trajforge.pipelines.release.scan import Inputs, scan, trajectory_drop
from trajforge.pipelines.release.shards import ShardWriter, batches, route
from trajforge.pipelines.release.split import assign_splits
from trajforge.pipelines.release.tables import (
    Conversation,
    explore_table,
    rl_table,
    sft_table,
    sft_xml_table,
    tasks_schema,
    tasks_table,
    transitions_table,
)
from trajforge.pipelines.runtime import progress
from trajforge.pipelines.runtime.sinks import publish, staging_dir
from trajforge.schemas.errors import UserError
from trajforge.schemas.explore_task import ExploreTask
from trajforge.schemas.params import ExportParams
from trajforge.schemas.records import from_row, from_table
from trajforge.schemas.storage import is_local, write_bytes_atomic
from trajforge.schemas.task_instance import TaskInstance
from trajforge.schemas.trajectory import Message, Trajectory
from trajforge.schemas.transition import Transition

CONFIGS = ("tasks", "sft", "sft_xml", "rl", "explore", "transitions")
OPTIONAL_TABLES = {"explore": "explore_tasks", "transitions": "transitions"}  # config -> table
CONVERSATION = ["trajectory_id", "messages", "tools"]  # what an explore row takes of its run


@dataclass
class ExportResult:
    output: str
    version: str
    counts: dict[str, dict[str, int]]  # config -> split -> rows (non-empty configs only)
    omitted: dict[str, str]  # config -> why it has no rows
    dropped: Counter  # reason -> input rows left out
    summary: progress.Summary
    unavailable: dict[str, str] = field(default_factory=dict)  # config -> the table it lacks


class _Table(NamedTuple):
    """How one input table becomes rows: its records, their repo, which to keep, each config."""

    name: str
    cls: Any  # a record class
    repo: Callable[[Any], str]
    keep: Callable[[Any], bool]
    render: dict[str, Callable[[list[Any]], pa.Table]]


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
    found = scan(inputs, configs)
    unavailable = {
        c: f"the inputs have no {t} table (curated before the explore stage)"
        for c, t in OPTIONAL_TABLES.items()
        if c in configs and not found.files[t]
    }
    configs = [c for c in configs if c not in unavailable]
    split_of = assign_splits(
        {c: set(found.repos(c)) for c in configs}, params.validation_fraction, params.seed
    )
    counts = {c: n for c, n in _counts(found, configs, split_of).items() if n}
    omitted = {c: _why_empty(c) for c in configs if c not in counts}
    staging = staging_dir(output)
    try:
        writers = {
            (c, s): ShardWriter(staging, c, s, n, params.shard_rows)
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
            omitted={**omitted, **unavailable},
            repo_splits=split_of,
            repo_tasks=found.repos("tasks") + found.repos("explore"),
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
    read = sum(found.read.values())
    summary = progress.Summary(
        "export", read, read - sum(found.dropped.values()), found.dropped, timer.elapsed()
    )
    summary.extra.update({f"{c} rows": sum(s.values()) for c, s in counts.items()})
    summary.extra["version"] = version
    return ExportResult(
        os.path.abspath(output), version, counts, omitted, found.dropped, summary, unavailable
    )


def _gate(
    staging: str, output: str, writers: dict[tuple[str, str], ShardWriter]
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


def _schema(writers: dict[tuple[str, str], ShardWriter], config: str) -> pa.Schema:
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


def _counts(
    found: Inputs, configs: Sequence[str], split_of: dict[str, str]
) -> dict[str, dict[str, int]]:
    counts: dict[str, dict[str, int]] = {}
    for config in configs:
        splits: Counter = Counter()
        for repo, n in found.repos(config).items():
            splits[split_of[repo]] += n
        counts[config] = {s: splits[s] for s in ("train", "validation") if splits[s]}
    return counts


def _why_empty(config: str) -> str:
    return {
        "sft": "no resolved trajectory of an exported task in the inputs",
        "sft_xml": "no resolved trajectory of an exported task in the inputs",
        "explore": "no explore tasks in the inputs",
        "transitions": "no transitions of an exported task in the inputs",
    }.get(config, "no tasks in the inputs")


def _write_rows(
    found: Inputs,
    writers: dict[tuple[str, str], ShardWriter],
    split_of: dict[str, str],
    system_prompt: str,
    batch_rows: int,
) -> None:
    """Each input table in batches -> rows of every config made of it that has a writer."""
    wanted = {config for config, _ in writers}
    repo_of = found.repo_of
    schema = tasks_schema(found.score_names)
    conversations = _conversations(found, batch_rows) if "explore" in wanted else {}
    tables = [
        _Table(
            "tasks",
            TaskInstance,
            attrgetter("repo"),
            lambda _: True,
            {
                "tasks": lambda ts: tasks_table(ts, schema),
                "rl": lambda ts: rl_table(ts, system_prompt),
            },
        ),
        _Table(
            "explore_tasks",
            ExploreTask,
            attrgetter("repo"),
            lambda _: True,
            {"explore": lambda ts: explore_table(ts, conversations)},
        ),
        _Table(
            "trajectories",
            Trajectory,
            lambda t: repo_of[t.instance_id],
            lambda t: not trajectory_drop(t.instance_id, t.resolved, repo_of),
            {
                "sft": lambda ts: sft_table(ts, repo_of),
                "sft_xml": lambda ts: sft_xml_table(ts, repo_of),
            },
        ),
        _Table(
            "transitions",
            Transition,
            lambda t: repo_of[t.instance_id],
            lambda t: t.instance_id in repo_of,
            {"transitions": lambda ts: transitions_table(ts, repo_of)},
        ),
    ]
    for table in tables:
        if wanted & set(table.render):
            _write_table(table, found.files[table.name], writers, split_of, batch_rows)


def _write_table(
    table: _Table,
    files: list[str],
    writers: dict[tuple[str, str], ShardWriter],
    split_of: dict[str, str],
    batch_rows: int,
) -> None:
    for batch in batches(files, table.cls.ARROW_SCHEMA, batch_rows):
        records = [r for r in from_table(table.cls, batch) if table.keep(r)]
        route(records, lambda r: split_of[table.repo(r)], table.render, writers)


def _conversations(found: Inputs, batch_rows: int) -> dict[str, Conversation]:
    """The messages and tools of the explore tasks' runs, by trajectory id. Explore runs are
    short, and only theirs are held, so the explore rows can be written in one pass."""
    if not found.explore_runs:
        return {}
    wanted = pa.array(sorted(found.explore_runs), pa.string())
    conversations: dict[str, Conversation] = {}
    for batch in batches(
        found.files["trajectories"], Trajectory.ARROW_SCHEMA, batch_rows, CONVERSATION
    ):
        for row in batch.filter(pc.is_in(batch["trajectory_id"], wanted)).to_pylist():
            messages = [trl_message(from_row(Message, m)) for m in row["messages"] or ()]
            conversations[row["trajectory_id"]] = Conversation(messages, row["tools"])
    return conversations


def _content_version(staging: str, writers: Iterable[ShardWriter]) -> tuple[str, dict[str, str]]:
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
