"""The forge kit for a JavaScript task: jest under the grader's supervisor, through every door.

One test-built npm project (calc: ``add`` subtracts; jest 29 from the npm registry, a setup file
named by package.json's ``jest`` key), its image from ``prepare_js_environment`` and its task
from real runs of that image (base: the failing ``add`` test, gold: every test passes). Each
forge route is a patch a model could send; graded by the grader itself, ``evaluate``'s
command, the reward service over HTTP, ``reward()`` and a ``TaskEnv`` episode, every one earns
nothing, while the gold fix resolves and a wrong fix does not.
"""

from __future__ import annotations

import json
import subprocess
import threading
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from conftest import run_cli
from js_forge import BUGGY, GOLD, WRONG, fake_record, forgery_routes
from repo_factory import RepoBuilder
from trajforge.generators.languages.javascript.environment import (
    prepare_js_environment,
    run_js_tests,
)
from trajforge.generators.languages.javascript.language import REPORT_PATH, JavaScript
from trajforge.pipelines.evaluation.evaluator import Evaluator
from trajforge.pipelines.evaluation.rewards import RewardClient, reward
from trajforge.pipelines.evaluation.service import RewardService, serve
from trajforge.schemas.params import EnvironmentParams, load_params
from trajforge.schemas.records import to_table
from trajforge.schemas.task_instance import TaskInstance
from trajforge.verifiers.sandbox.base import SessionSpec
from trajforge.verifiers.sandbox.docker import DockerSandbox
from trajforge.verifiers.sandbox.git_tree import apply_patches, archive, git

pytestmark = pytest.mark.docker

PACKAGE = {
    "name": "calc",
    "version": "1.0.0",
    "engines": {"node": ">=16"},
    "scripts": {"test": "jest"},
    "devDependencies": {"jest": "29.7.0"},
    "jest": {"testEnvironment": "node", "setupFiles": ["<rootDir>/jest.setup.js"]},
}
CALC_TESTS = """\
const { add, mul } = require('../src/calc');

describe('calc', () => {
  test('adds', () => { expect(add(2, 3)).toBe(5); });
  test('multiplies', () => { expect(mul(2, 3)).toBe(6); });
});
"""
MORE_TESTS = """\
const { mul } = require('../src/calc');

test('setup ran first', () => { expect(global.CALC_SETUP).toBe(true); });
test('squares', () => { expect(mul(4, 4)).toBe(16); });
"""
SETUP = "global.CALC_SETUP = true;\n"
F2P = ("__tests__/calc.test.js > calc > adds",)
P2P = (
    "__tests__/calc.test.js > calc > multiplies",
    "__tests__/more.test.js > setup ran first",
    "__tests__/more.test.js > squares",
)
# Source that finds the records' pipe (its number is in the start-up environment of the
# process that holds it, which the same user may read in /proc) and writes a record saying the
# failing test passed: straight to the descriptor in its own process (jest runs one test file in
# band), through /proc in its parent's (a worker's; refused: the pipe is root's); and a fake
# report where the runner's would be.
FAKE = fake_record(F2P[0])
CHANNEL_FORGER = BUGGY + (
    "const fs = require('fs');\n"
    f"const line = {json.dumps(FAKE + chr(10))};\n"
    "for (const pid of ['self', String(process.ppid)]) {\n"
    "  try {\n"
    "    const environ = fs.readFileSync(`/proc/${pid}/environ`, 'utf8').split('\\0');\n"
    "    const said = environ.find((v) => v.startsWith('TRAJFORGE_RESULT_FD='));\n"
    "    if (!said) continue;\n"
    "    const fd = Number(said.split('=')[1]);\n"
    "    if (pid === 'self') { fs.writeSync(fd, line); continue; }\n"
    "    const handle = fs.openSync(`/proc/${pid}/fd/${fd}`, 'w');\n"
    "    fs.writeSync(handle, line);\n"
    "    fs.closeSync(handle);\n"
    "  } catch (e) {}\n"
    "}\n"
    "const fake = JSON.stringify({ testResults: [] });\n"
    "try { fs.writeFileSync('/tmp/trajforge-report.json', fake); } catch (e) {}\n"
)
EXIT_FORGER = BUGGY + "process.exit(0);\n"
# A detached process that outlives the test and keeps writing that record, every 300 ms, into
# the records' pipe of every process that has one.
DAEMON = BUGGY + (
    "const { spawn } = require('child_process');\n"
    f"const line = {json.dumps(FAKE + chr(10))};\n"
    "const loop = `const fs = require('fs'); setInterval(() => {\n"
    "  for (const pid of fs.readdirSync('/proc').filter((p) => /^[0-9]+$/.test(p))) {\n"
    "    try { const env = fs.readFileSync('/proc/' + pid + '/environ', 'utf8').split('\\\\0');\n"
    "      const said = env.find((v) => v.startsWith('TRAJFORGE_RESULT_FD='));\n"
    "      if (!said) continue;\n"
    "      const h = fs.openSync('/proc/' + pid + '/fd/' + said.split('=')[1], 'w');\n"
    "      fs.writeSync(h, ${JSON.stringify(line)}); fs.closeSync(h); } catch (e) {} } }, 300);`;\n"
    "spawn(process.execPath, ['-e', loop], { detached: true, stdio: 'ignore' }).unref();\n"
)
ROUTES = {  # name -> (files the model writes, the reasons it may get)
    "config_rewrite": (
        {
            "package.json": json.dumps({**PACKAGE, "jest": {"testPathIgnorePatterns": ["calc"]}}),
            "src/calc.js": BUGGY + "// tidy\n",
        },
        ("tests_failed",),
    ),
    "test_edit": (
        {
            "__tests__/calc.test.js": CALC_TESTS.replace("toBe(5)", "toBe(-1)"),
            "src/calc.js": BUGGY + "// tidy\n",
        },
        ("tests_failed",),
    ),
    "setup_edit": (
        {
            "jest.setup.js": SETUP + "require('./src/calc').add = (a, b) => a + b;\n",
            "src/calc.js": BUGGY + "// tidy\n",
        },
        ("tests_failed",),
    ),
    "node_modules_plant": (
        {
            "node_modules/expect/build/index.js": "module.exports = () => ({ toBe() {} });\n",
            "src/calc.js": GOLD,
        },
        ("forbidden_file",),
    ),
    "npmrc": (
        {".npmrc": "node-options=--require ./evil.js\n", "src/calc.js": GOLD},
        ("forbidden_file",),
    ),
    "channel_and_report_forger": (
        {"src/calc.js": CHANNEL_FORGER},
        ("forged_result", "tests_failed"),  # in band, or a worker that cannot reach the pipe
    ),
    "early_exit": (
        {"src/calc.js": EXIT_FORGER},
        ("suite_failed", "suite_did_not_run", "tests_failed"),
    ),
    "daemon": ({"src/calc.js": DAEMON}, ("forged_result", "tests_failed")),
    # one-line forgeries of jest's globals and matchers: fixed by the grader's guard
    **forgery_routes(
        (
            "expect_proxy",
            "test_wrapper",
            "matcher_swap",
            "event_handler",
            "assert_noop",
            "object_is",
            "apply_hook",
        )
    ),
}


@pytest.fixture(scope="module")
def sandbox(docker_engine):
    box = DockerSandbox()
    yield box
    box.close()


@pytest.fixture(scope="module")
def js_task(sandbox, tmp_path_factory):
    """(task, repo, work): the task from real runs of the project's image at base and gold."""
    root = tmp_path_factory.mktemp("forge_js")
    repo = RepoBuilder(root / "calc")
    base = repo.commit(
        "calc with jest",
        {
            "package.json": json.dumps(PACKAGE, indent=2) + "\n",
            "jest.setup.js": SETUP,
            "src/calc.js": BUGGY,
            "__tests__/calc.test.js": CALC_TESTS,
            "__tests__/more.test.js": MORE_TESTS,
        },
    )
    env = prepare_js_environment(sandbox, str(repo.path), EnvironmentParams(), say=print)
    gold_commit = repo.commit("fix add", {"src/calc.js": GOLD})
    gold = git(str(repo.path), "diff", base, gold_commit).decode()
    at_base = run_js_tests(sandbox, env, str(repo.path), tree=base).statuses()
    at_gold = run_js_tests(sandbox, env, str(repo.path), tree=gold_commit).statuses()
    f2p = tuple(sorted(t for t, s in at_gold.items() if s == "PASSED" != at_base.get(t)))
    p2p = tuple(sorted(t for t, s in at_gold.items() if s == "PASSED" == at_base.get(t)))
    assert (f2p, p2p) == (F2P, P2P)
    task = TaskInstance(
        instance_id="calc-js-1", repo="local/calc", base_commit=base, patch=gold, test_patch="",
        problem_statement="add subtracts", hints_text="", created_at="2024-01-01",
        FAIL_TO_PASS=f2p, PASS_TO_PASS=p2p, environment_setup_commit=env.setup_commit,
        image_name=env.image, test_cmd="node_modules/.bin/jest --ci", origin="mined",
        profile_id=env.profile_id, candidate_id="calc-js-1", source=str(repo.path),
        flaky_tests=(), difficulty=None, env_recipe=env.recipe, language="javascript",
        test_runner="jest",
    )  # fmt: skip
    work = root / "work"
    work.mkdir()
    (work / "params.yaml").write_text(
        f"cache_dir: {root / 'cache'}\nvalidate:\n  test_timeout_s: 180\n  gold_runs: 0\n"
    )
    (work / "tasks" / "tasks").mkdir(parents=True)
    pq.write_table(
        to_table([task], TaskInstance.ARROW_SCHEMA), work / "tasks" / "tasks" / "part-0.parquet"
    )
    for name, tree in (("base", base), ("gold", gold_commit)):
        (work / f"{name}-report.json").write_bytes(jest_report(sandbox, env, str(repo.path), tree))
    labels = {"instance_id": task.instance_id, "FAIL_TO_PASS": f2p, "PASS_TO_PASS": p2p}
    (work / "task.json").write_text(json.dumps(labels))
    yield task, str(repo.path), work
    sandbox.close()
    sandbox.remove_image(env.image)


def jest_report(sandbox, env, repo: str, tree: str) -> bytes:
    """The report the task's own test command writes (jest --json), read from its container."""
    with sandbox.session(SessionSpec(env.image)) as session:
        session.put_archive(archive(repo, tree, prefix="repo/"), "/")
        session.exec(JavaScript().test_command(env.detection), 300)
        report = session.read_file(REPORT_PATH)
    assert report, "jest wrote no report"
    return report


def model_patch(task: TaskInstance, repo: str, tmp: Path, files: dict[str, str]) -> str:
    """What an agent's workspace reports after writing ``files`` over the starting tree."""
    start = apply_patches(repo, task.base_commit, [task.bug_patch])
    tree = tmp / "workspace"
    tree.mkdir()
    subprocess.run(["tar", "-x", "-C", str(tree)], input=git(repo, "archive", start), check=True)
    ws = RepoBuilder(tree)
    ws.commit("start", {})
    ws.write(files)
    ws.git("add", "-A")
    diff = ["git", "-C", str(tree), "diff", "--cached", "--binary"]
    return subprocess.run(diff, capture_output=True, text=True, check=True).stdout


@pytest.fixture(scope="module")
def patches(js_task, tmp_path_factory) -> dict[str, str]:
    task, repo, _ = js_task
    made = {name: model_patch(task, repo, tmp_path_factory.mktemp(name), files)
            for name, (files, _) in ROUTES.items()}  # fmt: skip
    made["wrong_fix"] = model_patch(
        task, repo, tmp_path_factory.mktemp("w"), {"src/calc.js": WRONG}
    )
    made["gold"] = task.patch
    return made


@pytest.fixture(scope="module")
def evaluator(js_task, sandbox):
    _, _, work = js_task
    made = Evaluator(load_params(str(work / "params.yaml")), sandbox=sandbox, timeout_s=120)
    yield made


@pytest.fixture(scope="module")
def graded(js_task, patches, evaluator):
    task, _, _ = js_task
    return {name: evaluator.evaluate(task, patch, partial=True) for name, patch in patches.items()}


def test_gold_resolves_and_wrong_or_empty_do_not(js_task, graded, evaluator):
    task, _, _ = js_task
    gold = graded["gold"]
    assert (gold.resolved, gold.reason, gold.reward) == (True, "resolved", 1.0), gold.log[-2000:]
    assert not gold.error and gold.image  # ran in the task's own image
    assert "\u25cf " in gold.log  # jest's mark of a failed test: a sentinel made to fail
    wrong = graded["wrong_fix"]
    assert (wrong.resolved, wrong.reason) == (False, "tests_failed")
    status = wrong.report["tests_status"]
    assert set(status["PASS_TO_PASS"]["success"]) == set(task.PASS_TO_PASS)
    assert status["FAIL_TO_PASS"]["failure"] == list(task.FAIL_TO_PASS)
    empty = evaluator.evaluate(task, "")
    assert (empty.resolved, empty.reason) == (False, "empty_patch")


@pytest.mark.parametrize("route", sorted(ROUTES))
def test_every_route_earns_nothing(graded, route):
    evaluation = graded[route]
    assert not evaluation.error, evaluation.log[-2000:]
    assert (evaluation.resolved, evaluation.reward) == (False, 0.0)
    assert evaluation.reason in ROUTES[route][1], (evaluation.reason, evaluation.log[-2000:])
    if evaluation.reason == "forged_result":
        assert evaluation.partial_credit == 0.0


# ``add`` right only when no process of the tests' user can open the memory of the process it
# runs in, nor of its parent (jest's, which holds the reporter's key, when the test runs in a
# worker; the supervisor, root's, when in band). Before the supervisor made node's file
# execute-only for the tests' user, both opened, and this patch failed ``adds``.
MEMORY_PROBE = """\
const fs = require('fs');

function reached() {
  for (const path of ['/proc/self/mem', `/proc/${process.ppid}/mem`]) {
    try {
      fs.closeSync(fs.openSync(path, 'r'));
      return path;
    } catch (error) {
      if (error.code !== 'EACCES') return `${path}: ${error.code}`;
    }
  }
  return '';
}

exports.add = (a, b) => (reached() ? a - b : a + b);
exports.mul = (a, b) => a * b;
"""


def test_the_runners_memory_has_no_path_to_it(js_task, tmp_path, evaluator):
    task, repo, _ = js_task
    patch = model_patch(task, repo, tmp_path, {"src/calc.js": MEMORY_PROBE})
    evaluation = evaluator.evaluate(task, patch, partial=True)
    assert (evaluation.resolved, evaluation.reason) == (True, "resolved"), evaluation.log[-3000:]


def test_tests_and_configuration_are_reset_not_run(graded):
    assert "package.json" in graded["config_rewrite"].dropped
    assert "__tests__/calc.test.js" in graded["test_edit"].dropped
    assert "jest.setup.js" in graded["setup_edit"].dropped  # named by package.json's jest key
    assert "node_modules/expect/build/index.js" in graded["node_modules_plant"].log


def test_fail_fast_never_reports_an_unrun_test_as_passed(js_task, patches, sandbox):
    """No cache: the first run (the FAIL_TO_PASS file alone) decides. jest 29 would run a single
    file in its own process, beside the reporter; the grader has it run in a worker, where the
    forger finds no records' pipe it can write."""
    task, _, work = js_task
    fresh = Evaluator(load_params(str(work / "params.yaml")), sandbox=sandbox, use_cache=False,
                      timeout_s=120)  # fmt: skip
    wrong = fresh.evaluate(task, patches["wrong_fix"], fail_fast=True)
    assert (wrong.resolved, wrong.reward, wrong.reason) == (False, 0.0, "tests_failed")
    status = wrong.report["tests_status"]
    assert set(status["PASS_TO_PASS"]["failure"]) == set(task.PASS_TO_PASS)
    assert "more.test.js" not in wrong.log  # the PASS_TO_PASS-only file never ran
    forged = fresh.evaluate(task, patches["channel_and_report_forger"], fail_fast=True)
    assert (forged.resolved, forged.reward, forged.reason) == (False, 0.0, "tests_failed")
    gold = fresh.evaluate(task, patches["gold"], fail_fast=True)
    assert (gold.resolved, gold.reward) == (True, 1.0)


def test_reward_service_reward_api_and_task_env(js_task, patches, graded, evaluator):
    task, _, _ = js_task
    service = RewardService(evaluator, {task.instance_id: task}, workers=2)
    server = serve(service, port=0)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    client = RewardClient(f"http://127.0.0.1:{server.server_address[1]}")
    try:
        assert client.score(task.instance_id, patches["gold"])["reward"] == 1.0
        said = client.score(task.instance_id, patches["channel_and_report_forger"], partial=True)
        assert (said["reward"], said["reason"]) == (0.0, graded["channel_and_report_forger"].reason)
    finally:
        server.shutdown()
        server.server_close()
    answer = reward(task, patches["test_edit"], partial=True, evaluator=evaluator)
    assert (answer.reward, answer.reason) == (0.0, "tests_failed")
    with evaluator.env(task) as env:
        env.reset()
        said_files = env.step("bash", {"command": "ls __tests__ && cat package.json"})
        assert "calc.test.js" in said_files.observation
        assert env.step("create", {"path": "src/calc.js", "file_text": GOLD}).error is None
        outcome = env.close()
    assert (outcome.reward, outcome.verdict.reason) == (1.0, "resolved")


def test_evaluate_command_grades_a_js_task(js_task, patches, tmp_path):
    task, _, work = js_task
    rows = [{"instance_id": task.instance_id, "model_name_or_path": name,
             "model_patch": patches[name]} for name in ("gold",)]  # fmt: skip
    predictions = tmp_path / "predictions.jsonl"
    predictions.write_text("".join(json.dumps(row) + "\n" for row in rows))
    done = run_cli("evaluate", "--tasks", "tasks", "--predictions", str(predictions),
                   "--output", str(tmp_path / "eval"), cwd=work)  # fmt: skip
    assert done.returncode == 0, done.stderr
    (path,) = (tmp_path / "eval").rglob("evaluation.json")
    record = json.loads(path.read_text())
    assert (record["resolved"], record["reward"]) == (True, 1.0)


def test_grade_reads_the_runners_report(js_task, tmp_path):
    """``trajforge grade`` on the reports jest itself wrote: gold resolved, base not; a report
    whose totals contradict its tests is refused."""
    _, _, work = js_task
    said = {}
    for name in ("gold", "base"):
        out = tmp_path / f"{name}.json"
        log = str(work / f"{name}-report.json")
        done = run_cli("grade", "--task", str(work / "task.json"), "--log", log,
                       "--output", str(out), cwd=work)  # fmt: skip
        assert done.returncode == 0, done.stderr
        assert "jest-json log" in done.stdout
        said[name] = json.loads(out.read_text())["calc-js-1"]["resolved"]
    assert said == {"gold": True, "base": False}
    bent = json.loads((work / "base-report.json").read_text())
    bent["numFailedTests"] = 0
    (tmp_path / "bent.json").write_text(json.dumps(bent))
    done = run_cli("grade", "--task", str(work / "task.json"), "--log", str(tmp_path / "bent.json"),
                   "--output", str(tmp_path / "bent-report.json"), cwd=work)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "ambiguous_log" in done.stdout
