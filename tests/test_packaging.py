"""The installed package: one `trajforge` namespace, the layering rule, and the console script."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

from conftest import ROOT, TRAJFORGE

FOLDERS = ("pipelines", "generators", "verifiers", "filters", "schemas")
CHECK_LAYERS = ROOT / "scripts" / "check_layers.py"

IMPORT_CHECK = """
import importlib.util, json, sys
import trajforge.verifiers, trajforge.pipelines.cli
from trajforge.pipelines.cli import build_parser
print(json.dumps({
    "generic": {name: importlib.util.find_spec(name) is not None for name in sys.argv[1:]},
    "verifiers": trajforge.verifiers.__name__,
    "cli_main": callable(trajforge.pipelines.cli.main),
    "prog": build_parser().prog,
    "cwd_on_path": any(p in ("", ".") for p in sys.path),
}))
"""


def test_installed_package_imports_from_outside_the_checkout(tmp_path):
    proc = subprocess.run(
        [sys.executable, "-c", IMPORT_CHECK, *FOLDERS],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    found = json.loads(proc.stdout.strip().splitlines()[-1])
    assert found["verifiers"] == "trajforge.verifiers"
    assert found["cli_main"] is True and found["prog"] == "trajforge"
    # No generic top-level package is installed: PyPI's `verifiers` and ours cannot collide.
    assert found["generic"] == dict.fromkeys(FOLDERS, False)
    assert not (tmp_path / "verifiers").exists()  # nothing in the cwd could have answered


def _check_layers(root: Path | None = None) -> subprocess.CompletedProcess[str]:
    args = [sys.executable, str(CHECK_LAYERS)] + ([str(root)] if root else [])
    return subprocess.run(args, capture_output=True, text=True, timeout=120, check=False)


def test_layer_check_passes_on_the_real_tree():
    proc = _check_layers()
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == ""


def test_layer_check_names_each_violation(tmp_path):
    for folder in FOLDERS:
        shutil.copytree(
            ROOT / folder, tmp_path / folder, ignore=shutil.ignore_patterns("__pycache__")
        )
    assert _check_layers(tmp_path).returncode == 0  # the copy alone is clean
    (tmp_path / "schemas" / "upward.py").write_text(
        "def run():\n    from trajforge.pipelines.cli import main\n\n    return main\n"
    )
    (tmp_path / "verifiers" / "sideways.py").write_text(
        "from trajforge.filters.thresholds import apply_thresholds\n"
    )
    (tmp_path / "filters" / "ring_a.py").write_text("from trajforge.filters import ring_b\n")
    (tmp_path / "filters" / "ring_b.py").write_text("from . import ring_a\n")  # relative import
    proc = _check_layers(tmp_path)
    assert proc.returncode == 1
    lines = proc.stderr.strip().splitlines()
    assert sorted(lines) == sorted(
        [
            "layers: trajforge.schemas.upward imports trajforge.pipelines.cli: "
            "schemas may not import pipelines",
            "layers: trajforge.verifiers.sideways imports trajforge.filters.thresholds: "
            "verifiers may not import filters",
            "layers: import circle: trajforge.filters.ring_a <-> trajforge.filters.ring_b",
        ]
    ), proc.stderr


def test_unknown_command_is_a_usage_error_without_traceback(tmp_path):
    assert Path(TRAJFORGE) == Path(sys.executable).parent / "trajforge"
    proc = subprocess.run(
        [TRAJFORGE, "frobnicate"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 2
    assert proc.stderr.startswith("usage: trajforge")
    assert "invalid choice: 'frobnicate'" in proc.stderr
    assert "Traceback" not in proc.stderr and proc.stdout == ""
