"""``go test -json``'s events read as ``{test_id: status}``: the one reader both floors use.

A Go test id is ``<package dir>::<TestName>[/<subtest>...]``: the package's folder relative to
the repository root (``.`` for the root package) and the name ``go test`` prints (subtests with
spaces already turned into ``_`` by the testing package). The events name a package by its
import path, so the reader is given each module's path and folder (``read_modules``): a folder
never changes between runs or machines, an import path does when a fork renames its module.

The stream is the suite's own output (the go command writes it from the test binary's stdout),
so it is hostile input: a line that is not an event is skipped (old go commands put build errors
there, except go's plain ``FAIL\t<package> [build failed]`` before Go 1.24), a test reported
ended twice is a contradiction (``problem``), an oversized stream is one
``ReportError`` line.
"""

from __future__ import annotations

import json
import posixpath
import re
from collections.abc import Iterable, Mapping

from trajforge.verifiers.log_parsers import ParsedLog
from trajforge.verifiers.reports.ids import ReportError, check_size, record

__all__ = [
    "SEPARATOR",
    "ReportError",
    "package_dir",
    "parse_test_events",
    "read_modules",
    "test_id",
]

SEPARATOR = "::"
ROOT = "."
_STATUS = {"pass": "PASSED", "fail": "FAILED", "skip": "SKIPPED"}
_MODULE = re.compile(r"^\s*module\s+(\"[^\"]+\"|\S+)", re.MULTILINE)
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")
# Before Go 1.24 a package whose test binary did not build is this plain line, not an event.
_BUILD_FAILED = re.compile(r"^FAIL\t(\S+) \[build failed\]$")


def test_id(package_dir: str, test: str) -> str:
    """The one id of ``test`` in the package at ``package_dir`` (a control character in the
    name is written ``\\xNN``, so an id is one printable line)."""
    name = _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", test)
    return f"{package_dir or ROOT}{SEPARATOR}{name}"


def package_dir(test_id: str) -> str:
    """The package folder an id names: ``internal/calc::TestAdd/neg`` -> ``internal/calc``."""
    return test_id.split(SEPARATOR, 1)[0]


def read_modules(go_mod_texts: Mapping[str, str]) -> dict[str, str]:
    """``{folder: go.mod text}`` -> ``{module path: folder}``; a go.mod with no ``module`` line
    is left out (the go command refuses it too)."""
    modules: dict[str, str] = {}
    for folder, text in go_mod_texts.items():
        found = _MODULE.search(text)
        if found:
            modules[found.group(1).strip('"')] = posixpath.normpath(folder or ROOT)
    return modules


def parse_test_events(text: str | bytes, modules: Mapping[str, str]) -> ParsedLog:
    """Statuses by test id from a ``go test -json`` stream; packages of modules not in
    ``modules`` keep their import path as their folder."""
    check_size(text, "go test -json")
    if isinstance(text, bytes):
        text = text.decode("utf-8", "replace")
    statuses: dict[str, str] = {}
    started: dict[str, None] = {}  # ids that ran, in order; those never ended failed
    broken: dict[str, None] = {}  # package folders whose test binary did not build
    problems: list[str] = []
    by_length = sorted(modules.items(), key=lambda item: -len(item[0]))
    for line in text.splitlines():
        event = _event(line)
        if event is None:
            if plain := _BUILD_FAILED.match(line):
                broken[_folder(plain.group(1), by_length)] = None
            continue
        action, package, test = event
        folder = _folder(package, by_length)
        if not test:
            if action == "fail" and _build_failed(line):
                broken[folder] = None
            continue
        node = test_id(folder, test)
        if action == "run":
            started[node] = None
        elif action in _STATUS:
            if node in statuses and node not in started:
                problems.append(f"{node} reported ended twice")
            started.pop(node, None)
            record(statuses, node, _STATUS[action])
    for node in started:  # a panic, a timeout or an exit ended the binary while it ran
        record(statuses, node, "FAILED")
    if problems:
        return ParsedLog(statuses={}, collection_errors=(), problem="; ".join(problems[:3]))
    return ParsedLog(statuses=statuses, collection_errors=tuple(broken))


def _event(line: str) -> tuple[str, str, str] | None:
    """(action, package, test) of one event line; None for any other line."""
    if not line.startswith("{"):
        return None
    try:
        event = json.loads(line)
    except ValueError:
        return None
    if not isinstance(event, dict):
        return None
    action, package, test = (event.get(key, "") for key in ("Action", "Package", "Test"))
    if not all(isinstance(value, str) for value in (action, package, test)):
        return None
    return action, package, test


def _build_failed(line: str) -> bool:
    event = json.loads(line)
    return bool(event.get("FailedBuild")) or "[build failed]" in str(event.get("Output", ""))


def _folder(package: str, modules: Iterable[tuple[str, str]]) -> str:
    """The repository folder of an import path (``example.com/m/sub`` -> ``sub``)."""
    for module, folder in modules:
        if package == module or package.startswith(module + "/"):
            rest = package[len(module) :].lstrip("/")
            return posixpath.normpath(posixpath.join(folder, rest)) if rest else folder
    return package
