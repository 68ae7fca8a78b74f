"""Score thresholds from ``curate.min_scores`` / ``curate.max_scores``: keep, or say why not.

Task and trajectory score names are disjoint, so one pair of maps serves both record kinds: a
threshold applies to the records that carry that score and is skipped by the others.
"""

from __future__ import annotations

from collections.abc import Mapping

from trajforge.filters.task_scores import TASK_SCORE_RANGES
from trajforge.filters.trajectory_scores import TRAJECTORY_SCORE_RANGES
from trajforge.schemas.errors import ParamsError
from trajforge.schemas.params import CurateParams

SCORE_RANGES: dict[str, tuple[float, float]] = {**TASK_SCORE_RANGES, **TRAJECTORY_SCORE_RANGES}


def check_threshold_names(params: CurateParams) -> None:
    """A misspelt score name would silently keep everything: refuse it when params load."""
    for key, thresholds in (("min_scores", params.min_scores), ("max_scores", params.max_scores)):
        for name in thresholds:
            if name not in SCORE_RANGES:
                known = ", ".join(sorted(SCORE_RANGES))
                raise ParamsError(f"params: unknown score curate.{key}.{name} (known: {known})")


def rejection_reason(
    scores: Mapping[str, float],
    min_scores: Mapping[str, float],
    max_scores: Mapping[str, float],
) -> str | None:
    """None when every threshold holds, else ``score_below:NAME`` or ``score_above:NAME`` for
    the first failing score by name (minimums first), so a rerun gives the same reason."""
    for name in sorted(min_scores):
        if name in scores and scores[name] < min_scores[name]:
            return f"score_below:{name}"
    for name in sorted(max_scores):
        if name in scores and scores[name] > max_scores[name]:
            return f"score_above:{name}"
    return None


def apply_thresholds(scores: Mapping[str, float], params: CurateParams) -> str | None:
    """``rejection_reason`` with the thresholds from params."""
    return rejection_reason(scores, params.min_scores, params.max_scores)
