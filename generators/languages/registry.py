"""The languages trajforge builds tasks for, and the one place that names them.

A caller never compares a language's name: it asks here for the ``Language`` (``for_repo`` for
a working tree, ``language_named`` for a task's or a profile's ``language``, ``spelled`` for a
dataset's spelling of it) and calls the answer. Adding a language is its package under
``languages/<lang>/`` and one line in ``LANGUAGES``.

Python comes first, so a repository with both a Python project and a package.json (docs
tooling, a web front end) stays the Python project it was before the language layer; it is
also ``DEFAULT``, the language of every task and tree that names none.
"""

from __future__ import annotations

from trajforge.generators.languages.base import Detection, Language
from trajforge.generators.languages.go.language import Go
from trajforge.generators.languages.javascript.language import JavaScript
from trajforge.generators.languages.python.language import Python
from trajforge.schemas.errors import UserError
from trajforge.schemas.task_instance import DEFAULT_LANGUAGE

LANGUAGES: tuple[Language, ...] = (Python(), JavaScript(), Go())
BY_NAME = {language.name: language for language in LANGUAGES}
DEFAULT = BY_NAME[DEFAULT_LANGUAGE]  # a task or profile that names none: schemas' default
# A dataset's spelling (name or alias, lower case) -> the language
_SPELLINGS = {
    spelling: language for language in LANGUAGES for spelling in (language.name, *language.aliases)
}


class UnknownLanguage(UserError):
    reason = "unknown_language"


def for_repo(repo_dir: str) -> tuple[Language, Detection] | None:
    """The repository's language and what it detected, or None when no language knows it."""
    for language in LANGUAGES:
        detection = language.detect(repo_dir)
        if detection is not None:
            return language, detection
    return None


def language_named(name: str) -> Language:
    """The language of a task's or a profile's ``language``; an unknown name is one line."""
    try:
        return BY_NAME[name]
    except KeyError:
        known = ", ".join(sorted(BY_NAME))
        raise UnknownLanguage(
            f"language {name[:40]!r} is none of trajforge's ({known}); the record was written by "
            "another version, or by hand"
        ) from None


def spelled(spelling: str) -> Language | None:
    """The language a dataset spells ``spelling`` (``py``, ``TypeScript``), or None when
    trajforge has no layer for it."""
    return _SPELLINGS.get(spelling.strip().lower())
