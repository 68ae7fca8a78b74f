"""The forge kit for a vitest task: vitest under the grader's supervisor with its keyed reporter.

One test-built npm project (calc: ``add`` subtracts; vitest 1 from the npm registry, a setup file
named by ``vitest.config.mts``, nested describes, a skipped test), its image and task from real
runs (validate's vitest JSON report). The gold patch resolves, so the grader's ids are
validate's; wrong, empty and every forge route earn nothing.
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
    "engines": {"node": ">=18"},
    "scripts": {"test": "vitest run"},
    "devDependencies": {"vitest": "1.6.0"},
}
# An ES-module configuration: vite writes it bundled beside its link in the grader's folder.
CONFIG = (
    "import { defineConfig } from 'vitest/config';\n"
    "export default defineConfig({ test: { setupFiles: ['./test/setup.js'] } });\n"
)
CALC_TESTS = """\
import { describe, it, expect } from 'vitest';
const { add, mul } = require('../src/calc');

describe('calc', () => {
  describe('sums', () => {
    it('adds', () => { expect(add(2, 3)).toBe(5); });
  });
  it('multiplies', () => { expect(mul(2, 3)).toBe(6); });
});
it('setup ran first', () => { expect(globalThis.CALC_SETUP).toBe(true); });
it.skip('cubes', () => {});
"""
SETUP = "globalThis.CALC_SETUP = true;\n"
F2P = ("test/calc.test.js > calc > sums > adds",)
P2P = ("test/calc.test.js > calc > multiplies", "test/calc.test.js > setup ran first")
FAKE = fake_record(F2P[0])
# Source that finds the records' pipe through /proc (the start-up environment names it) and
# writes a record saying the failing test passed.
CHANNEL_FORGER = BUGGY + (
    "const fs = require('fs');\n"
    f"const line = {json.dumps(FAKE + chr(10))};\n"
    "let environ = [];  // refused since node's processes are non-dumpable (EACCES)\n"
    "try { environ = fs.readFileSync('/proc/self/environ', 'utf8').split('\\0'); } catch (e) {}\n"
    "const said = environ.find((v) => v.startsWith('TRAJFORGE_RESULT_FD='));\n"
    "if (said) { try { fs.writeSync(Number(said.split('=')[1]), line); } catch (e) {} }\n"
)
EXIT_FORGER = BUGGY + "process.exit(0);\n"
TIDY = {"src/calc.js": BUGGY + "// tidy\n"}
ROUTES = {  # name -> (files the model writes, the reasons it may get)
    "test_edit": ({"test/calc.test.js": CALC_TESTS.replace("toBe(5)", "toBe(-1)"), **TIDY},
                  ("tests_failed",)),
    "config_edit": ({"vitest.config.mts": "export default { test: { include: ['none'] } };\n",
                     **TIDY}, ("tests_failed",)),
    "setup_edit": ({"test/setup.js": SETUP + "require('../src/calc').add = (a, b) => a + b;\n",
                    **TIDY}, ("tests_failed",)),
    "node_modules_plant": ({"node_modules/vitest/index.js": "export {};\n", "src/calc.js": GOLD},
                           ("forbidden_file",)),
    "channel_forger": ({"src/calc.js": CHANNEL_FORGER}, ("forged_result", "tests_failed")),
    "early_exit": ({"src/calc.js": EXIT_FORGER},
                   ("suite_failed", "suite_did_not_run", "tests_failed")),
    # one-line forgeries of vitest's expect, chai and node:assert: fixed by the grader's guard
    **forgery_routes(("expect_proxy", "test_wrapper", "matcher_swap", "assert_noop",
                      "object_is", "apply_hook")),
}  # fmt: skip


@pytest.fixture(scope="module")
def sandbox(docker_engine):
    box = DockerSandbox()
    yield box
    box.close()


@pytest.fixture(scope="module")
def vitest_task(sandbox, tmp_path_factory):
    """(task, repo, work): the task from real runs of the project's image at base and gold."""
    root = tmp_path_factory.mktemp("forge_vitest")
    files = {
        "package.json": json.dumps(PACKAGE, indent=2) + "\n",
        "vitest.config.mts": CONFIG,
        "test/setup.js": SETUP,
        "src/calc.js": BUGGY,
        "test/calc.test.js": CALC_TESTS,
    }
    task, repo, image, at_base, at_gold = js_task(
        sandbox, root, files, {"src/calc.js": GOLD}, "vitest"
    )
    assert (task.FAIL_TO_PASS, task.PASS_TO_PASS) == (F2P, P2P), (at_base, at_gold)
    assert at_gold["test/calc.test.js > cubes"] == "SKIPPED"
    yield task, repo, forge_work(root)
    sandbox.close()
    sandbox.remove_image(image)


@pytest.fixture(scope="module")
def graded(vitest_task, sandbox, tmp_path_factory):
    task, repo, work = vitest_task
    return grade_routes(task, repo, work, sandbox, tmp_path_factory, ROUTES, {"src/calc.js": WRONG})


def test_gold_resolves_and_wrong_or_empty_do_not(vitest_task, graded):
    task, _, _ = vitest_task
    assert_gold_wrong_empty(task, graded, "FAIL ")
    gold = graded["gold"]
    assert "EACCES" not in gold.log  # nothing written where the tests' user may not write


@pytest.mark.parametrize("route", sorted(ROUTES))
def test_every_route_earns_nothing(graded, route):
    assert_route_earns_nothing(graded, ROUTES, route)


def test_tests_and_configuration_are_reset_not_run(graded):
    assert "test/calc.test.js" in graded["test_edit"].dropped
    assert "vitest.config.mts" in graded["config_edit"].dropped
    assert "test/setup.js" in graded["setup_edit"].dropped
    assert "node_modules/vitest/index.js" in graded["node_modules_plant"].log
