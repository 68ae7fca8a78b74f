"""JavaScript test ids, ``path/to/file.test.js > describe > ... > title``, and the shared checks.

An id is the test file relative to /repo, the enclosing ``describe`` titles and the test's own
title, joined by one separator: nothing in it changes between runs (no line numbers, no times,
no run order). Every runner's report is the suite's own output, so each part is checked here.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Iterable

from trajforge.verifiers.sandbox.base import REPO_DIR

SEPARATOR = " > "
MAX_REPORT_CHARS = 64 * 1024 * 1024  # far above any real suite's report; more is an attack
# C0 controls, DEL and C1 controls: an id holding one cannot be written on one line of a log,
# a selection file or a table cell without being misread, so each is escaped.
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")
# When one id is reported more than once, the worst status wins (as in verifiers/log_parsers.py).
_RANK = {"PASSED": 0, "XFAIL": 1, "SKIPPED": 2, "ERROR": 3, "FAILED": 4}


class ReportError(ValueError):
    """A test report that cannot be read: its one-line cause (input, what is wrong)."""


def check_size(text: str | bytes, what: str) -> None:
    if len(text) > MAX_REPORT_CHARS:
        raise ReportError(
            f"the {what} report is {len(text)} characters, over the {MAX_REPORT_CHARS} read;"
            " run fewer tests per report"
        )


def relative_file(path: str) -> str:
    """A report's file as a repository path: ``/repo/test/a.test.js`` -> ``test/a.test.js``."""
    path = path.removeprefix("file://")
    if path.startswith(REPO_DIR + "/"):
        path = path[len(REPO_DIR) + 1 :]
    return posixpath.normpath(path) if path else path


def test_id(file: str, suites: Iterable[str], title: str) -> str:
    """The one id of a test; a control character in any part is written as ``\\xNN`` (ufo's
    suite names a URL with a NUL in it), so an id is always one printable line and the same
    in every run."""
    parts = [part for part in (file, *suites) if part] + [title]
    return SEPARATOR.join(_CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", p) for p in parts)


def test_file(test_id: str) -> str:
    """The file a JS test id lives in: ``src/a.test.js > sum > adds`` -> ``src/a.test.js``."""
    return test_id.split(SEPARATOR, 1)[0]


def record(statuses: dict[str, str], test: str, status: str) -> None:
    old = statuses.get(test)
    if old is None or _RANK[status] > _RANK[old]:
        statuses[test] = status


def string(value: object, what: str) -> str:
    if not isinstance(value, str):
        raise ReportError(f"{what} is not a string")
    return value


def count(value: object, what: str) -> int | None:
    """A summary count, or None when the report leaves it out."""
    if value is None:
        return None
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise ReportError(f"{what} is not a count")
    return value
