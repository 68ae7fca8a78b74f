"""A yarn berry workspace (yarn.lock v8 made by yarn 4, .yarnrc.yml asking for Plug'n'Play)
with one tested package: detected as a monorepo, installed once at the root from the lock
file (``--immutable``, into node_modules), the tested package's mocha suite run from its folder
with ids relative to the repository root, a selection given as repository paths."""

from __future__ import annotations

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
from trajforge.schemas.params import EnvironmentParams
from trajforge.verifiers.sandbox.docker import DockerSandbox

pytestmark = pytest.mark.docker
CA = EnvironmentParams().ca_bundle
YARN = "4.5.0"

FILES = {
    "package.json": {
        "name": "mono",
        "private": True,
        "packageManager": f"yarn@{YARN}",
        "workspaces": ["packages/*"],
        "scripts": {"test": "yarn workspaces foreach -A run test"},
    },
    "packages/util/package.json": {"name": "@mono/util", "version": "1.0.0", "main": "index.js"},
    "packages/core/package.json": {
        "name": "@mono/core",
        "version": "1.0.0",
        "scripts": {"test": "mocha test/"},
        "dependencies": {"@mono/util": "workspace:*"},
        "devDependencies": {"mocha": "10.4.0"},
    },
}
UTIL = "exports.twice = (n) => n + n;\nexports.thrice = (n) => n + n; // the bug\n"
CORE_TEST = """\
const assert = require('assert');
const { twice, thrice } = require('@mono/util');
describe('core', () => {
  it('doubles', () => assert.strictEqual(twice(2), 4));
  it('triples', () => assert.strictEqual(thrice(2), 6));
});
"""


def berry_lock(files: dict[str, str]) -> str:
    """yarn.lock for the workspace, made by yarn berry in the node base image (with the network
    and this machine's CA bundle), as the project's author would commit it."""
    ensure_node_base_image("18", say=print)
    with tempfile.TemporaryDirectory() as work:
        for name, text in files.items():
            Path(work, name).parent.mkdir(parents=True, exist_ok=True)
            Path(work, name).write_text(text)
        script = (
            f"npm install -g --prefix /tmp/yarn @yarnpkg/cli-dist@{YARN} >/dev/null && "
            "/tmp/yarn/bin/yarn install --mode=update-lockfile"
        )
        subprocess.run(
            ["docker", "run", "--rm", "-v", f"{work}:/w", "-w", "/w",
             "-v", f"{CA}:/ca.crt:ro", "-e", "NODE_EXTRA_CA_CERTS=/ca.crt",
             "-e", "npm_config_cafile=/ca.crt", "-e", "YARN_HTTPS_CA_FILE_PATH=/ca.crt",
             "-e", "HOME=/tmp", node_image_tag("18"), "sh", "-c", script],
            check=True, capture_output=True, timeout=600,
        )  # fmt: skip
        return Path(work, "yarn.lock").read_text()


@pytest.fixture(scope="module")
def workspace(tmp_path_factory, docker_engine):
    files = {name: json.dumps(data, indent=2) + "\n" for name, data in FILES.items()}
    files |= {
        ".yarnrc.yml": "nodeLinker: pnp\nenableGlobalCache: true\n",
        "packages/util/index.js": UTIL,
        "packages/core/test/core.test.js": CORE_TEST,
    }
    files["yarn.lock"] = berry_lock(files)
    repo = RepoBuilder(tmp_path_factory.mktemp("mono") / "mono")
    repo.commit("a workspace", files)
    return repo


def test_the_tested_package_runs_from_the_root_install_with_root_ids(workspace):
    assert "__metadata:" in (workspace.path / "yarn.lock").read_text()
    box = DockerSandbox()
    env = prepare_js_environment(box, str(workspace.path), EnvironmentParams(), say=print)
    try:
        detection = env.detection
        assert (detection.package_manager, detection.lockfile) == ("yarn-berry", "yarn.lock")
        assert (detection.package_dir, detection.runner) == ("packages/core", "mocha")
        assert "yarn install --immutable" in env.recipe
        run = run_js_tests(box, env, str(workspace.path))
        assert run.suite_ran and not run.collection_errors
        assert run.statuses() == {
            "packages/core/test/core.test.js > core > doubles": "PASSED",
            "packages/core/test/core.test.js > core > triples": "FAILED",
        }
        picked = ("packages/core/test/core.test.js > core > doubles",)
        only = run_js_tests(box, env, str(workspace.path), selection=picked)
        assert only.statuses() == {picked[0]: "PASSED"}
    finally:
        box.close()
        box.remove_image(env.image)
