"""The JavaScript runners' reports, in the shapes the runners write them, read as statuses."""

# ruff: noqa: E501  (the fixtures keep the runners' own long lines)

from __future__ import annotations

import json
from typing import Any

import pytest
from trajforge.verifiers.reports import FORMATS, ReportError, ids, read_report
from trajforge.verifiers.reports.ids import MAX_REPORT_CHARS

# --- jest --json / vitest --reporter=json ------------------------------------------------------


def _jest(results: list[dict], **counts: int) -> str:
    report: dict[str, object] = {"numFailedTestSuites": 1, "success": False}
    report.update(counts)
    report["testResults"] = results
    return json.dumps(report)


def _case(ancestors: list[str], title: str, status: str) -> dict:
    return {
        "ancestorTitles": ancestors,
        "fullName": " ".join([*ancestors, title]),
        "status": status,
        "title": title,
        "duration": 3,
        "failureMessages": ["Error: expected 2"] if status == "failed" else [],
    }


JEST = _jest(
    [
        {
            "name": "/repo/src/__tests__/sum.test.js",
            "status": "failed",
            "message": "",
            "assertionResults": [
                _case(["sum", "integers"], "adds", "passed"),
                _case(["sum"], "handles NaN", "failed"),
                _case([], "later", "pending"),
                _case([], "some day", "todo"),
            ],
        },
        {
            "name": "/repo/test/broken.test.js",
            "status": "failed",
            "message": "SyntaxError: Unexpected token",
            "assertionResults": [],
        },
    ],
    numTotalTests=4,
    numFailedTests=1,
    numPassedTests=1,
    numPendingTests=1,
    numTodoTests=1,
)


def test_jest_json_statuses_ids_and_broken_files() -> None:
    parsed = read_report(JEST, "jest-json")
    assert parsed.statuses == {
        "src/__tests__/sum.test.js > sum > integers > adds": "PASSED",
        "src/__tests__/sum.test.js > sum > handles NaN": "FAILED",
        "src/__tests__/sum.test.js > later": "SKIPPED",
        "src/__tests__/sum.test.js > some day": "SKIPPED",
    }
    assert parsed.collection_errors == ("test/broken.test.js",)
    assert parsed.problem == ""
    assert {ids.test_file(t) for t in parsed.statuses} == {"src/__tests__/sum.test.js"}


def test_vitest_json_with_skipped() -> None:
    report = _jest(
        [
            {
                "name": "/repo/test/math.spec.ts",
                "status": "failed",
                "assertionResults": [
                    _case(["math"], "adds", "passed"),
                    _case(["math"], "divides", "failed"),
                    _case(["math"], "rounds", "skipped"),
                ],
            }
        ],
        numTotalTests=3,
        numFailedTests=1,
    )
    assert read_report(report, "vitest-json").statuses == {
        "test/math.spec.ts > math > adds": "PASSED",
        "test/math.spec.ts > math > divides": "FAILED",
        "test/math.spec.ts > math > rounds": "SKIPPED",
    }


def test_jest_json_whose_totals_contradict_its_tests_is_refused() -> None:
    lying = JEST.replace('"numFailedTests": 1', '"numFailedTests": 0')
    parsed = read_report(lying, "jest-json")
    assert parsed.statuses == {}
    assert "counts 0 failed tests but lists 1" in parsed.problem


def test_a_title_repeated_in_one_file_keeps_its_worst_status() -> None:
    report = _jest(
        [
            {
                "name": "/repo/a.test.js",
                "status": "failed",
                "assertionResults": [_case([], "t", "passed"), _case([], "t", "failed")],
            }
        ]
    )
    assert read_report(report, "jest-json").statuses == {"a.test.js > t": "FAILED"}


# --- mocha --reporter json ---------------------------------------------------------------------


def _mocha_test(title: str, full: str, err: dict | None = None) -> dict:
    return {
        "title": title,
        "fullTitle": full,
        "file": "/repo/test/stack.js",
        "duration": 1,
        "currentRetry": 0,
        "speed": "fast",
        "err": err or {},
    }


MOCHA: dict[str, Any] = {
    "stats": {"suites": 2, "tests": 3, "passes": 1, "pending": 1, "failures": 2, "duration": 9},
    "tests": [],
    "pending": [_mocha_test("pops later", "Stack pops later")],
    "failures": [
        _mocha_test("is empty", "Stack new is empty", {"message": "expected 1 to equal 0"}),
        _mocha_test('"before each" hook for "x"', 'Stack io "before each" hook for "x"'),
    ],
    "passes": [_mocha_test("pushes", "Stack pushes")],
}


def test_mocha_json_statuses_and_a_failed_hook() -> None:
    parsed = read_report(json.dumps(MOCHA), "mocha-json")
    assert parsed.statuses == {
        "test/stack.js > Stack > pushes": "PASSED",
        "test/stack.js > Stack > pops later": "SKIPPED",
        "test/stack.js > Stack new > is empty": "FAILED",
        'test/stack.js > Stack io > "before each" hook for "x"': "ERROR",
    }


def test_mocha_json_on_stdout_after_what_the_tests_printed() -> None:
    printed = '{\nstarting\n{\n  "stats": {"fake": 1}\n}\nmore output\n  ok\n'
    report = json.dumps(MOCHA, indent=2)  # JSON.stringify(obj, null, 2)
    parsed = read_report(printed + report + "\n", "mocha-json")
    assert parsed.statuses == read_report(report, "mocha-json").statuses
    assert len(parsed.statuses) == 4
    with pytest.raises(ReportError, match="not JSON"):
        read_report("no report at all\n", "mocha-json")


def test_mocha_json_whose_stats_contradict_its_lists_is_refused() -> None:
    lying = {**MOCHA, "stats": {**MOCHA["stats"], "passes": 5}}
    parsed = read_report(json.dumps(lying), "mocha-json")
    assert parsed.statuses == {} and "count 5 passes but it lists 1" in parsed.problem


# --- TAP: node --test-reporter=tap, node-tap, ava --tap ----------------------------------------

NODE_TAP = """TAP version 13
# Subtest: math
    # Subtest: adds
    ok 1 - adds
      ---
      duration_ms: 0.51
      ...
    # Subtest: divides
    not ok 2 - divides
      ---
      duration_ms: 0.8
      failureType: 'testCodeFailure'
      error: 'Expected values to be strictly equal'
      stack: |-
        ok 9 - a line of a stack trace is no test
      ...
    # Subtest: rounds
    ok 3 - rounds # SKIP not yet
      ---
      duration_ms: 0.02
      ...
    1..3
not ok 1 - math
  ---
  duration_ms: 2.1
  type: 'suite'
  ...
# Subtest: top level
ok 2 - top level
  ---
  duration_ms: 0.3
  ...
# Subtest: planned
ok 3 - planned # TODO
1..3
# tests 4
# suites 1
# pass 2
# fail 1
# skipped 1
# todo 1
"""


def test_node_tap_nested_suites_and_directives() -> None:
    parsed = read_report(NODE_TAP, "tap")
    assert parsed.statuses == {
        "math > adds": "PASSED",
        "math > divides": "FAILED",
        "math > rounds": "SKIPPED",
        "top level": "PASSED",
        "planned": "SKIPPED",
    }
    assert parsed.problem == "" and parsed.collection_errors == ()


NODE_TAP_FILES = """TAP version 13
# Subtest: test/basic.js
    # Subtest: adds
        ok 1 - should be equal
        ok 2 - should be equal
        1..2
    ok 1 - adds # time=2.1ms
    # Subtest: subtracts
        not ok 1 - should be equal
          ---
          found: 1
          wanted: 2
          ...
        1..1
    not ok 2 - subtracts # time=1ms
    1..2
not ok 1 - test/basic.js # time=400ms
# Subtest: test/crash.js
    # Subtest: first
        ok 1 - fine
        1..1
    ok 1 - first
    1..1
not ok 2 - test/crash.js # time=50ms
1..2
"""


def test_node_tap_assertions_roll_up_and_a_crashed_file_is_a_collection_error() -> None:
    parsed = read_report(NODE_TAP_FILES, "tap")
    assert parsed.statuses == {
        "test/basic.js > adds": "PASSED",
        "test/basic.js > subtracts": "FAILED",
        "test/crash.js > first": "PASSED",
    }
    assert parsed.collection_errors == ("test/crash.js",)


AVA_TAP = """TAP version 13
ok 1 - test \u203a parse \u203a reads a number
not ok 2 - test \u203a parse \u203a rejects junk
  ---
    name: AssertionError
    message: Difference
    at: 'test.js:12:5'
  ...
ok 3 - test \u203a later # SKIP
not ok 4 - test \u203a some day # TODO
1..4
# tests 3
# pass 1
# skip 1
# fail 1
"""


def test_ava_tap_titles_split_into_parts() -> None:
    assert read_report(AVA_TAP, "ava-tap").statuses == {
        "test > parse > reads a number": "PASSED",
        "test > parse > rejects junk": "FAILED",
        "test > later": "SKIPPED",
        "test > some day": "SKIPPED",
    }


def test_tap_whose_plan_contradicts_its_points_is_refused() -> None:
    parsed = read_report(AVA_TAP.replace("1..4", "1..7"), "ava-tap")
    assert parsed.statuses == {} and "says 7 tests but 4 ran" in parsed.problem
    bailed = read_report("TAP version 13\nok 1 - a\nBail out! database down\n", "tap")
    assert bailed.statuses == {} and "bailed out" in bailed.problem


# --- JUnit XML: node --test-reporter=junit, jest-junit, mocha-junit-reporter ---------------------

NODE_JUNIT = """<?xml version="1.0" encoding="utf-8"?>
<testsuites>
\t<testsuite name="math" time="0.002" disabled="0" errors="0" tests="3" failures="1" skipped="1">
\t\t<testcase name="adds" time="0.0005" classname="test" file="/repo/test/math.test.mjs"/>
\t\t<testcase name="divides" time="0.0008" classname="test" failure="Expected" file="/repo/test/math.test.mjs">
\t\t\t<failure type="testCodeFailure" message="Expected values to be strictly equal">AssertionError</failure>
\t\t</testcase>
\t\t<testcase name="rounds" time="0.0001" classname="test" file="/repo/test/math.test.mjs">
\t\t\t<skipped type="skipped" message="not yet"/>
\t\t</testcase>
\t</testsuite>
\t<testcase name="top level \u00e9t\u00e9" time="0.0003" classname="test" file="/repo/test/math.test.mjs"/>
\t<!-- tests 4 -->
\t<!-- pass 2 -->
</testsuites>
"""


def test_node_junit_statuses() -> None:
    assert read_report(NODE_JUNIT, "junit").statuses == {
        "test/math.test.mjs > math > adds": "PASSED",
        "test/math.test.mjs > math > divides": "FAILED",
        "test/math.test.mjs > math > rounds": "SKIPPED",
        "test/math.test.mjs > top level \u00e9t\u00e9": "PASSED",
    }


JEST_JUNIT = """<?xml version="1.0" encoding="UTF-8"?>
<testsuites name="jest tests" tests="3" failures="1" errors="1" time="1.2">
  <testsuite name="sum" errors="0" failures="1" skipped="0" timestamp="2024-01-01T00:00:00" time="0.5" tests="2">
    <testcase classname="sum adds" name="sum adds" time="0.001" file="src/sum.test.ts"/>
    <testcase classname="sum subtracts" name="sum subtracts" time="0.002" file="src/sum.test.ts">
      <failure>Error: expect(received).toBe(expected)</failure>
    </testcase>
  </testsuite>
  <testsuite name="/repo/src/broken.test.ts" errors="1" failures="0" skipped="0" time="0" tests="1">
    <testcase classname="Test suite failed to run" name="/repo/src/broken.test.ts" time="0">
      <error>Cannot find module './gone'</error>
    </testcase>
  </testsuite>
</testsuites>
"""


def test_jest_junit_statuses_and_a_suite_that_failed_to_run() -> None:
    parsed = read_report(JEST_JUNIT, "junit")
    assert parsed.statuses == {
        "src/sum.test.ts > sum > sum adds": "PASSED",
        "src/sum.test.ts > sum > sum subtracts": "FAILED",
    }
    assert parsed.collection_errors == ("src/broken.test.ts",)


MOCHA_JUNIT = """<?xml version="1.0" encoding="UTF-8"?>
<testsuites name="Mocha Tests" time="0.01" tests="2" failures="1">
  <testsuite name="Root Suite" timestamp="2024-01-01T00:00:00" tests="0" file="/repo/test/a.spec.js" time="0" failures="0"/>
  <testsuite name="Stack" timestamp="2024-01-01T00:00:00" tests="2" file="/repo/test/a.spec.js" time="0.01" failures="1">
    <testcase name="Stack pushes" time="0.001" classname="pushes"/>
    <testcase name="Stack pops" time="0.001" classname="pops">
      <failure message="expected 1 to equal 2" type="AssertionError">AssertionError</failure>
    </testcase>
  </testsuite>
</testsuites>
"""


def test_mocha_junit_file_from_the_suite() -> None:
    assert read_report(MOCHA_JUNIT, "junit").statuses == {
        "test/a.spec.js > Stack > Stack pushes": "PASSED",
        "test/a.spec.js > Stack > Stack pops": "FAILED",
    }


# --- hostile input -----------------------------------------------------------------------------

BOMB = """<?xml version="1.0"?>
<!DOCTYPE lolz [<!ENTITY lol "lol"><!ENTITY lol2 "&lol;&lol;&lol;&lol;&lol;&lol;">]>
<testsuites><testsuite name="&lol2;"><testcase name="a"/></testsuite></testsuites>
"""
XXE = """<?xml version="1.0"?>
<!DOCTYPE r [<!ENTITY x SYSTEM "file:///etc/passwd">]>
<testsuites><testcase name="&x;"/></testsuites>
"""


@pytest.mark.parametrize(
    ("fmt", "text", "words"),
    [
        ("jest-json", "{not json", "not JSON"),
        ("jest-json", "[1, 2]", "not a JSON object"),
        ("jest-json", '{"testResults": 5}', "no testResults list"),
        ("jest-json", '{"testResults": [{"name": 3}]}', "name is not a string"),
        ("vitest-json", "[" * 100_000, "not JSON"),
        ("mocha-json", '{"stats": {}, "passes": [{"title": 1}]}', "title is not a string"),
        ("mocha-json", '{"stats": {}, "passes": []}', "no pending list"),
        ("mocha-json", b"\xff\xfe\x00garbage", "not JSON"),
        ("junit", BOMB, "not well-formed"),
        ("junit", XXE, "not well-formed"),
        ("junit", "<testsuites><testcase name='a'>", "not well-formed"),
        ("junit", "<html><body/></html>", "not <testsuites>"),
        ("junit", "<t>" * 200_000 + "</t>" * 200_000, "not"),
        ("nunit", "{}", "unknown test report format"),
    ],
)
def test_malformed_reports_are_one_report_error(fmt: str, text: str | bytes, words: str) -> None:
    with pytest.raises(ReportError) as info:
        read_report(text, fmt)
    message = str(info.value)
    assert words in message and "\n" not in message


def test_control_characters_in_ids_are_escaped_in_every_format() -> None:
    bad = "adds\x1b[31m"
    reports = {
        "jest-json": _jest(
            [{"name": "/repo/a.test.js", "assertionResults": [_case([], bad, "passed")]}]
        ),
        "mocha-json": json.dumps({**MOCHA, "passes": [_mocha_test(bad, bad)]}),
        "tap": f"TAP version 13\nok 1 - {bad}\n1..1\n",
        "junit": '<testsuites><testcase name="adds&#x85;"/></testsuites>',  # C1 NEL
    }
    for fmt, text in reports.items():
        tests = read_report(text, fmt).statuses
        assert any(t.endswith(("adds\\x1b[31m", "adds\\x85")) for t in tests), fmt
        assert all(t.isprintable() for t in tests)
    assert set(reports) | {"vitest-json", "ava-tap"} == set(FORMATS)


def test_a_report_over_the_size_cap_is_refused_before_it_is_read() -> None:
    huge = " " * (MAX_REPORT_CHARS + 1)
    for fmt in FORMATS:
        with pytest.raises(ReportError, match="over the"):
            read_report(huge, fmt)


def test_tap_noise_and_yaml_never_forge_tests() -> None:
    text = "hello from a test\n  ok 7 - indented noise is an assertion\n" + NODE_TAP
    assert read_report(text, "tap").statuses == read_report(NODE_TAP, "tap").statuses


def test_jest_22_titles_given_as_numbers_or_arrays_read_as_javascript_shows_them() -> None:
    """dayjs's ``it([2010, 6], ...)`` under jest 22: the report keeps the array as the title."""
    report = {
        "numTotalTests": 3, "numFailedTests": 0,
        "testResults": [{"name": "/repo/test/a.test.js", "status": "passed", "assertionResults": [
            {"ancestorTitles": ["parse"], "title": [2010, 6, None], "status": "passed"},
            {"ancestorTitles": ["parse"], "title": 7.0, "status": "passed"},
            {"ancestorTitles": ["parse"], "title": [[1, 2], "x"], "status": "passed"},
        ]}],
    }  # fmt: skip
    assert read_report(json.dumps(report), "jest-json").statuses == {
        "test/a.test.js > parse > 2010,6,": "PASSED",
        "test/a.test.js > parse > 7": "PASSED",
        "test/a.test.js > parse > 1,2,x": "PASSED",
    }
    report["testResults"][0]["assertionResults"][0]["title"] = {"an": "object"}
    with pytest.raises(ReportError, match="title is not a string"):
        read_report(json.dumps(report), "jest-json")


def test_a_file_with_no_test_is_no_collection_error_but_a_crash_is() -> None:
    """path-to-regexp's src/cases.spec.ts holds test data only: vitest fails it, loading fine."""
    empty = {
        "name": "/repo/src/cases.spec.ts",
        "status": "failed",
        "assertionResults": [],
        "message": "No test suite found in file /repo/src/cases.spec.ts",
    }
    crash = {
        "name": "/repo/src/b.spec.ts",
        "status": "failed",
        "assertionResults": [],
        "message": "Cannot find module './missing'",
    }
    ok = {
        "name": "/repo/src/a.spec.ts",
        "status": "passed",
        "assertionResults": [{"ancestorTitles": [], "title": "works", "status": "passed"}],
    }
    report = {"numTotalTests": 1, "testResults": [empty, ok]}  # fmt: skip
    parsed = read_report(json.dumps(report), "vitest-json")
    assert parsed.statuses == {"src/a.spec.ts > works": "PASSED"}
    assert parsed.collection_errors == ()
    report["testResults"].append(crash)
    assert read_report(json.dumps(report), "vitest-json").collection_errors == ("src/b.spec.ts",)
