"""The forge kit for a ``node --test`` task: node's runner under the grader's supervisor with its
keyed reporter.

One test-built npm project with no dependencies (calc: ``add`` subtracts; node:test's
describe/it, a nested describe, a skipped test, a setup module the test script preloads with
``--require``), its image from ``prepare_js_environment`` (node 20 by its ``.nvmrc``: node's
``--test-timeout`` and node 20's event order; node 18 was measured by hand) and its task from
real runs of that image (validate's JUnit report). The gold patch resolves, so the grader's ids
are validate's; wrong, empty and every forge route earn nothing. The strongest
route writes node's own event framing (v8-serialized ``test:pass`` records, as the runner's
children write them) and fake TAP to stdout, then exits before its real failure is reported.
"""

from __future__ import annotations

import json

import pytest
from js_forge import (
    BUGGY,
    GOLD,
    WRONG,
    assert_gold_wrong_empty,
    assert_route_earns_nothing,
    fake_record,
    forge_work,
    forgery_routes,
    grade_routes,
    js_task,
)
from trajforge.verifiers.sandbox.docker import DockerSandbox

pytestmark = pytest.mark.docker

SCRIPT = "node --require ./support/setup.js --test --test-reporter=spec test/"
PACKAGE = {
    "name": "calc",
    "version": "1.0.0",
    "engines": {"node": ">=18"},
    "scripts": {"test": SCRIPT},
}
CALC_TESTS = """\
const { describe, it } = require('node:test');
const assert = require('assert');
const { add, mul } = require('../src/calc');

describe('calc', () => {
  describe('sums', () => {
    it('adds', () => { assert.strictEqual(add(2, 3), 5); });
  });
  it('multiplies', () => { assert.strictEqual(mul(2, 3), 6); });
});
"""
MORE_TESTS = """\
const { it } = require('node:test');
const assert = require('assert');
const { mul } = require('../src/calc');

it('setup ran first', () => { assert.strictEqual(global.CALC_SETUP, true); });
it('squares', () => { assert.strictEqual(mul(4, 4), 16); });
it.skip('cubes', () => {});
"""
SETUP = "global.CALC_SETUP = true;\n"
F2P = ("test/calc.test.js > calc > sums > adds",)
P2P = (
    "test/calc.test.js > calc > multiplies",
    "test/more.test.js > setup ran first",
    "test/more.test.js > squares",
)
FAKE = fake_record(F2P[0])
# Source that looks for the records' pipe in its own and its parent's start-up environment
# (/proc keeps what the reporter deleted) and writes a record saying the failing test passed,
# and prints the same record keyed with a guess.
CHANNEL_FORGER = BUGGY + (
    "const fs = require('fs');\n"
    f"const line = {json.dumps(FAKE + chr(10))};\n"
    "for (const pid of ['self', String(process.ppid)]) {\n"
    "  let environ = [];\n"
    "  try { environ = fs.readFileSync(`/proc/${pid}/environ`, 'utf8').split('\\0'); }\n"
    "  catch (e) {}\n"
    "  const said = environ.find((v) => v.startsWith('TRAJFORGE_RESULT_FD='));\n"
    "  if (said) { try { fs.writeSync(Number(said.split('=')[1]), line); } catch (e) {} }\n"
    "}\n"
    "process.stdout.write('0000 ' + line + '0000 {\"t\": \"finish\"}\\n');\n"
)
EXIT_FORGER = BUGGY + "process.exit(0);\n"
# Source that writes node's child-to-runner framing (v8 header, 4-byte length, serialized
# event) saying every graded test passed, fake TAP beside it, then leaves before the tests run.
FRAMES_FORGER = BUGGY + (
    "const v8 = require('v8');\n"
    "const fs = require('fs');\n"
    "const file = require('path').resolve('test/calc.test.js');\n"
    "function frame(type, name, nesting) {\n"
    "  const body = v8.serialize({ type, data: { name, nesting, file, testNumber: 1,\n"
    "    details: { duration_ms: 1 } } });\n"
    "  const size = Buffer.alloc(4); size.writeUInt32BE(body.length);\n"
    "  return Buffer.concat([body.subarray(0, 2), size, body]);\n"
    "}\n"
    "for (const [name, nesting] of [['calc', 0], ['sums', 1], ['adds', 2]]) {\n"
    "  fs.writeSync(1, frame('test:start', name, nesting));\n"
    "}\n"
    "fs.writeSync(1, frame('test:pass', 'adds', 2));\n"
    "fs.writeSync(1, 'TAP version 13\\nok 1 - adds\\n1..1\\n');\n"
    "process.exit(0);\n"
)
ROUTES = {  # name -> (files the model writes, the reasons it may get)
    "test_edit": (
        {
            "test/calc.test.js": CALC_TESTS.replace("5);", "-1);"),
            "src/calc.js": BUGGY + "// tidy\n",
        },
        ("tests_failed",),
    ),
    "script_edit": (
        {
            "package.json": json.dumps(
                {**PACKAGE, "scripts": {"test": "node --test test/more.test.js"}}
            ),
            "src/calc.js": BUGGY + "// tidy\n",
        },
        ("tests_failed",),
    ),
    "setup_edit": (
        {
            "support/setup.js": SETUP + "require('../src/calc').add = (a, b) => a + b;\n",
            "src/calc.js": BUGGY + "// tidy\n",
        },
        ("tests_failed",),
    ),
    "node_modules_plant": (
        {"node_modules/calc-helper/index.js": "module.exports = null;\n", "src/calc.js": GOLD},
        ("forbidden_file",),
    ),
    # the children do not inherit the pipe (measured: the write fails), so the real failure stands
    "channel_forger": ({"src/calc.js": CHANNEL_FORGER}, ("tests_failed",)),
    "early_exit": (
        {"src/calc.js": EXIT_FORGER},
        ("suite_failed", "suite_did_not_run", "tests_failed"),
    ),
    "frames_forger": (
        {"src/calc.js": FRAMES_FORGER},
        ("suite_failed", "suite_did_not_run", "tests_failed"),
    ),
    # one-line forgeries of node:assert and node:test: fixed by the grader's guard; a
    # Module._load hook bends the sentinels too
    **forgery_routes(("assert_noop", "node_test_wrapper", "module_load_hook", "test_wrapper")),
}


@pytest.fixture(scope="module")
def sandbox(docker_engine):
    box = DockerSandbox()
    yield box
    box.close()


@pytest.fixture(scope="module")
def node_task(sandbox, tmp_path_factory):
    """(task, repo, work): the task from real runs of the project's image at base and gold."""
    root = tmp_path_factory.mktemp("forge_node")
    files = {
        "package.json": json.dumps(PACKAGE, indent=2) + "\n",
        ".nvmrc": "20\n",
        "support/setup.js": SETUP,
        "src/calc.js": BUGGY,
        "test/calc.test.js": CALC_TESTS,
        "test/more.test.js": MORE_TESTS,
    }
    task, repo, image, at_base, at_gold = js_task(
        sandbox, root, files, {"src/calc.js": GOLD}, "node"
    )
    assert (task.FAIL_TO_PASS, task.PASS_TO_PASS) == (F2P, P2P), (at_base, at_gold)
    assert at_gold["test/more.test.js > cubes"] == "SKIPPED"
    assert "ARG BASE=trajforge-base:node20" in task.env_recipe
    yield task, repo, forge_work(root)
    sandbox.close()
    sandbox.remove_image(image)


@pytest.fixture(scope="module")
def graded(node_task, sandbox, tmp_path_factory):
    task, repo, work = node_task
    return grade_routes(task, repo, work, sandbox, tmp_path_factory, ROUTES, {"src/calc.js": WRONG})


def test_gold_resolves_and_wrong_or_empty_do_not(node_task, graded):
    task, _, _ = node_task
    assert_gold_wrong_empty(task, graded, "FAILED ")
    gold = graded["gold"]
    assert "SKIPPED test/more.test.js > cubes" in gold.log  # the reporter's own lines


@pytest.mark.parametrize("route", sorted(ROUTES))
def test_every_route_earns_nothing(graded, route):
    assert_route_earns_nothing(graded, ROUTES, route)


def test_tests_configuration_and_preloads_are_reset_not_run(graded):
    assert "test/calc.test.js" in graded["test_edit"].dropped
    assert "package.json" in graded["script_edit"].dropped
    assert "support/setup.js" in graded["setup_edit"].dropped  # preloaded by the test script
    assert "node_modules/calc-helper/index.js" in graded["node_modules_plant"].log


def test_a_child_that_leaves_early_fails_its_file(graded):
    """The forged frames reached the runner (its file's test reads passed in the stream), but
    the child's early exit marks the file, so its tests fail."""
    log = graded["frames_forger"].log
    assert "test/calc.test.js (the file failed on its own)" in log, log[-2000:]
    assert graded["frames_forger"].report["tests_status"]["FAIL_TO_PASS"]["failure"] == list(F2P)
