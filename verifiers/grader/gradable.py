"""Whether the grader can grade a task at all, read from the task alone (no image, no run).

A task validate made can still be one the grader refuses (``unsupported_test_cmd``): a runner it
has no supervised run for, a Python command that is not pytest, a language it does not know.
Such a task cannot score a model's patch, so a dataset for evaluation or rewards leaves it out
(export) instead of shipping rows that only ever fail.
"""

from __future__ import annotations

from trajforge.verifiers.languages.registry import UnknownLanguage, grading_for


def grading_gap(language: str, test_runner: str, test_cmd: str) -> str:
    """Why the grader would refuse a task of this language, runner and command; "" if it grades."""
    try:
        return grading_for(language).grading_gap(test_runner, test_cmd)
    except UnknownLanguage as exc:
        return str(exc)
