"""`dvc repro` with the project's own dvc.yaml, on a tiny params file."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import datasets
import polars as pl
import pytest
from conftest import ROOT
from scripted_agents import GOOD_STATEMENT, reporter_and_fixer
from scripted_llm import ScriptedLLM

pytestmark = [pytest.mark.docker, pytest.mark.slow]


def _dvc(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    bin_dir = str(Path(sys.executable).parent)
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", "DVC_NO_ANALYTICS": "1"}
    return subprocess.run(
        [f"{bin_dir}/dvc", *args], cwd=cwd, env=env, capture_output=True, text=True, check=False
    )


def test_dvc_repro_runs_every_stage(calc_repo, docker_engine, tmp_path):
    with ScriptedLLM(reporter_and_fixer) as llm:
        _repro_twice(calc_repo, tmp_path, llm.base_url)


def _repro_twice(calc_repo, tmp_path: Path, base_url: str) -> None:
    path, shas = calc_repo
    project = tmp_path / "project"
    project.mkdir()
    shutil.copy(ROOT / "dvc.yaml", project)
    for package in ("generators", "pipelines", "verifiers", "filters", "schemas"):
        shutil.copytree(
            ROOT / package, project / package, ignore=shutil.ignore_patterns("__pycache__")
        )
    (project / "params.yaml").write_text(
        f"cache_dir: {tmp_path / 'cache'}\n"
        f"sources:\n  repos: [{path}]\n  pypi: []\n"
        "inject:\n  pypi: []\n"
        "pipeline:\n  runner: local\n"
        "curate:\n  threshold: 0.8\n"
        "export:\n  name: calc-tasks\n"
        f"mine:\n  commits: [{shas['fix_add']}]\n"
        "environment:\n  default_python: '3.11'\n"
        "sandbox:\n  kind: docker\n"
        "validate:\n  test_timeout_s: 60\n"
        f"llm:\n  base_url: {base_url}\n  model: scripted\n"
        "describe:\n  attempts: 2\n"
        "rollout:\n  attempts: 1\n  max_steps: 6\n"
        f"explore:\n  repos: [{path}]\n  explorations: 1\n  max_steps: 2\n"
    )
    subprocess.run(["git", "init", "-q"], cwd=project, check=True)
    assert _dvc("init", "-q", cwd=project).returncode == 0

    first = _dvc("repro", cwd=project)
    assert first.returncode == 0, first.stdout + first.stderr
    tasks = pl.read_parquet(project / "data" / "validate" / "tasks" / "*.parquet")
    assert tasks["FAIL_TO_PASS"].to_list() == [["tests/test_ops.py::test_add"]]
    assert (project / "dvc.lock").exists()
    export = project / "data" / "export"
    loaded = datasets.load_dataset(str(export), "tasks")
    assert loaded["train"]["FAIL_TO_PASS"] == [["tests/test_ops.py::test_add"]]
    assert loaded["train"]["problem_statement"] == [GOOD_STATEMENT]  # describe
    sft = datasets.load_dataset(str(export), "sft")  # rollout: verified, exported
    assert [m["role"] for m in sft["train"]["messages"][0][:2]] == ["system", "user"]
    assert (export / "data_docs" / "index.html").exists()
    assert "export" in (project / "dvc.lock").read_text()  # the version is recorded by DVC
    assert "<svg" in (project / "data" / "report" / "index.html").read_text()

    second = _dvc("repro", cwd=project)
    assert second.returncode == 0
    assert "didn't change, skipping" in second.stdout or "up to date" in second.stdout
