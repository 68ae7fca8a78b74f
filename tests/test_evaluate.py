"""The trainer's side on test-built tasks: ``evaluate`` (SWE-bench's predictions and reports), the
reward API and HTTP service, and ``TaskEnv`` episodes, all in real Docker containers.

Three tasks are mined and validated through the real CLI from a repository written here (add
subtracts, sub and neg are missing, each fixed with its test). Gold patches must resolve, empty
and wrong ones must not, a patch that does not apply must say so, and nothing a prediction or a
request holds may crash the run or the service.
"""

from __future__ import annotations

import dataclasses
import difflib
import json
import os
import re
import signal
import subprocess
import threading
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from conftest import TRAJFORGE, run_cli, write_params
from repo_factory import OPS_BUGGY, TEST_ADD, TESTS_BASE, RepoBuilder, pyproject
from trajforge.pipelines.evaluation.evaluator import Evaluator
from trajforge.pipelines.evaluation.rewards import RewardClient, patch_from_completion, reward
from trajforge.pipelines.evaluation.service import RewardService, serve
from trajforge.pipelines.evaluation.task_rows import load_tasks
from trajforge.pipelines.release.tables import tasks_schema, tasks_table
from trajforge.schemas.errors import UserError
from trajforge.schemas.params import load_params
from trajforge.schemas.task_instance import TaskInstance
from trajforge.verifiers.grader.supervised import TEST_UID
from trajforge.verifiers.sandbox.base import SessionSpec
from trajforge.verifiers.sandbox.containers import OWNER_LABEL
from trajforge.verifiers.sandbox.docker import DockerSandbox

pytestmark = pytest.mark.docker

ADD_F2P = "tests/test_ops.py::test_add"
HEAD = "--- a/calc/ops.py\n+++ b/calc/ops.py\n"
CONTEXT = " \n \n def mul(a, b):\n"  # the three lines after add's body
WRONG_ADD = (
    HEAD + "@@ -1,5 +1,5 @@\n def add(a, b):\n-    return a - b\n+    return a * b\n" + CONTEXT
)
HANG_ADD = (
    HEAD + "@@ -1,5 +1,7 @@\n def add(a, b):\n-    return a - b\n"
    "+    while True:\n+        pass\n+    return a + b\n" + CONTEXT
)
NOT_A_PATCH = (
    "--- a/calc/nowhere.py\n+++ b/calc/nowhere.py\n@@ -1,1 +1,1 @@\n-old line\n+new line\n"
)


def build_three_fixes(path: Path) -> None:
    repo = RepoBuilder(path)
    base = {"pyproject.toml": pyproject(), "calc/__init__.py": "", "calc/ops.py": OPS_BUGGY}
    repo.commit("Initial calc", {**base, "tests/test_ops.py": TESTS_BASE})
    fixed = OPS_BUGGY.replace("return a - b", "return a + b")
    tests = TESTS_BASE.replace("import mul", "import add, mul") + TEST_ADD
    repo.commit("Fix add: it subtracted", {"calc/ops.py": fixed, "tests/test_ops.py": tests})
    with_sub = fixed + "\n\ndef sub(a, b):\n    return a - b\n"
    test_sub = "from calc import ops\n\n\ndef test_sub():\n    assert ops.sub(5, 3) == 2\n"
    repo.commit("Add sub", {"calc/ops.py": with_sub, "tests/test_sub.py": test_sub})
    with_neg = with_sub + "\n\ndef neg(a):\n    return -a\n"
    test_neg = "from calc import ops\n\n\ndef test_neg():\n    assert ops.neg(2) == -2\n"
    repo.commit("Add neg", {"calc/ops.py": with_neg, "tests/test_neg.py": test_neg})


@pytest.fixture(scope="module")
def tasks_dir(docker_engine, tmp_path_factory) -> tuple[Path, Path]:
    """(work dir, validate output) with three proven tasks."""
    root = tmp_path_factory.mktemp("evaluate")
    build_three_fixes(root / "calc")
    work = root / "work"
    work.mkdir()
    write_params(work / "params.yaml", root / "cache")
    for args in (
        ("mine", "--repo", str(root / "calc"), "--output", "mine"),
        ("validate", "--input", "mine", "--output", "validate"),
    ):
        done = run_cli(*args, cwd=work)
        assert done.returncode == 0, done.stderr
    assert len(load_tasks([str(work / "validate")])) == 3
    return work, work / "validate"


@pytest.fixture(scope="module")
def tasks(tasks_dir):
    return load_tasks([str(tasks_dir[1])])


@pytest.fixture(scope="module")
def evaluator(tasks_dir):
    work, _ = tasks_dir
    params = load_params(str(work / "params.yaml"))
    made = Evaluator(params, use_cache=False, timeout_s=20, spares=2)
    yield made
    made.close()


def write_predictions(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def evaluate(work: Path, predictions: Path, output: str, *extra: str):
    done = run_cli("evaluate", "--tasks", "validate", "--predictions", str(predictions),
                   "--output", output, "--workers", "2", *extra, cwd=work)  # fmt: skip
    assert done.returncode == 0, done.stderr
    return done


def test_gold_patches_resolve_and_reports_follow_swebench(tasks_dir, tasks, tmp_path):
    work, _ = tasks_dir
    rows = [{"instance_id": i, "model_name_or_path": "gold", "model_patch": t.patch}
            for i, t in tasks.items()]  # fmt: skip
    done = evaluate(work, write_predictions(tmp_path / "gold.jsonl", rows), "eval-gold")
    assert "3 predictions, 3 resolved" in done.stdout
    summary = json.loads((work / "eval-gold/gold.evaluate.json").read_text())
    assert summary["resolved_instances"] == summary["completed_instances"] == 3
    assert summary["error_instances"] == summary["empty_patch_instances"] == 0
    assert summary["schema_version"] == 2 and summary["incomplete_ids"] == []
    for instance_id, task in tasks.items():
        folder = work / "eval-gold" / "gold" / instance_id
        report = json.loads((folder / "report.json").read_text())[instance_id]
        assert report["resolved"] and report["patch_successfully_applied"]
        assert report["tests_status"]["FAIL_TO_PASS"] == {
            "success": list(task.FAIL_TO_PASS),
            "failure": [],
        }
        assert report["tests_status"]["PASS_TO_PASS"]["failure"] == []
        assert "passed" in (folder / "test_output.txt").read_text()
    # A rerun finds every report finished and runs nothing.
    again = evaluate(work, tmp_path / "gold.jsonl", "eval-gold")
    assert "(3 finished earlier)" in again.stdout


def test_empty_wrong_and_broken_predictions_do_not_resolve(tasks_dir, tasks, tmp_path):
    work, _ = tasks_dir
    add = next(i for i, t in tasks.items() if ADD_F2P in t.FAIL_TO_PASS)
    others = [i for i in tasks if i != add]
    rows = [
        {"instance_id": add, "model_name_or_path": "m", "model_patch": WRONG_ADD},
        {"instance_id": others[0], "model_name_or_path": "m", "model_patch": ""},
        {"instance_id": others[1], "model_name_or_path": "m", "model_patch": NOT_A_PATCH},
        {"instance_id": "no-such-task", "model_name_or_path": "m", "model_patch": WRONG_ADD},
    ]
    path = write_predictions(tmp_path / "bad.jsonl", rows)
    path.write_text(path.read_text() + "{not json\n" + json.dumps({"model_patch": "x"}) + "\n")
    done = evaluate(work, path, "eval-bad")
    assert "0 resolved" in done.stdout and "malformed_prediction" in done.stdout
    summary = json.loads((work / "eval-bad/m.evaluate.json").read_text())
    assert summary["resolved_instances"] == 0 and summary["completed_ids"] == [add]
    assert summary["empty_patch_ids"] == [others[0]] and summary["error_ids"] == [others[1]]
    assert summary["trajforge"]["unknown_instance_ids"] == ["no-such-task"]
    assert len(summary["trajforge"]["malformed_predictions"]) == 2
    wrong = json.loads((work / "eval-bad/m" / add / "report.json").read_text())[add]
    assert wrong["patch_successfully_applied"] and not wrong["resolved"]
    assert wrong["tests_status"]["FAIL_TO_PASS"]["failure"] == [ADD_F2P]
    empty = json.loads((work / "eval-bad/m" / others[0] / "report.json").read_text())[others[0]]
    assert (empty["patch_exists"], empty["resolved"]) == (False, False)
    broken = json.loads((work / "eval-bad/m" / others[1] / "report.json").read_text())
    assert broken[others[1]]["patch_successfully_applied"] is False


def test_grade_of_the_logged_run_agrees_with_evaluate(tasks_dir, tasks, tmp_path):
    """``trajforge grade`` on the test log evaluate kept gives the report evaluate wrote."""
    work, _ = tasks_dir
    add = next(i for i, t in tasks.items() if ADD_F2P in t.FAIL_TO_PASS)
    rows = [{"instance_id": add, "model_name_or_path": "g", "model_patch": tasks[add].patch}]
    evaluate(work, write_predictions(tmp_path / "one.jsonl", rows), "eval-one")
    folder = work / "eval-one/g" / add
    task_file = tmp_path / "task.json"
    labels = {"FAIL_TO_PASS": list(tasks[add].FAIL_TO_PASS),
              "PASS_TO_PASS": list(tasks[add].PASS_TO_PASS)}  # fmt: skip
    task_file.write_text(json.dumps({"instance_id": add, **labels}))
    done = run_cli("grade", "--task", str(task_file), "--log", str(folder / "test_output.txt"),
                   "--output", str(tmp_path / "graded.json"), cwd=work)  # fmt: skip
    assert done.returncode == 0, done.stderr
    graded = json.loads((tmp_path / "graded.json").read_text())[add]
    evaluated = json.loads((folder / "report.json").read_text())[add]
    assert graded == evaluated


def test_an_exported_tasks_config_reads_back_as_the_same_tasks(tasks, tmp_path):
    """A dataset from ``export`` (scores as a struct, provenance as pairs) loads as the stage's."""
    folder = tmp_path / "dataset" / "tasks"
    folder.mkdir(parents=True)
    rows = list(tasks.values())
    pq.write_table(tasks_table(rows, tasks_schema([])), folder / "train-00000-of-00001.parquet")
    assert load_tasks([str(tmp_path / "dataset")]) == tasks
    moved = load_tasks([str(tmp_path / "dataset")], {rows[0].repo: "/srv/calc"})
    assert {t.source for t in moved.values()} == {"/srv/calc"}
    # One path alone (str or PathLike; a folder or one Parquet file) is a path, never its letters.
    assert load_tasks(str(tmp_path / "dataset")) == tasks == load_tasks(tmp_path / "dataset")
    assert load_tasks(folder / "train-00000-of-00001.parquet") == tasks
    with pytest.raises(UserError, match=r"load_tasks: 42 is not a path; pass a stage output"):
        load_tasks(42)  # type: ignore[arg-type]
    with pytest.raises(UserError, match=r"load_tasks: b'x' in the list is not a path"):
        load_tasks([b"x"])  # type: ignore[list-item]


def test_reward_api_binary_and_partial(tasks, evaluator):
    add = next(t for t in tasks.values() if ADD_F2P in t.FAIL_TO_PASS)
    gold = reward(add, add.patch, evaluator=evaluator)
    assert (gold.reward, gold.resolved, gold.reason) == (1.0, True, "resolved")
    wrong = reward(add, WRONG_ADD, evaluator=evaluator, partial=True)
    assert (wrong.reward, wrong.resolved, wrong.reason) == (0.0, False, "tests_failed")
    assert reward(add, None, evaluator=evaluator).report["patch_is_None"] is True


def test_a_missing_image_is_rebuilt_from_the_tasks_recipe_or_reported(tasks, tasks_dir):
    """On a machine without the image (and no registry): the row's env_recipe is built at its
    setup commit as trajforge-eval:<recipe hash> (never under the name the row gives), counted,
    named in the evaluation, and the gold patch resolves; with rebuilds off, one error line."""
    work, _ = tasks_dir
    params = load_params(str(work / "params.yaml"))
    add = next(t for t in tasks.values() if ADD_F2P in t.FAIL_TO_PASS)
    elsewhere = dataclasses.replace(add, image_name=f"trajforge-env:rebuild-{os.getpid()}")
    refusing = Evaluator(params, use_cache=False, rebuild=False)
    try:
        refused = refusing.evaluate(elsewhere, add.patch)
    finally:
        refusing.close()
    assert (refused.error, refused.reason) == (True, "registry_error")
    assert "rebuilds are off" in refused.log and "images pull" in refused.log
    said: list[str] = []
    rebuilding = Evaluator(params, use_cache=False, say=said.append)
    sandbox = rebuilding.sandbox
    assert isinstance(sandbox, DockerSandbox)
    rebuilt = None
    try:
        rebuilt = rebuilding.evaluate(elsewhere, add.patch)
        assert (rebuilt.resolved, rebuilt.reason) == (True, "resolved"), rebuilt.log
        assert rebuilding.counts["images_rebuilt"] == 1
        assert rebuilt.image.startswith("trajforge-eval:") and rebuilt.as_dict()["image"]
        assert rebuilding.images == {rebuilt.image: 1}
        assert len(said) == 1 and rebuilt.image in said[0] and elsewhere.image_name in said[0]
        assert not sandbox.has_image(elsewhere.image_name)
    finally:
        rebuilding.close()
        if rebuilt is not None and rebuilt.image and sandbox.has_image(rebuilt.image):
            sandbox.client.images.remove(rebuilt.image, force=True)


def test_patch_from_completion():
    diff = "diff --git a/x.py b/x.py\n--- a/x.py\n+++ b/x.py\n@@ -1 +1 @@\n-a\n+b\n"
    assert patch_from_completion(f"The fix:\n```diff\n{diff}```\nDone.") == diff
    assert patch_from_completion([{"role": "assistant", "content": "x\n" + diff}]) == diff
    assert patch_from_completion("no patch here") is None


def test_reward_service_under_concurrent_requests(tasks, tmp_path, tasks_dir):
    """Gold -> 1.0 and wrong -> 0.0 while a hanging patch times out; bad requests are answered."""
    work, _ = tasks_dir
    params = load_params(str(work / "params.yaml"))
    evaluator = Evaluator(params, use_cache=False, timeout_s=8, spares=3)
    service = RewardService(evaluator, tasks, workers=3, queue_size=8, max_patch_bytes=10_000)
    server = serve(service, port=0)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}"
    client = RewardClient(url)
    add = next(t for t in tasks.values() if ADD_F2P in t.FAIL_TO_PASS)
    try:
        jobs = [(t.instance_id, t.patch) for t in tasks.values()]
        jobs += [(add.instance_id, WRONG_ADD), (add.instance_id, HANG_ADD)]
        with ThreadPoolExecutor(max_workers=len(jobs)) as pool:
            answers = list(pool.map(lambda job: client.score(*job), jobs))
        assert [a["reward"] for a in answers] == [1.0, 1.0, 1.0, 0.0, 0.0]
        assert answers[3]["reason"] == "tests_failed" and answers[4]["reason"] == "timed_out"
        assert answers[0]["report"]["resolved"] is True
        assert _post(url, b"") == (400, "no_body")
        assert _post(url, b"{nope") == (400, "malformed_request")
        assert _post(url, json.dumps({"instance_id": "x", "patch": "y"}).encode()) == (
            404, "unknown_instance"
        )  # fmt: skip
        big = json.dumps({"instance_id": add.instance_id, "patch": "+" * 20_000}).encode()
        assert _post(url, big) == (413, "patch_too_large")
        stats = json.loads(urllib.request.urlopen(f"{url}/stats").read())
        counts = stats["counts"]
        assert counts["requests"] == 9 and counts["resolved"] == 3
        assert counts["not:timed_out"] == counts["not:tests_failed"] == 1
        assert stats["in_flight"] == 0 and stats["p95_s"] is not None
    finally:
        server.shutdown()
        service.close()
        evaluator.close()


def test_serve_rewards_command_answers_and_stops_with_a_summary(tasks_dir, tasks):
    work, _ = tasks_dir
    add = next(t for t in tasks.values() if ADD_F2P in t.FAIL_TO_PASS)
    server = subprocess.Popen(
        [TRAJFORGE, "serve-rewards", "--tasks", "validate", "--port", "0", "--workers", "1"],
        cwd=work, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert server.stdout is not None
        first = server.stdout.readline()
        assert "serve-rewards: 3 tasks, 1 workers" in first, server.stderr
        url = first.split("POST ")[1].strip().removesuffix("/reward")
        answer = RewardClient(url).score(add.instance_id, add.patch)
        assert (answer["reward"], answer["resolved"]) == (1.0, True)
    finally:
        server.send_signal(signal.SIGINT)
        out, _ = server.communicate(timeout=60)
    assert server.returncode == 0 and "stopped; requests 1, resolved 1" in out


def test_a_full_queue_and_a_slow_request_are_answered_not_dropped(tasks, evaluator):
    add = next(t for t in tasks.values() if ADD_F2P in t.FAIL_TO_PASS)
    service = RewardService(evaluator, tasks, workers=1, queue_size=0, request_timeout_s=0.2)
    body = json.dumps({"instance_id": add.instance_id, "patch": add.patch}).encode()
    try:
        with ThreadPoolExecutor(max_workers=2) as pool:
            first, second = pool.map(service.reward, [body, body])
        statuses = sorted((first.status, second.status))
        assert statuses == [503, 504]  # one waited past its deadline, the other found no room
        reasons = {first.body["reason"], second.body["reason"]}
        assert reasons == {"queue_full", "request_timeout"}
        assert "reward" not in first.body and "reward" not in second.body  # no verdict in them
    finally:
        service.close()  # waits for the timed-out grading to finish
    assert service.stats()["counts"]["refused:queue_full"] == 1


def test_a_sandbox_killed_mid_run_is_a_harness_error_not_a_verdict(tasks, evaluator):
    """The container dies under the tests: an error evaluation that says so, nothing raised."""
    add = next(t for t in tasks.values() if ADD_F2P in t.FAIL_TO_PASS)
    sandbox = evaluator.sandbox
    assert isinstance(sandbox, DockerSandbox)
    with ThreadPoolExecutor(max_workers=1) as pool:
        running = pool.submit(evaluator.evaluate, add, HANG_ADD)
        deadline = time.monotonic() + 60
        killed = 0
        while not killed and time.monotonic() < deadline:
            time.sleep(1)
            for container in sandbox.client.containers.list(
                filters={"label": f"{OWNER_LABEL}={sandbox.owner}", "ancestor": add.image_name}
            ):
                top = container.top().get("Processes") or []
                if any("launch.py" in " ".join(p) for p in top):  # pytest's launcher
                    container.kill()
                    killed += 1
        evaluation = running.result(timeout=120)
    assert killed
    assert (evaluation.error, evaluation.reason, evaluation.reward) == (True, "sandbox_error", 0.0)
    assert evaluation.report["resolved"] is False


def test_task_env_drives_a_scripted_fix_to_resolved(tasks, evaluator):
    add = next(t for t in tasks.values() if ADD_F2P in t.FAIL_TO_PASS)
    with evaluator.env(add) as env:
        start = env.reset()
        assert start.messages[0].role == "system" and "submit" in json.dumps(start.tools)
        seen = env.step("bash", {"command": "grep -n 'return a' calc/ops.py"})
        assert "return a - b" in seen.observation
        edit = {"path": "calc/ops.py", "old_str": "return a - b", "new_str": "return a + b"}
        assert env.step("str_replace", edit).error is None
        assert env.step("submit", {}).submitted
        outcome = env.close()
    assert outcome.verdict.resolved and outcome.reward == 1.0
    assert "return a + b" in outcome.patch
    # A new episode starts from the bug again, and closing without a change is no fix.
    with evaluator.env(add) as env:
        env.reset()
        assert "return a - b" in env.step("view", {"path": "calc/ops.py"}).observation
        assert env.close().verdict.reason == "empty_patch"


def _post(url: str, body: bytes) -> tuple[int, str]:
    request = urllib.request.Request(f"{url}/reward", body, method="POST")
    try:
        with urllib.request.urlopen(request) as answer:
            return answer.status, json.loads(answer.read()).get("reason", "")
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())["reason"]


# add fixed, mul broken: FAIL_TO_PASS passes, a PASS_TO_PASS test fails
FIX_ADD_BREAK_MUL = (
    HEAD + "@@ -1,6 +1,6 @@\n def add(a, b):\n-    return a - b\n+    return a + b\n"
    " \n \n def mul(a, b):\n-    return a * b\n+    return a * b + 1\n"
)


def test_fail_fast_never_reports_an_unrun_test_as_passed(tasks, evaluator):
    """A wrong patch stops at its failing FAIL_TO_PASS: PASS_TO_PASS are NOT_RUN (failures in the
    report, no partial credit); one that passes them gets the full run, and its verdict is the
    full run's, test for test."""
    add = next(t for t in tasks.values() if ADD_F2P in t.FAIL_TO_PASS)
    assert add.PASS_TO_PASS, "the add task needs PASS_TO_PASS tests for this check"
    wrong = evaluator.evaluate(add, WRONG_ADD, fail_fast=True)
    assert (wrong.resolved, wrong.reason, wrong.reward) == (False, "tests_failed", 0.0)
    status = wrong.report["tests_status"]
    assert status["FAIL_TO_PASS"] == {"success": [], "failure": [ADD_F2P]}
    assert status["PASS_TO_PASS"] == {"success": [], "failure": sorted(add.PASS_TO_PASS)}
    verdict = evaluator.verdict(add, WRONG_ADD, fail_fast=True)
    assert {verdict.test_report[t] for t in add.PASS_TO_PASS} == {"NOT_RUN"}
    full_wrong = evaluator.verdict(add, WRONG_ADD)
    assert full_wrong.test_report["tests/test_ops.py::test_mul"] == "PASSED"
    ran_mul = re.compile(r"test_ops\.py::test_mul\b")
    assert ran_mul.search(full_wrong.log) and not ran_mul.search(verdict.log)  # it never ran
    for patch in (add.patch, FIX_ADD_BREAK_MUL):
        quick = evaluator.verdict(add, patch, fail_fast=True)
        full = evaluator.verdict(add, patch)
        assert (quick.resolved, quick.reason, quick.test_report) == (
            full.resolved, full.reason, full.test_report
        )  # fmt: skip
    broke = evaluator.evaluate(add, FIX_ADD_BREAK_MUL, fail_fast=True)
    assert (broke.resolved, broke.reason) == (False, "tests_failed")
    assert broke.report["tests_status"]["PASS_TO_PASS"]["failure"] == sorted(add.PASS_TO_PASS)
    # partial credit needs every PASS_TO_PASS outcome: fail_fast does not apply to it
    assert evaluator.evaluate(add, WRONG_ADD, partial=True, fail_fast=True).log != wrong.log


def test_the_reward_service_takes_fail_fast_per_request(tasks, evaluator):
    service = RewardService(evaluator, tasks, workers=1, queue_size=2, max_patch_bytes=10_000)
    server = serve(service, port=0)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}"
    add = next(t for t in tasks.values() if ADD_F2P in t.FAIL_TO_PASS)
    try:
        said = {"instance_id": add.instance_id, "patch": WRONG_ADD, "fail_fast": "yes"}
        assert _post(url, json.dumps(said).encode()) == (400, "malformed_request")
        answer = RewardClient(url).score(add.instance_id, WRONG_ADD)
        assert (answer["reward"], answer["reason"]) == (0.0, "tests_failed")
        quick = RewardClient(url).score(add.instance_id, WRONG_ADD, fail_fast=True)
        assert (quick["reward"], quick["reason"]) == (0.0, "tests_failed")
        p2p = quick["report"]["tests_status"]["PASS_TO_PASS"]
        assert p2p == {"success": [], "failure": sorted(add.PASS_TO_PASS)}
    finally:
        server.shutdown()
        service.close()


MUL_F2P = "tests/test_ops.py::test_mul"
STOPPED_LINE = re.compile(
    r"fail-fast stopped the run at the first failing FAIL_TO_PASS test: (\S+)"
)


def _ops_patch(new_ops: str) -> str:
    """A patch of calc/ops.py from the tasks' starting text to ``new_ops``."""
    lines = difflib.unified_diff(
        OPS_BUGGY.splitlines(True), new_ops.splitlines(True), "a/calc/ops.py", "b/calc/ops.py"
    )
    return "".join(lines)


# add multiplies, mul is off by one after 5 s: both tests fail, and whichever runs second is
# still in its call when the stop (milliseconds after the first failure) kills the run
SLOW_WRONG_MUL = "import time\n    time.sleep(5)\n    return a * b + 1"
BOTH_WRONG = _ops_patch(
    OPS_BUGGY.replace("return a * b", SLOW_WRONG_MUL).replace("return a - b", "return a * b")
)
# The records' pipe, as a patch that read the grader finds it: a pipe past stdout and stderr.
CHANNEL = (
    "import os\n    fds = [int(f) for f in os.listdir('/proc/self/fd') if int(f) > 2 and "
    "os.path.exists('/proc/self/fd/' + f) and "
    "os.readlink('/proc/self/fd/' + f).startswith('pipe:')]\n"
)
HOSTILE = {  # each makes test_add fail, then tries to have the run read as passing
    "exit_zero": "import atexit, os\n    atexit.register(os._exit, 0)\n",
    "close_channel": CHANNEL + "    [os.close(fd) for fd in fds]\n",
    "forged_pass": (
        CHANNEL + "    [os.write(fd, "
        'b\'{"t":"report","id":"tests/test_ops.py::test_add","when":"call",'
        '"outcome":"passed","xfail":false,"sub":false}\\n\') for fd in fds]\n'
    ),
    "kill_pytest": "import os\n    os.kill(os.getpid(), 9)\n",
}


def _two_failing(tasks) -> TaskInstance:
    """The add task with test_mul as a second FAIL_TO_PASS test (the gold patch passes both)."""
    add = next(t for t in tasks.values() if ADD_F2P in t.FAIL_TO_PASS)
    return dataclasses.replace(add, FAIL_TO_PASS=(ADD_F2P, MUL_F2P), PASS_TO_PASS=())


def test_fail_fast_stops_at_the_first_failing_test_and_never_passes_what_it_cut(tasks, evaluator):
    """Two FAIL_TO_PASS tests, both broken by the patch: the supervisor ends the run at the
    first failure it reads on the channel, so the reporter's records hold one outcome and the
    other test is NOT_RUN (no outcome recorded: it never finished); the run without fail-fast
    reports both failed. A correct patch gets the
    full run's verdict either way, with and without PASS_TO_PASS."""
    two = _two_failing(tasks)
    quick = evaluator.verdict(two, BOTH_WRONG, fail_fast=True)
    assert (quick.resolved, quick.reason, quick.trusted) == (False, "tests_failed", True)
    stopped_at = STOPPED_LINE.search(quick.log)
    assert stopped_at, quick.log[-2000:]
    first = stopped_at.group(1)
    assert first in two.FAIL_TO_PASS and quick.test_report[first] == "FAILED"
    (other,) = set(two.FAIL_TO_PASS) - {first}
    assert quick.test_report[other] == "NOT_RUN"  # no outcome in the records: it never ran
    full = evaluator.verdict(two, BOTH_WRONG)
    assert full.test_report == {ADD_F2P: "FAILED", MUL_F2P: "FAILED"}
    assert not STOPPED_LINE.search(full.log)
    answer = evaluator.evaluate(two, BOTH_WRONG, fail_fast=True)
    assert (answer.reward, answer.resolved) == (0.0, False)
    failing = answer.report["tests_status"]["FAIL_TO_PASS"]
    assert failing == {"success": [], "failure": sorted(two.FAIL_TO_PASS)}
    add = next(t for t in tasks.values() if ADD_F2P in t.FAIL_TO_PASS)
    for task in (two, add):  # no PASS_TO_PASS: the first run was the full one; with some: both
        gold_quick = evaluator.verdict(task, task.patch, fail_fast=True)
        gold_full = evaluator.verdict(task, task.patch)
        passed = dict.fromkeys((*task.FAIL_TO_PASS, *task.PASS_TO_PASS), "PASSED")
        said = (gold_quick.resolved, gold_quick.reason, gold_quick.test_report)
        assert said == (gold_full.resolved, gold_full.reason, gold_full.test_report)
        assert said == (True, "resolved", passed)
        assert not STOPPED_LINE.search(gold_quick.log)


@pytest.mark.parametrize("trick", sorted(HOSTILE))
def test_a_patch_cannot_turn_a_stopped_run_into_a_pass(tasks, evaluator, trick):
    """A patch whose add is wrong and that then exits 0, closes the records' channel, forges a
    passing record for its failing test or kills pytest: reward 0 under fail-fast, never
    resolved, and a forged record is caught as forgery."""
    two = _two_failing(tasks)
    body = "def add(a, b):\n    " + HOSTILE[trick] + "    return a * b\n"
    patch = _ops_patch(OPS_BUGGY.replace("def add(a, b):\n    return a - b\n", body))
    answer = evaluator.evaluate(two, patch, fail_fast=True)
    assert (answer.reward, answer.resolved, answer.error) == (0.0, False, False), answer.log[-2000:]
    verdict = evaluator.verdict(two, patch, fail_fast=True)
    assert not verdict.resolved
    if trick == "forged_pass":  # its first word stands in the report, and is caught as forgery
        assert (verdict.reason, verdict.trusted) == ("forged_result", False)
    else:
        assert verdict.test_report[ADD_F2P] != "PASSED"


def test_the_tests_user_imports_pytest_from_the_images_bytecode(tasks, evaluator):
    """The recipe compiles what uv installs (UV_COMPILE_BYTECODE), and the grader's
    unprivileged user, which can write no ``__pycache__``, loads pytest from that bytecode: no
    module of the image's site-packages is compiled from source at a graded run's start (a
    stale or unreadable .pyc would be)."""
    add = next(t for t in tasks.values() if ADD_F2P in t.FAIL_TO_PASS)
    assert "UV_COMPILE_BYTECODE=1" in add.env_recipe
    as_user = (
        f"import os; os.setgroups([]); os.setgid({TEST_UID}); os.setuid({TEST_UID}); "
        "os.execv('/venv/bin/python', ['python', '-I', '-B', '-v', '-c', 'import pytest'])"
    )
    assert evaluator.sandbox is not None
    with evaluator.sandbox.session(SessionSpec(add.image_name, grading=True)) as session:
        said = session.exec(f'/venv/bin/python -I -c "{as_user}" 2>&1', timeout_s=60, workdir="/")
    assert said.exit_code == 0, said.output[-2000:]
    loaded = re.findall(r"^# code object from '?(\S+?)'?$", said.output, re.MULTILINE)
    ours = [path for path in loaded if "/site-packages/" in path]
    assert any("/_pytest/" in path for path in ours), said.output[-2000:]
    assert [path for path in ours if not path.endswith(".pyc")] == []
