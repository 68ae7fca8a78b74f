"""Which changed files are tests, which are code, and which are left out of a task's patches.

Python's rules are the ones mining always had; a JavaScript/TypeScript repository's come from
``languages/javascript/test_files.py`` (the language layer's ``is_test_file``), and its generated
files (lock files, dist/, bundles, node_modules) are left out on top of ``mine.skip_globs``.
"""

from __future__ import annotations

import fnmatch
import posixpath
from collections.abc import Callable
from dataclasses import dataclass

from trajforge.generators.languages.javascript.test_files import (
    is_js_generated,
    is_js_source_path,
    is_js_test_path,
)

# is_test_path lives with the test ids (verification reads it too); mining imports it from here.
from trajforge.schemas.test_ids import TEST_DIRS as TEST_DIRS
from trajforge.schemas.test_ids import is_test_path as is_test_path

CODE_SUFFIXES = {".py", ".pyx", ".pxd", ".pyi", ".c", ".h", ".cc", ".cpp", ".rs", ".js", ".ts"}


def is_code_path(path: str) -> bool:
    return posixpath.splitext(path)[1] in CODE_SUFFIXES


def is_skipped(path: str, globs: list[str]) -> bool:
    """Vendored and generated files: never part of a task, whatever the commit did to them."""
    return any(fnmatch.fnmatch(path, pattern) for pattern in globs)


def _never(path: str) -> bool:
    return False


@dataclass(frozen=True)
class FileRules:
    """One language's answers to mining's three questions about a changed path."""

    is_test: Callable[[str], bool]
    is_code: Callable[[str], bool]  # a change worth a task (not only docs or config)
    is_generated: Callable[[str], bool]  # skipped like mine.skip_globs

    def skipped(self, path: str, globs: list[str]) -> bool:
        return is_skipped(path, globs) or self.is_generated(path)


PYTHON_RULES = FileRules(is_test_path, is_code_path, _never)
JS_RULES = FileRules(is_js_test_path, is_js_source_path, is_js_generated)
RULES = {"python": PYTHON_RULES, "javascript": JS_RULES}


def rules_for(language: str) -> FileRules:
    """The rules of a language by name; one mining knows no rules for is a one-line error."""
    try:
        return RULES[language]
    except KeyError:
        known = ", ".join(sorted(RULES))
        raise ValueError(f"mining has no file rules for language {language!r} ({known})") from None
