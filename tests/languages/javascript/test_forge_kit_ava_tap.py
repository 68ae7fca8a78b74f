"""The forge kit for ava and node-tap tasks: each runner under the grader's supervisor, its own
TAP keyed on the records' pipe and read by validate's parser.

One test-built npm project (calc: ``add`` subtracts; ava 5 and tap 16 from the npm registry, an
ava suite of two files with a skipped test, a tap suite of one file), one image from
``prepare_js_environment``, and two tasks from real runs of that image: one graded by ava, one
by tap (validate's commands and reports). The gold patch resolves both, so the grader's ids are
validate's; wrong, empty and every forge route earn nothing.
"""

from __future__ import annotations

import dataclasses
import json

import pytest
from js_forge import (
    BUGGY,
    GOLD,
    WRONG,
    forgery_routes,
    model_patch,
)
from repo_factory import RepoBuilder
from trajforge.generators.languages.javascript.environment import (
    prepare_js_environment,
    run_js_tests,
)
from trajforge.pipelines.evaluation.evaluator import Evaluator
from trajforge.schemas.params import EnvironmentParams, load_params
from trajforge.schemas.task_instance import TaskInstance
from trajforge.verifiers.sandbox.docker import DockerSandbox
from trajforge.verifiers.sandbox.git_tree import git

pytestmark = pytest.mark.docker

PACKAGE = {
    "name": "calc",
    "version": "1.0.0",
    "private": True,
    "engines": {"node": ">=18"},
    "scripts": {"test": "ava"},
    "ava": {"files": ["test/ava/**/*.test.js"]},
    "devDependencies": {"ava": "5.3.1", "tap": "16.3.10"},
}
AVA_CALC = """\
const test = require('ava');
const { add, mul } = require('../../src/calc');
test('adds', (t) => { t.is(add(2, 3), 5); });
test('multiplies', (t) => { t.is(mul(2, 3), 6); });
test.skip('divides', (t) => { t.pass(); });
"""
AVA_MORE = """\
const test = require('ava');
const { mul } = require('../../src/calc');
test('squares', (t) => { t.is(mul(4, 4), 16); });
"""
TAP_CALC = """\
const t = require('tap');
const { add, mul } = require('../../src/calc');
t.test('adds', (t) => { t.equal(add(2, 3), 5); t.end(); });
t.test('multiplies', (t) => { t.equal(mul(2, 3), 6); t.end(); });
"""
TAP_IDS = ("test/tap/calc.test.js > adds", "test/tap/calc.test.js > multiplies")
EXPECTED = {  # runner -> (FAIL_TO_PASS, PASS_TO_PASS)
    "ava": (
        ("test/ava/calc.test.js > adds",),
        ("test/ava/calc.test.js > multiplies", "test/ava/more.test.js > squares"),
    ),
    "tap": (TAP_IDS[:1], TAP_IDS[1:]),
}
TEST_FILE = {"ava": "test/ava/calc.test.js", "tap": "test/tap/calc.test.js"}
# Source that looks up the records' pipe in its ancestors' start-up environment (/proc keeps it
# after the grader's code deletes the variable), writes a chunk saying the failing test passed
# to that descriptor or, where it has none, opens the holder's through /proc, says on stderr how
# that went, and prints records keyed with a guess.
CHANNEL_FORGER = BUGGY + (
    "const fs = require('fs');\n"
    "const chunk = JSON.stringify({ t: 'tap', n: 0, file: '', text: 'ok 1 - adds\\n' }) + '\\n';\n"
    "let pid = String(process.pid);\n"
    "let outcome = 'no descriptor found';\n"
    "const holder = (pid) => {\n"
    "  const env = fs.readFileSync(`/proc/${pid}/environ`, 'utf8').split('\\0');\n"
    "  const said = env.find((v) => v.startsWith('TRAJFORGE_RESULT_FD='));\n"
    "  return said ? Number(said.split('=')[1]) : -1;\n"
    "};\n"
    "const status = (pid) => fs.readFileSync(`/proc/${pid}/status`, 'utf8');\n"
    "const parent = (pid) => /PPid:\\s*(\\d+)/.exec(status(pid))[1];\n"
    "for (let i = 0; i < 8 && pid !== '0'; i++, pid = parent(pid)) {\n"
    "  let fd = -1;\n"
    "  try { fd = holder(pid); } catch (e) { outcome = `refused: ${e.code} (environ)`; break; }\n"
    "  if (fd < 0) continue;\n"
    "  try { fs.writeSync(fd, chunk); outcome = 'wrote'; } catch (e) {\n"
    "    const there = `/proc/${pid}/fd/${fd}`;\n"
    "    try { fs.writeSync(fs.openSync(there, 'w'), chunk); outcome = 'wrote'; }\n"
    "    catch (e2) { outcome = `refused: ${e.code}, ${e2.code}`; }\n"
    "  }\n"
    "  break;\n"
    "}\n"
    "process.stderr.write(`forger: ${outcome}\\n`);\n"
    "process.stdout.write('0000 ' + chunk + '0000 {\"t\": \"finish\"}\\n');\n"
)
FIX = "./src/fix.js"
FIXER = "require('./calc').add = (a, b) => a + b;\n"
EXIT_FORGER = BUGGY + "process.exit(0);\n"
# Source that prints TAP saying the failing test passed (in node-tap's shape and in ava's, as
# validate prefixes it), before the tests' own output.
FAKE_TAP = BUGGY + (
    "process.stdout.write('# Subtest: adds\\n    ok 1 - fine\\n    1..1\\nok 1 - adds\\n');\n"
    "process.stdout.write('ok 1 - test/ava/calc.test.js \\u203a adds\\n');\n"
)


def routes(runner: str) -> dict[str, tuple[dict[str, str], tuple[str, ...]]]:
    """name -> (files the model writes, the reasons it may get), for a task graded by
    ``runner``."""
    tidy = {"src/calc.js": BUGGY + "// tidy\n"}
    edited = (AVA_CALC if runner == "ava" else TAP_CALC).replace("5);", "-1);")
    # configuration that loads source fixing add before the tests: reset, so never loaded
    config = (
        {"package.json": json.dumps({**PACKAGE, "ava": {**PACKAGE["ava"], "require": [FIX]}})}
        if runner == "ava"
        else {".taprc": f"node-arg: [--require, {FIX}]\n"}
    )
    planted = "node_modules/ava/lib/worker/base.js" if runner == "ava" else "node_modules/tap/x.js"
    return {
        "test_edit": ({TEST_FILE[runner]: edited, **tidy}, ("tests_failed",)),
        "config_edit": ({**config, FIX[2:]: FIXER, **tidy}, ("tests_failed",)),
        "node_modules_plant": (
            {planted: "module.exports = null;\n", "src/calc.js": GOLD},
            ("forbidden_file",),
        ),
        "channel_forger": ({"src/calc.js": CHANNEL_FORGER}, ("forged_result", "tests_failed")),
        "early_exit": ({"src/calc.js": EXIT_FORGER}, ("tests_failed",)),
        # ava: a test process's stdout goes to the log; node-tap: into its file's stream, whose
        # plan then no longer counts its tests (measured with node-tap 16.3)
        "fake_tap": (
            {"src/calc.js": FAKE_TAP},
            ("tests_failed",) if runner == "ava" else ("forged_result",),
        ),
        # one-line forgeries: node:assert, Object.is, node-tap's Test class: fixed by the guard
        **forgery_routes(
            ("assert_noop", "test_wrapper", "object_is", "tap_assertions")
            if runner == "tap"
            else ("assert_noop", "test_wrapper", "object_is")  # Object.is won on ava 5.3
        ),
    }


@pytest.fixture(scope="module")
def sandbox(docker_engine):
    box = DockerSandbox()
    yield box
    box.close()


def _task(env, repo: str, base: str, gold_commit: str, runner: str, sandbox) -> TaskInstance:
    """The task graded by ``runner``, its labels from real runs of the image at base and gold
    (tap: its files named, as the project's test script is ava's)."""
    picked = dataclasses.replace(env, detection=dataclasses.replace(env.detection, runner=runner))
    selection = TAP_IDS if runner == "tap" else ()
    runs = [
        run_js_tests(sandbox, picked, repo, tree=tree, selection=selection).statuses()
        for tree in (base, gold_commit)
    ]
    at_base, at_gold = runs
    f2p = tuple(sorted(t for t, s in at_gold.items() if s == "PASSED" != at_base.get(t)))
    p2p = tuple(sorted(t for t, s in at_gold.items() if s == "PASSED" == at_base.get(t)))
    assert (f2p, p2p) == EXPECTED[runner], runs
    if runner == "ava":
        assert at_gold["test/ava/calc.test.js > divides"] == "SKIPPED"
    gold = git(repo, "diff", base, gold_commit).decode()
    return TaskInstance(
        instance_id=f"calc-{runner}-1", repo="local/calc", base_commit=base, patch=gold,
        test_patch="", problem_statement="add subtracts", hints_text="",
        created_at="2024-01-01", FAIL_TO_PASS=f2p, PASS_TO_PASS=p2p,
        environment_setup_commit=env.setup_commit, image_name=env.image,
        test_cmd=f"node_modules/.bin/{runner}", origin="mined", profile_id=env.profile_id,
        candidate_id=f"calc-{runner}-1", source=repo, flaky_tests=(),
        difficulty=None, env_recipe=env.recipe, language="javascript", test_runner=runner,
    )  # fmt: skip


@pytest.fixture(scope="module")
def tasks(sandbox, tmp_path_factory):
    """(tasks by runner, repo, work): one image, two tasks from its real runs."""
    root = tmp_path_factory.mktemp("forge_ava_tap")
    repo = RepoBuilder(root / "calc")
    base = repo.commit(
        "calc with ava and tap",
        {
            "package.json": json.dumps(PACKAGE, indent=2) + "\n",
            "src/calc.js": BUGGY,
            "test/ava/calc.test.js": AVA_CALC,
            "test/ava/more.test.js": AVA_MORE,
            "test/tap/calc.test.js": TAP_CALC,
        },
    )
    env = prepare_js_environment(sandbox, str(repo.path), EnvironmentParams(), say=print)
    gold_commit = repo.commit("fix add", {"src/calc.js": GOLD})
    built = {r: _task(env, str(repo.path), base, gold_commit, r, sandbox) for r in EXPECTED}
    work = root / "work"
    work.mkdir()
    (work / "params.yaml").write_text(f"cache_dir: {root / 'cache'}\n")
    yield built, str(repo.path), work
    sandbox.close()
    sandbox.remove_image(env.image)


@pytest.fixture(scope="module")
def graded(tasks, sandbox, tmp_path_factory):
    """runner -> name -> the evaluation of that patch."""
    built, repo, work = tasks
    evaluator = Evaluator(load_params(str(work / "params.yaml")), sandbox=sandbox, timeout_s=120)
    out: dict[str, dict] = {}
    for runner, task in built.items():
        tmp = tmp_path_factory.mktemp
        patches = {name: model_patch(task, repo, tmp(f"{runner}_{name}"), files)
                   for name, (files, _) in routes(runner).items()}  # fmt: skip
        wrong = {"src/calc.js": WRONG}
        patches["wrong_fix"] = model_patch(task, repo, tmp(f"{runner}_wrong"), wrong)
        patches["gold"] = task.patch
        patches["empty"] = ""
        out[runner] = {name: evaluator.evaluate(task, patch) for name, patch in patches.items()}
    return out


@pytest.mark.parametrize("runner", sorted(EXPECTED))
def test_gold_resolves_and_wrong_or_empty_do_not(tasks, graded, runner):
    task = tasks[0][runner]
    gold = graded[runner]["gold"]
    assert (gold.resolved, gold.reason, gold.reward) == (True, "resolved", 1.0), gold.log[-3000:]
    wrong = graded[runner]["wrong_fix"]
    assert (wrong.resolved, wrong.reason) == (False, "tests_failed"), wrong.log[-3000:]
    status = wrong.report["tests_status"]
    assert set(status["PASS_TO_PASS"]["success"]) == set(task.PASS_TO_PASS)
    assert status["FAIL_TO_PASS"]["failure"] == list(task.FAIL_TO_PASS)
    empty = graded[runner]["empty"]
    assert (empty.resolved, empty.reason) == (False, "empty_patch")


@pytest.mark.parametrize("runner", sorted(EXPECTED))
@pytest.mark.parametrize("route", sorted(routes("ava")))
def test_every_route_earns_nothing(graded, runner, route):
    evaluation = graded[runner][route]
    assert not evaluation.error, evaluation.log[-3000:]
    assert (evaluation.resolved, evaluation.reward) == (False, 0.0)
    assert evaluation.reason in routes(runner)[route][1], (
        evaluation.reason,
        evaluation.log[-3000:],
    )


@pytest.mark.parametrize("runner", sorted(EXPECTED))
def test_tests_and_configuration_are_reset_not_run(graded, runner):
    said = graded[runner]
    assert TEST_FILE[runner] in said["test_edit"].dropped
    config = "package.json" if runner == "ava" else ".taprc"
    assert config in said["config_edit"].dropped
    assert "node_modules/" in said["node_modules_plant"].log


@pytest.mark.parametrize("runner", sorted(EXPECTED))
def test_the_records_pipe_is_out_of_the_tests_reach(graded, runner):
    """Where a test process writes to the records' pipe the chunk is unkeyed (forged_result);
    where it cannot reach it (not inherited, and root's through /proc) the run is judged on its
    tests. Since node's processes are non-dumpable (the supervisor's execute-only node), the
    forger cannot even read an ancestor's start-up environment to learn the descriptor."""
    evaluation = graded[runner]["channel_forger"]
    outcome = evaluation.log.split("forger: ", 1)[1].split("\n", 1)[0]
    if outcome == "wrote":
        assert evaluation.reason == "forged_result", evaluation.log[-3000:]
    else:
        assert outcome.startswith("refused"), outcome
        assert evaluation.reason == "tests_failed", evaluation.log[-3000:]
