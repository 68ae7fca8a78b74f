"""tox's ``[testenv]`` deps (with their factors) and nox's test-session installs, read as
requirements and requirements files: where many projects keep their test dependencies.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Sequence

from packaging.requirements import InvalidRequirement, Requirement
from trajforge.generators.languages.python.declarations import (
    _dedupe,
    _first_per_name,
    _ini_get,
    _load_ini,
    _repo_file,
    _requirement_name,
)
from trajforge.schemas import python_ast

# pip options that take a value, so the next argument is no requirement
_PIP_VALUE_OPTIONS = frozenset(
    {"-c", "--constraint", "-e", "--editable", "-i", "--index-url", "--extra-index-url"}
    | {"-f", "--find-links"}
)


def _tox_deps(text: str, python: str, paths: set[str]) -> tuple[list[str], list[str]]:
    """[testenv] deps as (requirements files, requirements) for the chosen Python."""
    parser = _load_ini(text)
    raw = _ini_get(parser, "testenv", "deps") or ""
    files: list[str] = []
    definite: list[str] = []
    maybe: list[str] = []  # behind a non-Python factor (django32: ...): only if not pinned already
    for line in raw.splitlines():
        line = re.sub(r"(^|\s)#.*$", "", line).replace("{toxinidir}/", "").strip()
        factors, dep = _split_factors(line)
        if not dep or (factors is not None and not _factors_match(factors, python)):
            continue
        if dep.startswith(("-r", "--requirement")):
            path = _repo_file(re.sub(r"^(-r|--requirement)=?", "", dep), paths)
            files += [path] if path else []
        elif not dep.startswith(("-", ".", "/")) and "{" not in dep:
            unsure = factors is not None and _has_unknown_factor(factors)
            (maybe if unsure else definite).extend(_split_requirements(dep))
    definite = _dedupe(definite)
    return files, definite + _first_per_name(maybe, map(_requirement_name, definite))


def _split_factors(line: str) -> tuple[str | None, str]:
    """``py38,py39: pkg`` -> ("py38,py39", "pkg"); a URL's ``https:`` is no factor."""
    match = re.match(r"^([!\w.,{}-]+(?:\s*,\s*[!\w.,{}-]+)*)\s*:(?!//)\s*(.*)$", line)
    if match:
        return match.group(1), match.group(2).strip()
    return None, line


def _expand_braces(text: str) -> list[str]:
    """tox's ``py{38,39}-django`` -> ["py38-django", "py39-django"]."""
    match = re.search(r"\{([^{}]*)\}", text)
    if not match:
        return [text]
    head, tail = text[: match.start()], text[match.end() :]
    return [e for part in match.group(1).split(",") for e in _expand_braces(head + part + tail)]


def _factor_alternatives(factors: str) -> list[list[str]]:
    """The OR'ed alternatives of a factor prefix, each an AND of factors."""
    return [
        [f for f in alternative.strip().split("-") if f]
        for expanded in _expand_braces(factors)
        for alternative in expanded.split(",")
        if alternative.strip()
    ]


def _python_factor(factor: str) -> str | None:
    """The Python a factor names (py311, py3.11, 3.11 -> "3.11"; pypy3 -> "pypy"), else None."""
    match = re.fullmatch(r"(?:py)?(\d)\.?(\d+)", factor)
    if match and (factor.startswith("py") or "." in factor):
        return f"{match.group(1)}.{match.group(2)}"
    return "pypy" if factor.startswith("pypy") else None


def _factors_match(factors: str, python: str) -> bool:
    """Whether some alternative can hold for our Python; unknown factors count as on."""
    for alternative in _factor_alternatives(factors):
        if all(_factor_holds(factor, python) for factor in alternative):
            return True
    return False


def _factor_holds(factor: str, python: str) -> bool:
    negated = factor.startswith("!")
    named = _python_factor(factor.lstrip("!"))
    if named is None:
        return True
    return (named == python) != negated


def _has_unknown_factor(factors: str) -> bool:
    return any(
        _python_factor(f.lstrip("!")) is None for alt in _factor_alternatives(factors) for f in alt
    )


def _split_requirements(dep: str) -> list[str]:
    """One deps line as requirements; old tox configs put several on a line."""
    try:
        Requirement(dep)
        return [dep]
    except InvalidRequirement:
        pass
    parts = dep.split()
    if len(parts) > 1 and all(_parses(p) for p in parts):
        return parts
    return [dep]  # a URL or something pip may still understand


def _parses(requirement: str) -> bool:
    try:
        Requirement(requirement)
    except InvalidRequirement:
        return False
    return True


def _nox_installs(text: str, paths: set[str]) -> tuple[list[str], list[str]]:
    """Literal ``session.install`` arguments as (requirements files, requirements).

    Test sessions are preferred when any install something, so pins in lint or docs sessions
    cannot clash with the test ones.
    """
    try:
        tree = python_ast.parse(text)
    except (SyntaxError, ValueError):
        return [], []
    constants = _module_strings(tree)
    test_sessions = [
        f
        for f in tree.body
        if isinstance(f, ast.FunctionDef | ast.AsyncFunctionDef) and _is_test_session(f)
    ]
    args = [a for f in test_sessions for a in _install_args(f, constants)]
    if not args:
        args = _install_args(tree, constants)
    return _parse_install_args(args, paths)


def _module_strings(tree: ast.Module) -> dict[str, list[str]]:
    """Module-level ``NAME = "x"`` / ``NAME = ["x", "y"]`` so ``*NAME`` arguments resolve."""
    constants: dict[str, list[str]] = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            target = node.targets[0]
            values = _literal_strings(node.value)
            if isinstance(target, ast.Name) and values is not None:
                constants[target.id] = values
    return constants


def _literal_strings(expr: ast.expr) -> list[str] | None:
    if isinstance(expr, ast.Constant) and isinstance(expr.value, str):
        return [expr.value]
    if isinstance(expr, ast.List | ast.Tuple):
        values = [e.value for e in expr.elts if isinstance(e, ast.Constant)]
        if len(values) == len(expr.elts) and all(isinstance(v, str) for v in values):
            return [str(v) for v in values]
    return None


def _is_test_session(func: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    """A nox session whose function or ``name=`` mentions test."""
    decorators = [ast.unparse(d) for d in func.decorator_list]
    if not any("session" in d for d in decorators):
        return False
    return "test" in func.name.lower() or any("test" in d.lower() for d in decorators)


def _install_args(root: ast.AST, constants: dict[str, list[str]]) -> list[str]:
    """The literal arguments of every ``<x>.install(...)`` call under ``root``."""
    args: list[str] = []
    for node in ast.walk(root):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            if node.func.attr != "install":
                continue
            for arg in node.args:
                inner = arg.value if isinstance(arg, ast.Starred) else arg
                if isinstance(inner, ast.Name):
                    args += constants.get(inner.id, [])
                else:
                    args += _literal_strings(inner) or []
    return args


def _parse_install_args(args: Sequence[str], paths: set[str]) -> tuple[list[str], list[str]]:
    """pip arguments as (requirements files, requirements); options and local paths are dropped."""
    files: list[str] = []
    requirements: list[str] = []
    remaining = iter(args)
    for arg in remaining:
        if arg in ("-r", "--requirement"):
            path = _repo_file(next(remaining, ""), paths)
        elif arg.startswith(("-r", "--requirement=")):
            path = _repo_file(re.sub(r"^(-r|--requirement=)", "", arg), paths)
        else:
            if arg in _PIP_VALUE_OPTIONS:
                next(remaining, None)
            elif arg.strip() and not arg.startswith(("-", ".", "/")) and "{" not in arg:
                requirements.append(arg.strip())
            continue
        files += [path] if path else []
    return _dedupe(files), _first_per_name(requirements)
