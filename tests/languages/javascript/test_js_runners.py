"""node's built-in runner, ava and tap on one test-built project installed by yarn classic
(from the npm registry, no lock file): each runner's command and report give stable ids
``file > suite > title`` with the file in them, a selection runs its files only, and a
TypeScript test runs through the project's own loader (``node --import tsx``)."""

from __future__ import annotations

import dataclasses
import json

import pytest
from repo_factory import RepoBuilder
from trajforge.generators.languages.javascript.environment import (
    prepare_js_environment,
    run_js_tests,
)
from trajforge.schemas.params import EnvironmentParams
from trajforge.verifiers.sandbox.docker import DockerSandbox

pytestmark = pytest.mark.docker

PACKAGE = {
    "name": "runners",
    "version": "1.0.0",
    "private": True,
    "packageManager": "yarn@1.22.22",
    "scripts": {"test": "node --import tsx --test test/"},
    "ava": {"files": ["ava/**/*.js"]},
    "devDependencies": {"ava": "5.3.1", "tap": "16.3.10", "tsx": "4.19.2"},
}
SOURCE = "exports.add = (a, b) => a + b;\nexports.mul = (a, b) => a + b; // the bug\n"
NODE_TEST = """\
const { describe, it } = require('node:test');
const assert = require('node:assert');
const { add, mul } = require('../src');
describe('math', () => {
  it('adds', () => assert.strictEqual(add(2, 3), 5));
  describe('products', () => { it('multiplies', () => assert.strictEqual(mul(2, 3), 6)); });
});
"""
NODE_TS = """\
import { test } from 'node:test';
import assert from 'node:assert';
const area = (w: number, h: number): number => w * h;
test('area in TypeScript', () => { assert.strictEqual(area(2, 3), 6); });
"""
AVA = """\
const test = require('ava');
const { add, mul } = require('../src');
test('adds', t => { t.is(add(2, 3), 5); });
test('multiplies', t => { t.is(mul(2, 3), 6); });
test.skip('divides', t => { t.pass(); });
"""
AVA_MORE = "const test = require('ava');\ntest('other', t => { t.pass(); });\n"
TAP = """\
const t = require('tap');
const { add, mul } = require('../src');
t.test('adds', t => { t.equal(add(2, 3), 5); t.end(); });
t.test('multiplies', t => { t.equal(mul(2, 3), 6); t.end(); });
"""


@pytest.fixture(scope="module")
def project(tmp_path_factory):
    repo = RepoBuilder(tmp_path_factory.mktemp("runners") / "runners")
    repo.commit(
        "three runners",
        {
            "package.json": json.dumps(PACKAGE, indent=2) + "\n",
            "src.js": SOURCE,
            "test/math.test.js": NODE_TEST,
            "test/area.test.ts": NODE_TS,
            "test/fixture.json": "{}\n",
            "ava/math.js": AVA,
            "ava/more.js": AVA_MORE,
            "ava/_helper.js": "module.exports = 1;\n",
            "tapdir/math.js": TAP,
        },
    )
    return repo


def test_node_ava_and_tap_report_ids_with_their_file(docker_engine, project):
    box = DockerSandbox()  # its own: closing it frees the image for removal
    env = prepare_js_environment(box, str(project.path), EnvironmentParams(), say=print)
    try:
        detection = env.detection
        assert (detection.runner, detection.package_manager) == ("node", "yarn")
        assert detection.runner_args == ("--import", "tsx", "test/")

        def run(runner: str, selection: tuple[str, ...] = ()) -> dict[str, str]:
            picked = dataclasses.replace(detection, runner=runner)
            picked_env = dataclasses.replace(env, detection=picked)
            result = run_js_tests(box, picked_env, str(project.path), selection=selection)
            assert not result.collection_errors, result.collection_errors
            return result.statuses()

        assert run("node") == {
            "test/math.test.js > math > adds": "PASSED",
            "test/math.test.js > math > products > multiplies": "FAILED",
            "test/area.test.ts > area in TypeScript": "PASSED",
        }
        assert run("node", ("test/math.test.js > math > adds",)) == {
            "test/math.test.js > math > adds": "PASSED"
        }
        ava = {
            "ava/math.js > adds": "PASSED",
            "ava/math.js > multiplies": "FAILED",
            "ava/math.js > divides": "SKIPPED",
            "ava/more.js > other": "PASSED",
        }
        assert run("ava") == ava
        assert run("ava", ("ava/more.js > other",)) == {"ava/more.js > other": "PASSED"}
        assert run("tap", ("tapdir/math.js > adds", "tapdir/math.js > multiplies")) == {
            "tapdir/math.js > adds": "PASSED",
            "tapdir/math.js > multiplies": "FAILED",
        }
    finally:
        box.close()
        box.remove_image(env.image)
