"""Issue 30's test-run classes as a user meets them: ``trajforge inject`` then ``validate`` on one
test-built repository (tests/reach_repos.py), and ``validate`` again, which must build nothing.
"""

from __future__ import annotations

import json
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import polars as pl
from conftest import run_cli


@dataclass(frozen=True)
class Outputs:
    candidates: pl.DataFrame
    inject_summary: dict[str, Any]
    tasks: list[dict[str, Any]]
    rejections: list[dict[str, Any]]
    summary: dict[str, Any]
    rerun_summary: dict[str, Any]
    rerun_tasks: list[dict[str, Any]]


def write_params(path: Path, validate: str = "") -> Path:
    """Small, quick runs: few bugs, short limits, the image's Python only."""
    path.write_text(
        f"cache_dir: {path.parent / 'cache'}\n"
        f"validate:\n  test_timeout_s: 240\n  workers: 1\n  gold_runs: 0\n{validate}"
        "inject:\n  combos: 0\n"
        "environment:\n  pythons: ['3.11']\n"
    )
    return path


def rows(folder: Path) -> list[dict[str, Any]]:
    files = sorted(folder.glob("*.parquet"))
    return pl.concat([pl.read_parquet(f) for f in files]).to_dicts() if files else []


def inject_and_validate(repo: Path, work: Path, validate: str = "", bugs: int = 3) -> Outputs:
    """The CLI end to end; every image its builds made is removed by ``remove_images``."""
    params = write_params(work / "params.yaml", validate)
    inject = run_cli(
        "inject", "--repo", str(repo), "--max-candidates", str(bugs), "--seed", "0",
        "--params", str(params), "--output", str(work / "inject"), cwd=work,
    )  # fmt: skip
    assert inject.returncode == 0, inject.stderr
    outputs = {}
    for name in ("val", "again"):
        done = run_cli(
            "validate", "--input", str(work / "inject"), "--output", str(work / name),
            "--params", str(params), cwd=work,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        outputs[name] = json.loads((work / name / "summary.json").read_text())
    return Outputs(
        candidates=pl.read_parquet(work / "inject" / "candidates" / "*.parquet"),
        inject_summary=json.loads((work / "inject" / "summary.json").read_text()),
        tasks=rows(work / "val" / "tasks"),
        rejections=rows(work / "val" / "rejections"),
        summary=outputs["val"],
        rerun_summary=outputs["again"],
        rerun_tasks=rows(work / "again" / "tasks"),
    )


def remove_images(work: Path) -> None:
    """Every environment image a build under ``work`` made (each writes its build log)."""
    built = sorted({log.stem for log in work.glob("**/build-logs/*.log")})
    if built:
        images = [f"trajforge-env:{profile_id}" for profile_id in built]
        subprocess.run(["docker", "rmi", "-f", *images], capture_output=True, check=False)


def run_wild(repo: Path, tmp_path: Path, validate: str = "") -> Outputs:
    """``inject_and_validate`` in ``tmp_path/run``, the images it built removed whatever happens."""
    work = tmp_path / "run"
    work.mkdir()
    try:
        return inject_and_validate(repo, work, validate)
    finally:
        remove_images(work)
