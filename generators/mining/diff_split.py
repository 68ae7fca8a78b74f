"""Which changed files are tests, which are code, and which are left out of a task's patches.

The repository's language answers (``Language.is_test_file``, ``is_source_file``,
``is_generated``: ``languages/<lang>/``); its generated files (lock files, dist/, bundles,
node_modules) are left out on top of ``mine.skip_globs``.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Callable
from dataclasses import dataclass

from trajforge.generators.languages.base import Language

# is_test_path lives with the test ids (verification reads it too); mining imports it from here.
from trajforge.schemas.test_ids import TEST_DIRS as TEST_DIRS
from trajforge.schemas.test_ids import is_test_path as is_test_path


def is_skipped(path: str, globs: list[str]) -> bool:
    """Vendored and generated files: never part of a task, whatever the commit did to them."""
    return any(fnmatch.fnmatch(path, pattern) for pattern in globs)


@dataclass(frozen=True)
class FileRules:
    """One language's answers to mining's three questions about a changed path."""

    is_test: Callable[[str], bool]
    is_code: Callable[[str], bool]  # a change worth a task (not only docs or config)
    is_generated: Callable[[str], bool]  # skipped like mine.skip_globs

    def skipped(self, path: str, globs: list[str]) -> bool:
        return is_skipped(path, globs) or self.is_generated(path)


def rules_for(language: Language) -> FileRules:
    """Mining's three questions, answered by the language."""
    return FileRules(language.is_test_file, language.is_source_file, language.is_generated)
