"""What an issue writer may see: the gold patch, the failing tests' source, their failure output.

The failure output comes from the validate stage's own base-state runs (pytest's ``-rA`` report
holds a ``___ name ___`` section per failed test), so describing a task runs nothing. The words a
statement must stay grounded in (names from the patch's files and hunks and from the tests'
calls) are collected here too, so a statement about something else can be told apart. A
JavaScript/TypeScript task (``task.language``) reads its tests through
``languages/javascript/issue_context.py``.
"""

from __future__ import annotations

import ast
import keyword
import re
from dataclasses import dataclass

from trajforge.generators.languages.javascript.issue_context import (
    JS_COMMON,
    is_js_id,
    js_anchor_names,
    js_failure_excerpt,
    js_test_file,
    js_test_source,
    js_title,
    without_strings,
)
from trajforge.schemas.errors import UserError
from trajforge.schemas.task_instance import TaskInstance
from trajforge.schemas.test_ids import short_test_name, test_file, test_scopes
from trajforge.schemas.test_run import TestRun
from trajforge.verifiers.sandbox.git_tree import apply_patches, read_file_at

MAX_TEST_LINES = 60  # per test function
MAX_FAILURE_LINES = 40  # per failure section
_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")  # pytest colours its output on some terminals
_SECTION = re.compile(r"^_{3,} (.+?) _{3,}$", re.MULTILINE)
_SECTION_END = re.compile(r"^(?:={3,}|_{3,}) ", re.MULTILINE)
_HUNK_CONTEXT = re.compile(r"^@@ [^@]* @@ ?(?:async )?(?:def|class) (\w+)", re.MULTILINE)
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]{2,}")
_COMMON = {"self", "cls", "assert", "None", "True", "False", "test", "tests", "pytest", "raises"}


@dataclass(frozen=True)
class IssueContext:
    repo: str
    patch: str
    test_sources: dict[str, str]  # FAIL_TO_PASS test id -> its function's source
    failures: dict[str, str]  # FAIL_TO_PASS test id -> its failure report at the starting state
    anchors: frozenset[str]  # names a statement about this bug is expected to mention
    language: str = "python"  # the task's: which prompt and code fences the writer uses


def build_context(task: TaskInstance, repo_path: str, runs: list[TestRun]) -> IssueContext:
    sources = _test_sources(task, repo_path)
    failures = {}
    for test_id in task.FAIL_TO_PASS:
        for run in runs:
            if excerpt := failure_excerpt(run.log, test_id):
                failures[test_id] = excerpt
                break
    anchors = _anchors(task, sources)
    return IssueContext(task.repo, task.patch, sources, failures, anchors, task.language)


def failure_excerpt(log: str, test_id: str) -> str:
    """The body of pytest's failure section for ``test_id`` (``Class.name[param]`` headers);
    a JS test's is jest's section (``js_context``)."""
    if is_js_id(test_id):
        return js_failure_excerpt(log, test_id, MAX_FAILURE_LINES)
    wanted = ".".join(test_id.split("::")[1:])
    log = _ANSI.sub("", log)
    for match in _SECTION.finditer(log):
        if match.group(1).strip() not in (wanted, short_test_name(test_id)):
            continue
        body = log[match.end() :]
        end = _SECTION_END.search(body)
        lines = body[: end.start() if end else len(body)].strip("\n").splitlines()
        return "\n".join(lines[-MAX_FAILURE_LINES:])
    return ""


def _test_sources(task: TaskInstance, repo_path: str) -> dict[str, str]:
    """Each FAIL_TO_PASS test's function, from the tree the tests ran in."""
    try:
        tree = apply_patches(repo_path, task.base_commit, [task.bug_patch, task.test_patch])
    except UserError:
        return {}
    if task.language == "javascript":
        return _js_test_sources(task, repo_path, tree)
    sources: dict[str, str] = {}
    parsed: dict[str, tuple[ast.Module, str] | None] = {}
    for test_id in task.FAIL_TO_PASS:
        path = test_file(test_id)
        if path not in parsed:
            parsed[path] = _parse(repo_path, tree, path)
        found = parsed[path]
        if found and (text := _function_source(*found, test_id)):
            sources[test_id] = text
    return sources


def _js_test_sources(task: TaskInstance, repo_path: str, tree: str) -> dict[str, str]:
    files: dict[str, bytes | None] = {}
    sources: dict[str, str] = {}
    for test_id in task.FAIL_TO_PASS:
        path = js_test_file(test_id)
        if path not in files:
            try:
                files[path] = read_file_at(repo_path, tree, path).encode("utf-8")
            except Exception:  # not in the tree (odd ids): no source shown
                files[path] = None
        data = files[path]
        if data is not None and (text := js_test_source(path, data, test_id, MAX_TEST_LINES)):
            sources[test_id] = text
    return sources


def _parse(repo_path: str, tree: str, path: str) -> tuple[ast.Module, str] | None:
    try:
        source = read_file_at(repo_path, tree, path)
        return ast.parse(source), source
    except Exception:  # not in the tree (odd ids), not Python, not parsable: no source shown
        return None


def _function_source(module: ast.Module, source: str, test_id: str) -> str | None:
    scope: list[ast.stmt] = module.body
    node: ast.stmt | None = None
    for part in test_scopes(test_id):
        node = next((n for n in scope if _named(n, part)), None)
        if node is None:
            return None
        scope = node.body  # type: ignore[attr-defined]
    text = ast.get_source_segment(source, node) if node else None
    return "\n".join(text.splitlines()[:MAX_TEST_LINES]) if text else None


def _named(node: ast.stmt, name: str) -> bool:
    return (
        isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)
        and node.name == name
    )


def _anchors(task: TaskInstance, sources: dict[str, str]) -> frozenset[str]:
    """Module, function and class names of the patch, and the names the tests use."""
    javascript = task.language == "javascript"
    if javascript:
        names = js_anchor_names(task.patch)
        test_names = {js_title(t) for t in task.FAIL_TO_PASS}
        common = _COMMON | JS_COMMON
    else:
        names = set(_HUNK_CONTEXT.findall(task.patch))
        for line in task.patch.splitlines():
            if line.startswith(("+++ b/", "--- a/")):
                path = line[6:].strip()
                names.update(p.removesuffix(".py") for p in path.split("/") if p)
        test_names = {short_test_name(t) for t in task.FAIL_TO_PASS}
        common = _COMMON
    for text in sources.values():
        names.update(_IDENTIFIER.findall(without_strings(text) if javascript else text))
    return frozenset(
        n
        for n in names
        if len(n) >= 3
        and not keyword.iskeyword(n)
        and n not in common
        and n not in test_names
        and not n.startswith("test")
    )
