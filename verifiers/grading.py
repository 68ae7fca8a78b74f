"""Grade a test log against a task's labels, by SWE-bench's rules and in its report's shape.

So a trainer or an evaluation can score logs that already exist (from SWE-bench's harness, from
trajforge, from any pytest run): a test is passed when the log says PASSED or XFAIL, failed when
it says FAILED or ERROR or is missing from the log, and neither when skipped; a task is resolved
when every FAIL_TO_PASS and every PASS_TO_PASS test passed (SWE-bench's RESOLVED_FULL).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from trajforge.verifiers.log_parsers import LOG_PARSERS, detect_format

APPLY_PATCH_FAIL = ">>>>> Patch Apply Failed"  # swebench.harness.constants
# Markers that mean SWE-bench's harness has no test result to grade.
NO_RESULT = (APPLY_PATCH_FAIL, ">>>>> Reset Failed", ">>>>> Tests Errored", ">>>>> Tests Timed Out")
PASSING = ("PASSED", "XFAIL")
FAILING = ("FAILED", "ERROR")
RESOLVED_FULL, RESOLVED_PARTIAL, RESOLVED_NO = "RESOLVED_FULL", "RESOLVED_PARTIAL", "RESOLVED_NO"


def counts_as_passed(status: str) -> bool:
    """trajforge's rule, the one place it is written: a graded test counts only when it PASSED
    (SKIPPED, XFAIL, XPASS and a test missing from the report do not)."""
    return status == "PASSED"


@dataclass(frozen=True)
class Graded:
    log_format: str
    report: dict[str, object]  # one instance's entry of SWE-bench's report.json
    resolution: str  # RESOLVED_FULL | RESOLVED_PARTIAL | RESOLVED_NO
    tests_status: dict[str, dict[str, list[str]]] | None = None  # None: no test result


def grade_log(
    fail_to_pass: Sequence[str],
    pass_to_pass: Sequence[str],
    log: bytes,
    log_format: str = "auto",
    patch_exists: bool = True,
) -> Graded:
    """One task's report from its test log (``log_format``: a LOG_PARSERS name, or auto)."""
    name = detect_format(log) if log_format == "auto" else log_format
    text = log.decode("utf-8", "replace")
    applied = patch_exists and APPLY_PATCH_FAIL not in text
    harness_failed = name == "swebench" and any(marker in text for marker in NO_RESULT)
    if not applied or harness_failed:
        return Graded(name, swebench_report(not patch_exists, patch_exists, applied), RESOLVED_NO)
    statuses = LOG_PARSERS[name](log).statuses
    tests_status = tests_status_of(fail_to_pass, pass_to_pass, statuses)
    resolution = _resolution(tests_status)
    resolved = resolution == RESOLVED_FULL
    report = swebench_report(not patch_exists, patch_exists, applied, resolved, tests_status)
    return Graded(name, report, resolution, tests_status)


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
    fail_to_pass: Sequence[str], pass_to_pass: Sequence[str], statuses: Mapping[str, str]
) -> dict[str, dict[str, list[str]]]:
    """SWE-bench's tests_status: each label's tests split into success and failure."""
    return {
        "FAIL_TO_PASS": _split(fail_to_pass, statuses),
        "PASS_TO_PASS": _split(pass_to_pass, statuses),
        "FAIL_TO_FAIL": {"success": [], "failure": []},
        "PASS_TO_FAIL": {"success": [], "failure": []},
    }


def partial_credit(tests_status: dict[str, dict[str, list[str]]]) -> float:
    """The share of FAIL_TO_PASS tests passing, or 0 when any PASS_TO_PASS test broke."""
    if tests_status["PASS_TO_PASS"]["failure"]:
        return 0.0
    return round(_share(tests_status["FAIL_TO_PASS"]), 6)


def _split(tests: Sequence[str], statuses: Mapping[str, str]) -> dict[str, list[str]]:
    """success: passed (or xfail); failure: failed, errored or missing; skipped: neither."""
    success = [t for t in tests if statuses.get(t) in PASSING]
    failure = [t for t in tests if t not in statuses or statuses[t] in FAILING]
    return {"success": success, "failure": failure}


def _share(group: dict[str, list[str]]) -> float:
    total = len(group["success"]) + len(group["failure"])
    return 1.0 if total == 0 else len(group["success"]) / total


def _resolution(tests_status: dict[str, dict[str, list[str]]]) -> str:
    f2p, p2p = _share(tests_status["FAIL_TO_PASS"]), _share(tests_status["PASS_TO_PASS"])
    if f2p == 1 and p2p == 1:
        return RESOLVED_FULL
    if 0 < f2p < 1 and p2p == 1:
        return RESOLVED_PARTIAL
    return RESOLVED_NO
