"""The JS runners' command lines a graded run uses (never the task's test_cmd text)."""

from __future__ import annotations

import json

from trajforge.verifiers.languages.javascript.bins import package_bin
from trajforge.verifiers.languages.javascript.mocha_args import mocha_args, project_args
from trajforge.verifiers.languages.javascript.vitest_args import (
    LINKS,
    config_links,
    member_esm_config,
    vitest_args,
)


def test_the_grader_keeps_only_the_projects_test_choosing_options():
    test = (
        "lint && NODE_ENV=test mocha -r ./a.js --reporter dot --config x.json --bail "
        "--timeout 5 -n inspect --ui=tdd test/ $EXTRA"
    )
    script = {"scripts": {"test": test}}
    package = json.dumps(script).encode()
    assert project_args(package) == (["-r", "./a.js", "--ui=tdd"], ["test/"])
    assert project_args(b"{not json") == ([], [])
    assert project_args(json.dumps({"scripts": {"test": "mocha 'x"}}).encode()) == ([], [])
    args = mocha_args("R.js", "node_modules/.bin/_mocha", ("t/a.js",), package, 60)
    assert args == ["-r", "R.js", "node_modules/.bin/_mocha", "-r", "./a.js", "--ui=tdd",
                    "--reporter", "R.js", "--timeout", "60000", "t/a.js"]  # fmt: skip
    assert mocha_args("R.js", "m", (), package, 1)[-1] == "test/"
    cors = {
        "test": "npm run lint && npm run test-ci",
        "lint": "eslint lib test",
        "test-ci": "nyc --reporter=lcov --reporter=text mocha --require test/support/env",
    }
    said = project_args(json.dumps({"scripts": cors}).encode())
    assert said == (["--require", "test/support/env"], [])  # followed as validate follows it
    loop = {"test": "npm run again", "again": "npm test"}
    assert project_args(json.dumps({"scripts": loop}).encode()) == ([], [])


def test_vitest_runs_the_files_with_the_preloaded_reporter_and_no_cache():
    args = vitest_args("R.js", "E.mjs", "node_modules/.bin/vitest", ("test/a.test.js",), 60, "")
    assert args[:3] == ["-r", "R.js", "node_modules/.bin/vitest"]
    assert "--no-cache" in args and "--reporter=E.mjs" in args and "--config" not in args
    assert args[-2:] == ["--testTimeout=60000", "test/a.test.js"]
    linked = vitest_args("R.js", "E.mjs", "v.mjs", (), 1, f"{LINKS}/vitest.config.mts")
    assert linked[linked.index("--config") + 1] == f"{LINKS}/vitest.config.mts"


def test_an_es_module_configuration_is_linked_where_vite_may_write():
    module = json.dumps({"type": "module"}).encode()
    guard = ["vitest.config.mts", "vite.config.ts", "vitest.workspace.ts", "test/a.test.js"]
    assert config_links(guard, None) == ["vitest.config.mts", "vitest.workspace.ts"]
    assert config_links(["vite.config.ts"], module) == ["vite.config.ts"]
    assert config_links(["vitest.config.js"], b"{}") == []  # CommonJS: loaded in memory
    assert config_links(["vitest.config.mjs", "vitest.config.js"], None) == []  # .js first
    assert config_links(["vitest.config.js"], b"[not an object") == []
    assert config_links(["pkg/vitest.config.mjs"], None) == []
    members = ["vitest.workspace.json", "pkg/vitest.config.mts", "lib/vitest.config.cjs"]
    assert member_esm_config(members, None) == "pkg/vitest.config.mts"
    assert member_esm_config(members[1:], None) == ""  # no workspace: members are not loaded


def test_the_runner_file_is_the_packages_own_bin_never_a_path_outside_it():
    mocha = json.dumps({"bin": {"mocha": "./bin/mocha.js", "_mocha": "./bin/_mocha"}}).encode()
    assert package_bin(mocha, "mocha", ("_mocha", "mocha")) == "node_modules/mocha/bin/_mocha"
    vitest = json.dumps({"bin": {"vitest": "./vitest.mjs"}}).encode()
    assert package_bin(vitest, "vitest", ("vitest",)) == "node_modules/vitest/vitest.mjs"
    assert (
        package_bin(json.dumps({"bin": "cli.js"}).encode(), "x", ("x",)) == "node_modules/x/cli.js"
    )
    escape = json.dumps({"bin": {"x": "../../evil.js"}}).encode()
    assert package_bin(escape, "x", ("x",)) == ""
    assert package_bin(None, "x", ("x",)) == package_bin(b"[1]", "x", ("x",)) == ""
