"""Test-log parsers: turn a test run's output into per-test statuses keyed by pytest node id.

Modelled on SWE-bench's log-parser registry, with node ids written exactly as SWE-bench writes
them (``path/to/test_x.py::Class::test_name[param]``). The JUnit XML parser is the primary one;
the ``pytest -rA`` short-summary parser is the fallback when no XML was written. Both expect
the output of ``python -m pytest -rA -p no:cacheprovider -o junit_family=xunit1 --junitxml=...``.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from collections.abc import Callable
from dataclasses import dataclass

# When one test is reported more than once (a call failure plus a teardown error, a passing
# unittest with failed subtests), the worst status wins. FAILED outranks ERROR, as SWE-bench's
# last-line-wins parse of the same -rA summary (ERROR lines come before FAILED ones) would have it.
_RANK = {"PASSED": 0, "XFAIL": 1, "SKIPPED": 2, "ERROR": 3, "FAILED": 4}


@dataclass(frozen=True)
class ParsedLog:
    statuses: dict[str, str]  # node id -> one of trajforge.schemas.test_run.STATUSES
    collection_errors: tuple[str, ...]  # modules/paths that failed to collect or import


def _record(statuses: dict[str, str], node_id: str, status: str) -> None:
    old = statuses.get(node_id)
    if old is None or _RANK[status] > _RANK[old]:
        statuses[node_id] = status


# --- JUnit XML ---------------------------------------------------------------------------------


class _NoDoctype(ET.TreeBuilder):
    """Refuse any DTD: pytest never writes one, and entity declarations are how XML bombs and
    external-entity reads get in."""

    def doctype(self, name: str, pubid: str, system: str) -> None:
        raise ValueError("DTD in JUnit XML")


def _dotted(path: str) -> str:
    """A node id's file path as pytest's junitxml turns it into the start of `classname`."""
    return re.sub(r"\.py$", "", path.replace("/", "."))


def _split_classname(classname: str, known: list[tuple[str, str]]) -> list[str]:
    """`classname` as node id parts: the module's file path, then the (nested) classes.

    `classname` is pytest's node id with `/` and `::` turned into dots, so the module is the
    longest known file whose dotted form prefixes it. A testcase's own `file` is not enough: for a
    test inherited from a base class, `file` is where the base class lives. Without a match
    (xunit2, or every test of a module inherited) trailing CapWords parts are taken as classes.
    """
    for dotted, path in known:
        if classname == dotted or classname.startswith(dotted + "."):
            return [path, *filter(None, classname[len(dotted) + 1 :].split("."))]
    parts = classname.split(".")
    n = len(parts)
    while n > 1 and parts[n - 1][:1].isupper():
        n -= 1
    return ["/".join(parts[:n]) + ".py", *parts[n:]]


def _case_status(case: ET.Element) -> str:
    status = "PASSED"
    for child in case:
        if child.tag == "failure":
            new = "FAILED"
        elif child.tag == "error":
            new = "ERROR"
        elif child.tag == "skipped":
            new = "XFAIL" if child.get("type") == "pytest.xfail" else "SKIPPED"
        else:
            continue
        if _RANK[new] > _RANK[status]:
            status = new
    return status


def parse_junit_xml(xml: bytes) -> ParsedLog:
    """Statuses from pytest's JUnit XML; anything unparsable gives an empty result."""
    parser = ET.XMLParser(target=_NoDoctype())
    try:
        parser.feed(xml)
        root = parser.close()
    except (ET.ParseError, ValueError):
        return ParsedLog({}, ())
    cases = list(root.iter("testcase"))
    # Files of test reports only: a collection report's file may be a directory.
    files = {case.get("file") or "" for case in cases if case.get("classname")} - {""}
    known = sorted(((_dotted(f), f) for f in files), key=lambda k: len(k[0]), reverse=True)
    statuses: dict[str, str] = {}
    collection_errors: dict[str, None] = {}
    for case in cases:
        classname, name = case.get("classname", ""), case.get("name", "")
        if classname:
            node_id = "::".join([*_split_classname(classname, known), name])
        else:  # a module or directory: only collection reports have no classname
            node_id = case.get("file") or name.replace(".", "/") + ".py"
        if any(e.get("message") == "collection failure" for e in case.iter("error")):
            collection_errors[node_id] = None
        elif classname:  # a classname-less "collection skipped" (module-level skip) is no test
            _record(statuses, node_id, _case_status(case))
    return ParsedLog(statuses, tuple(collection_errors))


# --- pytest -rA short test summary -----------------------------------------------------------

_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
_SUMMARY_HEADER = "short test summary info"
_INTERRUPTED = re.compile(r"Interrupted: \d+ errors? during collection")
_LINE = re.compile(r"(PASSED|FAILED|ERROR|XFAIL|XPASS|XPASS\(strict\)) (.+)")
# pytest 9 subtests: `SUBFAILED[msg] (k=v) <node id> - ...` fails the test that holds them.
_SUBFAILED = re.compile(r"SUBFAILED(?:\[.*?\])? ?(?:\(.*?\))? (\S+::.+)")
_WORDS = {"XPASS": "PASSED", "XPASS(strict)": "FAILED"}


def _node_id(rest: str) -> str:
    """The node id out of `<id>` or `<id> - <message>`.

    Ids may hold spaces and ` - ` inside their `[params]`, so a parametrized id runs to the first
    `]` that ends the line or comes before ` - `.
    """
    head = rest.split(" - ", 1)[0]
    if "[" in head and not head.endswith("]"):
        match = re.match(r".*?\](?= - |$)", rest)
        if match:
            return match.group(0)
    return head


def parse_pytest_log(text: str) -> ParsedLog:
    """Statuses from the `pytest -rA` short test summary (the fallback when there is no XML).

    Only lines after the last summary header count, so a test's own output cannot fake a status.
    `SKIPPED [n] file:line: reason` lines carry no node id and are left out. Ids are relative to
    pytest's working directory, which is the rootdir when pytest runs from the repository root.
    """
    text = _ANSI.sub("", text)
    lines = text.splitlines()
    headers = [i for i, line in enumerate(lines) if _SUMMARY_HEADER in line and line[:1] == "="]
    if headers:
        lines = lines[headers[-1] + 1 :]
    # When pytest stops after collection errors nothing ran, so every ERROR is a collection error
    # (a class that fails to collect is `ERROR file.py::Class`).
    interrupted = _INTERRUPTED.search(text) is not None
    statuses: dict[str, str] = {}
    collection_errors: dict[str, None] = {}
    for line in lines:
        line = line.rstrip()
        if sub := _SUBFAILED.match(line):
            _record(statuses, _node_id(sub.group(1)), "FAILED")
            continue
        match = _LINE.match(line)
        if not match:
            continue
        word, node_id = match.group(1), _node_id(match.group(2))
        if word == "ERROR" and (interrupted or "::" not in node_id):
            collection_errors[node_id] = None
        elif "::" in node_id:
            _record(statuses, node_id, _WORDS.get(word, word))
    return ParsedLog(statuses, tuple(collection_errors))


def _parse_log_bytes(log: bytes) -> ParsedLog:
    return parse_pytest_log(log.decode("utf-8", errors="replace"))


# --- pytest's per-test lines: verbose, xdist, pytest-sugar ------------------------------------

_VERBOSE = re.compile(
    r"^(\S+\.py::\S.*?) (PASSED|FAILED|ERROR|SKIPPED|XFAIL|XPASS)(?: \(.*?\))?\s*(?:\[\s*\d+%\])?$"
)
_XDIST = re.compile(
    r"^\[gw\d+\] \[\s*\d+%\] (PASSED|FAILED|ERROR|SKIPPED|XFAIL|XPASS) (\S+\.py::\S.*?)\s*$"
)
_SUGAR = re.compile(r"^\s*(\S+\.py::\S.*?) (\u2713|\u2a2f|s|x|X)\s+\d+%")
_SUGAR_WORDS = {"\u2713": "PASSED", "\u2a2f": "FAILED", "s": "SKIPPED", "x": "XFAIL", "X": "PASSED"}
_VERBOSE_WORDS = {"XPASS": "PASSED"}


def _per_test_lines(
    text: str, pattern: re.Pattern[str], order: tuple[int, int], words: dict[str, str]
) -> ParsedLog:
    """Statuses from lines ``pattern`` matches; ``order`` names the (node id, word) groups."""
    statuses: dict[str, str] = {}
    for line in _ANSI.sub("", text).splitlines():
        match = pattern.match(line.rstrip())
        if match:
            node_id, word = match.group(order[0]), match.group(order[1])
            _record(statuses, node_id, words.get(word, word))
    return ParsedLog(statuses, ())


def parse_pytest_verbose(log: bytes) -> ParsedLog:
    """`pytest -v`: `path::test PASSED [ 90%]`, one line per test."""
    return _per_test_lines(log.decode("utf-8", "replace"), _VERBOSE, (1, 2), _VERBOSE_WORDS)


def parse_pytest_xdist(log: bytes) -> ParsedLog:
    """`pytest -n N -v`: `[gw0] [ 50%] PASSED path::test`, in the order workers finish."""
    return _per_test_lines(log.decode("utf-8", "replace"), _XDIST, (2, 1), _VERBOSE_WORDS)


def parse_pytest_sugar(log: bytes) -> ParsedLog:
    """pytest-sugar with `-v`: `path::test \u2713  50% \u2588\u2588...` (\u2a2f: failed)."""
    return _per_test_lines(log.decode("utf-8", "replace"), _SUGAR, (1, 2), _SUGAR_WORDS)


# --- SWE-bench's evaluation logs --------------------------------------------------------------

START_TEST_OUTPUT = ">>>>> Start Test Output"  # swebench.harness.constants
END_TEST_OUTPUT = ">>>>> End Test Output"


def test_output(text: str) -> str:
    """The part of a SWE-bench evaluation log between its start and end markers (the whole
    text when it has none): what the harness's own parsers read."""
    start, end = text.find(START_TEST_OUTPUT), text.rfind(END_TEST_OUTPUT)
    if start == -1 or end < start:
        return text
    return text[start + len(START_TEST_OUTPUT) : end]


def parse_swebench_log(log: bytes) -> ParsedLog:
    """A SWE-bench `test_output.txt`: the test output between the markers, parsed as what it is."""
    inner = test_output(log.decode("utf-8", "replace")).encode()
    return LOG_PARSERS[detect_format(inner)](inner)


LOG_PARSERS: dict[str, Callable[[bytes], ParsedLog]] = {
    "junit_xml": parse_junit_xml,
    "pytest_log": _parse_log_bytes,
    "pytest_verbose": parse_pytest_verbose,
    "pytest_xdist": parse_pytest_xdist,
    "pytest_sugar": parse_pytest_sugar,
    "swebench": parse_swebench_log,
}


def detect_format(log: bytes) -> str:
    """Which parser reads ``log``, from what it is: XML, SWE-bench markers, per-test lines
    (xdist, sugar, verbose), else the `-rA` summary."""
    head = log.lstrip()[:200]
    if head.startswith(b"<?xml") or head.startswith((b"<testsuite", b"<testsuites")):
        return "junit_xml"
    text = _ANSI.sub("", log.decode("utf-8", "replace"))
    if START_TEST_OUTPUT in text:
        return "swebench"
    # Per-test lines first: `-v` prints a short summary too, but only of what failed.
    lines = [line.rstrip() for line in text.splitlines()]
    for name, pattern in (
        ("pytest_xdist", _XDIST), ("pytest_sugar", _SUGAR), ("pytest_verbose", _VERBOSE)
    ):  # fmt: skip
        if any(pattern.match(line) for line in lines):
            return name
    return "pytest_log"


def get_parser(name: str) -> Callable[[bytes], ParsedLog]:
    """The parser registered as `name`; an unknown name is a KeyError that lists the known ones."""
    try:
        return LOG_PARSERS[name]
    except KeyError:
        known = ", ".join(sorted(LOG_PARSERS))
        raise KeyError(f"unknown log parser {name!r}; known: {known}") from None
