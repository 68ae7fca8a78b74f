"""JavaScript installs as people's projects need them, through the real Docker path: test-built
npm/pnpm projects (local ``file:`` packages, git repositories made here) with a dependency whose
``postinstall`` downloads a browser unless its off switch is set, a husky-style ``prepare`` that
fails without ``.git``, test scripts that fan out (``run-p test:*``, ``pnpm run /^test:/``), a
dependency whose download has no off switch (the scripts-off rung), and a failing install whose
cause line names the package and its own error line."""

from __future__ import annotations

import json
import uuid

import pytest
from repo_factory import RepoBuilder
from trajforge.generators.languages.javascript.environment import (
    prepare_js_environment,
    run_js_tests,
)
from trajforge.generators.languages.javascript.recipe import rung_ran
from trajforge.schemas.errors import UserError
from trajforge.schemas.params import EnvironmentParams
from trajforge.verifiers.sandbox.docker import DockerSandbox

pytestmark = pytest.mark.docker

# puppeteer's shape: downloads a browser from its own host unless PUPPETEER_SKIP_DOWNLOAD is set
BROWSER_INSTALL = """\
if (process.env.PUPPETEER_SKIP_DOWNLOAD) { console.log('fake-browser: skipping download'); return; }
require('https').get('https://downloads.fake-browser.invalid/chrome.zip', () => {})
  .on('error', (e) => { console.error('fake-browser: ' + e.message); process.exit(1); });
"""
# husky 9's shape: ``husky`` in ``prepare`` fails without .git unless HUSKY=0
HUSKY_BIN = """\
#!/usr/bin/env node
if (process.env.HUSKY === '0') { console.log('HUSKY=0 skip install'); process.exit(0); }
if (!require('fs').existsSync('.git')) { console.error(".git can't be found"); process.exit(1); }
"""
# a native download with no off switch: only the scripts-off rung gets past it
NATIVE_INSTALL = """\
require('https').get('https://user:s3cret-token@downloads.fake-native.invalid/v1/bin.tgz', () => {})
  .on('error', () => {
    console.error('fake-native: downloading prebuilt binary');
    console.error('Error: could not download https://user:s3cret-token@downloads.fake-native.invalid/v1/bin.tgz');
    console.error('    at ClientRequest.<anonymous> (/repo/vendor/fake-native/install.js:3:5)');
    process.exit(1);
  });
"""
BUILD = "require('fs').mkdirSync('lib', {recursive: true});\n" + (
    "require('fs').writeFileSync('lib/generated.js', 'exports.twice = (x) => x * 2;\\n');\n"
)
UNIT_TEST = """\
const test = require('node:test');
const assert = require('node:assert');
const { twice } = require('../lib/generated.js');
test('twice doubles', () => { assert.strictEqual(twice(2), 4); });
test('native is there', () => { assert.ok(require('fake-native/package.json')); });
"""


def _package(name: str, version: str, install: str | None = None) -> dict[str, str]:
    manifest: dict = {"name": name, "version": version}
    files = {}
    if install is not None:
        manifest["scripts"] = {"postinstall": "node install.js"}
        files[f"vendor/{name}/install.js"] = install
    files[f"vendor/{name}/package.json"] = json.dumps(manifest)
    return files


def _husky() -> dict[str, str]:
    manifest = {"name": "husky", "version": "9.0.0", "bin": {"husky": "bin.js"}}
    return {"vendor/husky/package.json": json.dumps(manifest), "vendor/husky/bin.js": HUSKY_BIN}


def _build(sandbox, tmp_path_factory, name: str, files: dict[str, str]):
    """The project committed and built; a file of its own makes each run's install a real one
    (not Docker's cached layer, whose output the log would not hold)."""
    repo = RepoBuilder(tmp_path_factory.mktemp("js-install") / name)
    repo.commit(f"{name}: an install people have", {**files, "NONCE": uuid.uuid4().hex})
    return repo, prepare_js_environment(sandbox, str(repo.path), EnvironmentParams(), say=print)


def _built(tmp_path_factory, name: str, files: dict[str, str]):
    """The project built in its own sandbox, closed before its image is removed (a spare
    container holds the image)."""
    box = DockerSandbox()
    repo, env = _build(box, tmp_path_factory, name, files)
    try:
        yield box, repo, env
    finally:
        box.close()
        box.remove_image(env.image)


@pytest.fixture(scope="module")
def switches(docker_engine, tmp_path_factory):
    """npm: a browser download, a husky ``prepare`` and ``run-p --aggregate-output test:*``."""
    package = {
        "name": "switches",
        "version": "1.0.0",
        "engines": {"node": ">=18"},
        "scripts": {
            "prepare": "husky && node scripts/build.js",
            "test": "run-p --aggregate-output --continue-on-error test:*",
            "test:unit": "node --test test/",
            "test:lint": "node -e \"console.log('lint ok')\"",
        },
        "devDependencies": {
            "fake-browser": "file:vendor/fake-browser",
            "fake-native": "file:vendor/fake-native",
            "husky": "file:vendor/husky",
            "npm-run-all": "4.1.5",
        },
    }
    files = {
        "package.json": json.dumps(package, indent=2) + "\n",
        "scripts/build.js": BUILD,
        "test/unit.test.js": UNIT_TEST,
        **_package("fake-browser", "1.0.0", BROWSER_INSTALL),
        **_package("fake-native", "1.0.0"),
        **_husky(),
    }
    yield from _built(tmp_path_factory, "switches", files)


def test_switches_let_a_browser_download_and_a_hook_installer_pass(switches):
    sandbox, repo, env = switches
    assert env.detection.runner == "node"  # run-p test:* reached test:unit's node --test
    assert env.detection.runner_args == ("test/",)
    # the first install passed (npm hides a passing dependency script's output): without the
    # switches fake-browser's postinstall and husky would fail it, and the rung would say so
    assert "export PUPPETEER_SKIP_DOWNLOAD=1" in env.recipe and "HUSKY=0" in env.recipe
    assert "Successfully built" in env.log and not rung_ran(env.log)
    run = run_js_tests(sandbox, env, str(repo.path), per_test_timeout_s=10)
    assert run.statuses() == {
        "test/unit.test.js > twice doubles": "PASSED",  # prepare's build ran, its file carried
        "test/unit.test.js > native is there": "PASSED",
    }
    assert run.suite_ran and run.exit_code == 0


@pytest.fixture(scope="module")
def rung(docker_engine, tmp_path_factory):
    """pnpm: a native download with no off switch fails the install; the scripts-off rung
    installs, then runs ``prepare`` without its hook installer; ``pnpm run /^test:/``."""
    package = {
        "name": "rung",
        "version": "1.0.0",
        "engines": {"node": ">=18"},
        "packageManager": "pnpm@8.15.8",
        "scripts": {
            "prepare": "husky && node scripts/build.js",
            "test": "pnpm run /^test:/",
            "test:unit": "node --test test/",
        },
        "devDependencies": {
            "fake-native": "file:vendor/fake-native",
            "husky": "file:vendor/husky",
        },
    }
    files = {
        "package.json": json.dumps(package, indent=2) + "\n",
        "scripts/build.js": BUILD,
        "test/unit.test.js": UNIT_TEST,
        **_package("fake-native", "1.0.0", NATIVE_INSTALL),
        **_husky(),
    }
    yield from _built(tmp_path_factory, "rung", files)


def test_the_scripts_off_rung_installs_and_runs_the_own_prepare(rung):
    sandbox, repo, env = rung
    assert (env.detection.package_manager, env.detection.runner) == ("pnpm", "node")
    assert rung_ran(env.log) and "+ pnpm install --no-frozen-lockfile --ignore-scripts" in env.log
    run = run_js_tests(sandbox, env, str(repo.path), per_test_timeout_s=10)
    assert set(run.statuses().values()) == {"PASSED"} and len(run.statuses()) == 2
    assert run.suite_ran and run.exit_code == 0


def test_a_failed_install_names_the_package_and_its_own_error_line(docker_engine, tmp_path_factory):
    package = {
        "name": "broken",
        "version": "1.0.0",
        "engines": {"node": ">=18"},
        "scripts": {"prepare": "node scripts/missing.js", "test": "node --test test/"},
        "devDependencies": {"fake-native": "file:vendor/fake-native"},
    }
    files = {
        "package.json": json.dumps(package, indent=2) + "\n",
        "test/unit.test.js": UNIT_TEST,
        **_package("fake-native", "1.0.0", NATIVE_INSTALL),
    }
    box = DockerSandbox()
    try:
        with pytest.raises(UserError) as info:
            _build(box, tmp_path_factory, "broken", files)
    finally:
        box.close()
    assert info.value.reason == "install_failed"
    assert str(info.value) == (
        "broken: npm install failed: fake-native (node install.js): Error: could not download "
        "https://***@downloads.fake-native.invalid/v1/bin.tgz"
    )
