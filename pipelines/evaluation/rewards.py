"""Rewards for RL trainers, in process or over HTTP.

In process: ``reward(task, patch)`` grades a patch (``Evaluator``) and returns the Evaluation
(``.reward``, ``.resolved``, ``.report``); ``load_tasks`` reads the tasks of a stage output or an
exported dataset. Over HTTP, against ``trajforge serve-rewards``: ``RewardClient(url).score(...)``,
and ``trl_reward_func(url)``, a reward function for TRL's GRPOTrainer (``reward_funcs=[...]``)
that reads each completion's patch and the row's ``instance_id`` (both in ``reward_client.py``,
which imports nothing heavy; re-exported here).
"""

from __future__ import annotations

from trajforge.pipelines.evaluation.evaluator import Evaluation, Evaluator
from trajforge.pipelines.evaluation.reward_client import (  # re-exported: the HTTP side
    RewardClient as RewardClient,
)
from trajforge.pipelines.evaluation.reward_client import (
    RewardServiceError as RewardServiceError,
)
from trajforge.pipelines.evaluation.reward_client import check_partial
from trajforge.pipelines.evaluation.reward_client import (
    patch_from_completion as patch_from_completion,
)
from trajforge.pipelines.evaluation.reward_client import trl_reward_func as trl_reward_func
from trajforge.pipelines.evaluation.task_rows import load_tasks as load_tasks  # re-exported
from trajforge.schemas.params import Params, load_params
from trajforge.schemas.task_instance import TaskInstance

_default: Evaluator | None = None


def reward(
    task: TaskInstance,
    patch: str | None,
    partial: bool = False,
    evaluator: Evaluator | None = None,
    params: Params | None = None,
    fail_fast: bool | None = None,
    strict: bool | None = None,
) -> Evaluation:
    """``patch`` graded for ``task`` in a fresh container of its image: 1.0 when resolved, else
    0.0 (``partial``: the share of FAIL_TO_PASS passing with no PASS_TO_PASS broken);
    ``fail_fast``: FAIL_TO_PASS first, 0.0 at once when one fails (default: the evaluator's).
    ``.suspicious_patch`` says why the patch's source looks like a hack the tests cannot see
    (caller inspection, reading the tests...; "" when clean); ``strict`` (default: the
    evaluator's) scores such a patch 0.0, reason ``suspicious_patch``."""
    global _default
    check_partial(partial)
    if evaluator is None:
        if _default is None:
            _default = Evaluator(params or load_params(None))
        evaluator = _default
    return evaluator.evaluate(task, patch, partial, fail_fast, strict)
