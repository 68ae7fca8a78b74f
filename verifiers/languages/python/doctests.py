"""A graded doctest of a source module is the task's own: the patch may fix the code, not the test.

With ``--doctest-modules`` a test lives in the code under test (``calc/ops.py::calc.ops.add``,
``schemas.test_ids.is_module_doctest``). The module is source, so the grader neither resets it
nor plants sentinels in it; but then a patch could "fix" the doctest by rewriting its expected
output (a weak model does that unprompted). So the examples of every graded doctest, read
statically from the patched module, must equal the task's own: prose may change, the examples
(source, expected output, exception, options) may not. A doctest whose examples cannot be read
from the task's own module (a docstring made at run time) cannot be protected, and is refused
the same way. What this does not see: a module that rewrites a docstring at import time
(``add.__doc__ = ...``), in-process code like any other (docs/security.md).
"""

from __future__ import annotations

import ast
import doctest
import posixpath
from collections.abc import Iterable

from trajforge.schemas import python_ast
from trajforge.schemas.test_ids import is_module_doctest, test_file

Examples = tuple[tuple[str, str, str | None, tuple[tuple[int, bool], ...]], ...]


def graded_modules(test_ids: Iterable[str]) -> dict[str, tuple[str, ...]]:
    """Source module path -> the graded doctest ids in it."""
    found: dict[str, list[str]] = {}
    for test_id in test_ids:
        if is_module_doctest(test_id):
            found.setdefault(test_file(test_id), []).append(test_id)
    return {path: tuple(ids) for path, ids in found.items()}


def changed_doctests(path: str, test_ids: Iterable[str], own: bytes, theirs: bytes) -> list[str]:
    """Why the patched module ``theirs`` does not keep the task's graded doctests of ``own``
    (one line each); empty when every graded doctest's examples are the task's own."""
    why = []
    for test_id in test_ids:
        name = test_id.partition("::")[2]
        mine = _examples(path, name, own)
        if mine is None:
            why.append(f"{test_id}: the grader cannot read this doctest from the task's module")
        elif _examples(path, name, theirs) != mine:
            why.append(f"{test_id}: the patch changes a graded doctest (the test is the task's)")
    return why


def _examples(path: str, name: str, source: bytes) -> Examples | None:
    """The examples of the doctest ``name`` in the module ``source``, or None when there is no
    such docstring to read (no object of that name, no docstring, a module that does not parse)."""
    try:
        tree = python_ast.parse(source)
        node = _find(tree, _qualname(path, name))
        doc = ast.get_docstring(node, clean=False) if node is not None else None
        if doc is None:
            return None
        examples = doctest.DocTestParser().get_examples(doc)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    return tuple((e.source, e.want, e.exc_msg, tuple(sorted(e.options.items()))) for e in examples)


def _qualname(path: str, name: str) -> list[str]:
    """``calc.ops.Calc.add`` in ``src/calc/ops.py`` -> ``["Calc", "add"]``: the name less the
    longest dotted tail of the file's path that begins it (pytest names the module by how it
    imported it: ``calc.ops``, or ``ops`` from a folder without ``__init__.py``)."""
    folders, stem = posixpath.split(posixpath.splitext(path)[0])
    module = [*filter(None, folders.split("/")), *([] if stem == "__init__" else [stem])]
    parts = name.split(".")
    for start in range(len(module)):
        tail = module[start:]
        if parts[: len(tail)] == tail:
            return parts[len(tail) :]
    return parts


Definition = ast.Module | ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef


def _find(tree: ast.Module, qualname: list[str]) -> Definition | None:
    """The module (an empty qualname) or the class or function it names, as the module's body
    last defines it (a later definition replaces an earlier one)."""
    node: Definition = tree
    for part in qualname:
        defs = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
        found = [n for n in node.body if isinstance(n, defs) and n.name == part]
        if not found:
            return None
        node = found[-1]
    return node
