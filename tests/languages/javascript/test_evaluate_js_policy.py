"""What a JS task's patch may change (refused, reset, counted) and how ``grade`` recognises a JS
runner's report: decided by what a file or a log is, on real bytes, no engine needed."""

from __future__ import annotations

import json

from trajforge.verifiers.grading import grade_log, runner_report_format
from trajforge.verifiers.languages.javascript import policy as js_policy


def test_refused_by_what_a_file_is():
    assert js_policy.forbidden_file("packages/a/node_modules/x/index.js")
    assert js_policy.forbidden_file("node_modules")
    assert js_policy.forbidden_file(".yarnrc.yml") and js_policy.forbidden_file(".pnp.cjs")
    assert js_policy.forbidden_file(".yarn/plugins/p.cjs") and js_policy.forbidden_file(".npmrc")
    assert js_policy.forbidden_file("src/index.js") is None
    assert js_policy.forbidden_file("src/node_modules.js") is None


def test_configuration_and_the_files_it_names_are_reset():
    tree = {
        "package.json": json.dumps(
            {"main": "index.js", "files": ["lib/"], "jest": {"setupFiles": ["./t/setup"]}}
        ).encode(),
        "index.js": b"",
        "lib/a.js": b"",
        "t/setup.ts": b"",
        "jest.config.js": b"module.exports = { globalSetup: '<rootDir>/tools/global.js' };",
        "tools/global.js": b"",
        "tsconfig.json": b'{"files": ["src/a.ts"]}',
        "src/a.ts": b"",
        "__tests__/a.test.js": b"",
    }
    found = js_policy.grading_files(tree, tree.get)
    # package.json's main and tsconfig's files name the source: still counted as source
    assert found == {
        "package.json", "jest.config.js", "tsconfig.json", "t/setup.ts", "tools/global.js",
        "__tests__/a.test.js",
    }  # fmt: skip
    # vitest: its setup code is configuration; the source its aliases and coverage name is not
    vite = {
        "vitest.config.mts": b"""import { defineConfig } from 'vitest/config'
export default defineConfig({
  resolve: { alias: { '@': './src/index.ts' } },
  test: { setupFiles: ['./support/setup.ts'], globalSetup: "./support/global.ts",
          coverage: { include: ['src/index.ts'] } },
})""",
        "src/index.ts": b"",
        "support/setup.ts": b"",
        "support/global.ts": b"",
    }
    assert js_policy.grading_files(vite, vite.get) == {
        "vitest.config.mts", "support/setup.ts", "support/global.ts",
    }  # fmt: skip
    assert js_policy.is_grading_path("packages/a/babel.config.cjs")
    assert not js_policy.is_grading_path("src/config.js")


def test_a_jest_report_is_recognised_and_graded():
    report = {
        "numTotalTests": 2,
        "numFailedTests": 1,
        "testResults": [
            {
                "name": "/repo/__tests__/a.test.js",
                "status": "failed",
                "assertionResults": [
                    {"ancestorTitles": ["a"], "title": "adds", "status": "passed"},
                    {"ancestorTitles": ["a"], "title": "subtracts", "status": "failed"},
                ],
            }
        ],
    }
    log = json.dumps(report).encode()
    assert runner_report_format(log) == "jest-json"
    assert runner_report_format(b"= 1 passed in 0.1s =") == ""
    assert runner_report_format(b'{"stats": {}, "tests": []}') == "mocha-json"
    graded = grade_log(["__tests__/a.test.js > a > adds"], [], log)
    assert (graded.log_format, graded.report["resolved"]) == ("jest-json", True)
    graded = grade_log([], ["__tests__/a.test.js > a > subtracts"], log)
    assert (graded.report["resolved"], graded.reason) == (False, "tests_failed")
    unreadable = grade_log(["x"], [], b'{"testResults": 3}', "jest-json")
    assert unreadable.reason == "no_test_result" and unreadable.tests_status is None
