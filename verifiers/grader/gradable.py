"""Whether the grader can grade a task at all, read from the task alone (no image, no run).

A task validate made can still be one the grader refuses (``unsupported_test_cmd``): a runner it
has no supervised run for, a Python command that is not pytest. Such a task cannot score a
model's patch, so a dataset for evaluation or rewards leaves it out (export) instead of shipping
rows that only ever fail.
"""

from __future__ import annotations

from trajforge.schemas.js_commands import package_dir
from trajforge.verifiers.grader.supervised import (
    UnsupportedTestCommand,
    check_js_runner,
    pytest_options,
)


def grading_gap(language: str, test_runner: str, test_cmd: str) -> str:
    """Why the grader would refuse a task of this language, runner and command; "" if it grades."""
    try:
        if language == "javascript":
            check_js_runner(test_runner, package_dir(test_cmd))
        else:
            pytest_options(test_cmd)
    except UnsupportedTestCommand as exc:
        return str(exc)
    return ""
