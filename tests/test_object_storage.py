"""Stage outputs on a real S3 endpoint (SeaweedFS on 127.0.0.1), on a 2-process Dask cluster.

The stage chain reads and writes ``s3://`` only; every table must hold what the in-process runner
writes on local disk, byte for byte. Publishing on an object store has no rename: a marker the run
writes last commits it, readers trust it, and a run cut off before it is refused, then redone.
Credentials reach the CLI and the Dask workers the way users pass them: ``AWS_*`` variables.
"""

from __future__ import annotations

import io
import json
import subprocess
from pathlib import Path

import polars as pl
import pytest
from conftest import run_cli, write_params
from s3_store import BUCKET, client, objects, seaweedfs, upload
from test_dask_runner import CURATE_PARAMS, write_curate_inputs
from trajforge.pipelines.runtime import cost

pytestmark = [pytest.mark.docker, pytest.mark.dask, pytest.mark.s3]

VOLATILE = {
    "seconds", "cache_hits", "images_built", "images_pulled", "images_pushed",
    "build s per image", "build s (slowest image)",  # timings, like "seconds"
}  # fmt: skip


@pytest.fixture(scope="module")
def s3(tmp_path_factory: pytest.TempPathFactory):
    with seaweedfs(tmp_path_factory.mktemp("seaweedfs")) as env:
        yield env


def _ok(proc: subprocess.CompletedProcess) -> str:
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr, proc.stderr
    return proc.stderr


def _one_line(proc: subprocess.CompletedProcess, needle: str) -> str:
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr, proc.stderr
    lines = [line for line in proc.stderr.splitlines() if needle in line]
    assert len(lines) == 1, proc.stderr
    return lines[0]


def _local_files(directory: Path) -> dict[str, bytes]:
    return {
        p.relative_to(directory).as_posix(): p.read_bytes()
        for p in sorted(directory.rglob("*"))
        if p.is_file()
    }


def _summary(raw: bytes) -> dict:
    return {
        k: v for k, v in json.loads(raw).items() if k not in VOLATILE and not cost.is_measured(k)
    }


def _same_stage_output(local: Path, remote: dict[str, bytes], tables: tuple[str, ...]) -> None:
    """The S3 output holds the local run's Parquet files, byte for byte, the same summary, and a
    marker that lists exactly the files it holds."""
    want = _local_files(local)
    marker = json.loads(remote.pop(".trajforge-output"))
    assert marker["files"] == {name: len(data) for name, data in remote.items()}
    parquet = {n: d for n, d in want.items() if n.endswith(".parquet")}
    assert {n: d for n, d in remote.items() if n.endswith(".parquet")} == parquet
    for table in tables:
        assert any(n.startswith(f"{table}/") for n in parquet), f"{table} missing"
    assert _summary(remote["summary.json"]) == _summary(want["summary.json"])


def _frame(files: dict[str, bytes], table: str) -> pl.DataFrame:
    parts = [pl.read_parquet(io.BytesIO(data)) for name, data in sorted(files.items())
             if name.startswith(f"{table}/")]  # fmt: skip
    return pl.concat(parts, how="diagonal_relaxed").sort(pl.all())


def _differing(want: pl.DataFrame, got: pl.DataFrame) -> dict[str, tuple]:
    """column -> (local, remote) values of the columns whose values differ (an assertion's word)."""
    if want.columns != got.columns or want.height != got.height:
        return {"shape": (want.columns, want.height, got.columns, got.height)}
    return {c: (want[c].to_list(), got[c].to_list()) for c in want.columns
            if want[c].to_list() != got[c].to_list()}  # fmt: skip


def _same_validation(local: Path, remote: dict[str, bytes]) -> None:
    """Test runs differ in their logs' timings, so a validate output differs from run to run in
    its log digests and durations (and a profile in its build seconds), and a flaky test's reruns
    differ in number; everything else must be equal: the same tasks with the same fields, the
    same rejections and profiles, and runs of the same candidates."""
    mine = _local_files(local)
    volatile = {"tasks": ["validation"], "rejections": ["detail"], "profiles": ["log", "build_s"]}
    for table, dropped in volatile.items():
        want, got = _frame(mine, table).drop(dropped), _frame(remote, table).drop(dropped)
        assert want.height > 0 and want.equals(got), (table, _differing(want, got))
    ran = [set(_frame(files, "runs")["candidate_id"]) for files in (mine, remote)]
    assert ran[0] and ran[0] == ran[1]
    assert _summary(remote["summary.json"]) == _summary(mine["summary.json"])


# 1. the stage chain on S3, under Dask -------------------------------------------------------------


def test_stage_chain_on_s3_under_dask_writes_what_the_local_runner_writes(
    s3, calc_repo, docker_engine, tmp_path
):
    """mine and inject from a local repository to S3; validate from S3 to S3 in containers;
    curate S3 to S3; export S3 to a local dataset: on a 2-process LocalCluster, against the
    in-process runner on local disk."""
    calc, _ = calc_repo
    write_curate_inputs(tmp_path / "given")  # what rollout and explore write (need an LLM)
    upload(s3, tmp_path / "given", "given")
    runs = {
        "local": (str(tmp_path / "local"), ("--runner", "local")),
        "dask": (f"s3://{BUCKET}/run", ("--runner", "dask", "--dask_workers", "2")),
    }
    for name, (root, runner) in runs.items():
        project = tmp_path / f"project-{name}"
        project.mkdir()
        write_params(
            project / "params.yaml", tmp_path / f"cache-{name}",
            "inject:\n  max_candidates: 6\n  min_complexity: 1\n" + CURATE_PARAMS,
        )  # fmt: skip
        given = str(tmp_path / "given") if name == "local" else f"s3://{BUCKET}/given"
        chain = [
            ("mine", "--repo", str(calc), "--output", f"{root}/mine"),
            ("inject", "--repo", str(calc), "--output", f"{root}/inject"),
            ("validate", "--input", f"{root}/mine", "--input", f"{root}/inject",
             "--output", f"{root}/validate"),
            ("curate", "--input", f"{given}/rollout", "--input", f"{given}/explore",
             "--output", f"{root}/curate"),
            ("export", "--input", f"{root}/curate", "--output", str(project / "export")),
        ]  # fmt: skip
        for command in chain:
            extra = ("--shards", "2", *runner) if command[0] != "export" else ()  # in-process
            _ok(run_cli(*command, *extra, cwd=project, env=s3, timeout=900))

    local = tmp_path / "local"
    _same_stage_output(local / "mine", objects(s3, "run/mine"), ("candidates", "rejections"))
    _same_stage_output(local / "inject", objects(s3, "run/inject"), ("candidates",))
    _same_validation(local / "validate", objects(s3, "run/validate"))
    _same_stage_output(local / "curate", objects(s3, "run/curate"), ("tasks", "trajectories"))
    exported = {
        project: {n: d for n, d in _local_files(tmp_path / project / "export").items()
                  if n.endswith(".parquet")}
        for project in ("project-local", "project-dask")
    }  # fmt: skip
    assert exported["project-local"] and exported["project-local"] == exported["project-dask"]
    assert not [key for key in objects(s3, "run") if ".staging-" in key]


# 2. publishing: the marker commits, readers trust it ----------------------------------------------


def test_a_rerun_replaces_every_file_and_the_marker_lists_only_the_new_ones(
    s3, calc_repo, tmp_path
):
    calc, _ = calc_repo
    write_params(tmp_path / "params.yaml", tmp_path / "cache")
    out = f"s3://{BUCKET}/rerun/mine"
    mine = ("mine", "--repo", str(calc), "--output", out, "--shards")
    _ok(run_cli(*mine, "3", cwd=tmp_path, env=s3))
    first = objects(s3, "rerun/mine")
    assert any(name.endswith("-of-00003.parquet") for name in first)
    _ok(run_cli(*mine, "1", cwd=tmp_path, env=s3))
    second = objects(s3, "rerun/mine")
    listed = json.loads(second.pop(".trajforge-output"))["files"]
    assert set(listed) == set(second)
    assert sorted(n for n in second if n.endswith(".parquet")) == [
        "candidates/part-00000-of-00001.parquet", "rejections/part-00000-of-00001.parquet",
    ]  # fmt: skip
    stats = run_cli("stats", out, cwd=tmp_path, env=s3)
    _ok(stats)
    assert "candidates          6 rows" in stats.stdout, stats.stdout


def test_a_run_cut_off_before_its_marker_is_refused_by_readers_and_redone(s3, calc_repo, tmp_path):
    """What a run killed mid-publish leaves: a staging folder, the marker deleted, some tables
    copied. Readers refuse it with one line; the stage run again commits a whole output."""
    calc, _ = calc_repo
    write_params(tmp_path / "params.yaml", tmp_path / "cache")
    out = f"s3://{BUCKET}/cut/mine"
    mine = ("mine", "--repo", str(calc), "--output", out, "--shards", "1")
    _ok(run_cli(*mine, cwd=tmp_path, env=s3))
    store = client(s3)
    store.delete_object(Bucket=BUCKET, Key="cut/mine/.trajforge-output")
    store.put_object(Bucket=BUCKET, Key="cut/mine/.staging-0badf00d/.trajforge-output", Body=b"x")
    store.put_object(
        Bucket=BUCKET, Key="cut/mine/.staging-0badf00d/candidates/part-00000-of-00001.parquet",
        Body=b"half a table",
    )  # fmt: skip

    validate = run_cli("validate", "--input", out, "--output", "v", cwd=tmp_path, env=s3)
    line = _one_line(validate, "cut off")
    assert out in line and "rerun the stage that writes it" in line
    assert "cut off" in _one_line(run_cli("stats", out, cwd=tmp_path, env=s3), "cut off")

    _ok(run_cli(*mine, cwd=tmp_path, env=s3))
    after = objects(s3, "cut/mine")
    assert not [name for name in after if name.startswith(".staging-")]
    listed = json.loads(after.pop(".trajforge-output"))["files"]
    assert set(listed) == set(after) and "summary.json" in after


def test_an_s3_output_holding_foreign_files_or_an_input_is_refused(s3, calc_repo, tmp_path):
    calc, _ = calc_repo
    write_params(tmp_path / "params.yaml", tmp_path / "cache")
    client(s3).put_object(Bucket=BUCKET, Key="foreign/notes.txt", Body=b"not trajforge's")
    mine = ("mine", "--repo", str(calc), "--shards", "1")
    line = _one_line(
        run_cli(*mine, "--output", f"s3://{BUCKET}/foreign", cwd=tmp_path, env=s3), "trajforge:"
    )
    assert "holds files trajforge did not write" in line
    assert objects(s3, "foreign") == {"notes.txt": b"not trajforge's"}

    out = f"s3://{BUCKET}/same/mine"
    _ok(run_cli(*mine, "--output", out, cwd=tmp_path, env=s3))
    proc = run_cli("validate", "--input", out, "--output", out, cwd=tmp_path, env=s3)
    assert "is or holds the input" in _one_line(proc, "trajforge:")
    assert ".trajforge-output" in objects(s3, "same/mine")


def test_an_object_store_that_fails_is_one_line_naming_the_path(s3, calc_repo, tmp_path):
    """No endpoint listening, and a bucket that does not exist: one line each, before any work
    (Beam's own S3 client retries a refused connection for minutes)."""
    calc, _ = calc_repo
    write_params(tmp_path / "params.yaml", tmp_path / "cache")
    mine = ("mine", "--repo", str(calc), "--shards", "1", "--output")
    nowhere = {**s3, "AWS_ENDPOINT_URL": "http://127.0.0.1:9"}  # the discard port: refused
    proc = run_cli(*mine, f"s3://{BUCKET}/down/mine", cwd=tmp_path, env=nowhere, timeout=120)
    line = _one_line(proc, "cannot be reached")
    assert line.startswith(f"trajforge: s3://{BUCKET}/down/mine") and "127.0.0.1:9" in line
    proc = run_cli(*mine, "s3://no-such-bucket-here/mine", cwd=tmp_path, env=s3, timeout=120)
    assert "the bucket no-such-bucket-here cannot be reached" in _one_line(proc, "trajforge:")
    proc = run_cli("validate", "--input", f"s3://{BUCKET}/down/mine", "--output", "v",
                   cwd=tmp_path, env=nowhere, timeout=120)  # fmt: skip
    assert "127.0.0.1:9" in _one_line(proc, "cannot be reached")
