"""The HTTP side of rewards: a client of ``trajforge serve-rewards`` and TRL's reward function.

A busy service is not a verdict: a refusal (queue full, a request that waited too long), a
connection reset or refused, or a harness failure is retried with exponential backoff and jitter,
and when the tries run out the caller gets an exception (or, from ``trl_reward_func`` when asked,
``None``), never a reward it did not earn. Only a 200 answer of the grader's shape is a reward.

Standard library only, so a trainer that only talks to the service (``from trajforge import
RewardClient, trl_reward_func``) loads neither Beam, pyarrow nor docker.
"""

from __future__ import annotations

import http.client
import json
import random
import re
import sys
import threading
import time
import urllib.error
import urllib.request
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Literal

FENCED_DIFF = re.compile(r"```(?:diff|patch)?\s*\n(.*?)```", re.DOTALL)
# Answers worth asking again: the service is busy or slow (429, 503 queue_full, 504 and 408
# request_timeout), or failed itself (500, 502); any other refusal is the request's fault.
RETRYABLE_STATUS = frozenset({408, 429, 500, 502, 503, 504})


class RewardServiceError(RuntimeError):
    """No reward: the service refused the request (``status``, ``reason``), or could not be
    reached or kept refusing until the tries ran out (``attempts``)."""

    def __init__(self, message: str, status: int | None, reason: str, attempts: int) -> None:
        super().__init__(message)
        self.status = status  # the last HTTP status; None: no answer (reset, refused, timeout)
        self.reason = reason  # the service's reason, or the connection's failure
        self.attempts = attempts


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
    """A client of ``trajforge serve-rewards`` that retries what is not the request's fault.

    Up to ``attempts`` tries within ``total_s`` seconds; between them it sleeps a random time in
    [0, min(``max_delay_s``, ``base_s`` * 2**try)] ("full jitter", so a burst of refused clients
    does not come back at the same instant). ``retries`` counts what was retried, by reason."""

    def __init__(
        self,
        url: str = "http://127.0.0.1:8765",
        timeout_s: float = 1800.0,
        attempts: int = 8,
        total_s: float = 600.0,
        base_s: float = 0.5,
        max_delay_s: float = 30.0,
    ) -> None:
        if attempts < 1 or total_s <= 0 or base_s < 0 or max_delay_s < 0:
            raise ValueError("attempts >= 1, total_s > 0, base_s >= 0 and max_delay_s >= 0")
        self.url = url.rstrip("/")
        self.timeout_s = timeout_s
        self.attempts = attempts
        self.total_s = total_s
        self.base_s = base_s
        self.max_delay_s = max_delay_s
        self.retries: Counter = Counter()
        self._lock = threading.Lock()

    def score(
        self,
        instance_id: str,
        patch: str | None,
        partial: bool = False,
        fail_fast: bool | None = None,
    ) -> dict:
        """The grader's answer (``reward``, ``resolved``, ``reason``, ``error``, ``report``).

        A harness failure (``error`` true: the sandbox broke, not the patch) is returned as is,
        for the caller to count apart (``reward_value`` retries it). Raises ``RewardServiceError``
        when the service refuses the request (unknown id, bad request: at once) or stays busy or
        unreachable past the tries."""
        return self._ask(instance_id, patch, partial, fail_fast, retry_harness=False)

    def reward_value(
        self,
        instance_id: str,
        patch: str | None,
        partial: bool = False,
        fail_fast: bool | None = None,
    ) -> float:
        """The reward alone, a harness failure retried like a refusal (it is worth another
        container); ``RewardServiceError`` when none came."""
        return float(
            self._ask(instance_id, patch, partial, fail_fast, retry_harness=True)["reward"]
        )

    def _ask(
        self,
        instance_id: str,
        patch: str | None,
        partial: bool,
        fail_fast: bool | None,
        retry_harness: bool,
    ) -> dict:
        check_partial(partial)
        said: dict[str, Any] = {"instance_id": instance_id, "patch": patch, "partial": partial}
        if fail_fast is not None:  # else the server's --fail-fast decides
            said["fail_fast"] = fail_fast
        body = json.dumps(said).encode()
        deadline = time.monotonic() + self.total_s
        for attempt in range(1, self.attempts + 1):
            status, reason, answer = self._post(body, instance_id)
            if answer is not None and not (retry_harness and answer["error"]):
                return answer
            if status is not None and status not in RETRYABLE_STATUS and answer is None:
                why = f"no reward for {instance_id!r}: the service answered {status} {reason}"
                raise RewardServiceError(why, status, reason, attempt)
            delay = random.uniform(0, min(self.max_delay_s, self.base_s * 2 ** (attempt - 1)))
            if attempt == self.attempts or time.monotonic() + delay > deadline:
                break
            with self._lock:
                self.retries[reason] += 1
            time.sleep(delay)
        got = f"{status} {reason}" if status is not None else reason
        why = (
            f"no reward for {instance_id!r} from {self.url} after {attempt} tries "
            f"(last: {got}); is serve-rewards up and sized for this load (--workers, --queue)?"
        )
        raise RewardServiceError(why, status, reason, attempt)

    def _post(self, body: bytes, instance_id: str) -> tuple[int | None, str, dict | None]:
        """(status, reason, the grader's answer or None): None when there is no answer of the
        grader's shape, so a refusal's body is never read as a reward."""
        request = urllib.request.Request(
            f"{self.url}/reward", body, {"Content-Type": "application/json"}
        )
        try:
            with urllib.request.urlopen(request, timeout=self.timeout_s) as reply:
                status, data = reply.status, reply.read()
        except urllib.error.HTTPError as exc:
            try:
                said = _reason(exc.read())
            except (OSError, http.client.HTTPException):  # the body was cut off: its status stands
                said = ""
            return exc.code, said or f"http_{exc.code}", None
        except (urllib.error.URLError, http.client.HTTPException, OSError) as exc:
            cause = exc.reason if isinstance(exc, urllib.error.URLError) else exc
            return None, f"unreachable: {type(cause).__name__}: {cause}"[:200], None
        answer = _graded(data, instance_id) if status == 200 else None
        if answer is None:  # a 200 not of the grader's shape, or another 2xx/3xx: no reward
            return status, "malformed_answer", None
        return status, "harness_error:" + answer["reason"] if answer["error"] else "", answer


def _graded(data: bytes, instance_id: str) -> dict | None:
    """``data`` when it is the grader's answer for ``instance_id``: a JSON object whose
    ``reward`` is a number in [0, 1], ``resolved`` and ``error`` booleans, ``reason`` text; else
    None."""
    try:
        answer = json.loads(data)
    except ValueError:
        return None
    if not isinstance(answer, dict):
        return None
    reward = answer.get("reward")
    if isinstance(reward, bool) or not isinstance(reward, int | float) or not 0 <= reward <= 1:
        return None
    if not isinstance(answer.get("resolved"), bool) or not isinstance(answer.get("error"), bool):
        return None
    if not isinstance(answer.get("reason"), str) or answer.get("instance_id") != instance_id:
        return None
    return answer


def _reason(data: bytes) -> str:
    try:
        reason = json.loads(data).get("reason", "")
    except (ValueError, AttributeError):
        return ""
    return reason[:100] if isinstance(reason, str) else ""


def trl_reward_func(
    url: str = "http://127.0.0.1:8765",
    partial: bool = False,
    on_failure: Literal["raise", "none"] = "raise",
    concurrency: int = 8,
    client: RewardClient | None = None,
) -> Callable[..., list[float | None]]:
    """A GRPOTrainer reward function: ``(prompts, completions, instance_id, **kwargs)`` ->
    rewards; the dataset (the export's ``rl`` config) supplies ``instance_id`` per row, and up to
    ``concurrency`` completions are scored at once.

    Refusals, lost connections and harness failures are retried (``client``'s tries; default a
    ``RewardClient(url)``). When a completion still has no reward, ``on_failure="raise"`` (the
    default) raises ``RewardServiceError`` and the training step stops; ``"none"`` gives ``None``
    for it. TRL's GRPOTrainer turns ``None`` into NaN and sums the reward functions with
    ``nansum``: with other reward functions the row is scored by them alone, but when this is the
    only one the row's reward becomes 0.0 (with a warning), the very signal a refusal must not
    give; hence ``"raise"`` by default.

    What the completion itself is refused for is its verdict, 0.0, never an error a policy could
    stop training with: a patch over the service's size limit (413 ``patch_too_large``), or one
    that is not Unicode text (a lone surrogate: no file holds it, and the service refuses it)."""
    check_partial(partial)
    if on_failure not in ("raise", "none"):
        raise ValueError(f"on_failure must be 'raise' or 'none', not {on_failure!r}")
    asker = client or RewardClient(url)

    def one(task_id: str, completion: Any) -> float | None:
        patch = patch_from_completion(completion)
        if patch is not None and not _is_text(patch):
            return 0.0
        try:
            return asker.reward_value(task_id, patch, partial)
        except RewardServiceError as exc:
            if exc.reason == "patch_too_large":
                return 0.0
            if on_failure == "raise":
                raise
            print(f"trl_reward_func: None for {task_id!r}: {exc}", file=sys.stderr)
            return None

    def trajforge_reward(prompts, completions, instance_id, **kwargs) -> list[float | None]:
        jobs = list(zip(instance_id, completions, strict=True))
        with ThreadPoolExecutor(max_workers=max(1, min(concurrency, len(jobs)))) as pool:
            return list(pool.map(lambda job: one(*job), jobs))

    return trajforge_reward


def _is_text(patch: str) -> bool:
    try:
        patch.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def check_partial(partial: object) -> None:
    """``partial`` is a bool: the service answers anything else 400, and a string such as
    ``"false"`` would be true."""
    if not isinstance(partial, bool):
        raise TypeError(f"partial must be True or False, not {type(partial).__name__}")
