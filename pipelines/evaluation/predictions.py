"""Model predictions in SWE-bench's format: ``instance_id``, ``model_name_or_path``,
``model_patch``, as JSONL, a JSON list, or a JSON object keyed by instance id.

A row that cannot be a prediction is not a reason to stop: it becomes a ``Problem`` (where, why)
that the evaluation reports and counts, and the other rows go on. Rows are read as untrusted
(``schemas/json_rows.py``): one over ``max_row_bytes`` is ``row_too_large`` before it is parsed
(a JSON Lines line is never held whole), and one nested past the parser or holding a lone
surrogate is ``malformed_prediction``, so every prediction kept can be written and hashed.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, BinaryIO

from trajforge.schemas import json_rows
from trajforge.schemas.errors import UserError

MAX_ROW_BYTES = json_rows.MAX_ROW_BYTES
MALFORMED = "malformed_prediction"


@dataclass(frozen=True)
class Prediction:
    instance_id: str
    model: str  # model_name_or_path
    patch: str | None  # None: the model gave no patch (SWE-bench's patch_is_None)


@dataclass(frozen=True)
class Problem:
    where: str  # "FILE:LINE" or "FILE[index]"
    instance_id: str  # "" when the row has none
    reason: str  # malformed_prediction | duplicate_prediction | row_too_large | unsafe_name
    detail: str


def read_predictions(
    path: str, max_row_bytes: int = MAX_ROW_BYTES
) -> tuple[list[Prediction], list[Problem]]:
    """Every usable prediction in ``path`` (file order) and the rows that are not."""
    try:
        with open(path, "rb") as handle:
            rows = _rows(path, handle, max_row_bytes)
    except OSError as exc:
        raise UserError(f"evaluate: cannot read --predictions {path} ({exc.strerror})") from None
    predictions: list[Prediction] = []
    problems: list[Problem] = []
    seen: set[str] = set()
    for where, row in rows:
        if isinstance(row, Problem):
            problems.append(row)
            continue
        made = _prediction(where, row)
        if isinstance(made, Problem):
            problems.append(made)
        elif made.instance_id in seen:
            problems.append(
                Problem(where, made.instance_id, "duplicate_prediction",
                        f"{where}: a second prediction for {made.instance_id}; the first is kept")
            )  # fmt: skip
        else:
            seen.add(made.instance_id)
            predictions.append(made)
    return predictions, problems


def _rows(path: str, handle: BinaryIO, max_row_bytes: int) -> list[tuple[str, object]]:
    """(where, row) for every row: a JSON list, a JSON object keyed by instance id (or one
    prediction over several lines), or JSON Lines; a row that cannot be read is a ``Problem``."""
    head = handle.read(4096).lstrip()
    handle.seek(0)
    if head.startswith(b"[") or (
        head.startswith(b"{") and not _first_line_reads(handle, max_row_bytes)
    ):
        data = handle.read()
        if head.startswith(b"[") or _one_value(data):
            return _document(path, data, max_row_bytes)
        handle.seek(0)
    rows: list[tuple[str, object]] = []
    for number, line in json_rows.lines(handle, max_row_bytes):
        where = f"{path}:{number}"
        if isinstance(line, json_rows.RowError):
            rows.append((where, _problem(where, line)))
            continue
        if not line.strip():
            continue
        try:
            rows.append((where, json_rows.loads(line, max_row_bytes)))
        except json_rows.RowError as exc:
            if not rows and exc.why.startswith("not UTF-8"):
                raise UserError(f"evaluate: --predictions {path} is not UTF-8 text") from None
            rows.append((where, _problem(where, exc)))
    if len(rows) == 1 and isinstance(rows[0][1], dict) and "instance_id" not in rows[0][1]:
        return _keyed(path, iter(rows[0][1].items()))  # one line: an object keyed by instance id
    return rows


def _first_line_reads(handle: BinaryIO, max_row_bytes: int) -> bool:
    """Whether the first non-blank line is JSON by itself (JSON Lines); the handle is rewound."""
    try:
        for _, line in json_rows.lines(handle, max_row_bytes):
            if isinstance(line, json_rows.RowError):
                return True  # a line too large to read: JSON Lines, refused line by line
            if line.strip():
                json_rows.loads(line, max_row_bytes)
                return True
        return False
    except json_rows.RowError:
        return False
    finally:
        handle.seek(0)


def _one_value(data: bytes) -> bool:
    try:
        json_rows.members(data)
    except json_rows.RowError:
        return False
    return True


def _document(path: str, data: bytes, max_row_bytes: int) -> list[tuple[str, object]]:
    try:
        opener, members = json_rows.document(data, max_row_bytes)
    except json_rows.RowError as exc:
        return [(path, _problem(path, exc))]
    if opener == b"[":
        return [(f"{path}[{i}]", _read(f"{path}[{i}]", row)) for i, row in members]
    too_large = len(data) > max_row_bytes and json_rows.too_large(len(data), max_row_bytes)
    return _keyed(path, members, too_large or None)


def _keyed(
    path: str, members: Any, too_large: json_rows.RowError | None = None
) -> list[tuple[str, object]]:
    """An object keyed by instance id, as SWE-bench also accepts (or one prediction, then
    ``too_large`` says whether the whole object is over the limit of a row)."""
    found = [(key, row) for key, row in members]
    if any(key == "instance_id" for key, _ in found):  # one prediction written over lines
        one = {key: row for key, row in found}
        bad = too_large or next(
            (row for row in one.values() if isinstance(row, json_rows.RowError)), None
        )
        return [(f"{path}:1", _problem(f"{path}:1", bad) if bad else one)]
    rows: list[tuple[str, object]] = []
    for key, row in found:
        where = f"{path}[{key}]"
        if isinstance(row, dict):
            row = {"instance_id": key, **row}
        rows.append((where, _read(where, row)))
    return rows


def _read(where: str, row: object) -> object:
    return _problem(where, row) if isinstance(row, json_rows.RowError) else row


def _problem(where: str, error: json_rows.RowError) -> Problem:
    reason = error.reason if error.reason == json_rows.TOO_LARGE else MALFORMED
    return Problem(where, "", reason, f"{where}: {error.why}; the row is left out")


def _prediction(where: str, row: object) -> Prediction | Problem:
    if not isinstance(row, dict):
        return Problem(where, "", MALFORMED, f"{where}: a row must be an object")
    instance_id = row.get("instance_id")
    if not isinstance(instance_id, str) or not instance_id:
        return Problem(where, "", MALFORMED, f"{where}: no instance_id")
    patch = row.get("model_patch")
    if patch is not None and not isinstance(patch, str):
        return Problem(where, instance_id, MALFORMED,
                       f"{where}: model_patch of {instance_id} must be text or null")  # fmt: skip
    model = row.get("model_name_or_path")
    model = model if isinstance(model, str) and model else "unknown-model"
    return Prediction(instance_id, model, patch)
