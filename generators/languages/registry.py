"""Which language a repository is: the first in ``LANGUAGES`` whose evidence it has.

Python comes first, so a repository with both a Python project and a package.json (docs
tooling, a web front end) stays the Python project it was before the language layer.
"""

from __future__ import annotations

from trajforge.generators.languages.base import Detection, Language
from trajforge.generators.languages.javascript.language import JavaScript
from trajforge.generators.languages.python.language import Python

LANGUAGES: tuple[Language, ...] = (Python(), JavaScript())
BY_NAME = {language.name: language for language in LANGUAGES}


def for_repo(repo_dir: str) -> tuple[Language, Detection] | None:
    """The repository's language and what it detected, or None when no language knows it."""
    for language in LANGUAGES:
        detection = language.detect(repo_dir)
        if detection is not None:
            return language, detection
    return None
