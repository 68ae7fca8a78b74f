"""The trainer's side of rewards over HTTP: a busy, broken or absent service is never a reward.

No Docker: the client is pointed at a port with nothing listening, and at a real HTTP server on
127.0.0.1 that answers as a hostile or broken service would (a refusal that carries a ``reward``
of 0.0 like the service once sent, a harness failure, answers of the wrong shape), and the real
service's door under a burst of empty patches (answered without a container). The real service
grading a burst in Docker is ``test_reward_burst.py``.
"""

from __future__ import annotations

import json
import socket
import threading
import urllib.error
import urllib.request
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from curated_factory import make_task
from trajforge.pipelines.evaluation.evaluator import Evaluator
from trajforge.pipelines.evaluation.reward_client import (
    RewardClient,
    RewardServiceError,
    trl_reward_func,
)
from trajforge.pipelines.evaluation.service import RewardService, serve
from trajforge.schemas.params import load_params

GRADED = {
    "instance_id": "calc-1", "reward": 1.0, "resolved": True, "reason": "resolved", "error": False,
    "report": {},
}  # fmt: skip
# What serve-rewards answered a full queue with before issue 41: a body with a reward in it.
OLD_QUEUE_FULL = {"error": True, "reason": "queue_full", "reward": 0.0, "resolved": False}
HARNESS_ERROR = {**GRADED, "error": True, "reward": 0.0, "resolved": False}
HARNESS_ERROR["reason"] = "sandbox_error"  # the sandbox broke: no verdict
FIX = "diff --git a/x.py b/x.py\n--- a/x.py\n+++ b/x.py\n@@ -1 +1 @@\n-a\n+b\n"


def _nothing_listening() -> str:
    """A URL whose port was just free: connecting to it is refused."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    return f"http://127.0.0.1:{port}"


@contextmanager
def scripted(answers: list[tuple[int, object]]) -> Iterator[tuple[str, list[bytes]]]:
    """A real HTTP server answering each POST with the next (status, body); the last repeats.
    Yields its URL and the bodies it received."""
    received: list[bytes] = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            received.append(self.rfile.read(int(self.headers["Content-Length"])))
            status, body = answers[min(len(received), len(answers)) - 1]
            data = body if isinstance(body, bytes) else json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", received
    finally:
        server.shutdown()
        server.server_close()


def test_a_service_that_never_answers_gives_up_with_a_clear_error():
    url = _nothing_listening()
    client = RewardClient(url, attempts=4, base_s=0.001)
    with pytest.raises(RewardServiceError) as gave_up:
        client.score("calc-1", FIX)
    said = str(gave_up.value)
    assert f"no reward for 'calc-1' from {url} after 4 tries" in said
    assert "ConnectionRefusedError" in said and "is serve-rewards up" in said
    assert (gave_up.value.status, gave_up.value.attempts) == (None, 4)
    assert sum(client.retries.values()) == 3  # the three waits between four tries
    # The time bound ends the tries too, whatever the count allows.
    bounded = RewardClient(url, attempts=10_000, total_s=0.2, base_s=0.01, max_delay_s=0.01)
    with pytest.raises(RewardServiceError) as timed:
        bounded.score("calc-1", FIX)
    assert 1 < timed.value.attempts < 10_000
    # trl_reward_func: raises by default; asked to, gives None for TRL to see as NaN.
    fail = RewardClient(url, attempts=2, base_s=0.001)
    batch = {"prompts": ["", ""], "completions": [FIX, FIX], "instance_id": ["calc-1"] * 2}
    with pytest.raises(RewardServiceError, match="after 2 tries"):
        trl_reward_func(url, client=fail)(**batch)
    assert trl_reward_func(url, on_failure="none", client=fail)(**batch) == [None, None]
    with pytest.raises(ValueError, match="on_failure"):
        trl_reward_func(url, on_failure="zero")  # type: ignore[arg-type]


def test_a_refusal_is_retried_never_read_as_a_reward():
    """A 503 whose body says ``"reward": 0.0`` (the old service, a proxy) is a refusal: retried,
    and the reward is the grader's answer that follows."""
    answers: list[tuple[int, object]] = [
        (503, OLD_QUEUE_FULL),
        (429, {}),
        (503, b"busy"),
        (200, GRADED),
    ]
    with scripted(answers) as (url, received):
        client = RewardClient(url, base_s=0.001)
        rewards = trl_reward_func(url, client=client)
        assert rewards(prompts=[""], completions=[FIX], instance_id=["calc-1"]) == [1.0]
    assert len(received) == 4
    assert client.retries == {"queue_full": 1, "http_429": 1, "http_503": 1}
    assert json.loads(received[-1]) == {"instance_id": "calc-1", "patch": FIX, "partial": False}


@pytest.mark.parametrize(
    "body",
    [
        {**GRADED, "reward": "1.0"},  # a string
        {**GRADED, "reward": True},  # a bool is no number
        {**GRADED, "reward": 7.0},  # out of [0, 1]
        {"reward": 1.0},  # no resolved, reason, error
        {**GRADED, "instance_id": "calc-2"},  # another task's answer
        [1.0],
        b"1.0 not json",
    ],
)
def test_an_answer_not_of_the_graders_shape_is_no_reward(body):
    refused = pytest.raises(RewardServiceError, match="answered 200 malformed_answer")
    with scripted([(200, body)]) as (url, received), refused:
        RewardClient(url, base_s=0.001).score("calc-1", FIX)
    assert len(received) == 1


def test_a_request_refused_for_its_own_fault_is_raised_at_once():
    unknown = {"error": True, "reason": "unknown_instance", "detail": "no task"}
    raised = pytest.raises(RewardServiceError, match="404 unknown_instance")
    with scripted([(404, unknown)]) as (url, received), raised as refused:
        RewardClient(url, base_s=0.001).score("nope", FIX)
    assert (refused.value.status, refused.value.attempts, len(received)) == (404, 1, 1)


def test_a_harness_failure_is_retried_and_never_a_reward():
    """``error`` true: the sandbox broke, not the patch. ``score`` returns it as is (to be
    counted apart); the reward function asks again, and a harness that stays broken is no 0.0."""
    with scripted([(200, HARNESS_ERROR), (200, GRADED)]) as (url, received):
        client = RewardClient(url, base_s=0.001)
        assert client.reward_value("calc-1", FIX) == 1.0
    assert len(received) == 2 and client.retries == {"harness_error:sandbox_error": 1}
    with scripted([(200, HARNESS_ERROR)]) as (url, received):
        client = RewardClient(url, attempts=3, base_s=0.001)
        assert client.score("calc-1", FIX)["error"] is True
        masked = trl_reward_func(url, on_failure="none", client=client)
        assert masked(prompts=[""], completions=[FIX], instance_id=["calc-1"]) == [None]
        with pytest.raises(RewardServiceError, match="last: 200 harness_error:sandbox_error"):
            client.reward_value("calc-1", FIX)
    assert len(received) == 7


@pytest.fixture
def door(tmp_path) -> Iterator[tuple[str, RewardService, str]]:
    """(url, service, instance id): the real service, one worker and a queue of one, with an
    Evaluator on the local sandbox; only what needs no container is asked of it here."""
    params = tmp_path / "params.yaml"
    params.write_text(f"cache_dir: {tmp_path / 'cache'}\nsandbox:\n  kind: local\n")
    evaluator = Evaluator(load_params(str(params)), use_cache=False)
    task = make_task("acme/alpha", 1)
    tasks = {task.instance_id: task}
    service = RewardService(evaluator, tasks, workers=1, queue_size=1, max_patch_bytes=10_000)
    server = serve(service, port=0)
    assert server.request_queue_size >= 128  # not Python's 5
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", service, task.instance_id
    finally:
        server.shutdown()
        server.server_close()
        service.close()
        evaluator.close()


def test_a_burst_is_answered_not_reset_and_every_connection_counted(door):
    """50 clients at once: with Python's default listen backlog (5) the kernel reset 154 of 250
    such connections before the service saw them; each must now get an answer, counted."""
    url, service, instance_id = door
    body = json.dumps({"instance_id": instance_id, "patch": None}).encode()
    start = threading.Barrier(50)

    def client(_: int) -> int | str:
        start.wait()
        request = urllib.request.Request(f"{url}/reward", body)
        try:
            with urllib.request.urlopen(request, timeout=60) as answer:
                return answer.status
        except urllib.error.HTTPError as exc:
            return exc.code
        except OSError as exc:
            return f"{type(exc).__name__}: {exc}"

    with ThreadPoolExecutor(max_workers=50) as pool:
        said = list(pool.map(client, range(50)))
    assert [s for s in said if not isinstance(s, int)] == []  # none reset
    assert set(said) <= {200, 503}
    stats = service.stats()
    assert stats["connections"] == {"accepted": 50, "unanswered": 0}
    assert stats["counts"]["requests"] == 50
    assert stats["counts"].get("refused:queue_full", 0) == said.count(503)


def test_a_completion_cannot_stop_training_with_what_the_service_refuses(door):
    """A policy that writes a patch over the size limit, or one that is not Unicode text, gets
    its verdict (0.0), not an exception that would stop the training step; a request the service
    refuses for another reason (an unknown id: the dataset's fault) still raises."""
    url, _, instance_id = door
    rewards = trl_reward_func(url, client=RewardClient(url, base_s=0.001))
    huge = FIX + "+" + "x" * 20_000 + "\n"
    surrogate = FIX.replace("+b", "+\ud800")
    completions = [f"```diff\n{huge}```", f"```diff\n{surrogate}```", "no patch"]
    ids = [instance_id] * 3
    assert rewards(prompts=[""] * 3, completions=completions, instance_id=ids) == [0.0] * 3
    with pytest.raises(RewardServiceError, match="404 unknown_instance"):
        rewards(prompts=[""], completions=[FIX], instance_id=["no-such-task"])
