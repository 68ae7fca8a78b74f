"""Rewards for RL trainers, in process or over HTTP.

In process: ``reward(task, patch)`` grades a patch (``Evaluator``) and returns the Evaluation
(``.reward``, ``.resolved``, ``.report``); ``load_tasks`` reads the tasks of a stage output or an
exported dataset. Over HTTP, against ``trajforge serve-rewards``: ``RewardClient(url).score(...)``,
and ``trl_reward_func(url)``, a reward function for TRL's GRPOTrainer (``reward_funcs=[...]``)
that reads each completion's patch and the row's ``instance_id``.
"""

from __future__ import annotations

import json
import re
import urllib.error
import urllib.request
from collections.abc import Callable
from typing import Any

from trajforge.pipelines.evaluation.evaluator import Evaluation, Evaluator
from trajforge.pipelines.evaluation.task_rows import load_tasks as load_tasks  # re-exported
from trajforge.schemas.params import Params, load_params
from trajforge.schemas.task_instance import TaskInstance

_default: Evaluator | None = None
FENCED_DIFF = re.compile(r"```(?:diff|patch)?\s*\n(.*?)```", re.DOTALL)


def reward(
    task: TaskInstance,
    patch: str | None,
    partial: bool = False,
    evaluator: Evaluator | None = None,
    params: Params | None = None,
) -> Evaluation:
    """``patch`` graded for ``task`` in a fresh container of its image: 1.0 when resolved, else
    0.0 (``partial``: the share of FAIL_TO_PASS passing with no PASS_TO_PASS broken)."""
    global _default
    _check_partial(partial)
    if evaluator is None:
        if _default is None:
            _default = Evaluator(params or load_params(None))
        evaluator = _default
    return evaluator.evaluate(task, patch, partial)


def patch_from_completion(completion: Any) -> str | None:
    """The unified diff in a model's completion: a fenced ```diff block, or the text from the
    first ``diff --git``; a chat completion (list of messages) is read from its last message."""
    if isinstance(completion, list):
        completion = completion[-1].get("content", "") if completion else ""
    text = completion if isinstance(completion, str) else ""
    for block in FENCED_DIFF.findall(text):
        if "--- " in block or "diff --git" in block:
            return block
    start = text.find("diff --git")
    return text[start:] if start >= 0 else None


class RewardClient:
    """A client of ``trajforge serve-rewards``."""

    def __init__(self, url: str = "http://127.0.0.1:8765", timeout_s: float = 1800.0) -> None:
        self.url = url.rstrip("/")
        self.timeout_s = timeout_s

    def score(self, instance_id: str, patch: str | None, partial: bool = False) -> dict:
        """The service's answer (``reward``, ``resolved``, ``reason``, ``report``); a refusal
        (queue full, request timeout, bad request) comes back as a body with ``error`` set."""
        _check_partial(partial)
        body = json.dumps({"instance_id": instance_id, "patch": patch, "partial": partial})
        request = urllib.request.Request(
            f"{self.url}/reward", body.encode(), {"Content-Type": "application/json"}
        )
        try:
            with urllib.request.urlopen(request, timeout=self.timeout_s) as answer:
                return json.loads(answer.read())
        except urllib.error.HTTPError as exc:
            return json.loads(exc.read() or b"{}") or {"error": True, "reason": str(exc.code)}


def trl_reward_func(
    url: str = "http://127.0.0.1:8765", partial: bool = False
) -> Callable[..., list[float]]:
    """A GRPOTrainer reward function: ``(prompts, completions, instance_id, **kwargs)`` ->
    rewards; the dataset (the export's ``rl`` config) supplies ``instance_id`` per row."""
    _check_partial(partial)
    client = RewardClient(url)

    def trajforge_reward(prompts, completions, instance_id, **kwargs) -> list[float]:
        return [
            float(client.score(task_id, patch_from_completion(completion), partial)["reward"])
            for task_id, completion in zip(instance_id, completions, strict=True)
        ]

    return trajforge_reward


def _check_partial(partial: object) -> None:
    """``partial`` is a bool: the service answers anything else 400, and a string such as
    ``"false"`` would be true."""
    if not isinstance(partial, bool):
        raise TypeError(f"partial must be True or False, not {type(partial).__name__}")
