"""What a Python example uses and what it feeds in, without its code.

A template instruction may name what the example exercises and the values it passes, so a learner
can write the script, but never the script's lines. From the example's syntax tree (nothing runs):

- ``names``: the dotted names it uses from outside the standard library and the builtins: what it
  imports (``from calc.ops import mul`` then ``mul(...)`` is ``calc.ops.mul``), what a star import
  provides (a doctest's ``from pkg.mod import *``), and module attributes (``pkg.mod.CONST``).
- ``inputs``: literal values (constants and containers of them, arithmetic included) passed as
  arguments (``name=value`` for keywords), used as subscripts or assigned, in source order;
  never what is printed or shown, which is the output.
"""

from __future__ import annotations

import ast
import builtins
import sys
from dataclasses import dataclass

from trajforge.schemas import python_ast

MAX_INPUTS = 10
MAX_INPUT_CHARS = 60
OUTPUT_CALLS = frozenset({"print", "_show", "pp", "pprint"})  # their arguments are output
_BUILTINS = frozenset(dir(builtins))
_LITERAL = (ast.Constant, ast.Tuple, ast.List, ast.Set, ast.Dict, ast.UnaryOp, ast.BinOp)


@dataclass(frozen=True)
class ExampleParts:
    names: tuple[str, ...]
    inputs: tuple[str, ...]


def example_parts(code: str) -> ExampleParts:
    try:
        tree = python_ast.parse(code)
    except (SyntaxError, ValueError):  # ValueError: a null byte, before Python 3.12
        return ExampleParts((), ())
    imported, star = _imports(tree)
    bound = _bound(tree)
    nodes = sorted(
        (n for n in ast.walk(tree) if isinstance(n, ast.stmt | ast.expr)),
        key=lambda n: (n.lineno, n.col_offset),
    )
    inner = {id(n.value) for n in nodes if isinstance(n, ast.Attribute)}
    shown = {
        id(a) for n in nodes if isinstance(n, ast.Call) and _calls(n, OUTPUT_CALLS) for a in n.args
    }
    names: list[str] = []
    found: list[tuple[int, int, str]] = []  # (line, column, text) of each literal fed in
    for node in nodes:
        if isinstance(node, ast.Name | ast.Attribute) and id(node) not in inner:
            name = _resolve(node, imported, star, bound)
            if name and name not in names:
                names.append(name)
        for value in _fed(node):
            if id(value) not in shown and _literal(value):
                found.append((value.lineno, value.col_offset, ast.unparse(value)))
        if isinstance(node, ast.Call) and not _calls(node, OUTPUT_CALLS):
            for keyword in node.keywords:
                if keyword.arg and _literal(keyword.value):
                    text = f"{keyword.arg}={ast.unparse(keyword.value)}"
                    found.append((keyword.value.lineno, keyword.value.col_offset, text))
    inputs: list[str] = []
    for *_, text in sorted(found):
        if len(text) <= MAX_INPUT_CHARS and text not in inputs:
            inputs.append(text)
    return ExampleParts(tuple(names), tuple(inputs[:MAX_INPUTS]))


def _imports(tree: ast.Module) -> tuple[dict[str, str], str]:
    """Local name -> dotted path of what is imported from outside the standard library, and the
    module a star import brings names from ('' when none)."""
    imported: dict[str, str] = {}
    star = ""
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.asname:
                    imported[alias.asname] = alias.name
                else:
                    root = alias.name.split(".")[0]
                    imported[root] = root
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            for alias in node.names:
                if alias.name == "*":
                    star = star or node.module
                else:
                    imported[alias.asname or alias.name] = f"{node.module}.{alias.name}"
    return {k: v for k, v in imported.items() if not _stdlib(v)}, "" if _stdlib(star) else star


def _bound(tree: ast.Module) -> set[str]:
    """Names the example itself defines or assigns (imports apart)."""
    bound: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store | ast.Del):
            bound.add(node.id)
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            bound.add(node.name)
        elif isinstance(node, ast.arg):
            bound.add(node.arg)
        elif isinstance(node, ast.ExceptHandler) and node.name:
            bound.add(node.name)
        elif isinstance(node, ast.Import | ast.ImportFrom):
            bound.update((a.asname or a.name).split(".")[0] for a in node.names if a.name != "*")
    return bound


def _resolve(node: ast.expr, imported: dict[str, str], star: str, bound: set[str]) -> str:
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name) or not isinstance(node.ctx, ast.Load):
        return ""
    rest = ".".join(reversed(parts))
    if node.id in imported:
        base = imported[node.id]
    elif node.id in bound or node.id in _BUILTINS or node.id in sys.stdlib_module_names:
        return ""
    elif star and node.id != star.split(".")[0]:
        base = f"{star}.{node.id}"
    elif parts:  # a module the example did not import itself (``pkg.mod.NAME``)
        base = node.id
    else:
        return ""
    return f"{base}.{rest}" if rest else base


def _fed(node: ast.AST) -> list[ast.expr]:
    """The expressions ``node`` feeds in: call arguments, subscripts, assigned values."""
    if isinstance(node, ast.Call):
        return [a.value if isinstance(a, ast.Starred) else a for a in node.args]
    if isinstance(node, ast.Subscript):
        return [node.slice]
    if isinstance(node, ast.Assign | ast.AugAssign | ast.AnnAssign) and node.value is not None:
        return [node.value]
    return []


def _calls(node: ast.AST, names: frozenset[str]) -> bool:
    if not isinstance(node, ast.Call):
        return False
    func = node.func
    name = func.id if isinstance(func, ast.Name) else getattr(func, "attr", "")
    return name in names


def _literal(node: ast.expr) -> bool:
    """Constants and containers or arithmetic of constants; no names, calls or f-strings."""
    return isinstance(node, _LITERAL) and all(
        isinstance(n, (*_LITERAL, ast.operator, ast.unaryop, ast.expr_context))
        for n in ast.walk(node)
    )


def _stdlib(module: str) -> bool:
    return module.split(".")[0] in sys.stdlib_module_names
