"""Grade a test log against a task's labels, in SWE-bench's report shape, by one rule for "passed".

trajforge's rule, written once here (``counts_as_passed``) and used for every verdict and every
partial credit: a graded test passed only when its status is PASSED. SKIPPED, XFAIL, XPASS,
FAILED, ERROR and missing are all not passed, so a FAIL_TO_PASS test that is skipped, marked
xfail or deselected is a failure, an empty FAIL_TO_PASS group is worth nothing, and a log in
which every graded test is skipped is never resolved.

SWE-bench's own rules stay available where a report must equal SWE-bench's (``rules="swebench"``,
``trajforge grade --rules swebench``), as its harness grades today (swebench 5:
``swebench/harness/grading.py``): PASSED or XFAIL passes; a FAIL_TO_PASS test fails when FAILED,
ERROR, SKIPPED or missing; a PASS_TO_PASS test is kept when PASSED, XFAIL or SKIPPED and fails when
FAILED, ERROR or missing; its parser never reports XPASS, so an XPASS test counts as missing; a
truncated parametrized id matches by prefix; an empty group counts 1. One departure, named where
it applies: a log in which every graded test is skipped is not resolved under either rule.

Which lines of a log count is the same under both rules (``log_parsers.read_log``): the runner's
own summary decides, and a log that contradicts itself is refused (``ambiguous_log``). A
JavaScript task's log is its runner's report (jest's or vitest's JSON, mocha's JSON, TAP, JUnit:
``verifiers/reports/``, ids ``file > describe > title``), named or recognised from its content,
graded by the same rules; a report whose totals contradict its tests is ``ambiguous_log`` too.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from trajforge.verifiers.grader.rules import counts_as_passed  # the one rule, written once
from trajforge.verifiers.log_parsers import read_log
from trajforge.verifiers.reports import FORMATS as REPORT_FORMATS
from trajforge.verifiers.reports import ReportError, read_report

APPLY_PATCH_FAIL = ">>>>> Patch Apply Failed"  # swebench.harness.constants
# Markers that mean SWE-bench's harness has no test result to grade.
NO_RESULT = (APPLY_PATCH_FAIL, ">>>>> Reset Failed", ">>>>> Tests Errored", ">>>>> Tests Timed Out")
PASSED = "PASSED"
PASSING = ("PASSED", "XFAIL")  # SWE-bench's passing statuses (``rules="swebench"`` only)
FAILING = ("FAILED", "ERROR")
SWEBENCH_STATUSES = ("FAILED", "PASSED", "SKIPPED", "ERROR", "XFAIL")  # its TestStatus enum
RESOLVED_FULL, RESOLVED_PARTIAL, RESOLVED_NO = "RESOLVED_FULL", "RESOLVED_PARTIAL", "RESOLVED_NO"
TRAJFORGE, SWEBENCH = "trajforge", "swebench"
RULES = (TRAJFORGE, SWEBENCH)
RULES_LABEL = {
    TRAJFORGE: "trajforge rules: only PASSED counts",
    SWEBENCH: "SWE-bench's rules: PASSED or XFAIL passes, a skipped PASS_TO_PASS test is kept",
}
MAX_LOG_BYTES = 32 * 1024 * 1024  # a test log past this is refused, not read (grading one
# this size takes a few seconds and about 250 MB)


@dataclass(frozen=True)
class Graded:
    log_format: str
    report: dict[str, object]  # one instance's entry of SWE-bench's report.json
    resolution: str  # RESOLVED_FULL | RESOLVED_PARTIAL | RESOLVED_NO
    tests_status: dict[str, dict[str, list[str]]] | None = None  # None: no test result
    rules: str = TRAJFORGE
    # Why it is not resolved ("" when it is): patch_not_applied, no_test_result, ambiguous_log,
    # exit_code_mismatch, log_too_large, all_skipped, tests_failed; ``detail`` says it in a line.
    reason: str = ""
    detail: str = ""


def grade_log(
    fail_to_pass: Sequence[str],
    pass_to_pass: Sequence[str],
    log: bytes,
    log_format: str = "auto",
    patch_exists: bool = True,
    rules: str = TRAJFORGE,
) -> Graded:
    """One task's report from its test log (``log_format``: a LOG_PARSERS name, or auto), under
    ``rules`` (trajforge's, or ``"swebench"``)."""
    _check_rules(rules)
    if len(log) > MAX_LOG_BYTES:
        why = f"the log is {len(log)} bytes, over the {MAX_LOG_BYTES} a test log may have"
        return _unresolved(log_format, rules, patch_exists, True, "log_too_large", why)
    graded_ids = [*fail_to_pass, *pass_to_pass]
    report_format = runner_report_format(log, log_format)
    if report_format:
        try:
            name, parsed, swebench = report_format, read_report(log, report_format), None
        except ReportError as exc:
            why = f"the {report_format} report cannot be read: {exc}"
            return _unresolved(report_format, rules, patch_exists, True, "no_test_result", why)
    else:
        name, parsed, swebench = read_log(log, log_format, graded_ids)
    applied = patch_exists and APPLY_PATCH_FAIL.encode() not in log
    if not applied:
        why = "no patch" if not patch_exists else f"the log says {APPLY_PATCH_FAIL!r}"
        return _unresolved(name, rules, patch_exists, False, "patch_not_applied", why)
    if swebench is not None:
        text = log.decode("utf-8", "replace")
        harness = next((marker for marker in NO_RESULT if marker in text), "")
        if harness or swebench.missing:
            why = f"the harness wrote {harness!r}" if harness else f"no {swebench.missing!r}"
            return _unresolved(name, rules, patch_exists, False, "no_test_result", why)
    if parsed.problem:
        return _unresolved(name, rules, patch_exists, True, "ambiguous_log", parsed.problem)
    statuses = {t: "XPASS" if t in parsed.xpassed else s for t, s in parsed.statuses.items()}
    if swebench is not None:
        if not statuses:
            why = "no test result between the markers"
            return _unresolved(name, rules, patch_exists, False, "no_test_result", why)
        code = swebench.exit_code
        if code not in (None, 0) and not any(s in FAILING for s in statuses.values()):
            why = f"the test command exited {code} but the log reports no failure"
            return _unresolved(name, rules, patch_exists, False, "exit_code_mismatch", why)
    tests_status = tests_status_of(fail_to_pass, pass_to_pass, statuses, rules)
    resolution = _resolution(tests_status, rules)
    reason, detail = "", ""
    if graded_ids and all(statuses.get(t) == "SKIPPED" for t in graded_ids):
        resolution = RESOLVED_NO
        reason, detail = "all_skipped", f"every graded test ({len(graded_ids)}) was skipped"
    elif resolution != RESOLVED_FULL:
        reason, detail = "tests_failed", _failed(tests_status)
    resolved = resolution == RESOLVED_FULL
    report = swebench_report(not patch_exists, patch_exists, True, resolved, tests_status)
    return Graded(name, report, resolution, tests_status, rules, reason, detail)


def runner_report_format(log: bytes, log_format: str = "auto") -> str:
    """The JavaScript runner report format (``verifiers/reports/``) that reads ``log``: the one
    named, or with ``auto`` a JSON object shaped like jest's/vitest's (``testResults``) or
    mocha's (``stats`` with ``tests`` or ``passes``); "" for a pytest log or JUnit XML."""
    if log_format in REPORT_FORMATS:
        return log_format
    if log_format != "auto" or log.lstrip()[:1] != b"{":
        return ""
    try:
        data = json.loads(log)
    except (ValueError, RecursionError):
        return ""
    if not isinstance(data, dict):
        return ""
    if "testResults" in data:
        return "jest-json"
    if "stats" in data and ("tests" in data or "passes" in data):
        return "mocha-json"
    return ""


def _unresolved(
    name: str, rules: str, patch_exists: bool, applied: bool, reason: str, detail: str
) -> Graded:
    """No test result to grade: SWE-bench's report without tests_status, and why."""
    report = swebench_report(not patch_exists, patch_exists, patch_exists and applied)
    return Graded(name, report, RESOLVED_NO, None, rules, reason, detail)


def _failed(tests_status: dict[str, dict[str, list[str]]]) -> str:
    failures = [*tests_status["FAIL_TO_PASS"]["failure"], *tests_status["PASS_TO_PASS"]["failure"]]
    if not failures:
        return "no FAIL_TO_PASS test counted"
    more = f" and {len(failures) - 1} more" if len(failures) > 1 else ""
    return f"{failures[0]} did not pass{more}"


def swebench_report(
    patch_is_none: bool,
    patch_exists: bool,
    applied: bool,
    resolved: bool = False,
    tests_status: dict[str, dict[str, list[str]]] | None = None,
) -> dict[str, object]:
    """One instance's entry of SWE-bench's report.json (``tests_status`` only when tests ran)."""
    report: dict[str, object] = {
        "patch_is_None": patch_is_none,
        "patch_exists": patch_exists,
        "patch_successfully_applied": applied,
        "resolved": resolved,
    }
    if tests_status is not None:
        report["tests_status"] = tests_status
    return report


def tests_status_of(
    fail_to_pass: Sequence[str],
    pass_to_pass: Sequence[str],
    statuses: Mapping[str, str],
    rules: str = TRAJFORGE,
) -> dict[str, dict[str, list[str]]]:
    """SWE-bench's tests_status: each label's tests split into success and failure. Under
    trajforge's rules every test lands in one of the two (success only when PASSED)."""
    _check_rules(rules)
    if rules == SWEBENCH:
        known = {t: s for t, s in statuses.items() if s in SWEBENCH_STATUSES}
        f2p, p2p = (
            _swebench_split(fail_to_pass, known, False),
            _swebench_split(pass_to_pass, known, True),
        )
    else:
        f2p, p2p = _split(fail_to_pass, statuses), _split(pass_to_pass, statuses)
    return {
        "FAIL_TO_PASS": f2p,
        "PASS_TO_PASS": p2p,
        "FAIL_TO_FAIL": {"success": [], "failure": []},
        "PASS_TO_FAIL": {"success": [], "failure": []},
    }


def partial_credit(tests_status: dict[str, dict[str, list[str]]], rules: str = TRAJFORGE) -> float:
    """The share of FAIL_TO_PASS tests passing, or 0 when any PASS_TO_PASS test broke. Under
    trajforge's rules an empty FAIL_TO_PASS group is worth 0 (SWE-bench's counts it 1)."""
    _check_rules(rules)
    if tests_status["PASS_TO_PASS"]["failure"]:
        return 0.0
    group = tests_status["FAIL_TO_PASS"]
    if rules == TRAJFORGE and not group["success"]:
        return 0.0
    return round(_share(group), 6)


def _check_rules(rules: str) -> None:
    if rules not in RULES:
        raise ValueError(f"unknown grading rules {rules!r}; known: {', '.join(RULES)}")


def _split(tests: Sequence[str], statuses: Mapping[str, str]) -> dict[str, list[str]]:
    """trajforge's: success only when PASSED; everything else (skipped, xfail, xpass, failed,
    errored, missing) is a failure."""
    success = [t for t in tests if counts_as_passed(statuses.get(t))]
    failure = [t for t in tests if not counts_as_passed(statuses.get(t))]
    return {"success": success, "failure": failure}


def _swebench_split(
    tests: Sequence[str], statuses: Mapping[str, str], kept_when_skipped: bool
) -> dict[str, list[str]]:
    """SWE-bench's ``check_pass_and_fail`` (FAIL_TO_PASS) or ``check_maintained`` (PASS_TO_PASS)."""
    success: list[str] = []
    failure: list[str] = []
    for test in tests:
        key = _swebench_key(test, statuses)
        status = None if key is None else statuses[key]
        if status in PASSING or (kept_when_skipped and status == "SKIPPED"):
            success.append(test)
        elif status is None or status in FAILING or status == "SKIPPED":
            failure.append(test)
    return {"success": success, "failure": failure}


def _swebench_key(case: str, statuses: Mapping[str, str]) -> str | None:
    """SWE-bench's ``_resolve_case``: the exact id, else for an id truncated inside its
    parameters the ids it prefixes, when they agree on pass or fail."""
    if case in statuses:
        return case
    if case.count("[") > case.count("]"):
        matches = [key for key in statuses if key.startswith(case)]
        if matches and len({statuses[key] in PASSING for key in matches}) == 1:
            return matches[0]
    return None


def _share(group: dict[str, list[str]]) -> float:
    total = len(group["success"]) + len(group["failure"])
    return 1.0 if total == 0 else len(group["success"]) / total


def _resolution(tests_status: dict[str, dict[str, list[str]]], rules: str = TRAJFORGE) -> str:
    """SWE-bench's ``get_resolution_status``; under trajforge's rules an empty FAIL_TO_PASS
    group resolves nothing."""
    f2p, p2p = _share(tests_status["FAIL_TO_PASS"]), _share(tests_status["PASS_TO_PASS"])
    if rules == TRAJFORGE and not tests_status["FAIL_TO_PASS"]["success"]:
        return RESOLVED_NO
    if f2p == 1 and p2p == 1:
        return RESOLVED_FULL
    if 0 < f2p < 1 and p2p == 1:
        return RESOLVED_PARTIAL
    return RESOLVED_NO
