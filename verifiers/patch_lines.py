"""Which lines of the original files a patch touches: what a test must execute to notice it.

Works from the diff alone, so it serves procedural mutants, LLM-written bugs and combinations of
them alike. Each touched line also brings the first line of the innermost statement around it:
coverage.py records a multi-line statement at the lines where execution events happen, which is
not always the physical line the mutation changed.
"""

from __future__ import annotations

import ast
import re
from collections import defaultdict

_FILE = re.compile(r"^--- (?:a/)?(.+?)\s*$")
_HUNK = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+\d+(?:,\d+)? @@")


def touched_lines(patch: str) -> dict[str, set[int]]:
    """path -> line numbers (1-based, in the original) that the patch removes or inserts beside."""
    touched: dict[str, set[int]] = defaultdict(set)
    path: str | None = None
    old_line = 0
    for line in patch.splitlines():
        if line.startswith("--- "):
            match = _FILE.match(line)
            path = match.group(1) if match and match.group(1) != "/dev/null" else None
            continue
        if line.startswith("+++ ") or path is None:
            continue
        if hunk := _HUNK.match(line):
            old_line = int(hunk.group(1))
            continue
        if line.startswith("-"):
            touched[path].add(old_line)
            old_line += 1
        elif line.startswith("+"):  # an insertion sits between old_line - 1 and old_line
            touched[path].update(n for n in (old_line - 1, old_line) if n > 0)
        elif line.startswith(" "):
            old_line += 1
    return dict(touched)


def with_statement_starts(source: str, lines: set[int]) -> set[int]:
    """``lines`` plus the first line of the innermost statement containing each of them."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return set(lines)
    innermost: dict[int, tuple[int, int]] = {}  # line -> (span, first line) of the smallest stmt
    for node in ast.walk(tree):
        if not isinstance(node, ast.stmt) or node.end_lineno is None:
            continue
        span = node.end_lineno - node.lineno
        for line in lines:
            if node.lineno <= line <= node.end_lineno and (
                line not in innermost or span < innermost[line][0]
            ):
                innermost[line] = (span, node.lineno)
    return set(lines) | {first for _, first in innermost.values()}
