"""A burst against ``serve-rewards``, as a busy trainer sends it (issue 41, item 7).

One task (``calc_task``), one worker and a queue of one, so nearly all of a burst is refused
``queue_full``: every client must still get an answer (none reset by a short listen backlog), the
service must count every connection, and ``trl_reward_func`` must give every correct fix its real
reward, the refusals retried, never read as 0.0. Each test grades with a verdict cache of its
own, so the first grading really runs (seconds, in Docker) while the burst waits; repeats of the
same patch are then answered from the cache. Real service, real HTTP on 127.0.0.1, real grader.
"""

from __future__ import annotations

import dataclasses
import json
import threading
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor

import pytest
from trajforge.pipelines.evaluation.evaluator import Evaluator
from trajforge.pipelines.evaluation.reward_client import RewardClient, trl_reward_func
from trajforge.pipelines.evaluation.service import RewardService, serve
from trajforge.schemas.params import load_params

pytestmark = pytest.mark.docker

CLIENTS = 50


@pytest.fixture
def service(calc_task, tmp_path):
    """(url, RewardService): one worker, a queue of one, verdicts cached under ``tmp_path``."""
    task, _, work = calc_task
    params = load_params(str(work / "params.yaml"))
    params = dataclasses.replace(params, shared_cache=str(tmp_path / "verdicts"))
    evaluator = Evaluator(params, timeout_s=30, spares=1)
    served = RewardService(evaluator, {task.instance_id: task}, workers=1, queue_size=1)
    server = serve(served, port=0)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", served
    finally:
        server.shutdown()
        server.server_close()
        served.close()
        evaluator.close()


def _post_once(url: str, body: bytes) -> tuple[int, dict]:
    """One POST, no retry: the status and body, or the exception (a reset) raised as is."""
    request = urllib.request.Request(f"{url}/reward", body, {"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=300) as answer:
            return answer.status, json.loads(answer.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def _stats(url: str) -> dict:
    with urllib.request.urlopen(f"{url}/stats", timeout=30) as answer:
        return json.loads(answer.read())


def test_a_burst_of_50_clients_is_answered_every_one_and_counted(calc_task, service):
    task, _, _ = calc_task
    url, _ = service
    body = json.dumps({"instance_id": task.instance_id, "patch": task.patch}).encode()
    start = threading.Barrier(CLIENTS)

    def client(_: int) -> tuple[int, dict] | str:
        start.wait()  # all 50 connect at once
        try:
            return _post_once(url, body)
        except OSError as exc:  # a reset or refused connection: lost
            return f"{type(exc).__name__}: {exc}"

    with ThreadPoolExecutor(max_workers=CLIENTS) as pool:
        said = list(pool.map(client, range(CLIENTS)))
    lost = [s for s in said if isinstance(s, str)]
    assert lost == [], lost
    answers = [s for s in said if not isinstance(s, str)]
    graded = [body for status, body in answers if status == 200]
    refused = [body for status, body in answers if status == 503]
    assert len(graded) + len(refused) == CLIENTS
    assert graded and all((b["reward"], b["resolved"]) == (1.0, True) for b in graded)
    assert refused, "one worker and a queue of one refused nothing: the queue was not exercised"
    # A refusal is no verdict: it carries no reward to misread.
    assert all(b["reason"] == "queue_full" and "reward" not in b for b in refused)
    stats = _stats(url)
    print(f"burst: {CLIENTS} clients, {len(graded)} graded, {len(refused)} refused, 0 lost;",
          f"/stats {json.dumps(stats['connections'])} {json.dumps(stats['counts'])}")  # fmt: skip
    # Every connection counted (the burst's and this /stats request's), every one answered.
    assert stats["connections"] == {"accepted": CLIENTS + 1, "unanswered": 0}
    assert stats["counts"]["requests"] == CLIENTS
    assert stats["counts"]["refused:queue_full"] == len(refused)
    assert stats["counts"]["resolved"] == len(graded)


def test_trl_reward_func_gives_every_correct_fix_its_reward_while_the_queue_is_full(
    calc_task, service
):
    task, _, _ = calc_task
    url, _ = service
    client = RewardClient(url, attempts=400, total_s=600, base_s=0.05, max_delay_s=1.0)
    rewards = trl_reward_func(url, client=client, concurrency=20)
    completion = f"The fix:\n```diff\n{task.patch}```\n"
    ids = [task.instance_id] * 20
    values = rewards(prompts=[""] * 20, completions=[completion] * 20, instance_id=ids)
    stats = _stats(url)
    print(f"trl burst: 20 completions, retries {dict(client.retries)},",
          f"/stats {json.dumps(stats['connections'])} {json.dumps(stats['counts'])}")  # fmt: skip
    assert values == [1.0] * 20  # the real reward, every one: no refusal read as 0.0
    refusals = stats["counts"].get("refused:queue_full", 0)
    assert refusals > 0, "nothing was refused: the retry path was not exercised"
    assert client.retries["queue_full"] == refusals  # each refusal retried, none lost
    assert stats["counts"]["resolved"] == 20
    assert stats["connections"] == {"accepted": 20 + refusals + 1, "unanswered": 0}
