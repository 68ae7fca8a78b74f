"""What every language's reader shares: the finding, the reader's interface, the kinds, and what a
test file's path looks like."""

from __future__ import annotations

import re
from bisect import bisect_left
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Protocol

FRAMES = "frame introspection"
READS_TESTS = "reads test files"
TEST_RUNNER = "reaches into the test runner"
RAW_MEMORY = "raw memory access"
TRACING = "tracing/profiling"
CODE_SWAP = "code object swap"
ALWAYS_EQUAL = "always-equal object"
BUILTINS = "patches builtins"
HIDDEN = "hidden attribute access"
DYNAMIC = "dynamic code"
FRAMEWORK_GLOBALS = "replaces test framework globals"
ASSERTIONS = "replaces assertion functions"
TEST_OUTPUT = "replaces test output"
UNREADABLE = "unreadable source"  # the reader itself failed on the file: flagged, never passed

MAX_SOURCE_BYTES = 2_000_000  # above this a file is not parsed: its added lines are read as text

# A string that names a test file or folder: tests/, test_x.py, x_test.py, conftest, x.test.js,
# x.spec.ts, __tests__/, or a glob of them.
TEST_PATH = re.compile(
    r"(^|[/\\*])(tests?|testing|__tests__|specs?)([/\\]|$)"
    r"|(^|[/\\*])test[^/\\]*\.py\b|_test\.py\b|conftest"
    r"|\.(test|spec)\.[cm]?[jt]sx?\b|\.(test|spec)\.\*|(^|[/\\*])\*\.(test|spec)\b",
    re.IGNORECASE,
)


@dataclass(frozen=True, order=True)
class Finding:
    path: str
    line: int
    kind: str
    what: str  # the code that was read as ``kind``, short

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.kind} ({self.what})"


class Reader(Protocol):
    """One language's reader: which files it reads and what it finds in their added lines."""

    def reads(self, path: str) -> bool: ...

    def findings(self, path: str, source: bytes, added: set[int]) -> list[Finding]: ...


def names_test_path(text: str) -> bool:
    return bool(TEST_PATH.search(text))


def spans_added(first: int, last: int, added: Sequence[int]) -> bool:
    """Whether any line of ``first..last`` (1-based, inclusive) is one the patch added
    (``added`` sorted)."""
    at = bisect_left(added, first)
    return at < len(added) and added[at] <= last


def text_findings(
    path: str, source: bytes, added: set[int], tokens: dict[str, tuple[str, str]]
) -> Iterator[Finding]:
    """The fallback where a file does not parse (or is too large to): each added line that holds
    one of ``tokens`` (a regex -> (kind, what))."""
    patterns = [(re.compile(p), kind, what) for p, (kind, what) in tokens.items()]
    for number, line in enumerate(source.decode("utf-8", "replace").splitlines(), 1):
        if number not in added:
            continue
        for pattern, kind, what in patterns:
            if pattern.search(line):
                yield Finding(path, number, kind, what)
                break
