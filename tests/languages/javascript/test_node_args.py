"""node_args: a graded ``node --test`` command line from the project's own test script.

The grader never runs the task's test_cmd text: it reads the task's package.json (reset to the
task's own) and keeps what loads and chooses tests, split between the runner's process and the
test files' processes; whatever would run tests in the reporter's process, replace its reporter
or time limit, or read the run's coverage is left out.
"""

from __future__ import annotations

import json

from trajforge.verifiers.languages.javascript import policy as js_policy
from trajforge.verifiers.languages.javascript.node_args import (
    children_options,
    node_args,
    project_args,
)


def package(scripts: dict[str, str]) -> bytes:
    return json.dumps({"name": "p", "scripts": scripts}).encode()


def test_options_split_between_the_children_and_the_runner():
    script = (
        "node --import tsx --require=./test/setup.js --experimental-vm-modules --test "
        "--test-reporter spec --test-reporter-destination=stdout --test-timeout 5000 "
        "--experimental-test-isolation=none --test-isolation none --experimental-test-coverage "
        "--test-name-pattern adds --test-concurrency=1 --watch test/ 'src/**/*.test.ts'"
    )
    loaders, runner, specs = project_args(package({"test": script}))
    assert loaders == ["--import", "tsx", "--require=./test/setup.js", "--experimental-vm-modules"]
    assert runner == ["--test-name-pattern", "adds", "--test-concurrency=1"]
    assert specs == ["test/", "src/**/*.test.ts"]


def test_the_command_is_the_graders_own():
    said = package({"test": "npm run build && npm run unit", "unit": "node --test test/"})
    args = node_args("/R.js", ("test/a.test.js",), said, 30, 20)
    assert args == ["-r", "/R.js", "--test", "--test-reporter=/R.js", "--test-timeout=300000",
                    "test/a.test.js"]  # fmt: skip
    # node 18: no --test-timeout; no files given: the script's own paths
    bare = ["-r", "/R.js", "--test", "--test-reporter=/R.js", "test/"]
    assert node_args("/R.js", (), said, 30, 18) == bare


def test_unreadable_or_foreign_scripts_give_nothing():
    assert project_args(b"{not json") == ([], [], [])
    assert project_args(package({"test": "jest --ci"})) == ([], [], [])
    assert project_args(package({"test": "node --test 'unclosed"})) == ([], [], [])
    assert children_options(None) == []


def test_modules_the_script_preloads_are_configuration():
    said = package({"test": "node --require ./support/setup.js --import=./lib/hooks.mjs --test"})
    tree = {"package.json": said, "support/setup.js": b"", "lib/hooks.mjs": b"", "src/a.js": b""}
    found = js_policy.grading_files(tree, tree.get)
    assert {"support/setup.js", "lib/hooks.mjs"} <= found
    assert "src/a.js" not in found
