"""The language layer's rule (scripts/check_layers.py): a language's package is imported only from
the language homes, and outside them no code names a language. Checked on a tree written here,
with the real languages' names read from the real homes."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ROOMS = ("pipelines", "generators", "verifiers", "filters", "schemas")


def _checker():
    sys.path.insert(0, str(ROOT / "scripts"))
    try:
        import check_layers
    finally:
        sys.path.remove(str(ROOT / "scripts"))
    return check_layers


def _tree(tmp_path: Path) -> Path:
    """The five rooms with the two real language homes and nothing else."""
    for room in ROOMS:
        (tmp_path / room).mkdir()
        (tmp_path / room / "__init__.py").write_text("")
    for home in ("generators/languages", "verifiers/languages"):
        shutil.copytree(ROOT / home, tmp_path / home, ignore=shutil.ignore_patterns("__pycache__"))
    return tmp_path


def test_the_real_tree_keeps_the_rule():
    assert _checker().check(ROOT) == []


def test_the_languages_are_read_from_their_homes():
    names = _checker().language_names(ROOT)
    assert {"python", "javascript"} <= names


def test_a_stage_comparing_a_language_name_is_an_error(tmp_path: Path):
    root = _tree(tmp_path)
    (root / "pipelines" / "stage.py").write_text(
        '"""A docstring may say "javascript"."""\n\n\n'
        'def pick(task):\n    return task.language == "javascript"\n'
    )
    (root / "pipelines" / "fstring.py").write_text('def run(v):\n    return f"python{v}"\n')
    errors = _checker().check(root)
    assert errors == [
        "pipelines/stage.py:5 names the language 'javascript': ask the task's language through "
        "its interface instead"
    ]


def test_importing_a_language_package_from_outside_the_homes_is_an_error(tmp_path: Path):
    root = _tree(tmp_path)
    (root / "pipelines" / "stage.py").write_text(
        "from trajforge.verifiers.languages.registry import grading_for\n"
        "from trajforge.verifiers.languages.python import patch_policy\n"
    )
    errors = _checker().check(root)
    assert errors == [
        "trajforge.pipelines.stage imports trajforge.verifiers.languages.python: the python "
        "package is reached through its language's interface and registry "
        "(languages/registry.py)",
        "trajforge.pipelines.stage imports trajforge.verifiers.languages.python.patch_policy: the "
        "python package is reached through its language's interface and registry "
        "(languages/registry.py)",
    ]
