"""Which changed files are tests, which are code, and which are left out of a task's patches."""

from __future__ import annotations

import fnmatch
import posixpath

# is_test_path lives with the test ids (verification reads it too); mining imports it from here.
from trajforge.schemas.test_ids import TEST_DIRS as TEST_DIRS
from trajforge.schemas.test_ids import is_test_path as is_test_path

CODE_SUFFIXES = {".py", ".pyx", ".pxd", ".pyi", ".c", ".h", ".cc", ".cpp", ".rs", ".js", ".ts"}


def is_code_path(path: str) -> bool:
    return posixpath.splitext(path)[1] in CODE_SUFFIXES


def is_skipped(path: str, globs: list[str]) -> bool:
    """Vendored and generated files: never part of a task, whatever the commit did to them."""
    return any(fnmatch.fnmatch(path, pattern) for pattern in globs)
