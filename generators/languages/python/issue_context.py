"""What an issue writer may see of a Python task: its tests' functions (``ast``) and pytest's
failure lines, and the names a patch is about (its hunk headers' defs and its modules)."""

from __future__ import annotations

import ast
import re
from collections.abc import Sequence

from trajforge.generators.languages.base import IssueText
from trajforge.generators.languages.python.prompts import ISSUE_PROMPT
from trajforge.schemas import python_ast
from trajforge.schemas.test_ids import short_test_name, test_file, test_scopes
from trajforge.verifiers.sandbox.git_tree import read_file_at

_HUNK_CONTEXT = re.compile(r"^@@ [^@]* @@ ?(?:async )?(?:def|class) (\w+)", re.MULTILINE)
_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")  # pytest colours its output on some terminals
_SECTION = re.compile(r"^_{3,} (.+?) _{3,}$", re.MULTILINE)
_SECTION_END = re.compile(r"^(?:={3,}|_{3,}) ", re.MULTILINE)


class PythonIssueText(IssueText):
    """A Python task's tests read by ``ast``, its failures as pytest prints them."""

    prompt = ISSUE_PROMPT

    def test_sources(
        self, repo_path: str, tree: str, test_ids: Sequence[str], max_lines: int
    ) -> dict[str, str]:
        sources: dict[str, str] = {}
        parsed: dict[str, tuple[ast.Module, str] | None] = {}
        for test_id in test_ids:
            path = test_file(test_id)
            if path not in parsed:
                parsed[path] = _parse(repo_path, tree, path)
            found = parsed[path]
            if found and (text := _function_source(*found, test_id, max_lines)):
                sources[test_id] = text
        return sources

    def failure_excerpt(self, log: str, test_id: str, max_lines: int) -> str:
        """pytest's ``-rA`` section for the test (``Class.name[param]`` headers)."""
        wanted = ".".join(test_id.split("::")[1:])
        log = _ANSI.sub("", log)
        for match in _SECTION.finditer(log):
            if match.group(1).strip() not in (wanted, short_test_name(test_id)):
                continue
            body = log[match.end() :]
            end = _SECTION_END.search(body)
            lines = body[: end.start() if end else len(body)].strip("\n").splitlines()
            return "\n".join(lines[-max_lines:])
        return ""

    def patch_names(self, patch: str) -> set[str]:
        names = set(_HUNK_CONTEXT.findall(patch))
        for line in patch.splitlines():
            if line.startswith(("+++ b/", "--- a/")):
                path = line[6:].strip()
                names.update(p.removesuffix(".py") for p in path.split("/") if p)
        return names

    def test_name(self, test_id: str) -> str:
        return short_test_name(test_id)

    def evidence(self, failure: str, test_source: str) -> list[str]:
        """pytest's pointer and assertion lines when there is a failure report, else the
        asserts."""
        lines = [
            line.rstrip()
            for line in failure.splitlines()
            if line.startswith((">", "E ")) and line[1:].strip()
        ]
        if lines:
            return lines
        return [
            line.strip() for line in test_source.splitlines() if line.strip().startswith("assert ")
        ]


def _parse(repo_path: str, tree: str, path: str) -> tuple[ast.Module, str] | None:
    try:
        source = read_file_at(repo_path, tree, path)
        return python_ast.parse(source), source
    except Exception:  # not in the tree (odd ids), not Python, not parsable: no source shown
        return None


def _function_source(module: ast.Module, source: str, test_id: str, max_lines: int) -> str | None:
    scope: list[ast.stmt] = module.body
    node: ast.stmt | None = None
    for part in test_scopes(test_id):
        node = next((n for n in scope if _named(n, part)), None)
        if node is None:
            return None
        scope = node.body  # type: ignore[attr-defined]
    text = ast.get_source_segment(source, node) if node else None
    return "\n".join(text.splitlines()[:max_lines]) if text else None


def _named(node: ast.stmt, name: str) -> bool:
    return (
        isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)
        and node.name == name
    )
