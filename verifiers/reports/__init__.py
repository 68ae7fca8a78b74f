"""Machine-readable test reports of JavaScript/TypeScript runners, read as ``{test_id: status}``.

One parser per format, each returning ``verifiers.log_parsers.ParsedLog`` (statuses by test id,
files that failed to load, and ``problem`` when the report contradicts itself, which grading
refuses). Malformed, oversized or hostile input is one ``ReportError`` line, never another
exception. Test ids: ``ids.py``.
"""

from __future__ import annotations

from collections.abc import Callable

from trajforge.verifiers.log_parsers import ParsedLog
from trajforge.verifiers.reports.ids import SEPARATOR, ReportError, test_id
from trajforge.verifiers.reports.jest import parse_jest_json, parse_vitest_json
from trajforge.verifiers.reports.junit import parse_junit
from trajforge.verifiers.reports.mocha import parse_mocha_json
from trajforge.verifiers.reports.tap import parse_ava_tap, parse_tap

__all__ = ["FORMATS", "SEPARATOR", "ReportError", "read_report", "test_id"]

# Format names as the language layer's test commands name what they write.
FORMATS: dict[str, Callable[[str | bytes], ParsedLog]] = {
    "jest-json": parse_jest_json,
    "vitest-json": parse_vitest_json,
    "mocha-json": parse_mocha_json,
    "tap": parse_tap,  # node --test-reporter=tap, node-tap
    "ava-tap": parse_ava_tap,
    "junit": parse_junit,  # node --test-reporter=junit, jest-junit, mocha-junit-reporter, tap
}


def read_report(text: str | bytes, fmt: str) -> ParsedLog:
    """``text`` read as a report in ``fmt`` (a key of FORMATS)."""
    parser = FORMATS.get(fmt)
    if parser is None:
        raise ReportError(f"unknown test report format {fmt!r}; known: {', '.join(FORMATS)}")
    return parser(text)
