"""Which changed files are tests, which are code, and which are left out of a task's patches."""

from __future__ import annotations

import fnmatch
import posixpath

TEST_DIRS = {"test", "tests", "testing", "__tests__"}
CODE_SUFFIXES = {".py", ".pyx", ".pxd", ".pyi", ".c", ".h", ".cc", ".cpp", ".rs", ".js", ".ts"}


def is_test_path(path: str) -> bool:
    """SWE-bench's split: test directories, test modules and conftest.py belong to test_patch."""
    parts = path.split("/")
    name = parts[-1]
    if any(part in TEST_DIRS for part in parts[:-1]):
        return True
    stem, suffix = posixpath.splitext(name)
    if suffix != ".py":
        return False
    return (
        stem.startswith("test_") or stem.endswith("_test") or stem in {"conftest", "tests", "test"}
    )


def is_code_path(path: str) -> bool:
    return posixpath.splitext(path)[1] in CODE_SUFFIXES


def is_skipped(path: str, globs: list[str]) -> bool:
    """Vendored and generated files: never part of a task, whatever the commit did to them."""
    return any(fnmatch.fnmatch(path, pattern) for pattern in globs)
