"""Every program a Harbor task folder ships (``harbor.PROGRAMS``) runs alone there, under the
task image's Python: it may import the standard library, pytest (the image has it) and the
other shipped programs, and anything else only inside ``try`` with an ``ImportError`` fallback.
(sentinels.py once imported trajforge's parse lock unguarded: every Harbor grade was a
``grader_error``, ModuleNotFoundError.)"""

from __future__ import annotations

import ast
import importlib.util
import sys
from pathlib import Path

from trajforge.pipelines.release.harbor import PROGRAMS

IN_THE_IMAGE = {"__future__", "pytest", "_pytest", "pluggy"}


def _guarded(tree: ast.AST) -> set[int]:
    """ids of the import nodes inside a ``try`` that catches ImportError."""
    found: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Try) and any(
            isinstance(h.type, ast.Name) and h.type.id in ("ImportError", "ModuleNotFoundError")
            for h in node.handlers
        ):
            found.update(id(n) for stmt in node.body for n in ast.walk(stmt))
    return found


def _unshippable(path: Path, shipped: set[str]) -> list[str]:
    tree = ast.parse(path.read_text())
    guarded = _guarded(tree)
    bad = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module]
        else:
            continue
        for name in names:
            top = name.split(".")[0]
            allowed = top in sys.stdlib_module_names or top in IN_THE_IMAGE or top in shipped
            if not allowed and id(node) not in guarded:
                bad.append(f"{path.name}:{node.lineno} imports {name}")
    return bad


def test_each_shipped_program_imports_only_what_a_task_folder_has():
    shipped = {name.removesuffix(".py") for _, _, name in PROGRAMS}
    bad = []
    for package, file, _ in PROGRAMS:
        spec = importlib.util.find_spec(package)
        assert spec is not None and spec.submodule_search_locations, package
        bad += _unshippable(Path(next(iter(spec.submodule_search_locations))) / file, shipped)
    assert bad == []


def test_an_unguarded_import_of_trajforge_is_caught(tmp_path: Path):
    program = tmp_path / "program.py"
    program.write_text(
        "import ast\nfrom trajforge.schemas import python_ast\n"
        "try:\n    from trajforge.schemas.python_ast import parse\n"
        "except ImportError:\n    parse = ast.parse\n"
    )
    assert _unshippable(program, set()) == ["program.py:2 imports trajforge.schemas"]
