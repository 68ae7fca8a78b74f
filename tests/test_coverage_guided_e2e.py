"""Inject where the tests look, end to end: inject, validate (which measures the clean suite's
coverage), inject again over the same snapshot: the second round's bugs all sit in functions the
passing tests run, so none comes back not_covered. Real git, real Docker, real coverage."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest
from conftest import run_cli, write_params
from coverage_repo import COVERED, build_halfway_repo

pytestmark = [pytest.mark.docker, pytest.mark.usefixtures("docker_engine")]


def _round(tmp_path: Path, repo: Path, params: Path, name: str) -> tuple[dict, dict, int]:
    """One inject and its validate; (inject summary, validate summary, not_covered count)."""
    inject = run_cli(
        "inject", "--repo", str(repo), "--max-candidates", "8", "--seed", "4",
        "--params", str(params), "--output", str(tmp_path / f"{name}-inject"), cwd=tmp_path,
    )  # fmt: skip
    assert inject.returncode == 0, inject.stderr
    validate = run_cli(
        "validate", "--input", str(tmp_path / f"{name}-inject"),
        "--output", str(tmp_path / f"{name}-val"), "--params", str(params), cwd=tmp_path,
    )  # fmt: skip
    assert validate.returncode == 0, validate.stderr
    rejections = pl.read_parquet(tmp_path / f"{name}-val" / "rejections" / "*.parquet")
    not_covered = rejections.filter(pl.col("reason") == "not_covered").height
    summaries = (
        json.loads((tmp_path / f"{name}-{stage}" / "summary.json").read_text())
        for stage in ("inject", "val")
    )
    return *summaries, not_covered  # type: ignore[return-value]


def test_second_inject_aims_at_covered_functions_and_wastes_no_run(tmp_path: Path):
    repo = tmp_path / "halfway"
    build_halfway_repo(repo)
    # inject measuring the first contact itself: test_inject_first_contact_e2e.py
    extra = "inject:\n  combos: 0\n  measure_coverage: false\n"
    params = write_params(tmp_path / "params.yaml", tmp_path / "cache", extra)
    first_inject, first_val, first_wasted = _round(tmp_path, repo, params, "first")
    assert first_inject["sites_unguided"] == 1  # nothing measured yet: sampled as before
    assert first_wasted > 0  # half the functions are never run: some bugs land there
    assert first_val["wasted"] == f"local/halfway {first_wasted} of 8 not_covered"

    second_inject, second_val, second_wasted = _round(tmp_path, repo, params, "second")
    assert second_inject["sites_guided"] == 1
    assert second_wasted == 0
    assert second_val["wasted"] == "local/halfway 0 of 8 not_covered"
    candidates = pl.read_parquet(tmp_path / "second-inject" / "candidates" / "*.parquet")
    messages = candidates.select(pl.col("meta").struct.field("message"))["message"]
    assert all(any(f"in {name} " in m for name in COVERED) for m in messages), list(messages)
