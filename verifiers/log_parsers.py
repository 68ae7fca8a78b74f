"""Test-log parsers: turn a test run's output into per-test statuses keyed by pytest node id.

Modelled on SWE-bench's log-parser registry, with node ids written exactly as SWE-bench writes
them (``path/to/test_x.py::Class::test_name[param]``). The JUnit XML parser is the primary one;
the ``pytest -rA`` short-summary parser is the fallback when no XML was written. Both expect
the output of ``python -m pytest -rA -p no:cacheprovider -o junit_family=xunit1 --junitxml=...``.

Every parser runs in time linear in the log: lines are read with string operations and regexes
that cannot backtrack over a line, so a hostile log (64 KB lines, megabytes of noise) costs what
its size costs. ``read_log`` is what grading reads: the runner's own summary decides over
status lines printed anywhere else, and a log that contradicts itself says why (``problem``).
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from collections.abc import Callable, Collection, Iterable
from dataclasses import dataclass, field
from typing import Any

# When one test is reported more than once (a call failure plus a teardown error, a passing
# unittest with failed subtests), the worst status wins. FAILED outranks ERROR, as SWE-bench's
# last-line-wins parse of the same -rA summary (ERROR lines come before FAILED ones) would have it.
_RANK = {"PASSED": 0, "XFAIL": 1, "SKIPPED": 2, "ERROR": 3, "FAILED": 4}


@dataclass(frozen=True)
class ParsedLog:
    statuses: dict[str, str]  # node id -> one of trajforge.schemas.test_run.STATUSES
    collection_errors: tuple[str, ...]  # modules/paths that failed to collect or import
    # Ids the log reports as XPASS (an xfail-marked test that passed): PASSED in ``statuses``,
    # as validation reads them; grading's rules see them apart (JUnit XML cannot tell them).
    xpassed: frozenset[str] = field(default=frozenset())
    # Why this log cannot decide a verdict (two summaries, a status line that contradicts the
    # runner's summary...): "" when none. Grading refuses such a log; statuses are then empty.
    problem: str = ""


def _record(statuses: dict[str, str], node_id: str, status: str) -> None:
    old = statuses.get(node_id)
    if old is None or _RANK[status] > _RANK[old]:
        statuses[node_id] = status


class _Tally:
    """Statuses of one source of lines, worst wins, XPASS kept apart."""

    def __init__(self) -> None:
        self.statuses: dict[str, str] = {}
        self.xpass: set[str] = set()
        self.words: dict[str, set[str]] = {}  # every word each id was given, line by line

    def add(self, node_id: str, word: str) -> None:
        if word == "XPASS":
            self.xpass.add(node_id)
        self.words.setdefault(node_id, set()).add(word)
        _record(self.statuses, node_id, _WORDS.get(word, word))

    def xpassed(self) -> frozenset[str]:
        return frozenset(t for t in self.xpass if self.statuses.get(t) == "PASSED")


# --- JUnit XML ---------------------------------------------------------------------------------


class _NoDoctype(ET.TreeBuilder):
    """Refuse any DTD: pytest never writes one, and entity declarations are how XML bombs and
    external-entity reads get in."""

    def doctype(self, name: str, pubid: str, system: str) -> None:
        raise ValueError("DTD in JUnit XML")


def _dotted(path: str) -> str:
    """A node id's file path as pytest's junitxml turns it into the start of `classname`."""
    return path.replace("/", ".").removesuffix(".py")


class _Modules:
    """The known test files by their dotted form, as a trie of dotted parts, so finding the
    module that prefixes a `classname` costs the classname's length, not the number of files."""

    def __init__(self, files: Iterable[str]) -> None:
        self.root: dict[str, Any] = {}  # part -> node; "." -> the file path ending here
        for path in sorted(files):
            node = self.root
            for part in _dotted(path).split("."):
                node = node.setdefault(part, {})
            node["."] = path  # "." is never a part of a dotted name: it marks a file's end

    def split(self, classname: str) -> list[str]:
        """`classname` as node id parts: the module's file path, then the (nested) classes.

        `classname` is pytest's node id with `/` and `::` turned into dots, so the module is the
        longest known file whose dotted form prefixes it. A testcase's own `file` is not enough:
        for a test inherited from a base class, `file` is where the base class lives. Without a
        match (xunit2, or every test of a module inherited) trailing CapWords parts are classes.
        """
        parts = classname.split(".")
        node: dict[str, Any] | None = self.root
        found, depth = None, 0
        for i, part in enumerate(parts):
            node = node.get(part) if node is not None else None
            if node is None:
                break
            if "." in node:
                found, depth = node["."], i + 1
        if found is not None:
            return [found, *filter(None, parts[depth:])]
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
    """Statuses from pytest's JUnit XML; anything unparsable gives an empty result. (pytest
    writes an XPASS as a plain pass here: the XML cannot tell the two apart.)"""
    parser = ET.XMLParser(target=_NoDoctype())
    try:
        parser.feed(xml)
        root = parser.close()
    except (ET.ParseError, ValueError, RecursionError):
        return ParsedLog({}, ())
    cases = list(root.iter("testcase"))
    # Files of test reports only: a collection report's file may be a directory.
    files = {case.get("file") or "" for case in cases if case.get("classname")} - {""}
    modules = _Modules(files)
    statuses: dict[str, str] = {}
    collection_errors: dict[str, None] = {}
    for case in cases:
        classname, name = case.get("classname", ""), case.get("name", "")
        if classname:
            node_id = "::".join([*modules.split(classname), name])
        else:  # a module or directory: only collection reports have no classname
            node_id = case.get("file") or name.replace(".", "/") + ".py"
        if any(e.get("message") == "collection failure" for e in case.iter("error")):
            collection_errors[node_id] = None
        elif classname:  # a classname-less "collection skipped" (module-level skip) is no test
            _record(statuses, node_id, _case_status(case))
    return ParsedLog(statuses, tuple(collection_errors))


# --- pytest -rA short test summary -----------------------------------------------------------

# Linear: the class excludes ESC, so no two attempts scan the same characters.
_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
_SUMMARY_HEADER = "short test summary info"
_INTERRUPTED = re.compile(r"Interrupted: \d+ errors? during collection")
_SUMMARY_WORDS = ("PASSED", "FAILED", "ERROR", "XFAIL", "XPASS", "XPASS(strict)")
_WORDS = {"XPASS": "PASSED", "XPASS(strict)": "FAILED"}
_PASS_CLAIMS = {"PASSED", "XPASS", "XFAIL"}
_SPACE = re.compile(r"\s")
_STATS_COUNT = re.compile(r"(?<!\d)(\d+) (passed|xpassed)\b")
_STATS_TIME = re.compile(r"in \d+(?:\.\d+)?(?:s| seconds)(?: \([\d:.]+\))?")


def _node_id(rest: str) -> str:
    """The node id out of `<id>` or `<id> - <message>`.

    Ids may hold spaces and ` - ` inside their `[params]`, so a parametrized id runs to the first
    `]` that ends the line or comes before ` - `.
    """
    dash = rest.find(" - ")
    head = rest if dash == -1 else rest[:dash]
    if "[" in head and not head.endswith("]"):
        end = rest.find("]")
        while end != -1:
            if end + 1 == len(rest) or rest.startswith(" - ", end + 1):
                return rest[: end + 1]
            end = rest.find("]", end + 1)
    return head


def _summary_line(line: str) -> tuple[str, str] | None:
    """(word, the text after it) of a `WORD <id>...` summary line; None for any other line."""
    word, space, rest = line.partition(" ")
    if space and rest and word in _SUMMARY_WORDS:
        return word, rest
    return None


def _token_end(s: str, at: int) -> int:
    """Where the run of non-spaces at ``at`` ends."""
    space = _SPACE.search(s, at)
    return len(s) if space is None else space.start()


def _has_id_start(s: str, at: int = 0) -> bool:
    """Whether ``s[at:]`` opens as a test id: a run of non-spaces holding `<x>.py::<y>`."""
    end = _token_end(s, at)
    dot = s.find(".py::", at + 1, end)
    return dot != -1 and dot + 5 < end


def _subfailed_id(line: str) -> str | None:
    """The node id of pytest 9's `SUBFAILED[msg] (k=v) <id> - <message>` (both parts optional),
    or None: the first token holding `::` after a prefix that is `[...]`, `(...)`, both, or none.
    """
    s = line[len("SUBFAILED") :]
    opens = [i + 1 for i in (s.find("]("),) if i != -1] + [
        i + 2 for i in (s.find("] ("),) if i != -1
    ]
    paren_open = min(opens, default=-1)  # the first `(` that can follow a `[...]`
    space = s.find(" ")
    while space != -1:
        if _has_colons_token(s, space + 1) and _prefix_ok(s, space, paren_open):
            return _node_id(s[space + 1 :])
        space = s.find(" ", space + 1)
    return None


def _has_colons_token(s: str, at: int) -> bool:
    """Whether ``s[at:]`` opens with a non-space run holding `::` with something after it."""
    end = _token_end(s, at)
    colons = s.find("::", at + 1, end)
    return colons != -1 and colons + 2 < len(s)


def _prefix_ok(s: str, end: int, paren_open: int) -> bool:
    """``s[:end]`` is `(?:\\[.*\\])? ?(?:\\(.*\\))?`: empty, a space, `[..]`, `(..)`, or both
    (checked in constant time: no slicing)."""
    if end == 0 or (end == 1 and s[0] == " "):
        return True
    if s[0] == "[":
        if s[end - 1] == "]" or (s[end - 1] == " " and s[end - 2] == "]"):
            return end >= 2 + (s[end - 1] == " ")
        return s[end - 1] == ")" and -1 < paren_open < end - 1
    first = 1 if s[0] == " " else 0
    return end - first >= 2 and s[first] == "(" and s[end - 1] == ")"


@dataclass
class _Summary:
    tally: _Tally
    main: dict[str, set[str]]  # the words of each id's WORD lines (SUBFAILED lines left out)
    collection_errors: dict[str, None]
    complete: bool  # it lists passes, skips or xfails too (-rA, -ra, -rp): not only failures


def _read_summary(lines: Iterable[str], interrupted: bool) -> _Summary:
    tally, main = _Tally(), _Tally()
    collection_errors: dict[str, None] = {}
    complete = False
    for line in lines:
        line = line.rstrip()
        if line.startswith("SUBFAILED"):
            sub = _subfailed_id(line)
            if sub is not None:
                tally.add(sub, "FAILED")
            continue
        if line.startswith("SKIPPED ["):
            complete = True
            continue
        parsed = _summary_line(line)
        if parsed is None:
            continue
        word, node_id = parsed[0], _node_id(parsed[1])
        if word in ("PASSED", "XFAIL", "XPASS"):
            complete = True
        if word == "ERROR" and (interrupted or "::" not in node_id):
            collection_errors[node_id] = None
        elif "::" in node_id:
            tally.add(node_id, word)
            main.add(node_id, word)
    return _Summary(tally, main.words, collection_errors, complete)


def _headers(lines: list[str]) -> list[int]:
    return [i for i, line in enumerate(lines) if line[:1] == "=" and _SUMMARY_HEADER in line]


def parse_pytest_log(text: str) -> ParsedLog:
    """Statuses from the `pytest -rA` short test summary (the fallback when there is no XML).

    Only lines after the last summary header count, so a test's own output cannot fake a status.
    `SKIPPED [n] file:line: reason` lines carry no node id and are left out. Ids are relative to
    pytest's working directory, which is the rootdir when pytest runs from the repository root.
    A second header is named in ``problem`` (grading refuses such a log; validation reads the
    statuses as before).
    """
    text = _ANSI.sub("", text)
    lines = text.splitlines()
    headers = _headers(lines)
    if headers:
        lines = lines[headers[-1] + 1 :]
    # When pytest stops after collection errors nothing ran, so every ERROR is a collection error
    # (a class that fails to collect is `ERROR file.py::Class`).
    summary = _read_summary(lines, _INTERRUPTED.search(text) is not None)
    problem = _two_headers(len(headers)) if len(headers) > 1 else ""
    tally = summary.tally
    return ParsedLog(tally.statuses, tuple(summary.collection_errors), tally.xpassed(), problem)


def _two_headers(n: int) -> str:
    return f"{n} 'short test summary info' headers (one pytest run prints one)"


def _parse_log_bytes(log: bytes) -> ParsedLog:
    return parse_pytest_log(log.decode("utf-8", errors="replace"))


# --- pytest's per-test lines: verbose, xdist, pytest-sugar ------------------------------------

_PER_TEST_WORDS = ("PASSED", "FAILED", "ERROR", "SKIPPED", "XFAIL", "XPASS")
_PROGRESS = re.compile(r"\[\s*\d+%\]")
_XDIST_HEAD = re.compile(r"\[gw\d+\] \[\s*\d+%\] (PASSED|FAILED|ERROR|SKIPPED|XFAIL|XPASS) ")
_SUGAR_MARKS = {"\u2713": "PASSED", "\u2a2f": "FAILED", "s": "SKIPPED", "x": "XFAIL", "X": "XPASS"}
# Linear: each mark's run of spaces and digits is its own, so no two attempts share one.
_SUGAR_MARK = re.compile(r" ([\u2713\u2a2fsxX])\s+\d+%")
Matcher = Callable[[str], tuple[str, str] | None]


def _verbose_line(line: str) -> tuple[str, str] | None:
    """`path::test WORD`, optionally ` (reason)` and ` [ NN%]` after it: (id, word).

    The id is the shortest one that leaves a well-formed tail, as a lazy regex would read it,
    found in one pass over the line (each ` WORD` is checked in constant time)."""
    s = line.rstrip()
    if not _has_id_start(s):
        return None
    ends = [len(s)]
    bracket = s.rfind("[")
    if s.endswith("%]") and _PROGRESS.fullmatch(s, bracket):
        ends.append(bracket)
    last = [_last_non_space(s, end) for end in ends]
    best: tuple[int, str] | None = None
    for word in _PER_TEST_WORDS:
        at = s.find(" " + word)
        while at != -1 and (best is None or at < best[0]):
            tail = at + 1 + len(word)
            if any(_tail_ok(s, tail, end, stop) for end, stop in zip(ends, last, strict=True)):
                best = (at, word)
                break
            at = s.find(" " + word, at + 1)
    return None if best is None else (s[: best[0]], best[1])


def _last_non_space(s: str, end: int) -> int:
    return len(s[:end].rstrip()) - 1


def _tail_ok(s: str, tail: int, end: int, last: int) -> bool:
    """``s[tail:end]`` is blank, or ` (...)` then blanks."""
    if tail > end:
        return False
    if last < tail:
        return True
    return s.startswith(" (", tail) and s[last] == ")" and last > tail + 1


def _xdist_line(line: str) -> tuple[str, str] | None:
    """`[gw0] [ 50%] WORD path::test`: (id, word)."""
    s = line.rstrip()
    head = _XDIST_HEAD.match(s)
    if head is None or not _has_id_start(s, head.end()):
        return None
    return s[head.end() :], head.group(1)


def _sugar_line(line: str) -> tuple[str, str] | None:
    """pytest-sugar's ` path::test MARK   NN% ...`: (id, word)."""
    s = line.rstrip()
    start = len(s) - len(s.lstrip())
    if not _has_id_start(s, start):
        return None
    mark = _SUGAR_MARK.search(s, start)
    return None if mark is None else (s[start : mark.start()], _SUGAR_MARKS[mark.group(1)])


def _per_test_tally(lines: Iterable[str], matcher: Matcher) -> _Tally:
    tally = _Tally()
    for line in lines:
        found = matcher(line)
        if found is not None:
            tally.add(*found)
    return tally


def _per_test_lines(text: str, matcher: Matcher) -> ParsedLog:
    """Statuses from the lines ``matcher`` reads."""
    tally = _per_test_tally(_ANSI.sub("", text).splitlines(), matcher)
    return ParsedLog(tally.statuses, (), tally.xpassed())


def parse_pytest_verbose(log: bytes) -> ParsedLog:
    """`pytest -v`: `path::test PASSED [ 90%]`, one line per test."""
    return _per_test_lines(log.decode("utf-8", "replace"), _verbose_line)


def parse_pytest_xdist(log: bytes) -> ParsedLog:
    """`pytest -n N -v`: `[gw0] [ 50%] PASSED path::test`, in the order workers finish."""
    return _per_test_lines(log.decode("utf-8", "replace"), _xdist_line)


def parse_pytest_sugar(log: bytes) -> ParsedLog:
    """pytest-sugar with `-v`: `path::test \u2713  50% \u2588\u2588...` (\u2a2f: failed)."""
    return _per_test_lines(log.decode("utf-8", "replace"), _sugar_line)


PER_TEST: dict[str, Matcher] = {
    "pytest_xdist": _xdist_line,
    "pytest_sugar": _sugar_line,
    "pytest_verbose": _verbose_line,
}


# --- SWE-bench's evaluation logs --------------------------------------------------------------

START_TEST_OUTPUT = ">>>>> Start Test Output"  # swebench.harness.constants
END_TEST_OUTPUT = ">>>>> End Test Output"
TEST_EXIT_CODE = ">>>>> Test Exit Code"  # SWE-bench 5: the test command's status, after the end
_EXIT_CODE = re.compile(re.escape(TEST_EXIT_CODE) + r":\s*(-?\d{1,9})(?!\d)")


def test_output(text: str) -> str:
    """The part of a SWE-bench evaluation log between its start and end markers (the whole
    text when it has none): what the harness's own parsers read."""
    start, end = text.find(START_TEST_OUTPUT), text.rfind(END_TEST_OUTPUT)
    if start == -1 or end < start:
        return text
    return text[start + len(START_TEST_OUTPUT) : end]


def parse_swebench_log(log: bytes) -> ParsedLog:
    """A SWE-bench `test_output.txt`: the test output between the markers, parsed as what it is
    (never as a SWE-bench log again: markers inside it cannot recurse)."""
    return _read_swebench(_text(log), ())[1]


@dataclass(frozen=True)
class SwebenchLog:
    """What the harness's markers say around the test output."""

    inner: str  # the test output between the markers
    exit_code: int | None  # the test command's exit status, where the harness recorded it
    problem: str  # the markers are not the harness's (repeated, out of order): "" when fine
    missing: str  # a marker the harness always writes is absent: "" when both are there


def swebench_parts(text: str) -> SwebenchLog:
    """The start and end markers, each used once: a second one, or an end before the start,
    is a problem; the exit code is read after the end marker only."""
    starts, ends = text.count(START_TEST_OUTPUT), text.count(END_TEST_OUTPUT)
    if starts > 1 or ends > 1:
        many = START_TEST_OUTPUT if starts > 1 else END_TEST_OUTPUT
        return SwebenchLog(
            "", None, f"{max(starts, ends)} {many!r} markers (the harness writes one)", ""
        )
    if not starts or not ends:
        return SwebenchLog("", None, "", START_TEST_OUTPUT if not starts else END_TEST_OUTPUT)
    start, end = text.find(START_TEST_OUTPUT), text.find(END_TEST_OUTPUT)
    if end < start:
        return SwebenchLog("", None, "the end-of-test-output marker comes before the start", "")
    after = text[end + len(END_TEST_OUTPUT) :]
    # SWE-bench 5 echoes the code under `set -x`: the traced command and its output say it twice.
    codes = {int(code) for code in _EXIT_CODE.findall(after)}
    if len(codes) > 1:
        return SwebenchLog("", None, f"{TEST_EXIT_CODE!r} lines that disagree", "")
    code = codes.pop() if codes else None
    return SwebenchLog(text[start + len(START_TEST_OUTPUT) : end], code, "", "")


def _read_swebench(text: str, graded: Collection[str]) -> tuple[SwebenchLog, ParsedLog]:
    parts = swebench_parts(text)
    if parts.problem:
        return parts, ParsedLog({}, (), problem=parts.problem)
    inner = parts.inner if not parts.missing else test_output(text)
    name = _detect_text(inner, markers=False)
    if name == "junit_xml":  # a log is never XML between the markers; read it as text
        name = "pytest_log"
    return parts, _read_text(inner, name, graded)


LOG_PARSERS: dict[str, Callable[[bytes], ParsedLog]] = {
    "junit_xml": parse_junit_xml,
    "pytest_log": _parse_log_bytes,
    "pytest_verbose": parse_pytest_verbose,
    "pytest_xdist": parse_pytest_xdist,
    "pytest_sugar": parse_pytest_sugar,
    "swebench": parse_swebench_log,
}


# --- which format, and what grading reads -----------------------------------------------------


def _text(log: bytes) -> str:
    return _ANSI.sub("", log.decode("utf-8", "replace"))


def _is_xml(log: bytes) -> bool:
    head = log.lstrip()[:200]
    return head.startswith((b"<?xml", b"<testsuite", b"<testsuites"))


def detect_format(log: bytes) -> str:
    """Which parser reads ``log``, from what it is: XML, SWE-bench markers, a `-rA` summary that
    lists passes too (it alone decides), per-test lines (xdist, sugar, verbose), else the
    `-rA` summary."""
    if _is_xml(log):
        return "junit_xml"
    return _detect_text(_text(log))


def _detect_text(text: str, markers: bool = True) -> str:
    if markers and START_TEST_OUTPUT in text:
        return "swebench"
    lines = text.splitlines()
    headers = _headers(lines)
    if len(headers) == 1 and _read_summary(_region(lines, headers[0]), False).complete:
        return "pytest_log"
    # Per-test lines next: `-v` prints a short summary too, but only of what failed.
    for name, matcher in PER_TEST.items():
        if any(matcher(line) is not None for line in lines):
            return name
    return "pytest_log"


def _region(lines: list[str], header: int) -> list[str]:
    """The summary's lines: after its header, up to pytest's closing `=== ... ===` line."""
    return lines[header + 1 : _region_end(lines, header)]


def _region_end(lines: list[str], header: int) -> int:
    return next((i for i in range(header + 1, len(lines)) if lines[i][:1] == "="), len(lines))


def _passes_counted(line: str) -> int | None:
    """pytest's closing line `=== 1 failed, 3 passed, 1 xpassed in 0.1s ===`: passed + xpassed
    (None for any other line)."""
    if len(line) > 2000 or not (line.startswith("=") and line.endswith("=")):
        return None
    body = line.strip("= ")
    cut = body.rfind(" in ")
    if cut == -1 or not _STATS_TIME.fullmatch(body, cut + 1):
        return None
    return sum(int(n) for n, _ in _STATS_COUNT.findall(body, 0, cut))


def read_log(
    log: bytes, log_format: str = "auto", graded: Collection[str] = ()
) -> tuple[str, ParsedLog, SwebenchLog | None]:
    """The log as grading reads it: (format, statuses, SWE-bench's markers when it is one).

    The runner's own summary decides. When the log has a `-rA` summary that lists passes (or
    skips, or xfails), it is the only source; per-test lines (verbose, xdist, sugar) fill in only
    what a failures-only summary leaves out, and only when they cover every test that summary
    names (as pytest's own `-v` lines do). A log is refused (``problem``) when it has two
    summaries, two closing lines after them, or SWE-bench markers used more than once; when a
    status line outside the summary claims a pass for a graded test (``graded``; every test
    when empty) that the summary does not give it; or when more tests pass than pytest's own
    closing line counts.
    """
    if log_format == "junit_xml" or (log_format == "auto" and _is_xml(log)):
        return "junit_xml", parse_junit_xml(log), None
    text = _text(log)
    name = _detect_text(text) if log_format == "auto" else log_format
    if name == "swebench":
        parts, parsed = _read_swebench(text, graded)
        return name, parsed, parts
    return name, _read_text(text, name, graded), None


def _short(node_id: str) -> str:
    return node_id if len(node_id) <= 200 else node_id[:200] + "..."


def _refused(problem: str) -> ParsedLog:
    return ParsedLog({}, (), problem=problem)


def _read_text(text: str, name: str, graded: Collection[str]) -> ParsedLog:
    lines = text.splitlines()
    headers = _headers(lines)
    if len(headers) > 1:
        return _refused(_two_headers(len(headers)))
    wanted = set(graded)
    per_test = {fmt: _per_test_tally(lines, matcher) for fmt, matcher in PER_TEST.items()}
    if not headers:
        if name not in PER_TEST:  # no summary and no per-test lines: nothing the runner vouched
            return ParsedLog({}, ())
        tally = per_test[name]
        counted = [c for c in map(_passes_counted, lines) if c is not None]
        return _counted(tally.statuses, tally.xpassed(), (), min(counted, default=None))
    header = headers[0]
    end = _region_end(lines, header)
    after = lines[end + 1 :]
    if any(_passes_counted(line) is not None for line in after):
        return _refused("a second pytest closing line after the summary's")
    summary = _read_summary(lines[header + 1 : end], _INTERRUPTED.search(text) is not None)
    said = summary.tally.statuses
    outside = _per_test_tally((*lines[:header], *after), _outside_summary_line)
    for tally in (*per_test.values(), outside):
        for node_id, words in tally.words.items():
            if wanted and node_id not in wanted:
                continue
            for claim in words & _PASS_CLAIMS:
                if node_id in summary.main:  # every pass a line claims, the summary must say
                    named = summary.main[node_id]
                    # a failures-only summary names a test whose call passed only by the
                    # ERROR of its teardown
                    agrees = claim in named or (not summary.complete and named == {"ERROR"})
                else:  # named by SUBFAILED lines only (its own line passed), or not at all
                    agrees = node_id in said or not summary.complete
                if not agrees:
                    where = said.get(node_id, "absent")
                    why = f"{_short(node_id)} is {claim} on a line outside the summary"
                    return _refused(f"{why} but {where} in it")
    statuses = dict(said)
    xpass = set(summary.tally.xpassed())
    fill = per_test.get(name)
    if not summary.complete and fill is not None and set(said) <= set(fill.statuses):
        for node_id, status in fill.statuses.items():
            if node_id not in statuses:
                statuses[node_id] = status
                if node_id in fill.xpassed():
                    xpass.add(node_id)
    closing = _passes_counted(lines[end]) if end < len(lines) else None
    return _counted(statuses, frozenset(xpass), tuple(summary.collection_errors), closing)


def _outside_summary_line(line: str) -> tuple[str, str] | None:
    """A `WORD <id>` line where no summary is: what code under test prints to fake one."""
    parsed = _summary_line(line.rstrip())
    if parsed is None:
        return None
    node_id = _node_id(parsed[1])
    return (node_id, parsed[0]) if "::" in node_id else None


def _counted(
    statuses: dict[str, str],
    xpassed: frozenset[str],
    collection_errors: tuple[str, ...],
    closing: int | None,
) -> ParsedLog:
    """The statuses, unless more of them passed than pytest's closing line counts."""
    passed = sum(1 for status in statuses.values() if status == "PASSED")
    if closing is not None and passed > closing:
        why = f"{passed} tests PASSED in the log but pytest's closing line counts {closing}"
        return _refused(why)
    return ParsedLog(statuses, collection_errors, xpassed)


def get_parser(name: str) -> Callable[[bytes], ParsedLog]:
    """The parser registered as `name`; an unknown name is a KeyError that lists the known ones."""
    try:
        return LOG_PARSERS[name]
    except KeyError:
        known = ", ".join(sorted(LOG_PARSERS))
        raise KeyError(f"unknown log parser {name!r}; known: {known}") from None
