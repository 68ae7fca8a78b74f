"""Shared by the JS forge kits (mocha, vitest, node): a task made from real runs of a test-built
npm project's image, the patch a model's workspace reports, every route's patch graded, and the
checks each kit makes of the verdicts."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from repo_factory import RepoBuilder
from trajforge.generators.languages.javascript.environment import (
    prepare_js_environment,
    run_js_tests,
)
from trajforge.pipelines.evaluation.evaluator import Evaluator
from trajforge.schemas.params import EnvironmentParams, load_params
from trajforge.schemas.task_instance import TaskInstance
from trajforge.verifiers.sandbox.git_tree import apply_patches, git

# The calc every JS kit grades: ``add`` subtracts; the gold patch fixes it, the wrong one
# multiplies (right for 2 + 2 only).
BUGGY = "exports.add = (a, b) => a - b;\nexports.mul = (a, b) => a * b;\n"
GOLD = "exports.add = (a, b) => a + b;\nexports.mul = (a, b) => a * b;\n"
WRONG = "exports.add = (a, b) => a * b;\nexports.mul = (a, b) => a * b;\n"

# One-line forgeries in the module under test (each after the buggy calc), kept as routes by every
# JS kit: the grader's guard (verifiers/languages/javascript/in_container/trajforge_guard.js)
# fixes what they replace before the module loads, and a bend that gets through bends the
# sentinels too.
NOOP = "const noop = new Proxy(function () {}, { get: () => noop, apply: () => noop });\n"
FORGERIES = {
    # the runner's global expect replaced by a no-op Proxy (assigned, redefined, deleted)
    "expect_proxy": NOOP
    + (
        "try { globalThis.expect = noop; } catch (e) {}\n"
        "try { Object.defineProperty(globalThis, 'expect', { value: noop }); } catch (e) {}\n"
        "try { Reflect.defineProperty(globalThis, 'expect', { value: noop }); } catch (e) {}\n"
        "try { delete globalThis.expect; globalThis.expect = noop; } catch (e) {}\n"
    ),
    # the global test/it wrapped to swallow failures
    "test_wrapper": (
        "for (const name of ['test', 'it']) {\n"
        "  const real = globalThis[name];\n"
        "  if (typeof real !== 'function') continue;\n"
        "  const swallow = (title, fn) =>\n"
        "    real(title, async () => { try { await fn(); } catch (e) {} });\n"
        "  try { globalThis[name] = swallow; } catch (e) {}\n"
        "  try { Object.defineProperty(globalThis, name, { value: swallow }); } catch (e) {}\n"
        "}\n"
    ),
    # node:assert, assert.strict and node:assert/strict made no-ops
    "assert_noop": (
        "for (const name of ['assert', 'node:assert', 'assert/strict', 'node:assert/strict']) {\n"
        "  let mod; try { mod = require(name); } catch (e) { continue; }\n"
        "  for (const o of [mod, mod.strict]) {\n"
        "    if (!o) continue;\n"
        "    for (const k of Object.keys(o)) { try { o[k] = () => {}; } catch (e) {} }\n"
        "  }\n"
        "}\n"
    ),
    # node:test's test/it wrapped to swallow failures (a test file that required us first)
    "node_test_wrapper": (
        "let t; try { t = require('node:test'); } catch (e) {}\n"
        "for (const name of ['test', 'it']) {\n"
        "  if (!t) break;\n"
        "  const real = t[name];\n"
        "  const swallow = (title, fn) =>\n"
        "    real(title, async () => { try { await fn(); } catch (e) {} });\n"
        "  try { t[name] = swallow; } catch (e) {}\n"
        "}\n"
    ),
    # every later require of assert or node:test answered by a no-op (Module._load, the cache)
    "module_load_hook": NOOP
    + (
        "const Module = require('module');\n"
        "const load = Module._load;\n"
        "Module._load = function (request) {\n"
        "  if (/^(node:)?assert/.test(String(request))) return noop;\n"
        "  return load.apply(this, arguments);\n"
        "};\n"
        "try { require.cache[require.resolve('assert')] = { exports: noop }; } catch (e) {}\n"
    ),
    # jest's and vitest's matchers replaced where expect finds them
    "matcher_swap": (
        "const pass = () => ({ pass: true, message: () => '' });\n"
        "const ex = globalThis.expect || (globalThis.__vitest_index__ || {}).expect;\n"
        "try { ex.extend({ toBe: pass, toEqual: pass }); } catch (e) {}\n"
        "try { const m = globalThis[Symbol.for('$$jest-matchers-object')];\n"
        "  m.matchers.toBe = pass; m.matchers.toEqual = pass; } catch (e) {}\n"
        "try { globalThis[Symbol.for('$$jest-matchers-object')] = { matchers: {}, state: {} }; }"
        " catch (e) {}\n"
        "try { const chai = globalThis.__vitest_index__.chai;\n"
        "  const self = function () { return this; };\n"
        "  try { chai.Assertion.prototype.toBe = self; } catch (e) {}\n"
        "  try { chai.Assertion.overwriteMethod('toBe', () => self); } catch (e) {}\n"
        "  try { chai.Assertion.prototype.assert = () => {}; } catch (e) {}\n"
        "} catch (e) {}\n"
    ),
    # node-tap's assertions made passes (its Test class) and its test() wrapped to bend them
    "tap_assertions": (
        "try { const T = require('tap').Test.prototype;\n"
        "  for (const k of ['equal', 'strictEqual', 'same', 'ok']) {\n"
        "    T[k] = function () { return this.pass('ok'); }; }\n"
        "} catch (e) {}\n"
        "try { const tap = require('tap'); const real = tap.test;\n"
        "  tap.test = function (name, fn) {\n"
        "    return real.call(this, name, (t) => { t.equal = () => true; return fn(t); }); };\n"
        "} catch (e) {}\n"
    ),
    # the language's own functions the matchers call: Object.is says equal to everything
    "object_is": "Object.is = () => true;\n",
    # ... and Function.prototype.apply swallows a failure when the graded test file is on the
    # stack (a sentinel's stack holds the guard, not the test file: aimed at the graded tests)
    "apply_hook": (
        "Function.prototype.apply = function (self, args) {\n"
        "  if (new Error().stack.includes('calc.test.js:')) {\n"
        "    try { return Reflect.apply(this, self, args || []); }\n"
        "    catch (e) { return undefined; }\n"
        "  }\n"
        "  return Reflect.apply(this, self, args || []);\n"
        "};\n"
    ),
    # jest-circus's event handlers: one that clears a finished test's errors
    "event_handler": (
        "try { const state = globalThis[Symbol.for('JEST_STATE_SYMBOL')];\n"
        "  state.eventHandlers.push((event) => {\n"
        "    if (event.name === 'test_done') event.test.errors.length = 0; });\n"
        "} catch (e) {}\n"
    ),
}
FORGERY_REASONS = ("tests_failed", "forged_result")


def forgery_routes(names: tuple[str, ...]) -> dict[str, tuple[dict[str, str], tuple[str, ...]]]:
    """The ``names`` forgeries as kit routes (route -> (files, the reasons it may get))."""
    return {name: ({"src/calc.js": BUGGY + FORGERIES[name]}, FORGERY_REASONS) for name in names}


def fake_record(test_id: str) -> str:
    """The record a reporter would send for ``test_id`` passing (what a forger writes)."""
    record = {"t": "report", "id": test_id, "when": "call", "outcome": "passed",
              "xfail": False, "sub": False}  # fmt: skip
    return json.dumps(record)


def js_task(sandbox, root: Path, files: dict[str, str], fix: dict[str, str], runner: str):
    """(task, repo, image, statuses at base, at gold): the project committed, its image built by
    ``prepare_js_environment``, FAIL_TO_PASS/PASS_TO_PASS from its runs at base and at the fix."""
    repo = RepoBuilder(root / "calc")
    base = repo.commit(f"calc with {runner}", files)
    env = prepare_js_environment(sandbox, str(repo.path), EnvironmentParams(), say=print)
    gold_commit = repo.commit("fix add", fix)
    gold = git(str(repo.path), "diff", base, gold_commit).decode()
    at_base = run_js_tests(sandbox, env, str(repo.path), tree=base).statuses()
    at_gold = run_js_tests(sandbox, env, str(repo.path), tree=gold_commit).statuses()
    f2p = tuple(sorted(t for t, s in at_gold.items() if s == "PASSED" != at_base.get(t)))
    p2p = tuple(sorted(t for t, s in at_gold.items() if s == "PASSED" == at_base.get(t)))
    task = TaskInstance(
        instance_id=f"calc-{runner}-1", repo="local/calc", base_commit=base, patch=gold,
        test_patch="", problem_statement="add subtracts", hints_text="",
        created_at="2024-01-01", FAIL_TO_PASS=f2p, PASS_TO_PASS=p2p,
        environment_setup_commit=env.setup_commit, image_name=env.image,
        test_cmd=f"node_modules/.bin/{runner}", origin="mined", profile_id=env.profile_id,
        candidate_id=f"calc-{runner}-1", source=str(repo.path), flaky_tests=(),
        difficulty=None, env_recipe=env.recipe, language="javascript", test_runner=runner,
    )  # fmt: skip
    return task, str(repo.path), env.image, at_base, at_gold


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


def forge_work(root: Path) -> Path:
    """The folder evaluate runs from: a params file whose cache is the kit's own."""
    work = root / "work"
    work.mkdir()
    (work / "params.yaml").write_text(f"cache_dir: {root / 'cache'}\n")
    return work


def grade_routes(task, repo, work, sandbox, tmp_path_factory, routes, wrong: dict[str, str]):
    """route -> Evaluation: every route's patch, a wrong fix, the gold patch and an empty one,
    each graded by ``Evaluator`` as ``trajforge evaluate`` grades it."""
    patches = {name: model_patch(task, repo, tmp_path_factory.mktemp(name), files)
               for name, (files, _) in routes.items()}  # fmt: skip
    patches["wrong_fix"] = model_patch(task, repo, tmp_path_factory.mktemp("w"), wrong)
    patches["gold"] = task.patch
    patches["empty"] = ""
    evaluator = Evaluator(load_params(str(work / "params.yaml")), sandbox=sandbox, timeout_s=120)
    return {name: evaluator.evaluate(task, patch) for name, patch in patches.items()}


def assert_gold_wrong_empty(task: TaskInstance, graded, failed_mark: str = "") -> None:
    """Gold resolves (so the grader's ids are validate's); the wrong fix fails exactly its
    FAIL_TO_PASS and keeps PASS_TO_PASS; the empty patch is empty_patch. ``failed_mark``: how
    the runner's log marks a failed test; gold's log then has one (a sentinel made to fail, as
    every run has, while no graded test failed)."""
    gold = graded["gold"]
    assert (gold.resolved, gold.reason, gold.reward) == (True, "resolved", 1.0), gold.log[-2000:]
    assert failed_mark in gold.log, gold.log[-2000:]
    wrong = graded["wrong_fix"]
    assert (wrong.resolved, wrong.reason) == (False, "tests_failed"), wrong.log[-2000:]
    status = wrong.report["tests_status"]
    assert set(status["PASS_TO_PASS"]["success"]) == set(task.PASS_TO_PASS)
    assert status["FAIL_TO_PASS"]["failure"] == list(task.FAIL_TO_PASS)
    assert (graded["empty"].resolved, graded["empty"].reason) == (False, "empty_patch")


def assert_route_earns_nothing(graded, routes, route: str) -> None:
    """The route's patch was graded (no error) and earned nothing, for one of its reasons."""
    evaluation = graded[route]
    assert not evaluation.error, evaluation.log[-2000:]
    assert (evaluation.resolved, evaluation.reward) == (False, 0.0)
    assert evaluation.reason in routes[route][1], (evaluation.reason, evaluation.log[-2000:])
