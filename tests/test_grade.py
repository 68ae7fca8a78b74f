"""Grading logs that already exist: one parser per format, chosen by what the log is, under
trajforge's rules (only PASSED counts) or SWE-bench's (XFAIL passes, a missing test fails, a
skipped FAIL_TO_PASS test fails, a skipped PASS_TO_PASS test is kept).

The pytest logs are real: a test-built suite is run by pytest with -v, -rA and --junitxml. The
xdist and pytest-sugar logs (plugins not installed here) and SWE-bench's markers are written in
the shapes those tools print.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import run_cli
from trajforge.verifiers.grading import (
    RESOLVED_FULL,
    RESOLVED_NO,
    RESOLVED_PARTIAL,
    counts_as_passed,
    grade_log,
)
from trajforge.verifiers.log_parsers import LOG_PARSERS, detect_format

SUITE = """
import pytest

def test_fixed():
    assert True

@pytest.mark.parametrize("word", ["a b", "c - d"])
def test_words(word):
    assert word != "c - d"

def test_kept():
    assert True

@pytest.mark.xfail(reason="known")
def test_known():
    assert False

@pytest.mark.skip(reason="not here")
def test_skipped():
    pass
"""
FIXED = "tests/test_suite.py::test_fixed"
WORD_OK = "tests/test_suite.py::test_words[a b]"
WORD_BAD = "tests/test_suite.py::test_words[c - d]"
KEPT = "tests/test_suite.py::test_kept"
KNOWN = "tests/test_suite.py::test_known"
SKIPPED = "tests/test_suite.py::test_skipped"
GONE = "tests/test_suite.py::test_not_in_the_log"
EXPECTED = {
    FIXED: "PASSED", WORD_OK: "PASSED", WORD_BAD: "FAILED", KEPT: "PASSED", KNOWN: "XFAIL",
    SKIPPED: "SKIPPED",
}  # fmt: skip


@pytest.fixture(scope="module")
def logs(tmp_path_factory) -> dict[str, bytes]:
    root = tmp_path_factory.mktemp("suite")
    (root / "tests").mkdir()
    (root / "tests" / "test_suite.py").write_text(SUITE)

    def pytest_run(*args: str) -> bytes:
        done = subprocess.run(
            [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *args, "tests"],
            cwd=root,
            capture_output=True,
            check=False,
        )
        return done.stdout

    pytest_run("-o", "junit_family=xunit1", "--junitxml=junit.xml")
    summary = pytest_run("-rA")
    return {
        "junit_xml": (root / "junit.xml").read_bytes(),
        "pytest_log": summary,
        "pytest_verbose": pytest_run("-v"),
        "pytest_xdist": _xdist(),
        "pytest_sugar": _sugar(),
        "swebench": b"+ git apply -v -\n>>>>> Applied Patch\n+ pytest -rA\n"
        + b">>>>> Start Test Output\n"
        + summary
        + b"\n>>>>> End Test Output\n",
    }


def _xdist() -> bytes:
    lines = ["created: 2/2 workers", "2 workers [6 items]", ""]
    for n, (test, status) in enumerate(EXPECTED.items()):
        lines.append(f"[gw{n % 2}] [{100 * (n + 1) // 6:>3}%] {status} {test} ")
    return "\n".join(lines).encode()


def _sugar() -> bytes:
    marks = {"PASSED": "\u2713", "FAILED": "\u2a2f", "XFAIL": "x", "SKIPPED": "s"}
    rows = [
        f" {test} {marks[status]}{' ' * 20}{100 * (n + 1) // 6}% \u2588\u2588\u2588"
        for n, (test, status) in enumerate(EXPECTED.items())
    ]
    return ("Test session starts (platform: linux)\n" + "\n".join(rows) + "\n").encode()


@pytest.mark.parametrize("name", sorted(LOG_PARSERS))
def test_each_format_is_recognised_and_read(logs, name):
    log = logs[name]
    assert detect_format(log) == name
    statuses = LOG_PARSERS[name](log).statuses
    summary_only = name in ("pytest_log", "swebench")  # -rA's SKIPPED lines name no test
    wanted = {t: s for t, s in EXPECTED.items() if not (summary_only and t == SKIPPED)}
    assert {t: statuses.get(t) for t in wanted} == wanted


@pytest.mark.parametrize("name", sorted(LOG_PARSERS))
def test_swebench_rules_in_every_format(logs, name):
    graded = grade_log([FIXED, WORD_OK], [KEPT, KNOWN], logs[name], rules="swebench")
    assert graded.resolution == RESOLVED_FULL and graded.report["resolved"] is True
    assert graded.report["tests_status"]["PASS_TO_PASS"]["success"] == [KEPT, KNOWN]  # XFAIL
    assert graded.rules == "swebench" and graded.reason == ""

    partial = grade_log([FIXED, WORD_BAD], [KEPT], logs[name], rules="swebench")
    assert partial.resolution == RESOLVED_PARTIAL and partial.report["resolved"] is False
    assert partial.report["tests_status"]["FAIL_TO_PASS"] == {
        "success": [FIXED],
        "failure": [WORD_BAD],
    }
    missing = grade_log([FIXED], [KEPT, GONE], logs[name], rules="swebench")
    assert missing.resolution == RESOLVED_NO and missing.reason == "tests_failed"
    assert missing.report["tests_status"]["PASS_TO_PASS"]["failure"] == [GONE]


@pytest.mark.parametrize("name", sorted(LOG_PARSERS))
def test_trajforge_rules_in_every_format(logs, name):
    """Only PASSED counts: the same XFAIL that SWE-bench keeps is a failure here."""
    graded = grade_log([FIXED, WORD_OK], [KEPT], logs[name])
    assert graded.resolution == RESOLVED_FULL and graded.report["resolved"] is True
    assert graded.rules == "trajforge"
    xfail = grade_log([FIXED, WORD_OK], [KEPT, KNOWN], logs[name])
    assert xfail.resolution == RESOLVED_NO and xfail.reason == "tests_failed"
    assert xfail.report["tests_status"]["PASS_TO_PASS"] == {"success": [KEPT], "failure": [KNOWN]}
    assert KNOWN in xfail.detail
    # Every graded test lands in success or failure: a skipped or missing one is a failure.
    skipped = grade_log([FIXED, SKIPPED, GONE], [KEPT], logs[name])
    assert skipped.report["tests_status"]["FAIL_TO_PASS"] == {
        "success": [FIXED],
        "failure": [SKIPPED, GONE],
    }
    assert skipped.resolution == RESOLVED_PARTIAL


def test_one_rule_for_passed():
    assert counts_as_passed("PASSED")
    for status in ("SKIPPED", "XFAIL", "XPASS", "FAILED", "ERROR", "MISSING", None):
        assert not counts_as_passed(status)


def test_a_skipped_test_by_each_rule(logs):
    """SWE-bench 5 keeps a skipped PASS_TO_PASS test and fails a skipped FAIL_TO_PASS one;
    trajforge fails both."""
    swebench = grade_log([FIXED], [KEPT, SKIPPED], logs["junit_xml"], rules="swebench")
    assert swebench.report["tests_status"]["PASS_TO_PASS"] == {
        "success": [KEPT, SKIPPED],
        "failure": [],
    }
    assert swebench.resolution == RESOLVED_FULL
    f2p = grade_log([FIXED, SKIPPED], [KEPT], logs["junit_xml"], rules="swebench")
    assert f2p.report["tests_status"]["FAIL_TO_PASS"]["failure"] == [SKIPPED]
    ours = grade_log([FIXED], [KEPT, SKIPPED], logs["junit_xml"])
    assert ours.report["tests_status"]["PASS_TO_PASS"] == {"success": [KEPT], "failure": [SKIPPED]}
    assert ours.resolution == RESOLVED_NO


def test_a_patch_that_did_not_apply_is_not_resolved(logs):
    log = logs["swebench"].replace(b">>>>> Applied Patch", b">>>>> Patch Apply Failed")
    graded = grade_log([FIXED], [KEPT], log)
    assert graded.report == {
        "patch_is_None": False,
        "patch_exists": True,
        "patch_successfully_applied": False,
        "resolved": False,
    }
    timed_out = logs["swebench"] + b"\n>>>>> Tests Timed Out\n"
    assert grade_log([FIXED], [KEPT], timed_out).report["resolved"] is False


def test_the_grade_command_writes_swebenchs_report(logs, tmp_path: Path):
    task = {
        "instance_id": "acme__widgets-1",
        "FAIL_TO_PASS": json.dumps([FIXED, WORD_OK]),  # as SWE-bench publishes them
        "PASS_TO_PASS": json.dumps([KEPT, KNOWN]),
    }
    (tmp_path / "task.json").write_text(json.dumps(task))
    (tmp_path / "test_output.txt").write_bytes(logs["swebench"])
    done = run_cli(
        "grade", "--task", "task.json", "--log", "test_output.txt", "--output", "report.json",
        cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "acme__widgets-1: not resolved, tests_failed: " in done.stdout  # KNOWN is an XFAIL
    assert "FAIL_TO_PASS 2/2, PASS_TO_PASS 1/2; swebench log; trajforge rules" in done.stdout
    done = run_cli(
        "grade", "--task", "task.json", "--log", "test_output.txt", "--output", "report.json",
        "--rules", "swebench", cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "acme__widgets-1: resolved (FAIL_TO_PASS 2/2, PASS_TO_PASS 2/2; swebench" in done.stdout
    assert "SWE-bench's rules" in done.stdout
    report = json.loads((tmp_path / "report.json").read_text())["acme__widgets-1"]
    assert report["resolved"] is True and report["patch_successfully_applied"] is True
    assert set(report["tests_status"]) == {
        "FAIL_TO_PASS", "PASS_TO_PASS", "FAIL_TO_FAIL", "PASS_TO_FAIL"
    }  # fmt: skip


@pytest.mark.parametrize(
    "task, why",
    [
        ("not json", "is not JSON"),
        (json.dumps({"FAIL_TO_PASS": []}), "has no instance_id"),
        (json.dumps({"instance_id": "x", "FAIL_TO_PASS": "[1]", "PASS_TO_PASS": []}), "list"),
    ],
)
def test_bad_input_is_one_line(tmp_path: Path, task, why):
    (tmp_path / "task.json").write_text(task)
    (tmp_path / "log.txt").write_text("")
    done = run_cli(
        "grade", "--task", "task.json", "--log", "log.txt", "--output", "r.json", cwd=tmp_path
    )
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1 and why in done.stderr
    missing = run_cli(
        "grade", "--task", "task.json", "--log", "nope.txt", "--output", "r.json", cwd=tmp_path
    )
    assert missing.returncode == 2 and "Traceback" not in missing.stderr
