"""The HTTP side of rewards: a client of ``trajforge serve-rewards`` and TRL's reward function.

Standard library only, so a trainer that only talks to the service (``from trajforge import
RewardClient, trl_reward_func``) loads neither Beam, pyarrow nor docker.
"""

from __future__ import annotations

import json
import re
import urllib.error
import urllib.request
from collections.abc import Callable
from typing import Any

FENCED_DIFF = re.compile(r"```(?:diff|patch)?\s*\n(.*?)```", re.DOTALL)


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

    def score(
        self,
        instance_id: str,
        patch: str | None,
        partial: bool = False,
        fail_fast: bool | None = None,
    ) -> dict:
        """The service's answer (``reward``, ``resolved``, ``reason``, ``report``); a refusal
        (queue full, request timeout, bad request) comes back as a body with ``error`` set."""
        check_partial(partial)
        said = {"instance_id": instance_id, "patch": patch, "partial": partial}
        if fail_fast is not None:  # else the server's --fail-fast decides
            said["fail_fast"] = fail_fast
        body = json.dumps(said)
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
    check_partial(partial)
    client = RewardClient(url)

    def trajforge_reward(prompts, completions, instance_id, **kwargs) -> list[float]:
        return [
            float(client.score(task_id, patch_from_completion(completion), partial)["reward"])
            for task_id, completion in zip(instance_id, completions, strict=True)
        ]

    return trajforge_reward


def check_partial(partial: object) -> None:
    """``partial`` is a bool: the service answers anything else 400, and a string such as
    ``"false"`` would be true."""
    if not isinstance(partial, bool):
        raise TypeError(f"partial must be True or False, not {type(partial).__name__}")
