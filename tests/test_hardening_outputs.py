"""Hardening (issue 12): outputs never replace what trajforge did not write, corrupt input Parquet
is one line while the good shards go on, and unclear inputs get a clear line.

Everything goes through the real CLI, on repositories and Parquet files the tests build.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from conftest import run_cli, write_params
from curated_factory import make_task, write_curated
from repo_factory import GIT_ENV
from trajforge.pipelines.runtime.sinks import MARKER
from trajforge.schemas.candidate import Candidate, CandidateMeta
from trajforge.schemas.storage import write_records


def _one_line(proc: subprocess.CompletedProcess, code: int, *needles: str) -> str:
    """The run ended with ``code`` and said it in one ``trajforge:`` line (or argparse's)."""
    assert proc.returncode == code, proc.stderr
    assert "Traceback" not in proc.stderr, proc.stderr
    lines = [line for line in proc.stderr.splitlines() if all(n in line for n in needles)]
    assert len(lines) == 1, proc.stderr
    return lines[0]


def _rejections(directory: Path) -> pl.DataFrame:
    return pl.read_parquet(directory / "rejections" / "*.parquet")


# 1. --output never deletes what the user did not give us ------------------------------------


@pytest.mark.slow
def test_output_is_replaced_only_when_trajforge_wrote_it(tmp_path, calc_repo):
    repo, _ = calc_repo
    write_params(tmp_path / "params.yaml", tmp_path / "cache")
    mine = ("mine", "--repo", str(repo), "--max-commits", "3")

    unrelated = tmp_path / "notes"
    unrelated.mkdir()
    (unrelated / "todo.txt").write_text("mine, not trajforge's")
    line = _one_line(run_cli(*mine, "--output", "notes", cwd=tmp_path), 2, "trajforge:")
    assert "notes exists and was not written by trajforge" in line
    assert (unrelated / "todo.txt").read_text() == "mine, not trajforge's"

    line = _one_line(run_cli(*mine, "--output", ".", cwd=tmp_path), 2, "trajforge:")
    assert "is the current directory" in line
    line = _one_line(run_cli(*mine, "--output", "..", cwd=tmp_path), 2, "trajforge:")
    assert "parent of the current directory" in line

    copy = tmp_path / "calc"  # the repository itself, .git included, given as the output
    shutil.copytree(repo, copy)
    proc = run_cli("mine", "--repo", "calc", "--output", "calc", cwd=tmp_path)
    assert "is or holds the input calc" in _one_line(proc, 2, "trajforge:")
    assert (copy / ".git" / "HEAD").is_file()
    proc = run_cli("mine", "--repo", "calc", "--output", str(tmp_path), cwd=tmp_path / "calc")
    assert "parent of the current directory" in _one_line(proc, 2, "trajforge:")

    # A glob character in the name: another run's staging directory survives.
    other = tmp_path / "run1.staging-abcdef12"
    other.mkdir()
    (other / "part.parquet").write_text("another run, still writing")
    proc = run_cli(*mine, "--output", "run[1]", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert (other / "part.parquet").read_text() == "another run, still writing"
    assert (tmp_path / "run[1]" / MARKER).is_file()
    assert (tmp_path / "run[1]" / "summary.json").is_file()
    # ... and a run's own output is replaced by a rerun, leaving no staging behind.
    proc = run_cli(*mine, "--output", "run[1]", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert not list(tmp_path.glob("run[[]1].staging-*"))

    # An output of an older trajforge (no marker, only a summary and table folders) is replaced.
    legacy = tmp_path / "legacy"
    shutil.copytree(tmp_path / "run[1]", legacy)
    (legacy / MARKER).unlink()
    proc = run_cli(*mine, "--output", "legacy", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert (legacy / MARKER).is_file()
    # A user's folder that has an older output's names alone (a README.md and a summary.json of
    # its own) is not one: refused in one line, the README kept.
    mine_own = tmp_path / "d"
    mine_own.mkdir()
    (mine_own / "README.md").write_text("# my notes\n")
    (mine_own / "summary.json").write_text(json.dumps({"title": "my summary"}))
    line = _one_line(run_cli(*mine, "--output", "d", cwd=tmp_path), 2, "trajforge:")
    assert "--output d exists and was not written by trajforge; pass a new directory" in line
    assert (mine_own / "README.md").read_text() == "# my notes\n"

    # export and report follow the same rule.
    curated = write_curated(tmp_path / "curated", [make_task("acme/alpha", 1)])
    proc = run_cli("export", "--input", str(curated), "--output", "notes", cwd=tmp_path)
    assert "notes exists and was not written by trajforge" in _one_line(proc, 2, "trajforge:")
    proc = run_cli("export", "--input", str(curated), "--output", "curated", cwd=tmp_path)
    assert "is or holds the input" in _one_line(proc, 2, "trajforge:")
    assert (unrelated / "todo.txt").is_file() and (curated / "tasks").is_dir()
    stage = f"mine={tmp_path / 'run[1]'}"
    proc = run_cli("report", "--stage", stage, "--output", "notes", cwd=tmp_path)
    assert "notes is a directory" in _one_line(proc, 2, "trajforge:")
    proc = run_cli("report", "--stage", stage, "--output", "notes/todo.txt", cwd=tmp_path)
    assert "is not an HTML report" in _one_line(proc, 2, "trajforge:")
    assert (unrelated / "todo.txt").read_text() == "mine, not trajforge's"
    for _ in range(2):  # a report overwrites the report it wrote
        proc = run_cli("report", "--stage", stage, "--output", "report.html", cwd=tmp_path)
        assert proc.returncode == 0, proc.stderr


# 2. corrupt input Parquet is one line, and the good shards go on ----------------------------


def _bad_shards(table: Path) -> dict[str, str]:
    """Next to the good shards of ``table``: one file of each way a shard can be broken."""
    good = next(table.glob("*.parquet")).read_bytes()
    (table / "part-zero.parquet").write_bytes(b"")
    (table / "part-truncated.parquet").write_bytes(good[: len(good) // 2])
    (table / "part-text.parquet").write_text("instance_id,repo\nnot,parquet\n")
    pq.write_table(pa.table({"something": ["else"]}), table / "part-schema.parquet")
    return {
        "part-zero.parquet": "not a readable Parquet file",
        "part-truncated.parquet": "not a readable Parquet file",
        "part-text.parquet": "not a readable Parquet file",
        "part-schema.parquet": "lacks columns",
    }


def _named(stderr: str, stage: str, bad: dict[str, str]) -> None:
    assert "Traceback" not in stderr, stderr
    for name, why in bad.items():
        lines = [line for line in stderr.splitlines() if name in line]
        assert len(lines) == 1 and lines[0].startswith(f"{stage}: ") and why in lines[0], stderr


@pytest.mark.slow
def test_corrupt_input_files_are_named_and_good_shards_go_on(tmp_path):
    write_params(tmp_path / "params.yaml", tmp_path / "cache")
    tasks = [make_task("acme/alpha", 1), make_task("acme/beta", 2)]
    curated = write_curated(tmp_path / "in", tasks)
    bad = _bad_shards(curated / "tasks")

    proc = run_cli("curate", "--input", "in", "--output", "curated", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    _named(proc.stderr, "curate", bad)
    kept = pl.read_parquet(tmp_path / "curated" / "tasks" / "*.parquet")
    rejections = _rejections(tmp_path / "curated")
    rejected = rejections.filter(pl.col("reason") == "bad_input_file")
    assert sorted(Path(p).name for p in rejected["input"]) == sorted(bad)
    assert kept.height + rejections.height - rejected.height == len(tasks)  # all good rows seen
    summary = json.loads((tmp_path / "curated" / "summary.json").read_text())
    assert summary["rejected"]["bad_input_file"] == len(bad)

    proc = run_cli("export", "--input", "in", "--output", "dataset", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    _named(proc.stderr, "export", bad)
    assert pl.read_parquet(tmp_path / "dataset" / "tasks" / "*.parquet").height == len(tasks)

    # stats and the report read any table (an export's too) and only the columns present: a
    # file of another schema still counts its rows; an unreadable one is named and left out.
    unreadable = {name: why for name, why in bad.items() if "schema" not in name}
    proc = run_cli("stats", "in", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    _named(proc.stderr, "stats", unreadable)
    assert re.search(r"^tasks\s+3 rows$", proc.stdout, re.M), proc.stdout

    proc = run_cli("report", "--stage", "curate=in", "--output", "r.html", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    _named(proc.stderr, "report", unreadable)
    assert "3 unreadable files left out" in (tmp_path / "r.html").read_text()

    # Nothing readable left: one line, exit 2, for every stage that reads the table.
    for good in (curated / "tasks").glob("part-0*.parquet"):
        good.unlink()
    for command in (("curate", "--output", "c2"), ("export", "--output", "d2")):
        proc = run_cli(command[0], "--input", "in", *command[1:], cwd=tmp_path)
        line = _one_line(proc, 2, "trajforge:")
        assert "no readable tasks" in line, proc.stderr
        _named(proc.stderr, command[0], bad)


@pytest.mark.slow
def test_validate_sets_aside_corrupt_candidate_shards(tmp_path):
    write_params(tmp_path / "params.yaml", tmp_path / "cache")
    missing = str(tmp_path / "gone")  # a source that no longer exists: rejected without Docker
    candidate = Candidate(
        candidate_id="c1",
        repo="local/gone",
        source=missing,
        base_commit="0" * 40,
        patch="",
        test_patch="",
        origin="commit",
        created_at="2024-01-01T00:00:00Z",
        meta=CandidateMeta("0" * 40, "m", "2024-01-01T00:00:00Z", 1, 1, 1),
    )
    table = tmp_path / "mined" / "candidates"
    write_records(str(table / "part-00000-of-00001.parquet"), [candidate], Candidate.ARROW_SCHEMA)
    bad = _bad_shards(table)
    proc = run_cli("validate", "--input", "mined", "--output", "out", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    _named(proc.stderr, "validate", bad)
    reasons = _rejections(tmp_path / "out")["reason"].to_list()
    assert sorted(reasons) == sorted(["bad_input_file"] * len(bad) + ["repo_missing"])

    (table / "part-00000-of-00001.parquet").unlink()
    proc = run_cli("validate", "--input", "mined", "--output", "out2", cwd=tmp_path)
    assert "no readable candidates" in _one_line(proc, 2, "trajforge:")
    _named(proc.stderr, "validate", bad)


# 3. unclear messages ------------------------------------------------------------------------


@pytest.mark.slow
def test_unclear_inputs_get_a_clear_line(tmp_path, calc_repo):
    repo, _ = calc_repo
    write_params(tmp_path / "params.yaml", tmp_path / "cache")
    empty = tmp_path / "empty"
    empty.mkdir()
    subprocess.run(["git", "init", "-q", str(empty)], check=True, env={**os.environ, **GIT_ENV})
    (empty / "tests").mkdir()
    (empty / "tests" / "test_x.py").write_text("def test_x():\n    pass\n")

    for stage in ("mine", "inject"):
        proc = run_cli(stage, "--repo", "empty", "--output", stage, cwd=tmp_path)
        assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr
        assert "no_commits" in proc.stderr
        (detail,) = _rejections(tmp_path / stage)["detail"].to_list()
        assert "has no commits" in detail and "None" not in detail

    refused = [
        ("mine", "--repo", str(repo), "--max-commits", "-5"),
        ("mine", "--repo", str(repo), "--max-commits", "0"),
        ("mine", "--repo", str(repo), "--shards", "0"),
        ("inject", "--repo", str(repo), "--max-candidates", "0"),
        ("validate", "--input", "mine", "--workers", "0"),
        ("validate", "--input", "mine", "--reruns", "-1"),
        ("rollout", "--input", "mine", "--attempts", "0"),
    ]
    for args in refused:
        proc = run_cli(*args, "--output", "x", cwd=tmp_path)
        line = _one_line(proc, 2, "error:")
        assert args[-2] in line and "or more" in line, proc.stderr
    assert not (tmp_path / "x").exists()

    for option in ("--since", "--until"):
        proc = run_cli(
            "mine", "--repo", str(repo), option, "not a date", "--output", "x", cwd=tmp_path
        )
        line = _one_line(proc, 2, "trajforge:")
        assert f"{option} 'not a date' is not a date git can read" in line
    proc = run_cli(
        "mine", "--repo", str(repo), "--since", "2023-12-31", "--max-commits", "2",
        "--output", "dated", cwd=tmp_path,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
