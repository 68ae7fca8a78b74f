"""The forge kit for a mocha task: mocha under the grader's supervisor with its keyed reporter.

One test-built npm project (calc: ``add`` subtracts; mocha 10 from the npm registry, a setup file
named by ``.mocharc.json``, the test script's own options and spec folder, a nested describe and
a skipped test), its image from ``prepare_js_environment`` and its task from real runs of that
image (validate's mocha report). The gold patch resolves, so the grader's ids are validate's;
wrong, empty and every forge route earn nothing.
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

PACKAGE = {
    "name": "calc",
    "version": "1.0.0",
    "engines": {"node": ">=20"},  # 20.19: Error's own prepareStackTrace (reads its frames)
    "scripts": {"test": "mocha --recursive --reporter spec test/"},
    "devDependencies": {"mocha": "10.4.0"},
}
MOCHARC = {"require": "./support/setup.js"}
CALC_TESTS = """\
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
const assert = require('assert');
const { mul } = require('../src/calc');

it('setup ran first', () => { assert.strictEqual(global.CALC_SETUP, true); });
it('squares', () => { assert.strictEqual(mul(4, 4), 16); });
it.skip('cubes', () => {});
// as depd (express, body-parser) reads its caller: V8's frames through Error.prepareStackTrace
it('reads its frames', () => {
  const prep = Error.prepareStackTrace;
  Error.prepareStackTrace = (_, frames) => frames;
  const held = {};
  Error.captureStackTrace(held);
  const frames = held.stack;
  Error.prepareStackTrace = prep;
  assert.strictEqual(typeof frames[0].getFileName(), 'string');
});
// as express 4 gives its router a method for HTTP's BIND, and code before classes its
// constructor: an own property over an intrinsic the grader fixed
it('gives a function its own bind', () => {
  const router = function () {};
  router.bind = () => 'route';
  assert.strictEqual(router.bind(), 'route');
  function Deferred() {}
  Deferred.prototype = Object.create(Promise.prototype);
  Deferred.prototype.constructor = Deferred;
  assert.strictEqual(new Deferred().constructor, Deferred);
});
"""
SETUP = "global.CALC_SETUP = true;\n"
F2P = ("test/calc.test.js > calc sums > adds",)
P2P = (
    "test/calc.test.js > calc > multiplies",
    "test/more.test.js > gives a function its own bind",
    "test/more.test.js > reads its frames",
    "test/more.test.js > setup ran first",
    "test/more.test.js > squares",
)
# Source that finds the records' pipe (its number is in the process's start-up environment,
# which /proc keeps after the reporter deletes the variable) and writes a record saying the
# failing test passed, and prints the same record keyed with a guess.
FAKE = fake_record(F2P[0])
CHANNEL_FORGER = BUGGY + (
    "const fs = require('fs');\n"
    f"const line = {json.dumps(FAKE + chr(10))};\n"
    "let environ = [];  // refused since node's processes are non-dumpable (EACCES)\n"
    "try { environ = fs.readFileSync('/proc/self/environ', 'utf8').split('\\0'); } catch (e) {}\n"
    "const said = environ.find((v) => v.startsWith('TRAJFORGE_RESULT_FD='));\n"
    "if (said) { try { fs.writeSync(Number(said.split('=')[1]), line); } catch (e) {} }\n"
    "process.stdout.write('0000 ' + line + '0000 {\"t\": \"finish\"}\\n');\n"
)
EXIT_FORGER = BUGGY + "process.exit(0);\n"
ROUTES = {  # name -> (files the model writes, the reasons it may get)
    "test_edit": (
        {
            "test/calc.test.js": CALC_TESTS.replace("5);", "-1);"),
            "src/calc.js": BUGGY + "// tidy\n",
        },
        ("tests_failed",),
    ),
    "mocharc_edit": (
        {
            ".mocharc.json": json.dumps({**MOCHARC, "ignore": ["test/calc.test.js"]}),
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
        {"node_modules/mocha/lib/runner.js": "module.exports = null;\n", "src/calc.js": GOLD},
        ("forbidden_file",),
    ),
    # forged_result when it finds the pipe; since node's processes are non-dumpable it cannot
    # read its own start-up environment, and the run is judged on its tests
    "channel_forger": ({"src/calc.js": CHANNEL_FORGER}, ("forged_result", "tests_failed")),
    "early_exit": (
        {"src/calc.js": EXIT_FORGER},
        ("suite_failed", "suite_did_not_run", "tests_failed"),
    ),
    # one-line forgeries of mocha's globals and node:assert: fixed by the grader's guard
    **forgery_routes(
        (
            "assert_noop",
            "test_wrapper",
            "module_load_hook",
            "expect_proxy",
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
def mocha_task(sandbox, tmp_path_factory):
    """(task, repo, work): the task from real runs of the project's image at base and gold."""
    root = tmp_path_factory.mktemp("forge_mocha")
    files = {
        "package.json": json.dumps(PACKAGE, indent=2) + "\n",
        ".mocharc.json": json.dumps(MOCHARC) + "\n",
        "support/setup.js": SETUP,
        "src/calc.js": BUGGY,
        "test/calc.test.js": CALC_TESTS,
        "test/more.test.js": MORE_TESTS,
    }
    task, repo, image, at_base, at_gold = js_task(
        sandbox, root, files, {"src/calc.js": GOLD}, "mocha"
    )
    assert (task.FAIL_TO_PASS, task.PASS_TO_PASS) == (F2P, P2P), (at_base, at_gold)
    assert at_gold["test/more.test.js > cubes"] == "SKIPPED"
    yield task, repo, forge_work(root)
    sandbox.close()
    sandbox.remove_image(image)


@pytest.fixture(scope="module")
def graded(mocha_task, sandbox, tmp_path_factory):
    task, repo, work = mocha_task
    return grade_routes(task, repo, work, sandbox, tmp_path_factory, ROUTES, {"src/calc.js": WRONG})


def test_gold_resolves_and_wrong_or_empty_do_not(mocha_task, graded):
    task, _, _ = mocha_task
    assert_gold_wrong_empty(task, graded, "FAILED ")
    gold = graded["gold"]
    assert "SKIPPED test/more.test.js > cubes" in gold.log  # the reporter's own lines


@pytest.mark.parametrize("route", sorted(ROUTES))
def test_every_route_earns_nothing(graded, route):
    assert_route_earns_nothing(graded, ROUTES, route)


def test_tests_and_configuration_are_reset_not_run(graded):
    assert "test/calc.test.js" in graded["test_edit"].dropped
    assert ".mocharc.json" in graded["mocharc_edit"].dropped
    assert "support/setup.js" in graded["setup_edit"].dropped  # named by .mocharc.json
    assert "node_modules/mocha/lib/runner.js" in graded["node_modules_plant"].log
