"""JUnit XML from JavaScript runners: node's ``--test-reporter=junit``, jest-junit,
mocha-junit-reporter, tap's junit reporter.

A test id is the file (the testcase's ``file``, else its nearest suite's), the names of the
``testsuite`` elements around the testcase, and its ``name``. A ``failure`` child is FAILED, an
``error`` ERROR, a ``skipped`` (node writes its todo tests so too) SKIPPED; a suite named by its
file's path is that file, and jest-junit's "Test suite failed to run" case is a collection
error of its file, not a test, as is node's failed testcase named by its own file (a file
that crashed; passed, it is a file that ran no test). The XML is the suite's
own output, parsed with the DTD refused as pytest's is (``verifiers/log_parsers.py``), so no entity
is ever expanded; anything that does not parse is one ``ReportError`` line.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from dataclasses import dataclass

from trajforge.verifiers.log_parsers import ParsedLog, _NoDoctype
from trajforge.verifiers.reports.ids import ReportError, check_size, record, relative_file
from trajforge.verifiers.reports.ids import test_id as make_id

_CHILD_STATUS = {"failure": "FAILED", "error": "ERROR", "skipped": "SKIPPED"}
_RANK = ("PASSED", "SKIPPED", "ERROR", "FAILED")
_SUITE_FAILED = "Test suite failed to run"  # jest-junit's classname for a file that did not load
_SOURCE_SUFFIXES = (".js", ".jsx", ".mjs", ".cjs", ".ts", ".tsx", ".mts", ".cts")


def parse_junit(text: str | bytes) -> ParsedLog:
    check_size(text, "JUnit")
    parser = ET.XMLParser(target=_NoDoctype())
    try:
        parser.feed(text)
        root = parser.close()
    except (ET.ParseError, ValueError, RecursionError) as exc:
        raise ReportError(f"the JUnit report is not well-formed XML ({str(exc)[:120]})") from None
    if root.tag not in ("testsuites", "testsuite"):
        raise ReportError(f"the JUnit report's root is <{root.tag[:40]}>, not <testsuites>")
    found = _Found({}, {})
    try:
        _suite(root, [], "", found, top=root.tag == "testsuites")
    except RecursionError:
        raise ReportError("the JUnit report nests its suites too deep to read") from None
    return ParsedLog(found.statuses, tuple(found.broken))


@dataclass
class _Found:
    statuses: dict[str, str]
    broken: dict[str, None]


def _suite(element: ET.Element, path: list[str], file: str, found: _Found, top: bool) -> None:
    file = relative_file(element.get("file") or element.get("filepath") or "") or file
    name = element.get("name", "")
    if name.endswith(_SOURCE_SUFFIXES) and "/" in name:  # jest-junit names a suite by its file
        file, name = relative_file(name), ""
    here = path if top or not name or name == file else [*path, name]
    for child in element:
        if child.tag == "testsuite":
            _suite(child, here, file, found, top=False)
        elif child.tag == "testcase":
            _case(child, here, file, found)


def _case(case: ET.Element, path: list[str], file: str, found: _Found) -> None:
    name = case.get("name")
    if name is None:
        raise ReportError(f"a JUnit testcase under {' > '.join(path)[:80]!r} has no name")
    file = relative_file(case.get("file") or "") or file
    if case.get("classname") == _SUITE_FAILED:  # jest-junit's file that did not load
        found.broken[file or relative_file(name)] = None
        return
    if file and relative_file(name) == file:  # node's file itself: crashed, or ran no test
        if any(child.tag in _CHILD_STATUS and child.tag != "skipped" for child in case):
            found.broken[file] = None
        return
    status = "PASSED"
    for child in case:
        new = _CHILD_STATUS.get(child.tag)
        if new is not None and _RANK.index(new) > _RANK.index(status):
            status = new
    record(found.statuses, make_id(file, path, name), status)
