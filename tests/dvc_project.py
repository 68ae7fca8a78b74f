"""A DVC project made of this repository's dvc.yaml and code, for the tests that run `dvc repro`."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from conftest import ROOT

PACKAGES = ("generators", "pipelines", "verifiers", "filters", "schemas")


def dvc(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """The venv's `dvc`, with the venv's tools first on PATH (the stages call `trajforge`)."""
    bin_dir = str(Path(sys.executable).parent)
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", "DVC_NO_ANALYTICS": "1"}
    return subprocess.run(
        [f"{bin_dir}/dvc", *args], cwd=cwd, env=env, capture_output=True, text=True, check=False
    )


def copy_project(project: Path) -> Path:
    """`project` holding dvc.yaml and the code its stages depend on (params.yaml is the test's)."""
    project.mkdir(parents=True, exist_ok=True)
    shutil.copy(ROOT / "dvc.yaml", project)
    for package in PACKAGES:
        shutil.copytree(
            ROOT / package, project / package, ignore=shutil.ignore_patterns("__pycache__")
        )
    return project


def init_project(project: Path) -> None:
    """`git init` and `dvc init` in a project whose params.yaml is written."""
    subprocess.run(["git", "init", "-q"], cwd=project, check=True)
    done = dvc("init", "-q", cwd=project)
    assert done.returncode == 0, done.stderr
