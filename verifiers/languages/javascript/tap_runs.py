"""ava's and node-tap's graded runs: node's arguments, and the statuses read from the TAP the
runners' own processes wrote, by validate's parser (``verifiers/reports/tap.py``), so the
grader's ids are validate's by construction.

Neither runner has a reporter a program can name. ava runs once per file under the grader's
driver (``in_container/trajforge_ava_reporter.js``), which sends each ava's TAP keyed with its
file; here each file's text is prefixed as validate's command does (``js_runners._ava``'s awk)
and joined under one plan. node-tap's own process sends the TAP it writes
(``trajforge_tap_reporter.js``, preloaded), read as it is: at the repository's root validate's
prefix adds nothing. A stream that contradicts itself (a plan that does not count its tests, a
test with no name) is tampering: both runners write their plans from the tests they ran, so only
a test process writing TAP of its own into its file's stream (node-tap reads a file's TAP from
that file's process) makes them disagree. A stream that bailed out (``--bail``, ``t.bailout()``:
the runner's own features) is a run that did not finish: no statuses.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import replace

from trajforge.verifiers.grader.channel import Evidence
from trajforge.verifiers.reports.ids import ReportError
from trajforge.verifiers.reports.tap import parse_ava_tap, parse_tap

AVA_SEPARATOR = " \u203a "  # ava's `file <U+203A> title`, as validate writes it
# Lines of one file's ava TAP that validate's command leaves out: the version, the file's plan
# (one plan for all files follows) and a file with no tests.
_AVA_DROPPED = re.compile(r"^TAP version|^1\.\.[0-9]+| - No tests found in ")
_AVA_POINT = re.compile(r"^(not )?ok [0-9]+ - ")  # where validate's prefixes go
_TOP_POINT = re.compile(r"^(not )?ok ")
WORKER_THREADS_FROM = 4  # ava 4+ runs tests in threads of its own process unless told not to
TAP_BEFORE = 18  # node-tap 18+ (@tapjs) is another program: other options, coverage always on


def installed_major(package_json: bytes | None) -> int:
    """The major version an installed package's package.json declares; 0 when unreadable."""
    try:
        version = json.loads(package_json or b"")["version"]
        return int(str(version).split(".", 1)[0])
    except (ValueError, KeyError, TypeError):
        return 0


def ava_args(driver: str, program: str, major: int, files: Iterable[str], test_s: int) -> list[str]:
    """node's arguments for the driver: ava's program and options (TAP; tests in child
    processes; validate's inactivity limit), then the files, each run by an ava of its own."""
    threads = ["--no-worker-threads"] if major >= WORKER_THREADS_FROM else []
    return [driver, program, "--tap", *threads, f"--timeout={test_s}s", "--", *files]


def tap_args(reporter: str, program: str, files: Iterable[str], test_s: int) -> list[str]:
    """node's arguments for node-tap: the reporter preloaded, TAP on stdout, no coverage (nyc
    would re-run node-tap in a child, away from the reporter), validate's per-file limit (ten
    tests' worth); node-tap reads the project's ``.taprc`` and package.json ``tap`` itself."""
    return ["-r", reporter, program, "--reporter=tap", "--no-coverage",
            f"--timeout={test_s * 10}", *files]  # fmt: skip


def ava_report(chunks: Iterable[tuple[str, str]]) -> str:
    """validate's ava report from the driver's chunks: each file's TAP with the file before
    every title, one version line and one plan for all."""
    texts: dict[str, list[str]] = {}
    for file, text in chunks:
        texts.setdefault(file, []).append(text)
    lines = ["TAP version 13"]
    for file, parts in texts.items():
        said = "".join(parts).split("\n")
        for line in said[:-1] if said[-1] == "" else said:
            if _AVA_DROPPED.search(line):
                continue
            point = _AVA_POINT.match(line)
            lines.append(
                line[: point.end()] + file + AVA_SEPARATOR + line[point.end() :] if point else line
            )
    lines.append(f"1..{sum(1 for line in lines if _TOP_POINT.match(line))}")
    return "".join(line + "\n" for line in lines)


def tap_report(chunks: Iterable[tuple[str, str]], package_dir: str = "") -> str:
    """validate's node-tap report: node-tap's TAP, its top-level subtests (files) and points
    prefixed with the workspace package's folder (nothing at the repository's root)."""
    text = "".join(text for _, text in chunks)
    if not package_dir:
        return text
    prefix = package_dir.rstrip("/") + "/"
    lines = []
    for line in text.split("\n"):
        point = _AVA_POINT.match(line)
        if line.startswith("# Subtest: "):
            line = "# Subtest: " + prefix + line[len("# Subtest: ") :]
        elif point:
            line = line[: point.end()] + prefix + line[point.end() :]
        lines.append(line)
    return "\n".join(lines)


def tap_evidence(evidence: Evidence, runner: str, package_dir: str = "") -> Evidence:
    """``evidence`` with its statuses and collection errors read from the runner's TAP (run in
    the workspace package ``package_dir``: its files named relative to it)."""
    if runner == "ava":
        prefix = package_dir.rstrip("/") + "/" if package_dir else ""
        chunks = ((prefix + file, text) for file, text in evidence.tap)
        text, parse = ava_report(chunks), parse_ava_tap
    else:
        text, parse = tap_report(evidence.tap, package_dir), parse_tap
    try:
        parsed = parse(text)
        problem = parsed.problem
    except ReportError as exc:
        parsed, problem = None, str(exc)
    if parsed is None or (problem and not problem.startswith("the TAP stream bailed out")):
        tampering = (*evidence.tampering, f"the runner's TAP contradicts itself: {problem}")
        return replace(evidence, statuses={}, collection_errors=(), tampering=tampering)
    return replace(evidence, statuses=parsed.statuses, collection_errors=parsed.collection_errors)
