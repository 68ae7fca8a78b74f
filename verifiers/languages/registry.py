"""The grader's languages by name: the one place of the proving floor that lists them.

A task written before the language layer names none: it is ``DEFAULT_LANGUAGE``'s (schemas).
"""

from __future__ import annotations

from trajforge.schemas.task_instance import DEFAULT_LANGUAGE
from trajforge.verifiers.grader.supervised import UnsupportedTestCommand
from trajforge.verifiers.languages.base import Grading
from trajforge.verifiers.languages.go.grading import GoGrading
from trajforge.verifiers.languages.javascript.grading import JavaScriptGrading
from trajforge.verifiers.languages.python.grading import PythonGrading

GRADINGS: tuple[Grading, ...] = (PythonGrading(), JavaScriptGrading(), GoGrading())
BY_NAME = {grading.name: grading for grading in GRADINGS}


class UnknownLanguage(UnsupportedTestCommand):
    """A task whose language the grader does not know: it cannot be graded."""


def grading_for(language: str) -> Grading:
    """The grader's answers for a task of ``language``; UnknownLanguage (one line) when no
    language of the grader has that name."""
    found = BY_NAME.get(language or DEFAULT_LANGUAGE)
    if found is None:
        raise UnknownLanguage(
            f"grader: no language named {language!r} (the grader knows "
            f"{', '.join(sorted(BY_NAME))}); the task cannot be graded"
        )
    return found
