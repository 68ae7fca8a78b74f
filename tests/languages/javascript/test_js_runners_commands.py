"""The runners' commands without Docker: what detection finds in a test script and a workspace,
and what a command does with the test files a caller appends, run by a real shell against
stand-in runner executables that print their arguments (the runners themselves run in
tests/languages/javascript/test_js_runners.py)."""

from __future__ import annotations

import json
import subprocess

import pytest
from repo_factory import RepoBuilder
from trajforge.generators.languages.base import Detection
from trajforge.generators.languages.javascript.language import JavaScript

JS = JavaScript()


def _repo(tmp_path, files: dict[str, str]) -> str:
    repo = RepoBuilder(tmp_path / "js")
    repo.commit("js", files)
    return str(repo.path)


@pytest.mark.parametrize(
    ("script", "runner", "args"),
    [
        ("node --test test/", "node", ("test/",)),
        ("node --test && npm run types", "node", ()),
        ("c8 node --import tsx --test --test-reporter spec test/*.ts", "node",
         ("--import", "tsx", "test/*.ts")),
        ("npm run lint && npm run unit", "node", ()),  # unit: node --test
        ("xo && ava && tsd", "ava", ()),
        ("tap --no-coverage", "tap", ()),
    ],
)  # fmt: skip
def test_node_ava_and_tap_are_found_in_the_test_script(tmp_path, script, runner, args):
    package = {"scripts": {"test": script, "unit": "node --test", "lint": "eslint ."}}
    detection = JS.detect(_repo(tmp_path, {"package.json": json.dumps(package)}))
    assert (detection.runner, detection.runner_args) == (runner, args)


def test_a_workspace_runs_its_tested_package_from_the_root_install(tmp_path):
    root = {"private": True, "workspaces": ["packages/*"], "scripts": {"test": "lerna run test"}}
    core = {"name": "core", "scripts": {"test": "mocha --require ./setup.js spec/"}}
    docs = {"name": "docs", "scripts": {"build": "vitepress build"}}
    path = _repo(
        tmp_path,
        {
            "package.json": json.dumps(root),
            "package-lock.json": "{}",
            "packages/docs/package.json": json.dumps(docs),
            "packages/core/package.json": json.dumps(core),
            "packages/core/node_modules/x/package.json": json.dumps(core),
        },
    )
    detection = JS.detect(path)
    assert detection.package_dir == "packages/core" and detection.runner == "mocha"
    assert detection.lockfile == "package-lock.json" and detection.package_manager == "npm"
    assert detection.runner_args == ("--require", "./setup.js", "spec/")
    assert "packages/core/package.json" in detection.evidence


def test_pnpm_workspace_yaml_and_a_root_runner_that_decides(tmp_path):
    files = {
        "package.json": json.dumps({"scripts": {"test": "pnpm -r test"}}),
        "pnpm-workspace.yaml": "packages:\n  - 'libs/**'\n  - '!libs/skip'\n",
        "libs/skip/package.json": json.dumps({"scripts": {"test": "jest"}}),
        "libs/deep/one/package.json": json.dumps({"scripts": {"test": "vitest run"}}),
    }
    detection = JS.detect(_repo(tmp_path, files))
    assert (detection.package_dir, detection.runner) == ("libs/deep/one", "vitest")
    files["package.json"] = json.dumps({"workspaces": ["libs/*"], "scripts": {"test": "jest"}})
    root = JS.detect(_repo(tmp_path / "again", files))
    assert (root.package_dir, root.runner) == ("", "jest")


@pytest.fixture
def stand_ins(tmp_path):
    """node_modules/.bin/<runner> at the root of a workspace, printing its arguments and its
    folder."""
    bin_dir = tmp_path / "node_modules" / ".bin"
    bin_dir.mkdir(parents=True)
    for runner in ("jest", "vitest", "mocha"):
        (bin_dir / runner).write_text(
            '#!/bin/sh\necho "cwd:$(basename "$PWD")"\nfor a in "$@"; do echo "arg:$a"; done\n'
        )
        (bin_dir / runner).chmod(0o755)
    (tmp_path / "packages" / "core").mkdir(parents=True)
    return tmp_path


@pytest.mark.parametrize("runner", ["jest", "vitest", "mocha"])  # ava, tap: test_js_runners.py
def test_a_workspace_command_runs_in_the_package_with_package_relative_files(stand_ins, runner):
    detection = Detection("javascript", "npm", runner, "18", (), package_dir="packages/core")
    command = JS.test_command(detection, ("packages/core/test/a.test.js > x > y",), 2)
    out = subprocess.run(["sh", "-c", command], cwd=stand_ins, capture_output=True, text=True)
    lines = out.stdout.splitlines()
    assert "cwd:core" in lines and "arg:test/a.test.js" in lines
    assert not any("packages/core" in line for line in lines)


def test_a_pnpm_pin_newer_than_debians_nodes_run_falls_back_to_one_that_reads_its_lock(tmp_path):
    """zustand pins pnpm@11 (Node 22 and up); pnpm 10 runs on Node 18/20 and reads lock v9."""
    package = {"packageManager": "pnpm@11.3.0+sha512.abc", "scripts": {"test": "vitest run"}}
    files = {"package.json": json.dumps(package), "pnpm-lock.yaml": "lockfileVersion: '9.0'\n"}
    detection = JS.detect(_repo(tmp_path, files))
    assert (detection.package_manager, detection.manager_spec) == ("pnpm", "pnpm@10")
    package["packageManager"] = "pnpm@10.14.0"
    files["package.json"] = json.dumps(package)
    assert JS.detect(_repo(tmp_path / "b", files)).manager_spec == "pnpm@10.14.0"
