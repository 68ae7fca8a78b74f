"""A test-built npm project with jest from the npm registry: detected, built into an image
(Debian's node 18 from the on-demand base image, the lock file made by the build's npm),
and its suite run in the sandbox with no network, statuses read from jest's JSON report."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import tempfile
from pathlib import Path

import pytest
from repo_factory import RepoBuilder
from trajforge.generators.languages.javascript.base_image import (
    ensure_node_base_image,
    node_image_tag,
)
from trajforge.generators.languages.javascript.environment import (
    prepare_js_environment,
    run_js_tests,
)
from trajforge.generators.languages.registry import for_repo
from trajforge.schemas.errors import UserError
from trajforge.schemas.params import EnvironmentParams
from trajforge.verifiers.sandbox.docker import DockerSandbox

pytestmark = pytest.mark.docker
CA = EnvironmentParams().ca_bundle

PACKAGE = {
    "name": "calc",
    "version": "1.0.0",
    "engines": {"node": ">=16"},
    "scripts": {"test": "jest"},
    "devDependencies": {"jest": "29.7.0"},
}
SOURCE = "exports.add = (a, b) => a + b;\nexports.mul = (a, b) => a + b; // the bug\n"
TESTS = """\
const { add, mul } = require('../src/calc');

describe('calc', () => {
  describe('add', () => {
    test('adds two numbers', () => { expect(add(2, 3)).toBe(5); });
  });
  test('multiplies', () => { expect(mul(2, 3)).toBe(6); });
  test.skip('divides', () => {});
});
"""
HANGS = """\
test('never settles', () => new Promise(() => {}));
test('answers', () => { expect(1 + 1).toBe(2); });
"""
CALC_IDS = {
    "__tests__/calc.test.js > calc > add > adds two numbers": "PASSED",
    "__tests__/calc.test.js > calc > multiplies": "FAILED",
    "__tests__/calc.test.js > calc > divides": "SKIPPED",
}
OFFLINE = """\
const dns = require('dns');
test('has no network', (done) => {
  dns.lookup('registry.npmjs.org', (err) => { expect(err).toBeTruthy(); done(); });
});
"""
HANG_IDS = {
    "test/hang.test.js > never settles": "FAILED",
    "test/hang.test.js > answers": "PASSED",
    "test/offline.test.js > has no network": "PASSED",
}
# A TypeScript project tested by vitest, installed by pnpm (from the npm registry, no lock).
TS_PACKAGE = {
    "name": "shapes",
    "private": True,
    "type": "module",
    "scripts": {"test": "vitest run"},
    "devDependencies": {"vitest": "1.6.0", "typescript": "5.4.5"},
    "packageManager": "pnpm@8.15.8",
}
TS_SOURCE = "export const area = (w: number, h: number): number => w * h;\n"
TS_TESTS = """\
import { describe, expect, it } from 'vitest';
import { area } from '../src/area';

describe('area', () => {
  it('multiplies', () => { expect(area(2, 3)).toBe(6); });
  it('is never negative', () => { expect(area(-2, 3)).toBeGreaterThan(0); });
});
"""


@pytest.fixture(scope="module")
def sandbox(docker_engine):
    box = DockerSandbox()
    yield box
    box.close()


def npm_lock(package: dict) -> str:
    """package-lock.json for ``package``, made by Debian's npm in the node base image (with
    the network and this machine's CA bundle), as a project's author would commit it."""
    ensure_node_base_image("18", say=print)
    with tempfile.TemporaryDirectory() as work:
        Path(work, "package.json").write_text(json.dumps(package))
        subprocess.run(
            ["docker", "run", "--rm", "-v", f"{work}:/w", "-w", "/w",
             "-v", f"{CA}:/ca.crt:ro", "-e", "NODE_EXTRA_CA_CERTS=/ca.crt",
             "-e", "npm_config_cafile=/ca.crt", "-e", "HOME=/tmp", node_image_tag("18"),
             "npm", "install", "--package-lock-only", "--ignore-scripts", "--no-audit"],
            check=True, capture_output=True, timeout=600,
        )  # fmt: skip
        return Path(work, "package-lock.json").read_text()


@pytest.fixture(scope="module")
def project(tmp_path_factory, docker_engine):
    repo = RepoBuilder(tmp_path_factory.mktemp("js") / "calc")
    repo.commit(
        "calc with jest",
        {
            "package.json": json.dumps(PACKAGE, indent=2) + "\n",
            "package-lock.json": npm_lock(PACKAGE),
            "src/calc.js": SOURCE,
            "__tests__/calc.test.js": TESTS,
            "test/hang.test.js": HANGS,
            "test/offline.test.js": OFFLINE,
        },
    )
    return repo


@pytest.fixture(scope="module")
def environment(sandbox, project):
    env = prepare_js_environment(sandbox, str(project.path), EnvironmentParams(), say=print)
    yield env
    sandbox.close()  # its spare container holds the image (close is safe to call twice)
    sandbox.remove_image(env.image)


@pytest.fixture(scope="module")
def ts_project(tmp_path_factory):
    repo = RepoBuilder(tmp_path_factory.mktemp("ts") / "shapes")
    repo.commit(
        "shapes in TypeScript with vitest",
        {
            "package.json": json.dumps(TS_PACKAGE, indent=2) + "\n",
            "tsconfig.json": '{"compilerOptions": {"strict": true, "module": "esnext"}}\n',
            "src/area.ts": TS_SOURCE,
            "test/area.test.ts": TS_TESTS,
        },
    )
    return repo


def test_typescript_with_vitest_installed_by_pnpm(docker_engine, ts_project):
    box = DockerSandbox()  # its own: closing it frees the image for removal
    env = prepare_js_environment(box, str(ts_project.path), EnvironmentParams(), say=print)
    try:
        detection = env.detection
        assert (detection.package_manager, detection.manager_spec) == ("pnpm", "pnpm@8.15.8")
        assert detection.runner == "vitest" and detection.typescript
        assert "npm install -g pnpm@8.15.8" in env.recipe
        run = run_js_tests(box, env, str(ts_project.path), per_test_timeout_s=5)
        assert run.statuses() == {
            "test/area.test.ts > area > multiplies": "PASSED",
            "test/area.test.ts > area > is never negative": "FAILED",
        }
        assert run.suite_ran
    finally:
        box.close()
        box.remove_image(env.image)


def test_detection_chooses_javascript_npm_jest_and_node_18(project):
    language, detection = for_repo(str(project.path))
    assert language.name == "javascript"
    assert (detection.package_manager, detection.runner) == ("npm", "jest")
    assert detection.lockfile == "package-lock.json"  # so the build runs `npm ci`
    # engines >=16 allows 18 and 20; a commit of 2024-01 is node 18's era
    assert detection.runtime == "18"


def test_jest_runs_offline_with_exact_ids(sandbox, project, environment):
    assert "npm ci" in environment.recipe  # the lock file decides the install
    run = run_js_tests(sandbox, environment, str(project.path), per_test_timeout_s=2)
    assert run.statuses() == {**CALC_IDS, **HANG_IDS}
    assert run.suite_ran and not run.collection_errors and run.exit_code == 1
    # the hanging test failed alone, on its own time limit, and the run went on
    assert "Exceeded timeout of 2000 ms" in run.log


def test_ids_are_stable_and_a_selection_runs_its_files_only(sandbox, project, environment):
    picked = ("__tests__/calc.test.js > calc > multiplies",)
    run = run_js_tests(sandbox, environment, str(project.path), selection=picked)
    assert run.statuses() == {picked[0]: "FAILED"}
    assert run.selection == picked
    assert "hang.test.js" not in run.log  # the other file never ran


def test_a_reused_image_is_the_same_and_the_fix_turns_the_test_green(sandbox, project, environment):
    again = prepare_js_environment(sandbox, str(project.path), EnvironmentParams(), say=print)
    assert again.log == ""  # reused by its recipe label, nothing rebuilt
    assert dataclasses.replace(again, log=environment.log) == environment
    fixed = project.commit("fix mul", {"src/calc.js": SOURCE.replace("a + b; //", "a * b; //")})
    run = run_js_tests(sandbox, environment, str(project.path), tree=fixed, per_test_timeout_s=2)
    assert run.statuses()["__tests__/calc.test.js > calc > multiplies"] == "PASSED"


def test_a_suite_that_does_not_load_is_a_collection_error(sandbox, project, environment):
    broken = project.commit("syntax error", {"__tests__/broken.test.js": "test('x', () => {\n"})
    run = run_js_tests(sandbox, environment, str(project.path), tree=broken, per_test_timeout_s=2)
    assert run.collection_errors == ("__tests__/broken.test.js",)
    assert not run.suite_ran


def test_a_failed_install_is_one_line_naming_its_cause(sandbox, tmp_path):
    repo = RepoBuilder(tmp_path / "missing")
    package = {**PACKAGE, "devDependencies": {"trajforge-no-such-package-4f1c": "1.0.0"}}
    repo.commit("a dependency npm has never heard of", {"package.json": json.dumps(package)})
    with pytest.raises(UserError) as caught:
        prepare_js_environment(sandbox, str(repo.path), EnvironmentParams(), say=print)
    line = str(caught.value)
    assert caught.value.reason == "install_failed"
    assert "\n" not in line and "E404" in line and "trajforge-no-such-package-4f1c" in line
