"""Imports run one way: pipelines -> generators -> verifiers, filters -> schemas; no file circles.

A module may import its own folder and any folder of a lower layer; verifiers and filters sit side
by side and do not import each other; nothing imports pipelines from outside it. Every import
counts, a lazy one inside a function too. The package `trajforge` itself is `pipelines/api/` (the
public API, see setup.py), so `from trajforge import X` counts as importing that pipelines module:
no other room may, and inside pipelines it may not close a circle. Exit 1 with one line per broken
rule.

Languages are plug-ins on two floors, ``generators/languages/<lang>/`` (what builds) and
``verifiers/languages/<lang>/`` (what proves): a language's package is imported only from the
language homes (its own packages, the registries), and outside them no code names a language
(a string equal to a language's ``name``): callers go through the interface. ``NAMED_ELSEWHERE``
lists the places still allowed to, each with its reason.

Every parse of Python source goes through ``schemas/python_ast.py`` (one at a time: CPython 3.11's
AST constructor is not safe on two threads, gh-106905): ``ast.parse`` or ``ast.literal_eval``
anywhere else fails, except inside the sandbox's own code (``in_container/``).

usage: python scripts/check_layers.py [ROOT]
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

LAYERS = {"pipelines": 3, "generators": 2, "verifiers": 1, "filters": 1, "schemas": 0}
PACKAGE = "trajforge"
PREFIX = PACKAGE + "."
API = PREFIX + "pipelines.api"  # the folder setup.py installs as the package `trajforge` itself
HOMES = ("generators.languages", "verifiers.languages")  # the two floors of the language layer
# Files outside the homes that may still name a language, and why (each one a debt to pay).
NAMED_ELSEWHERE: dict[str, str] = {
    # the word, not a task's language:
    "generators/bugs/llm_rewrite.py": "the code-fence names a model's answer may use",
    "generators/explore/doc_blocks.py": "a documentation block's highlighting language",
    "generators/explore/doc_examples.py": "a documentation block's highlighting language",
    "generators/imports/multiswebench.py": "the dataset's own folder names (c++, go, rust...); "
    "ours come from registry.spelled",
    "schemas/task_instance.py": "DEFAULT_LANGUAGE, the language of rows that name none: the one "
    "place both registries and the report read it from (schemas import no language)",
    "schemas/env_profile.py": "the Arrow column 'python' (a profile's Python version: a stored "
    "field's name)",
}
# Modules outside the homes that may still import one language's package, and why.
IMPORTS_ELSEWHERE: dict[str, str] = {
    "trajforge.pipelines.release.harbor": "Harbor folders carry Python's grader only; a "
    "language's Harbor part behind its interface is still to come",
    "trajforge.generators.bugs.llm_rewrite": "model-written bugs are Python's (libcst), still in "
    "bugs/; inject reaches them only where Language.writes_model_bugs",
}


def module_name(root: Path, path: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return PREFIX + ".".join(parts)


def imports_of(path: Path, name: str) -> set[str]:
    """trajforge modules (or packages) that ``path`` imports, relative imports resolved."""
    tree = ast.parse(path.read_text(), filename=str(path))
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")
                anchor = anchor[: len(anchor) - node.level + 1]
                base = ".".join([*anchor, base]) if base else ".".join(anchor)
            found.add(base)
            found.update(f"{base}.{alias.name}" for alias in node.names)
    return {API if m == PACKAGE else m for m in found if m == PACKAGE or m.startswith(PREFIX)}


def graph(root: Path) -> dict[str, set[str]]:
    """Module -> the trajforge modules it imports (names that are not modules are dropped)."""
    files = {
        module_name(root, path): path
        for folder in LAYERS
        for path in sorted((root / folder).rglob("*.py"))
    }
    # A module's own parent packages are loaded before it by Python itself: not an edge.
    return {
        name: {
            m
            for m in imports_of(path, name)
            if m in files and m != name and not name.startswith(m + ".")
        }
        for name, path in files.items()
    }


def folder(module: str) -> str:
    return module[len(PREFIX) :].split(".")[0]


def layer_errors(edges: dict[str, set[str]]) -> list[str]:
    errors = []
    for source, targets in sorted(edges.items()):
        for target in sorted(targets):
            a, b = folder(source), folder(target)
            if a != b and LAYERS[a] <= LAYERS[b]:
                errors.append(f"{source} imports {target}: {a} may not import {b}")
    return errors


def _home(module: str) -> str | None:
    """The language home ``module`` sits in ("generators.languages"), or None."""
    rest = module[len(PREFIX) :]
    return next((h for h in HOMES if rest == h or rest.startswith(h + ".")), None)


def _language_package(module: str) -> str | None:
    """The language a module of a language package belongs to ("python"), or None."""
    home = _home(module)
    if home is None:
        return None
    parts = module[len(PREFIX) + len(home) + 1 :].split(".")
    return parts[0] if len(parts) > 1 or _is_package(module) else None


_PACKAGES: set[str] = set()


def _is_package(module: str) -> bool:
    return module in _PACKAGES


def language_import_errors(edges: dict[str, set[str]]) -> list[str]:
    """A language's package imported from outside the language homes."""
    errors = []
    for source, targets in sorted(edges.items()):
        if _home(source) or source in IMPORTS_ELSEWHERE:
            continue
        for target in sorted(targets):
            if (language := _language_package(target)) is not None:
                errors.append(
                    f"{source} imports {target}: the {language} package is reached through "
                    "its language's interface and registry (languages/registry.py)"
                )
    return errors


def language_names(root: Path) -> set[str]:
    """Every language's ``name``, read from the classes of the language homes."""
    names = set()
    for home in HOMES:
        for path in (root / home.replace(".", "/")).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
                if isinstance(node, ast.ClassDef):
                    for item in node.body:
                        target = getattr(item, "target", None) or (
                            item.targets[0] if isinstance(item, ast.Assign) else None
                        )
                        value = getattr(item, "value", None)
                        if (
                            isinstance(target, ast.Name)
                            and target.id == "name"
                            and isinstance(value, ast.Constant)
                            and isinstance(value.value, str)
                        ):
                            names.add(value.value)
    return names


def language_name_errors(root: Path) -> list[str]:
    """A language's name as a string outside the language homes (and ``NAMED_ELSEWHERE``)."""
    names, errors = language_names(root), []
    for folder_name in LAYERS:
        for path in sorted((root / folder_name).rglob("*.py")):
            relative = path.relative_to(root).as_posix()
            if _home(module_name(root, path)) or relative in NAMED_ELSEWHERE:
                continue
            tree = ast.parse(path.read_text(), filename=str(path))
            docstrings = {
                id(node.body[0].value)
                for node in ast.walk(tree)
                if isinstance(
                    node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)
                )
                and node.body
                and isinstance(node.body[0], ast.Expr)
            }
            in_fstrings = {
                id(part)
                for node in ast.walk(tree)
                if isinstance(node, ast.JoinedStr)
                for part in node.values
            }
            for node in ast.walk(tree):
                if (
                    isinstance(node, ast.Constant)
                    and isinstance(node.value, str)
                    and node.value in names
                    and id(node) not in docstrings | in_fstrings
                ):
                    errors.append(
                        f"{relative}:{node.lineno} names the language {node.value!r}: ask the "
                        "task's language through its interface instead"
                    )
    return errors


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in edges.get(node, ()):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(edges):
        if node not in index:
            visit(node)
    return found


PARSE_HOME = "schemas/python_ast.py"
PARSES = {"parse", "literal_eval"}


def parse_errors(root: Path) -> list[str]:
    """``ast.parse``/``ast.literal_eval`` called outside ``PARSE_HOME`` and ``in_container/``."""
    errors = []
    for folder_name in LAYERS:
        for path in sorted((root / folder_name).rglob("*.py")):
            relative = path.relative_to(root).as_posix()
            if relative == PARSE_HOME or "/in_container/" in relative:
                continue
            for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
                call = node.func if isinstance(node, ast.Call) else None
                if (
                    isinstance(call, ast.Attribute)
                    and call.attr in PARSES
                    and isinstance(call.value, ast.Name)
                    and call.value.id == "ast"
                ):
                    errors.append(
                        f"{relative}:{node.lineno} calls ast.{call.attr}: parse through "
                        f"{PARSE_HOME} (one parse at a time on CPython 3.11, gh-106905)"
                    )
    return errors


def check(root: Path) -> list[str]:
    edges = graph(root)
    _PACKAGES.update(
        module_name(root, path)
        for folder_name in LAYERS
        for path in (root / folder_name).rglob("__init__.py")
    )
    errors = layer_errors(edges)
    errors += [f"import circle: {' <-> '.join(c)}" for c in cycles(edges)]
    errors += language_import_errors(edges)
    errors += language_name_errors(root)
    errors += parse_errors(root)
    return errors


def main(argv: list[str]) -> int:
    root = Path(argv[1]) if len(argv) > 1 else Path(__file__).resolve().parents[1]
    errors = check(root)
    for error in errors:
        print(f"layers: {error}", file=sys.stderr)
    return 1 if errors else 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv))
