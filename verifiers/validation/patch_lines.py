"""The lines a test must execute to notice a patch: the touched lines (``schemas.diff``), and with
each the first line of the innermost statement around it:
coverage.py records a multi-line statement at the lines where execution events happen, which is
not always the physical line the mutation changed.
"""

from __future__ import annotations

import ast

from trajforge.schemas import python_ast


def with_statement_starts(source: str, lines: set[int]) -> set[int]:
    """``lines`` plus the first line of the innermost statement containing each of them."""
    try:
        tree = python_ast.parse(source)
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


def outside_functions(source: str, lines: set[int]) -> bool:
    """Whether any of ``lines`` runs when its module is imported, not when a function is called:
    module and class bodies, decorators, default values, signatures.

    Coverage gives such a line only to the first test that imported the module (or to none, at
    collection), so no test selection can be trusted for it; a bug there gets the whole suite.
    Blank and comment lines (an insertion's neighbours) do not count.
    """
    try:
        tree = python_ast.parse(source)
    except SyntaxError:
        return True
    text = source.splitlines()
    code = {n for n in lines if 0 < n <= len(text) and text[n - 1].strip()[:1] not in ("", "#")}
    bodies = [
        (node.body[0].lineno, node.end_lineno or node.body[0].lineno)
        for node in ast.walk(tree)
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
    ]
    return any(not any(start <= line <= end for start, end in bodies) for line in code)
