"""The reward service's pool of started containers, in real Docker, on test_evaluate's tasks.

A spare container is started ahead so a request does not wait for one; it must be a container
nobody used (docs/security.md: a patch's writes outside the repository would outlive a reused
one). What the engine saw is the evidence: its events name every container this process
created and every command run in each, so a container that graded two patches, or one left
running after the service stopped, shows there whatever the code believes.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor

import pytest
from test_evaluate import ADD_F2P, WRONG_ADD, tasks, tasks_dir  # noqa: F401 (fixtures)
from trajforge.pipelines.evaluation.evaluator import Evaluator
from trajforge.pipelines.evaluation.rewards import RewardClient
from trajforge.pipelines.evaluation.service import RewardService, serve
from trajforge.schemas.params import load_params
from trajforge.verifiers.sandbox.containers import OWNER_LABEL
from trajforge.verifiers.sandbox.docker import DockerSandbox

pytestmark = pytest.mark.docker

GRADED_RUN = "supervisor.py run"  # the supervisor's command: one per graded run


def _requests(by_id) -> list[tuple[str, str, bool]]:
    """(instance id, patch, fail_fast): every gold patch both ways, the wrong one both ways."""
    add = next(t for t in by_id.values() if ADD_F2P in t.FAIL_TO_PASS)
    gold = [(i, t.patch, quick) for i, t in sorted(by_id.items()) for quick in (True, False)]
    return [*gold, (add.instance_id, WRONG_ADD, True), (add.instance_id, WRONG_ADD, False)]


def _what_counts(answer: dict) -> tuple:
    status = answer["report"].get("tests_status") or {}
    return answer["reward"], answer["resolved"], answer["reason"], status


class EngineEvents:
    """What the engine says about this process's containers while the block runs: live, since
    its buffer of past events is short and shared with every other run on the machine."""

    def __init__(self, sandbox: DockerSandbox) -> None:
        self.created: set[str] = set()
        self.destroyed: set[str] = set()
        self.graded: Counter = Counter()  # container -> graded runs in it
        label = f"{OWNER_LABEL}={sandbox.owner}"
        self.stream = sandbox.client.events(
            decode=True, filters={"type": "container", "label": label}
        )
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        with contextlib.suppress(Exception):  # the stream closed under the read
            for event in self.stream:
                self._saw(event.get("Action", ""), event.get("id", ""))

    def _saw(self, action: str, container: str) -> None:
        if action == "create":
            self.created.add(container)
        elif action == "destroy":
            self.destroyed.add(container)
        elif action.startswith("exec_create") and GRADED_RUN in action:
            self.graded[container] += 1

    def stop(self) -> None:
        time.sleep(1)  # the last events on their way
        self.stream.close()
        self.reader.join(timeout=10)


def test_the_pool_changes_no_reward_hands_each_container_out_once_and_leaves_none(
    tasks_dir,  # noqa: F811
    tasks,  # noqa: F811
):
    work, _ = tasks_dir
    params = load_params(str(work / "params.yaml"))
    jobs = _requests(tasks)
    # Without a pool: each request starts its own container, in process.
    plain = Evaluator(params, use_cache=False, timeout_s=20, spares=0)
    try:
        expected = [
            _what_counts(plain.evaluate(tasks[i], patch, fail_fast=quick).as_dict())
            for i, patch, quick in jobs
        ]
    finally:
        plain.close()
    add = next(t for t in tasks.values() if ADD_F2P in t.FAIL_TO_PASS)
    wrong_quick = expected[-2]
    assert wrong_quick[:3] == (0.0, False, "tests_failed")
    assert wrong_quick[3]["PASS_TO_PASS"] == {"success": [], "failure": sorted(add.PASS_TO_PASS)}
    assert all(reward == 1.0 for reward, *_ in expected[:-2])

    # With the pool, over HTTP, two at a time: the same answers, test for test.
    pooled = Evaluator(params, use_cache=False, timeout_s=20, spares=2)
    sandbox = pooled.sandbox
    assert isinstance(sandbox, DockerSandbox)
    engine = EngineEvents(sandbox)
    service = RewardService(pooled, tasks, workers=2)
    server = serve(service, port=0)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    client = RewardClient(f"http://127.0.0.1:{server.server_address[1]}")
    try:
        with ThreadPoolExecutor(max_workers=2) as pool:
            answers = list(pool.map(lambda job: client.score(*job[:2], fail_fast=job[2]), jobs))
        assert [_what_counts(a) for a in answers] == expected
        spares_waiting = sum(len(queue) for queue in sandbox.spares.values())
        assert spares_waiting >= 2  # the next requests' containers, started ahead
    finally:
        server.shutdown()
        service.close()
        pooled.close()
        engine.stop()

    created, graded, destroyed = engine.created, engine.graded, engine.destroyed
    assert sum(graded.values()) >= len(jobs)  # every request ran its tests (twice: not fail-fast)
    assert max(graded.values()) == 1, "a container graded two patches"
    assert set(graded) <= created
    assert created - set(graded), "no container was started ahead and left unused"
    leftover = created - destroyed
    assert not leftover, f"{len(leftover)} container(s) outlived the service"
    label = {"label": f"{OWNER_LABEL}={sandbox.owner}"}
    still = {c.id for c in sandbox.client.containers.list(all=True, filters=label)}
    assert not still & created
