"""Which failing tests failed for want of the outside world, read from a run's pytest log.

Tests run with no network and no secrets, so a suite that calls web APIs, reads an API key from
the environment or talks to a local redis/postgres fails those tests on the clean code. They are
not evidence about the code: they are never PASS_TO_PASS (they fail), and they are counted per
profile; when every failing test failed so and none passed, the snapshot's reason says so
(``needs_outside_world``) instead of ``no_passing_test_at_clean``.

The evidence is the log the runner already keeps (``-rA``): each failure's section (its ``E``
lines) and the short summary's ``FAILED id - message`` line. Lines are read once, each cut to
``LINE_CAP`` characters, with regexes that cannot backtrack over a line: time linear in the log.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from trajforge.schemas.test_run import TestRun

NETWORK, KEY, SERVICE = "network", "key", "service"
KINDS = (SERVICE, KEY, NETWORK)  # the order a line is tried in: the most specific first
LINE_CAP = 2000
_SERVICE = re.compile(
    r"redis\.exceptions\.ConnectionError|Error \d+ connecting to |could not connect to server"
    r"|Is the server running|connection to server at|psycopg2?\.OperationalError"
    r"|ServerSelectionTimeoutError|Can't connect to MySQL server|AMQPConnectionError"
)
_KEY_ERROR = re.compile(r"KeyError: '[A-Z][A-Z0-9_]*(?:KEY|TOKEN|SECRET|PASSWORD|CREDENTIALS)")
_KEY_NAMED = re.compile(r"(?i)api[_ -]?key|access[_ ]token|secret[_ ]key|auth[_ ]token")
_KEY_ABSENT = re.compile(
    r"(?i)must be set|is not set|not set\b|missing|required|not provided|not found"
    r"|environment variable|no api key"
)
_NETWORK = re.compile(
    r"ConnectionRefusedError|Connection refused|gaierror|Temporary failure in name resolution"
    r"|Name or service not known|nodename nor servname|Network is unreachable|No route to host"
    r"|Failed to establish a new connection|NewConnectionError|MaxRetryError"
    r"|requests\.exceptions\.ConnectionError|httpx\.ConnectError|ClientConnectorError"
    r"|Cannot connect to host|urlopen error|getaddrinfo failed|\[Errno (?:111|101|-2|-3|-5)\]"
)
_SECTIONS = re.compile(r"^=+ (FAILURES|ERRORS) =+$")
_BANNER = re.compile(r"^=+ .* =+$")
_SUMMARY = re.compile(r"^(?:FAILED|ERROR) (\S+) - (.*)$")
_PHASE = re.compile(r"^ERROR at (?:setup|teardown) of ")


def line_kind(line: str) -> str:
    """The outside-world cause one line of a failure names, or ""."""
    line = line[:LINE_CAP]
    if _SERVICE.search(line):
        return SERVICE
    if _KEY_ERROR.search(line) or (_KEY_NAMED.search(line) and _KEY_ABSENT.search(line)):
        return KEY
    return NETWORK if _NETWORK.search(line) else ""


def outside_world_tests(run: TestRun) -> dict[str, str]:
    """Failing test id -> why the outside world failed it (``KINDS``), for those the log shows."""
    failing = [t.test_id for t in run.tests if t.status in ("FAILED", "ERROR")]
    if not failing:
        return {}
    by_head: dict[str, list[str]] = {}
    for test_id in failing:
        by_head.setdefault(_head(test_id), []).append(test_id)
    found: dict[str, str] = {}
    for head, lines in _failure_sections(run.log.splitlines()):
        kind = _first_kind(line[1:] for line in lines if line.startswith("E "))
        if kind:
            for test_id in _owners(by_head.get(head, []), lines):
                found.setdefault(test_id, kind)
    wanted = set(failing)
    for line in run.log.splitlines():
        match = _SUMMARY.match(line[:LINE_CAP])
        if match and match.group(1) in wanted and match.group(1) not in found:
            kind = line_kind(match.group(2))
            if kind:
                found[match.group(1)] = kind
    return found


def kind_counts(found: dict[str, str]) -> dict[str, int]:
    """Tests per cause, in ``KINDS`` order, causes with none left out."""
    return {kind: n for kind in KINDS if (n := sum(1 for k in found.values() if k == kind))}


def describe(found: dict[str, str]) -> str:
    """``3 (network 2, key 1)``: the count and its causes, for a summary line or a detail."""
    causes = ", ".join(f"{kind} {n}" for kind, n in kind_counts(found).items())
    return f"{len(found)} ({causes})" if found else "0"


def _first_kind(lines: Iterable[str]) -> str:
    for line in lines:
        if kind := line_kind(line):
            return kind
    return ""


def _head(test_id: str) -> str:
    """The headline pytest gives a failure's section: ``tests/t.py::TestX::test_a[1]`` ->
    ``TestX.test_a[1]``."""
    return ".".join(test_id.split("::")[1:]) or test_id


def _owners(ids: list[str], lines: list[str]) -> list[str]:
    """The tests a section belongs to: its headline's one test, else those whose file the
    traceback names (a name shared by tests in two files); none when that cannot tell."""
    if len(ids) <= 1:
        return ids
    named = [t for t in ids if any(line.startswith(t.split("::")[0] + ":") for line in lines)]
    return named if len(named) == 1 else []


def _headline(line: str) -> str:
    """``____ TestX.test_a ____`` -> ``TestX.test_a`` (string operations: no backtracking)."""
    if not (line.startswith("___") and line.endswith("___")):
        return ""
    inner = line.strip("_")
    if len(inner) < 3 or not (inner.startswith(" ") and inner.endswith(" ")):
        return ""
    return inner.strip()


def _failure_sections(lines: list[str]) -> Iterable[tuple[str, list[str]]]:
    """(headline, lines) of each section under FAILURES and ERRORS."""
    inside, head = False, ""
    body: list[str] = []
    for raw in lines:
        line = raw[:LINE_CAP]
        if _SECTIONS.match(line):
            inside = True
            continue
        if inside and _BANNER.match(line):
            if head:
                yield head, body
            inside, head, body = bool(_SECTIONS.match(line)), "", []
            continue
        if not inside:
            continue
        headline = _headline(line)
        if headline:
            if head:
                yield head, body
            head, body = _PHASE.sub("", headline), []
        elif head:
            body.append(line)
    if head:
        yield head, body
