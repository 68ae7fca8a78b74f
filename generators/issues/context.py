"""What an issue writer may see: the gold patch, the failing tests' source, their failure output.

The failure output comes from the validate stage's own base-state runs (pytest's ``-rA`` report
holds a ``___ name ___`` section per failed test), so describing a task runs nothing. The words a
statement must stay grounded in (names from the patch's files and hunks and from the tests'
calls) are collected here too, so a statement about something else can be told apart. How a
task's tests, failures and patch read is its language's (``Language.issue_text``:
``languages/<lang>/issue_context.py``).
"""

from __future__ import annotations

import keyword
import re
from dataclasses import dataclass

from trajforge.generators.languages.base import Language
from trajforge.generators.languages.registry import DEFAULT, language_named
from trajforge.schemas.errors import UserError
from trajforge.schemas.task_instance import TaskInstance
from trajforge.schemas.test_run import TestRun
from trajforge.verifiers.sandbox.git_tree import apply_patches

MAX_TEST_LINES = 60  # per test function
MAX_FAILURE_LINES = 40  # per failure section
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]{2,}")
_COMMON = {"self", "cls", "assert", "None", "True", "False", "test", "tests", "pytest", "raises"}


@dataclass(frozen=True)
class IssueContext:
    repo: str
    patch: str
    test_sources: dict[str, str]  # FAIL_TO_PASS test id -> its function's source
    failures: dict[str, str]  # FAIL_TO_PASS test id -> its failure report at the starting state
    anchors: frozenset[str]  # names a statement about this bug is expected to mention
    language: str = DEFAULT.name  # the task's: which prompt and code fences the writer uses


def build_context(task: TaskInstance, repo_path: str, runs: list[TestRun]) -> IssueContext:
    language = language_named(task.language)
    sources = _test_sources(task, repo_path, language)
    failures = {}
    for test_id in task.FAIL_TO_PASS:
        for run in runs:
            if excerpt := failure_excerpt(run.log, test_id, language):
                failures[test_id] = excerpt
                break
    anchors = _anchors(task, sources, language)
    return IssueContext(task.repo, task.patch, sources, failures, anchors, task.language)


def failure_excerpt(log: str, test_id: str, language: Language = DEFAULT) -> str:
    """The body of the test's failure section in a run's log, as its language's runner prints
    it (pytest's ``___ name ___``, jest's ``●``), "" when there is none."""
    return language.issue_text.failure_excerpt(log, test_id, MAX_FAILURE_LINES)


def _test_sources(task: TaskInstance, repo_path: str, language: Language) -> dict[str, str]:
    """Each FAIL_TO_PASS test's source, from the tree the tests ran in."""
    try:
        tree = apply_patches(repo_path, task.base_commit, [task.bug_patch, task.test_patch])
    except UserError:
        return {}
    return language.issue_text.test_sources(repo_path, tree, task.FAIL_TO_PASS, MAX_TEST_LINES)


def _anchors(task: TaskInstance, sources: dict[str, str], language: Language) -> frozenset[str]:
    """Module, function and class names of the patch, and the names the tests use."""
    text = language.issue_text
    names = text.patch_names(task.patch)
    test_names = {text.test_name(t) for t in task.FAIL_TO_PASS}
    common = _COMMON | text.ignored_names
    for source in sources.values():
        names.update(_IDENTIFIER.findall(text.code_words(source)))
    return frozenset(
        n
        for n in names
        if len(n) >= 3
        and not keyword.iskeyword(n)
        and n not in common
        and n not in test_names
        and not n.startswith("test")
    )
