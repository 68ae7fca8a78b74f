"""Every program a Harbor task folder ships (``harbor.shipped_programs``) runs alone there, under
the task image's Python: it may import the standard library, pytest (the image has it) and the
other shipped programs, and anything else only inside ``try`` with an ``ImportError`` fallback.
(sentinels.py once imported trajforge's parse lock unguarded: every Harbor grade was a
``grader_error``, ModuleNotFoundError.)"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest
from trajforge.pipelines.release.harbor import shipped_programs
from trajforge.verifiers.grader import supervised
from trajforge.verifiers.languages.python import pytest_run
from trajforge.verifiers.languages.python.in_container import harbor_grade

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


def _unshippable(name: str, source: str, shipped: set[str]) -> list[str]:
    tree = ast.parse(source)
    guarded = _guarded(tree)
    bad = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module]
        else:
            continue
        for imported in names:
            top = imported.split(".")[0]
            allowed = top in sys.stdlib_module_names or top in IN_THE_IMAGE or top in shipped
            if not allowed and id(node) not in guarded:
                bad.append(f"{name}:{node.lineno} imports {imported}")
    return bad


def test_each_shipped_program_imports_only_what_a_task_folder_has():
    programs = shipped_programs()
    shipped = {Path(path).stem for path in programs}
    bad = []
    for path, data in programs.items():
        bad += _unshippable(Path(path).name, data.decode(), shipped)
    assert len(programs) == 12 and bad == []


def test_the_folder_installs_the_graded_runs_files_as_a_graded_container_has_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    """One list: harbor_grade lays out under the grader's root exactly what ``add_grader`` ships
    into a validate or evaluate container."""
    folder = tmp_path / "tests" / "trajforge"
    for path, data in shipped_programs().items():
        (folder / path).parent.mkdir(parents=True, exist_ok=True)
        (folder / path).write_bytes(data)
    monkeypatch.setattr(harbor_grade, "HERE", str(folder))
    root = tmp_path / "grader"
    root.mkdir()
    (root / "planted.py").write_text("left by someone else")
    harbor_grade.install_grader(str(root))
    installed = {str(p.relative_to(root)): p.read_bytes() for p in root.rglob("*") if p.is_file()}
    assert installed == supervised.grader_files(pytest_run.programs())
    assert {p.stat().st_mode & 0o777 for p in root.rglob("*") if p.is_file()} == {0o644}
    assert (root / "out").stat().st_mode & 0o777 == 0o700


def test_an_unguarded_import_of_trajforge_is_caught(tmp_path: Path):
    source = (
        "import ast\nfrom trajforge.schemas import python_ast\n"
        "try:\n    from trajforge.schemas.python_ast import parse\n"
        "except ImportError:\n    parse = ast.parse\n"
    )
    assert _unshippable("program.py", source, set()) == ["program.py:2 imports trajforge.schemas"]
