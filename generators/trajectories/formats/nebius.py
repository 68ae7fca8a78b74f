"""Rows shaped like the Hugging Face dataset nebius/SWE-agent-trajectories, as Trajectories.

A row is one SWE-agent run: ``instance_id``, ``model_name``, ``target`` (its patch passed the
instance's tests), ``trajectory`` (turns of ``role`` system/user/ai with ``text``; the system
turn's text is in ``system_prompt``), ``exit_status``, ``generated_patch`` and ``eval_logs``.
Actions are 0.x text actions inside the ``ai`` text, kept as written. ``mask`` (which turns to
train on: the ``ai`` ones) and ``cutoff_date`` have no column; ``eval_logs`` is the raw harness
log, not parsed. The dataset holds several runs per instance id, so a Trajectory's id hashes
the whole row.

Files are Parquet (the dataset's own shards), JSON Lines (one row a line, as ``to_json`` writes)
or a JSON list of rows. A bad row is rejected alone (``path:LINE`` or ``path#row=N``); the rest
of its file goes on.
"""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from functools import partial
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from trajforge.generators.trajectories.formats.common import (
    STAGE,
    BadInput,
    Result,
    exit_status,
    guarded,
    load_json,
    openai_message,
    require_dict,
    require_list,
    sha256,
    trajectory_id,
)
from trajforge.schemas.rejection import Rejection
from trajforge.schemas.trajectory import Message, Trajectory

FORMAT = "nebius"
ROLE_NAMES = {"ai": "assistant"}
REQUIRED = ("instance_id", "trajectory")
BATCH_ROWS = 256


def read_nebius(path: str, data: bytes) -> Iterator[Result]:
    if path.endswith(".parquet"):
        yield from _parquet(path, data)
    elif path.endswith(".json"):
        yield from guarded(path, partial(_json_list, path, data))
    else:
        yield from _json_lines(path, data)


def _json_lines(path: str, data: bytes) -> Iterator[Result]:
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:  # a binary file: one rejection, not one per "line"
        detail = f"{path}: not UTF-8 text (bad byte at {exc.start}); is it the right file?"
        yield Rejection(path, STAGE, "malformed_json", detail)
        return
    # "\n" only: str.splitlines would also split at U+2028, which JSON allows inside strings.
    for number, line in enumerate(text.split("\n"), start=1):
        if line.strip():
            label = f"{path}:{number}"
            yield from guarded(label, partial(_line, label, line))


def _line(label: str, line: str) -> list[Trajectory]:
    return _one(label, load_json(label, line))


def _one(label: str, row: Any) -> list[Trajectory]:
    return [row_trajectory(label, row)]


def _json_list(path: str, data: bytes) -> list[Trajectory]:
    rows = require_list(load_json(path, data), path, "rows")
    return [row_trajectory(f"{path}#row={n}", row) for n, row in enumerate(rows)]


def _parquet(path: str, data: bytes) -> Iterator[Result]:
    try:
        parquet = pq.ParquetFile(io.BytesIO(data))
    except (pa.ArrowException, OSError, ValueError) as exc:
        detail = f"{path}: not a readable Parquet file ({exc}); copy it again or leave it out"
        yield Rejection(path, STAGE, "malformed_parquet", detail)
        return
    missing = [c for c in REQUIRED if c not in parquet.schema_arrow.names]
    if missing:
        detail = f"{path}: no column {', '.join(missing)}; is it a nebius-style trajectory table?"
        yield Rejection(path, STAGE, "missing_field", detail)
        return
    number = 0
    try:
        for batch in parquet.iter_batches(batch_size=BATCH_ROWS):
            for row in batch.to_pylist():
                label = f"{path}#row={number}"
                number += 1
                yield from guarded(label, partial(_one, label, row))
    except (pa.ArrowException, OSError) as exc:
        detail = f"{path}: unreadable after row {number} ({exc}); copy it again"
        yield Rejection(path, STAGE, "malformed_parquet", detail)


def row_trajectory(label: str, raw: Any) -> Trajectory:
    row = require_dict(raw, label, "the row")
    instance_id = row.get("instance_id")
    if not isinstance(instance_id, str) or not instance_id:
        raise BadInput(f"{label}: no `instance_id`; every row needs one", "missing_field")
    turns = require_list(row.get("trajectory"), label, "trajectory")
    messages = tuple(_turn(turn, f"{label}: trajectory[{n}]") for n, turn in enumerate(turns))
    if not messages:
        raise BadInput(f"{label}: `trajectory` is empty", "missing_field")
    target = row.get("target")
    resolved = target if isinstance(target, bool) else None
    canonical = json.dumps(row, sort_keys=True, ensure_ascii=False, default=str)
    model = row.get("model_name")
    return Trajectory(
        trajectory_id=trajectory_id(FORMAT, instance_id, sha256(canonical)),
        instance_id=instance_id,
        model=model if isinstance(model, str) and model else "unknown",
        messages=messages,
        tools="[]",
        model_patch=str(row.get("generated_patch") or ""),
        exit_status=exit_status(row.get("exit_status")),
        resolved=resolved,
        reward=None if resolved is None else float(resolved),
        origin=f"import/{FORMAT}",
    )


def _turn(raw: Any, where: str) -> Message:
    turn = require_dict(raw, where, "the turn")
    role = turn.get("role")
    if role is None:
        raise BadInput(f"{where}: no `role`", "missing_field")
    text = turn.get("text")
    if text is None:
        text = turn.get("content")
    if text is None and role == "system":
        text = turn.get("system_prompt")
    return openai_message(turn, where, role=ROLE_NAMES.get(role, role), content=text)
