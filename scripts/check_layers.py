"""Imports run one way: pipelines -> generators -> verifiers, filters -> schemas; no file circles.

A module may import its own folder and any folder of a lower layer; verifiers and filters sit side
by side and do not import each other; nothing imports pipelines from outside it. Every import
counts, a lazy one inside a function too. The package `trajforge` itself is `pipelines/api/` (the
public API, see setup.py), so `from trajforge import X` counts as importing that pipelines module:
no other room may, and inside pipelines it may not close a circle. Exit 1 with one line per broken
rule.

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


def check(root: Path) -> list[str]:
    edges = graph(root)
    errors = layer_errors(edges)
    errors += [f"import circle: {' <-> '.join(c)}" for c in cycles(edges)]
    return errors


def main(argv: list[str]) -> int:
    root = Path(argv[1]) if len(argv) > 1 else Path(__file__).resolve().parents[1]
    errors = check(root)
    for error in errors:
        print(f"layers: {error}", file=sys.stderr)
    return 1 if errors else 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv))
