"""Evaluate a predictions file against tasks, as SWE-bench's ``run_evaluation`` lays it out.

Per prediction ``<output>/<model>/<instance_id>/`` holds ``report.json`` (SWE-bench's shape),
``test_output.txt`` (the test log) and ``evaluation.json`` (trajforge's reason, reward, the
patch's hash). ``<output>/<model>.<run_id>.json`` is the summary with SWE-bench's keys
(``submitted_instances``, ``completed_ids``, ``error_ids``...) and trajforge's breakdown by
reason. Files are written atomically; a rerun skips every prediction whose evaluation.json holds
the same patch and no harness error, so a crash costs only the unfinished ones.

Every file name made from a row (model, instance id) is one safe path component by construction
(``path_name``): a plain name as SWE-bench writes it, anything else a slug and a hash of the raw
value, so no row can name a place outside ``--output`` and distinct values never share a folder;
each path is checked to lie under ``--output`` before anything is written there.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import time
from collections import Counter
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from trajforge.pipelines.evaluation.evaluator import Evaluation, Evaluator
from trajforge.pipelines.evaluation.predictions import Prediction, Problem
from trajforge.pipelines.runtime import progress
from trajforge.schemas.storage import write_bytes_atomic
from trajforge.schemas.task_instance import TaskInstance
from trajforge.verifiers.grading import swebench_report

SCHEMA_VERSION = 2  # SWE-bench's report schema
UNKNOWN_INSTANCE = "unknown_instance"
# Not completed in SWE-bench's sense (it counts a patch that does not apply as an error).
NOT_COMPLETED = ("empty_patch", "patch_does_not_apply")


@dataclass
class Outcome:
    """Every prediction's evaluation (this run's, or a finished one read back)."""

    evaluations: dict[str, tuple[Prediction, Evaluation]] = field(default_factory=dict)
    problems: list[Problem] = field(default_factory=list)
    skipped: int = 0  # finished by an earlier run
    seconds: float = 0.0


def evaluate_predictions(
    evaluator: Evaluator,
    tasks: dict[str, TaskInstance],
    predictions: list[Prediction],
    problems: list[Problem],
    output: str,
    run_id: str = "evaluate",
    workers: int = 1,
) -> Outcome:
    """Evaluate ``predictions`` ``workers`` at a time; write reports, logs and the summary."""
    started = time.monotonic()
    outcome = Outcome(problems=list(problems))
    todo: list[Prediction] = []
    for prediction in predictions:
        unsafe = _unsafe(output, prediction)
        if unsafe is not None:
            outcome.problems.append(unsafe)
            continue
        done = _finished(output, prediction)
        if done is not None:
            outcome.evaluations[prediction.instance_id] = (prediction, done)
            outcome.skipped += 1
        else:
            todo.append(prediction)
    progress.start("evaluate", total=len(predictions), unit="prediction")
    if outcome.skipped:
        progress.tick("finished earlier", outcome.skipped)
    try:
        with ThreadPoolExecutor(max_workers=max(1, workers)) as pool:
            for prediction, evaluation in pool.map(
                lambda p: (p, _one(evaluator, tasks, p, output)), todo
            ):
                outcome.evaluations[prediction.instance_id] = (prediction, evaluation)
                progress.tick("resolved" if evaluation.resolved else evaluation.reason)
    finally:
        progress.stop()
    outcome.seconds = time.monotonic() - started
    for model in sorted({p.model for p in predictions} or {"unknown-model"}):
        summary = run_report(outcome, tasks, model, run_id)
        path = os.path.join(output, f"{model_dir(model)}.{path_name(run_id)}.json")
        write_bytes_atomic(path, (json.dumps(summary, indent=2) + "\n").encode())
    return outcome


def _one(
    evaluator: Evaluator, tasks: dict[str, TaskInstance], prediction: Prediction, output: str
) -> Evaluation:
    task = tasks.get(prediction.instance_id)
    if task is None:
        report = swebench_report(prediction.patch is None, bool(prediction.patch), False)
        why = (
            f"{prediction.instance_id}: no task with this instance_id in --tasks; check the id or "
            "pass the directory that holds it"
        )
        evaluation = Evaluation(prediction.instance_id, False, UNKNOWN_INSTANCE, report, why)
    else:
        evaluation = evaluator.evaluate(task, prediction.patch)
    _write(output, prediction, evaluation)
    return evaluation


# A name kept as it is: what SWE-bench's ids and model names look like. It never holds "~",
# which every other name does (a slug, "~" and a hash of the raw value), so the two kinds never
# meet; it never starts with "." or "-" and has no "/" or NUL, so it is one harmless component.
PLAIN_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+-]{0,99}")
HASH_CHARS = 16


def path_name(value: str) -> str:
    """``value`` as one file name: itself when plain (``PLAIN_NAME``), else ``slug~hash``."""
    return value if PLAIN_NAME.fullmatch(value) else _hashed(value)


def model_dir(model: str) -> str:
    """A model name as one path component: SWE-bench's ``org__name`` for ``org/name`` where
    each part is plain and holds no "__" (so the "__" can only be a "/"), else ``path_name``."""
    parts = model.split("/")
    if all(PLAIN_NAME.fullmatch(p) and "__" not in p for p in parts) and len(model) <= 100:
        return "__".join(parts)
    return _hashed(model)


def _hashed(value: str) -> str:
    raw = value.encode("utf-8", "surrogatepass")
    slug = re.sub(r"[^A-Za-z0-9._+-]+", "_", value)[:48].strip("._-") or "x"
    return f"{slug}~{hashlib.sha256(raw).hexdigest()[:HASH_CHARS]}"


def _instance_dir(output: str, prediction: Prediction) -> str:
    return os.path.join(output, model_dir(prediction.model), path_name(prediction.instance_id))


def _unsafe(output: str, prediction: Prediction) -> Problem | None:
    """A problem when the prediction's folder would not lie inside ``output`` (a link there that
    points elsewhere); None for every folder ``path_name`` makes under a plain output."""
    root = os.path.realpath(output)
    folder = os.path.realpath(_instance_dir(output, prediction))
    if os.path.commonpath([root, folder]) == root and folder != root:
        return None
    where = f"{prediction.instance_id!r} of {prediction.model!r}"
    return Problem(
        "", prediction.instance_id, "unsafe_output_path",
        f"{where}: its folder {folder} is outside --output {output} (a link inside it points "
        "elsewhere); remove the link or pass a new --output",
    )  # fmt: skip


def _patch_hash(patch: str | None) -> str:
    return "none" if patch is None else hashlib.sha256(patch.encode()).hexdigest()


def _write(output: str, prediction: Prediction, evaluation: Evaluation) -> None:
    folder = _instance_dir(output, prediction)
    write_bytes_atomic(os.path.join(folder, "test_output.txt"), evaluation.log.encode())
    report = {prediction.instance_id: evaluation.report}
    write_bytes_atomic(
        os.path.join(folder, "report.json"), (json.dumps(report, indent=2) + "\n").encode()
    )
    record = {**evaluation.as_dict(), "patch_sha256": _patch_hash(prediction.patch)}
    write_bytes_atomic(  # last: its presence means the folder is complete
        os.path.join(folder, "evaluation.json"), (json.dumps(record, indent=2) + "\n").encode()
    )


def _finished(output: str, prediction: Prediction) -> Evaluation | None:
    """The earlier evaluation of exactly this patch, unless the harness failed it."""
    path = os.path.join(_instance_dir(output, prediction), "evaluation.json")
    try:
        with open(path, encoding="utf-8") as handle:
            record = json.load(handle)
    except (OSError, ValueError):
        return None
    if record.get("patch_sha256") != _patch_hash(prediction.patch) or record.get("error"):
        return None
    return Evaluation(
        record["instance_id"], record["resolved"], record["reason"], record["report"], "",
        record["reward"], record["partial_credit"], False, record["seconds"],
        tuple(record.get("dropped") or ()), str(record.get("image") or ""),
        str(record.get("suspicious_patch") or ""),
    )  # fmt: skip


def run_report(
    outcome: Outcome, tasks: dict[str, TaskInstance], model: str, run_id: str
) -> dict[str, object]:
    """SWE-bench's run report for ``model``, plus trajforge's reasons and problems."""
    mine = {i: e for i, (p, e) in outcome.evaluations.items() if p.model == model}
    submitted = sorted(mine)
    empty = sorted(i for i, e in mine.items() if e.reason == "empty_patch")
    errors = sorted(i for i, e in mine.items() if e.error or e.reason == "patch_does_not_apply")
    left_out = (*NOT_COMPLETED, UNKNOWN_INSTANCE)
    completed = sorted(i for i, e in mine.items() if not e.error and e.reason not in left_out)
    resolved = sorted(i for i in completed if mine[i].resolved)
    unknown = sorted(i for i, e in mine.items() if e.reason == UNKNOWN_INSTANCE)
    suspicious = sorted(i for i, e in mine.items() if e.suspicious_patch)
    reasons = Counter(e.reason for e in mine.values())
    return {
        "total_instances": len(tasks),
        "submitted_instances": len(submitted),
        "completed_instances": len(completed),
        "resolved_instances": len(resolved),
        "unresolved_instances": len(completed) - len(resolved),
        "empty_patch_instances": len(empty),
        "error_instances": len(errors),
        "completed_ids": completed,
        "incomplete_ids": sorted(set(tasks) - set(submitted)),
        "empty_patch_ids": empty,
        "submitted_ids": submitted,
        "resolved_ids": resolved,
        "unresolved_ids": sorted(set(completed) - set(resolved)),
        "error_ids": errors,
        "schema_version": SCHEMA_VERSION,
        "trajforge": {
            "run_id": run_id,
            "model": model,
            "reasons": dict(sorted(reasons.items())),
            "unknown_instance_ids": unknown,
            # patches whose source reads like a hack no test run sees (strict: reward 0)
            "suspicious_ids": suspicious,
            # the images the predictions ran in (a row's own recipe: trajforge-eval:<hash>)
            "images": dict(sorted(Counter(e.image for e in mine.values() if e.image).items())),
            "malformed_predictions": [p.detail for p in outcome.problems],
            "seconds": round(outcome.seconds, 2),
        },
    }


def summary_lines(outcome: Outcome, counts: Iterable[tuple[str, int]] = ()) -> list[str]:
    """The closing summary: inputs, resolved, the rest by reason, time."""
    evaluations = [e for _, e in outcome.evaluations.values()]
    resolved = sum(e.resolved for e in evaluations)
    total = len(evaluations) + len(outcome.problems)
    lines = [
        f"evaluate: {total} predictions, {resolved} resolved, {total - resolved} not, in "
        f"{outcome.seconds:.1f}s ({outcome.skipped} finished earlier)"
    ]
    reasons = Counter(e.reason for e in evaluations if not e.resolved)
    reasons.update(p.reason for p in outcome.problems)
    for reason, count in reasons.most_common():
        lines.append(f"  {count:>6}  {reason}")
    suspicious = sum(bool(e.suspicious_patch) for e in evaluations)
    if suspicious:
        lines.append(f"  suspicious patches: {suspicious} (evaluation.json: suspicious_patch)")
    lines.extend(f"  {name}: {value}" for name, value in counts if value)
    return lines
