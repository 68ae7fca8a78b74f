"""Soft verification (SERA): how close an unresolved patch came, besides the binary verdict.

``soft_reward`` is line-level recall against the gold patch, on the files the gold patch changes:
of the lines the gold patch touches in the original files (``schemas.diff``'s touched lines: the
lines it removes and the lines an insertion sits between), the share the model patch touches too.
A file the gold patch creates counts as one unit, met when the model patch changes that path.
Only the gold patch's files count, so edits elsewhere (a reproduction script, a test) neither help
nor hurt. ``f2p_pass_rate`` is the share of FAIL_TO_PASS tests that passed in the verification run.
Both are pure functions of text: no container runs for them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from trajforge.schemas.diff import parse_patch

PASSED = "PASSED"


def gold_units(gold_patch: str) -> set[tuple[str, int | None]]:
    """(path, original line) for every line the gold patch touches; (path, None) for a file it
    creates (a new file has no original lines)."""
    stats = parse_patch(gold_patch)
    units: set[tuple[str, int | None]] = set()
    for path in stats.files:
        lines = stats.touched.get(path)
        if lines:
            units.update((path, line) for line in lines)
        elif path not in stats.touched:  # created by the patch: no original line to touch
            units.add((path, None))
    return units


def soft_reward(gold_patch: str, model_patch: str) -> float | None:
    """Share of the gold patch's touched lines the model patch touches, in [0, 1]; None when the
    gold patch touches nothing (no patch to compare with)."""
    gold = gold_units(gold_patch)
    if not gold:
        return None
    model = parse_patch(model_patch)
    hits = sum(
        1
        for path, line in gold
        if (path in model.files if line is None else line in model.touched.get(path, ()))
    )
    return round(hits / len(gold), 6)


def f2p_pass_rate(fail_to_pass: Sequence[str], test_report: Mapping[str, str]) -> float | None:
    """Share of ``fail_to_pass`` tests PASSED in ``test_report`` (missing: not passed); None for
    a task without FAIL_TO_PASS tests."""
    if not fail_to_pass:
        return None
    passed = sum(1 for test_id in fail_to_pass if test_report.get(test_id) == PASSED)
    return round(passed / len(fail_to_pass), 6)
