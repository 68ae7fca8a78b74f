"""jest's ``--json`` report and vitest's ``--reporter=json`` (which keeps jest's shape).

Each file's ``assertionResults`` give a test's ``ancestorTitles`` (its describe path), ``title``
and ``status``. A title jest 22 kept as a number or an array reads as JavaScript shows it
(``2010,1``). A file whose run failed with no failing test (a syntax error, a missing module, a
failing ``afterAll``) is a collection error; one that holds no test at all is not. The report's
own totals must agree with the tests it lists, else it contradicts itself and is refused
(``problem``), as grading refuses such a log.
"""

from __future__ import annotations

from typing import Any

from trajforge.verifiers.log_parsers import ParsedLog
from trajforge.verifiers.reports.ids import ReportError, count, record, relative_file, string
from trajforge.verifiers.reports.ids import test_id as make_id
from trajforge.verifiers.reports.json_report import load_object

_EMPTY_FILE = ("No test suite found in file", "Your test suite must contain at least one test")
STATUS = {
    "passed": "PASSED",
    "failed": "FAILED",
    "pending": "SKIPPED",
    "skipped": "SKIPPED",
    "todo": "SKIPPED",
    "disabled": "SKIPPED",
    "focused": "PASSED",
}


def parse_jest_json(text: str | bytes, what: str = "jest") -> ParsedLog:
    """Statuses by test id from a jest (or, with ``what="vitest"``, vitest) JSON report."""
    report = load_object(text, what)
    results = report.get("testResults")
    if not isinstance(results, list):
        raise ReportError(f"the {what} report has no testResults list")
    statuses: dict[str, str] = {}
    broken: dict[str, None] = {}
    listed = failed = 0
    for result in results:
        if not isinstance(result, dict):
            raise ReportError(f"a {what} testResults entry is not an object")
        file = relative_file(string(result.get("name"), f"a {what} test file's name"))
        cases = result.get("assertionResults", [])
        if not isinstance(cases, list):
            raise ReportError(f"{file}: assertionResults is not a list")
        file_failed = False
        for case in cases:
            status = _case(statuses, file, case)
            listed += 1
            failed += status == "FAILED"
            file_failed |= status == "FAILED"
        if result.get("status") == "failed" and not file_failed and not _no_tests(result, cases):
            broken[file] = None
    problem = _contradiction(report, listed, failed, what)
    if problem:
        return ParsedLog({}, (), problem=problem)
    return ParsedLog(statuses, tuple(broken))


def parse_vitest_json(text: str | bytes) -> ParsedLog:
    return parse_jest_json(text, "vitest")


def _case(statuses: dict[str, str], file: str, case: Any) -> str:
    if not isinstance(case, dict):
        raise ReportError(f"{file}: a test's result is not an object")
    ancestors = case.get("ancestorTitles", [])
    if not isinstance(ancestors, list) or not all(isinstance(a, str) for a in ancestors):
        raise ReportError(f"{file}: ancestorTitles is not a list of strings")
    title = _title(case.get("title"), file)
    word = string(case.get("status"), f"{file}: a test's status")
    status = STATUS.get(word)
    if status is None:
        raise ReportError(f"{file}: unknown test status {word[:40]!r}")
    record(statuses, make_id(file, ancestors, title), status)
    return status


def _no_tests(result: dict[str, Any], cases: list[Any]) -> bool:
    """A file that holds no test at all (a data file the spec pattern matched: vitest's "No
    test suite found in file", jest's "must contain at least one test"): nothing failed to
    load, and it adds no test."""
    message = result.get("message")
    return not cases and isinstance(message, str) and any(m in message for m in _EMPTY_FILE)


def _title(value: Any, file: str) -> str:
    """A test's title as jest prints it: jest before 23 keeps a title given as a number or an
    array (``it([2010, 1], ...)``) as such in its report, which JavaScript's String() shows as
    ``2010,1``; anything else that is no string is refused."""
    if isinstance(value, str):
        return value
    shown = _js_string(value)
    if shown is None:
        raise ReportError(f"{file}: a test's title is not a string")
    return shown


def _js_string(value: Any, depth: int = 0) -> str | None:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return str(int(value)) if value.is_integer() and abs(value) < 1e21 else repr(value)
    if isinstance(value, str):
        return value
    if value is None and depth:
        return ""  # an array shows null as nothing
    if isinstance(value, list) and depth < 8:
        parts = [_js_string(item, depth + 1) for item in value]
        return None if any(p is None for p in parts) else ",".join(p or "" for p in parts)
    return None


def _contradiction(report: dict[str, Any], listed: int, failed: int, what: str) -> str:
    total = count(report.get("numTotalTests"), f"the {what} report's numTotalTests")
    if total is not None and total != listed:
        return f"the {what} report counts {total} tests but lists {listed}"
    said = count(report.get("numFailedTests"), f"the {what} report's numFailedTests")
    if said is not None and said != failed:
        return f"the {what} report counts {said} failed tests but lists {failed}"
    return ""
