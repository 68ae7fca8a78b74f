"""mocha's ``--reporter json`` report: ``passes``, ``failures``, ``pending`` lists and ``stats``.

mocha gives a test's ``title`` and its ``fullTitle`` (the describe titles and the title joined by
spaces), not the describe titles one by one, so the describe path is ``fullTitle`` less the title:
one part, the same in every run. A failed hook (``"before each" hook for "x"``) is listed among the
failures with no test of its own: it is an ERROR under its own title. ``stats`` must count what
the lists hold, else the report contradicts itself and is refused (``problem``).

Old mocha has no ``output`` option and writes its report to stdout after whatever the tests
printed. Its report is ``JSON.stringify(report, null, 2)``: a line that is exactly ``{`` opens it
and every nested line is indented, so when the text is not JSON the report is read from the last
such line (what a test printed comes before it, and cannot forge it).
"""

from __future__ import annotations

from typing import Any

from trajforge.verifiers.log_parsers import ParsedLog
from trajforge.verifiers.reports.ids import (
    ReportError,
    count,
    record,
    relative_file,
    string,
)
from trajforge.verifiers.reports.ids import test_id as make_id
from trajforge.verifiers.reports.json_report import load_object

_LISTS = (("passes", "PASSED"), ("pending", "SKIPPED"), ("failures", "FAILED"))


def parse_mocha_json(text: str | bytes) -> ParsedLog:
    report = _load(text)
    stats = report.get("stats")
    if not isinstance(stats, dict):
        raise ReportError("the mocha report has no stats object")
    statuses: dict[str, str] = {}
    for key, status in _LISTS:
        tests = report.get(key)
        if not isinstance(tests, list):
            raise ReportError(f"the mocha report has no {key} list")
        said = count(stats.get(key), f"the mocha report's stats.{key}")
        if said is not None and said != len(tests):
            problem = f"the mocha report's stats count {said} {key} but it lists {len(tests)}"
            return ParsedLog({}, (), problem=problem)
        for test in tests:
            _test(statuses, test, status)
    return ParsedLog(statuses, ())


def _load(text: str | bytes) -> dict[str, Any]:
    """The report, read whole, else from the last line that is exactly ``{``."""
    try:
        return load_object(text, "mocha")
    except ReportError:
        raw = text.encode("utf-8", "replace") if isinstance(text, str) else text
        start = raw.rfind(b"\n{\n")
        if start == -1:
            raise
        return load_object(raw[start + 1 :], "mocha")


def _test(statuses: dict[str, str], test: Any, status: str) -> None:
    if not isinstance(test, dict):
        raise ReportError("a mocha test entry is not an object")
    title = string(test.get("title"), "a mocha test's title")
    full = string(test.get("fullTitle", title), f"mocha test {title[:60]!r}'s fullTitle")
    file = test.get("file")
    file = relative_file(string(file, f"mocha test {title[:60]!r}'s file")) if file else ""
    suite = full[: -len(title) - 1] if full.endswith(" " + title) else ""
    if status == "FAILED" and _is_hook(title):
        status = "ERROR"
    record(statuses, make_id(file, [suite], title), status)


def _is_hook(title: str) -> bool:
    return title.startswith(('"before', '"after')) and '" hook' in title
