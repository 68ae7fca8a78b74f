"""Scores of one task: patch size, test counts, statement quality and difficulty.

Pure functions of a ``TaskInstance`` (plus an optional solve rate from rollouts), so curation can
threshold on them and users can filter the released dataset by them. The names below are stable:
they become keys of ``TaskInstance.scores`` and columns of the exported ``scores`` struct.
"""

from __future__ import annotations

import math
import re

from trajforge.schemas.diff import PatchStats, parse_patch
from trajforge.schemas.task_instance import TaskInstance
from trajforge.schemas.test_ids import short_test_name

INF = math.inf

# name -> (lowest, highest) value the score can take; the quality gates check these bounds.
TASK_SCORE_RANGES: dict[str, tuple[float, float]] = {
    "patch_lines": (0.0, INF),  # lines added + removed by the gold patch
    "patch_files": (0.0, INF),  # files the gold patch touches
    "patch_hunks": (0.0, INF),  # @@ hunks in the gold patch
    "fail_to_pass": (0.0, INF),  # number of FAIL_TO_PASS tests
    "pass_to_pass": (0.0, INF),  # number of PASS_TO_PASS tests
    "statement_words": (0.0, INF),  # whitespace-separated words in the problem statement
    "statement_leaks_patch": (0.0, 1.0),  # 1 when the statement quotes a line the fix adds
    "statement_leaks_test": (0.0, 1.0),  # 1 when the statement names a FAIL_TO_PASS test
    "statement_code_ratio": (0.0, 1.0),  # share of statement characters that are code
    "difficulty": (0.0, 1.0),  # 0 easy .. 1 hard, from size and (when known) solve rate
    "solve_rate": (0.0, 1.0),  # resolved rollouts / rollouts; present only when given
}

MIN_LEAK_CHARS = 10  # shorter added lines (``return x``, ``pass``) are too common to count as leaks
SIZE_WEIGHT = 0.3  # share of difficulty from patch size when a solve rate is known

_FENCE = re.compile(r"```.*?(?:```|\Z)", re.DOTALL)
_INLINE = re.compile(r"`[^`\n]+`")


def leaks_patch(statement: str, stats: PatchStats) -> bool:
    """The statement quotes a line the fix adds: the answer is in the question."""
    removed = {line.strip() for line in stats.removed}
    for line in stats.added:
        text = line.strip()
        if len(text) >= MIN_LEAK_CHARS and text not in removed and text in statement:
            return True
    return False


def leaks_test(statement: str, fail_to_pass: tuple[str, ...]) -> bool:
    """The statement names a test that grades the task, so a solver can target it directly."""
    for test_id in fail_to_pass:
        name = short_test_name(test_id)
        if test_id in statement or (
            name and re.search(rf"(?<![\w.]){re.escape(name)}(?!\w)", statement)
        ):
            return True
    return False


def code_ratio(statement: str) -> float:
    """Share of non-blank characters (backticks aside) in fenced blocks, inline code or indented
    lines: statements that are mostly code dumps tell a solver little about the intent."""
    total = _non_blank(statement)
    if total == 0:
        return 0.0
    code = 0
    rest = statement
    for pattern in (_FENCE, _INLINE):
        code += sum(_non_blank(m.group(0)) for m in pattern.finditer(rest))
        rest = pattern.sub(" ", rest)
    code += sum(_non_blank(line) for line in rest.splitlines() if line.startswith(("    ", "\t")))
    return min(1.0, code / total)


def _non_blank(text: str) -> int:
    return sum(1 for c in text if not c.isspace() and c != "`")


def size_difficulty(stats: PatchStats) -> float:
    """0..1 from patch size: lines on a log scale (200 lines saturate), then files and hunks."""
    lines = min(1.0, math.log1p(stats.lines) / math.log1p(200))
    files = min(1.0, max(0, len(stats.files) - 1) / 4)
    hunks = min(1.0, max(0, stats.hunks - 1) / 9)
    return 0.5 * lines + 0.25 * files + 0.25 * hunks


def difficulty(stats: PatchStats, solve_rate: float | None = None) -> float:
    """Size alone, or mostly the failure rate of rollouts when there were any."""
    size = size_difficulty(stats)
    if solve_rate is None:
        return round(size, 6)
    return round(SIZE_WEIGHT * size + (1 - SIZE_WEIGHT) * (1 - solve_rate), 6)


def task_scores(task: TaskInstance, solve_rate: float | None = None) -> dict[str, float]:
    """Every task score (see ``TASK_SCORE_RANGES``); ``solve_rate`` only when it is given."""
    if solve_rate is not None and not 0.0 <= solve_rate <= 1.0:
        raise ValueError(f"solve_rate must be within [0, 1], got {solve_rate}")
    stats = parse_patch(task.patch)
    statement = task.problem_statement
    scores = {
        "patch_lines": float(stats.lines),
        "patch_files": float(len(stats.files)),
        "patch_hunks": float(stats.hunks),
        "fail_to_pass": float(len(task.FAIL_TO_PASS)),
        "pass_to_pass": float(len(task.PASS_TO_PASS)),
        "statement_words": float(len(statement.split())),
        "statement_leaks_patch": float(leaks_patch(statement, stats)),
        "statement_leaks_test": float(leaks_test(statement, task.FAIL_TO_PASS)),
        "statement_code_ratio": round(code_ratio(statement), 6),
        "difficulty": difficulty(stats, solve_rate),
    }
    if solve_rate is not None:
        scores["solve_rate"] = float(solve_rate)
    return scores
