"""Model predictions in SWE-bench's format: ``instance_id``, ``model_name_or_path``,
``model_patch``, as JSONL, a JSON list, or a JSON object keyed by instance id.

A row that cannot be a prediction is not a reason to stop: it becomes a ``Problem`` (where, why)
that the evaluation reports and counts, and the other rows go on.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from trajforge.schemas.errors import UserError


@dataclass(frozen=True)
class Prediction:
    instance_id: str
    model: str  # model_name_or_path
    patch: str | None  # None: the model gave no patch (SWE-bench's patch_is_None)


@dataclass(frozen=True)
class Problem:
    where: str  # "FILE:LINE" or "FILE[index]"
    instance_id: str  # "" when the row has none
    reason: str  # malformed_prediction | duplicate_prediction
    detail: str


def read_predictions(path: str) -> tuple[list[Prediction], list[Problem]]:
    """Every usable prediction in ``path`` (file order) and the rows that are not."""
    try:
        with open(path, encoding="utf-8") as handle:
            text = handle.read()
    except OSError as exc:
        raise UserError(f"evaluate: cannot read --predictions {path} ({exc.strerror})") from None
    except UnicodeDecodeError:
        raise UserError(f"evaluate: --predictions {path} is not UTF-8 text") from None
    rows = _rows(path, text)
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


def _rows(path: str, text: str) -> list[tuple[str, object]]:
    """(where, row) for every row: the whole file as JSON when it is, else line by line."""
    try:
        data = json.loads(text)
    except ValueError:
        data = None
    if isinstance(data, list):
        return [(f"{path}[{i}]", row) for i, row in enumerate(data)]
    if isinstance(data, dict) and "instance_id" in data:  # one prediction (a one-line JSONL)
        return [(f"{path}:1", data)]
    if isinstance(data, dict):  # keyed by instance id, as SWE-bench also accepts
        return [(f"{path}[{k}]", {"instance_id": k, **v} if isinstance(v, dict) else v)
                for k, v in data.items()]  # fmt: skip
    rows: list[tuple[str, object]] = []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        where = f"{path}:{number}"
        try:
            rows.append((where, json.loads(line)))
        except ValueError as exc:
            rows.append((where, Problem(where, "", "malformed_prediction",
                                        f"{where}: not JSON ({exc})")))  # fmt: skip
    return rows


def _prediction(where: str, row: object) -> Prediction | Problem:
    if not isinstance(row, dict):
        return Problem(where, "", "malformed_prediction", f"{where}: a row must be an object")
    instance_id = row.get("instance_id")
    if not isinstance(instance_id, str) or not instance_id:
        return Problem(where, "", "malformed_prediction", f"{where}: no instance_id")
    patch = row.get("model_patch")
    if patch is not None and not isinstance(patch, str):
        return Problem(where, instance_id, "malformed_prediction",
                       f"{where}: model_patch of {instance_id} must be text or null")  # fmt: skip
    model = row.get("model_name_or_path")
    model = model if isinstance(model, str) and model else "unknown-model"
    return Prediction(instance_id, model, patch)
