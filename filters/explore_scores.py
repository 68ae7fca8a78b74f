"""What curation judges of an explore task: its score, and what makes two explorations the same.

An explore task is its instruction plus the actions that accomplish it, so two tasks are exact
duplicates when both normalize the same: the instruction as prose (``normalize_text``), each action
as its tool and its arguments re-serialized with sorted keys (JSON key order and spacing carry no
meaning; the values, code included, are kept as written). The survivor of a duplicate group is the
best-scored one.
"""

from __future__ import annotations

import dataclasses
import json

from trajforge.filters.exact_dedup import DedupKey
from trajforge.filters.text_normalize import FIELD_SEPARATOR, normalize_text
from trajforge.filters.thresholds import check_threshold_names
from trajforge.schemas.explore_task import ExploreTask, ReplayAction
from trajforge.schemas.params import CurateParams

EXPLORE_SCORE = "explore_score"
# name -> (lowest, highest): the judge's 1-5 score, as ``curate.min_scores.explore_score`` names it
EXPLORE_SCORE_RANGES: dict[str, tuple[float, float]] = {EXPLORE_SCORE: (1.0, 5.0)}


def explore_scores(task: ExploreTask) -> dict[str, float]:
    """The task's scores by threshold name; an unjudged task has none, so no threshold drops it."""
    return {} if task.score is None else {EXPLORE_SCORE: float(task.score)}


def canonical_action(action: ReplayAction) -> str:
    """``tool {arguments}``, the arguments' JSON keys sorted (unparsable ones as written)."""
    try:
        arguments = json.dumps(json.loads(action.arguments), sort_keys=True, ensure_ascii=False)
    except (json.JSONDecodeError, TypeError):
        arguments = action.arguments
    return f"{action.tool} {arguments}"


def explore_text(task: ExploreTask) -> str:
    """The normalized instruction, then one line per action."""
    return FIELD_SEPARATOR.join(
        [normalize_text(task.instruction), *map(canonical_action, task.actions)]
    )


def explore_dedup_key(task: ExploreTask) -> DedupKey:
    """Exact dedup's view of an explore task: the higher score survives (unjudged ranks last)."""
    rank = task.score if task.score is not None else float("-inf")
    return DedupKey(task.task_id, explore_text(task), rank)


def check_curate_threshold_names(params: CurateParams) -> None:
    """``check_threshold_names`` that also accepts the explore score names."""
    check_threshold_names(
        dataclasses.replace(
            params,
            min_scores=_without_explore(params.min_scores),
            max_scores=_without_explore(params.max_scores),
        )
    )


def _without_explore(thresholds: dict[str, float]) -> dict[str, float]:
    return {k: v for k, v in thresholds.items() if k not in EXPLORE_SCORE_RANGES}
