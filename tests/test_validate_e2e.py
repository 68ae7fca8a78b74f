"""mine -> validate through the real CLI, a real repository and real containers."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import docker
import polars as pl
import pytest
from conftest import TRAJFORGE, run_cli, write_params
from repo_factory import RepoBuilder

pytestmark = pytest.mark.docker


@pytest.fixture(scope="module")
def validated(calc_repo, docker_engine, tmp_path_factory):
    path, shas = calc_repo
    work = tmp_path_factory.mktemp("e2e")
    params = write_params(work / "params.yaml", work / "cache")
    mined = run_cli("mine", "--repo", str(path), "--output", "mine", cwd=work)
    assert mined.returncode == 0, mined.stderr
    done = run_cli("validate", "--input", "mine", "--output", "out", cwd=work)
    assert done.returncode == 0, done.stderr
    assert params.exists()
    return work, shas, done.stderr


def _tasks(out: Path) -> pl.DataFrame:
    return pl.read_parquet(out / "tasks" / "*.parquet")


def _rejections(out: Path) -> dict[str, str]:
    frame = pl.read_parquet(out / "rejections" / "*.parquet")
    return dict(zip(frame["input"], frame["reason"], strict=True))


def _by_commit(work: Path) -> dict[str, str]:
    """fix commit sha -> candidate id, from the mine output."""
    frame = pl.read_parquet(work / "mine" / "candidates" / "*.parquet")
    return {
        meta["commit"]: cid for cid, meta in zip(frame["candidate_id"], frame["meta"], strict=True)
    }


def test_real_bug_fix_is_kept_with_the_right_tests(validated):
    work, shas, _ = validated
    tasks = _tasks(work / "out")
    cid = _by_commit(work)[shas["fix_add"]]
    row = tasks.filter(pl.col("candidate_id") == cid).to_dicts()[0]
    assert row["FAIL_TO_PASS"] == ["tests/test_ops.py::test_add"]
    assert row["PASS_TO_PASS"] == ["tests/test_ops.py::test_mul"]
    assert row["base_commit"] == shas["initial"]
    assert row["image_name"].startswith("trajforge-env:")
    assert row["validation"]["base_exit_code"] == 1 and row["validation"]["gold_exit_code"] == 0


def test_import_error_at_collection_is_rejected(validated):
    work, shas, _ = validated
    cid = _by_commit(work)[shas["import_error"]]
    assert _rejections(work / "out")[cid] == "collection_error_at_base"
    assert cid not in set(_tasks(work / "out")["candidate_id"])


def test_flaky_test_is_kept_out_of_f2p_and_p2p(validated):
    work, shas, _ = validated
    cid = _by_commit(work)[shas["flaky"]]
    row = _tasks(work / "out").filter(pl.col("candidate_id") == cid).to_dicts()[0]
    assert row["FAIL_TO_PASS"] == ["tests/test_neg.py::test_neg"]
    assert row["flaky_tests"] == ["tests/test_neg.py::test_neg_flaky"]
    assert "tests/test_neg.py::test_neg_flaky" not in row["PASS_TO_PASS"]


def test_non_utf8_message_commit_is_validated(validated):
    work, shas, _ = validated
    cid = _by_commit(work)[shas["latin1"]]
    row = _tasks(work / "out").filter(pl.col("candidate_id") == cid).to_dicts()[0]
    assert row["FAIL_TO_PASS"] == ["tests/test_sub.py::test_sub"]


def test_hanging_test_is_killed_by_the_timeout(validated):
    work, shas, _ = validated
    cid = _by_commit(work)[shas["hang"]]
    assert _rejections(work / "out")[cid] == "timeout_at_base"
    runs = pl.read_parquet(work / "out" / "runs" / "*.parquet").filter(
        pl.col("candidate_id") == cid
    )
    assert runs["timed_out"].to_list() == [True]


def test_failed_install_is_rejected_with_its_cause_in_one_line(validated):
    work, shas, _ = validated
    cid = _by_commit(work)[shas["bad_install"]]
    frame = pl.read_parquet(work / "out" / "rejections" / "*.parquet")
    row = frame.filter(pl.col("input") == cid).to_dicts()[0]
    assert row["reason"] == "install_failed"
    assert "trajforge-no-such-package-xyz" in row["detail"] and "\n" not in row["detail"]
    profiles = pl.read_parquet(work / "out" / "profiles" / "*.parquet")
    assert sorted(profiles["status"].to_list()) == ["built", "failed"]


def test_summary_counts_and_exit_codes_are_recorded(validated):
    work, _, stderr = validated
    summary = json.loads((work / "out" / "summary.json").read_text())
    assert summary["inputs"] == 6 and summary["kept"] == 3
    assert summary["rejected"] == {
        "collection_error_at_base": 1,
        "install_failed": 1,
        "timeout_at_base": 1,
    }
    assert "validate: 6 inputs, 3 kept, 3 rejected" in stderr
    runs = pl.read_parquet(work / "out" / "runs" / "*.parquet")
    assert runs["log_digest"].str.len_chars().min() == 64
    assert set(runs["exit_code"].to_list()) >= {0, 1, 2, -9}


def test_rerun_is_byte_identical_and_redoes_nothing(validated):
    work, _, _ = validated
    again = run_cli("validate", "--input", "mine", "--output", "again", cwd=work)
    assert again.returncode == 0, again.stderr
    for table in ("tasks", "rejections", "profiles"):
        first = sorted((work / "out" / table).glob("*.parquet"))
        second = sorted((work / "again" / table).glob("*.parquet"))
        assert [f.read_bytes() for f in first] == [f.read_bytes() for f in second], table
    summary = json.loads((work / "again" / "summary.json").read_text())
    assert summary["cache_hits"] == 5  # every candidate that reached the sandbox
    assert "images_built" not in summary


def test_stats_reports_yield_and_reasons(validated):
    work, _, _ = validated
    proc = run_cli("stats", "out", cwd=work)
    assert proc.returncode == 0, proc.stderr
    assert "tasks" in proc.stdout and "validate/install_failed" in proc.stdout
    assert "yield" in proc.stdout


def test_killed_run_resumes_without_duplicates(calc_repo, docker_engine, tmp_path):
    """The three fixes and a rejection, not the whole log: the hang (a test timeout) and the
    failed install (a failed build) are what the module's validate proves, and here they would
    only add a minute of waiting to each of the two runs."""
    path, shas = calc_repo
    write_params(tmp_path / "params.yaml", tmp_path / "cache")
    commits = ",".join(shas[name] for name in ("fix_add", "import_error", "latin1", "flaky"))
    mined = run_cli(
        "mine", "--repo", str(path), "--commits", commits, "--output", "mine", cwd=tmp_path
    )
    assert mined.returncode == 0, mined.stderr
    proc = subprocess.Popen(
        [TRAJFORGE, "validate", "--input", "mine", "--output", "out", "--workers", "1"],
        cwd=tmp_path,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    cache = tmp_path / "cache" / "validate"
    deadline = time.monotonic() + 600
    while len(list(cache.rglob("*.json"))) < 2 and time.monotonic() < deadline:
        assert proc.poll() is None, "validate finished before it could be killed"
        time.sleep(0.2)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    finished = len(list(cache.rglob("*.json")))
    assert finished >= 2
    assert not (tmp_path / "out").exists()  # nothing half-written where the output goes
    resumed = run_cli("validate", "--input", "mine", "--output", "out", cwd=tmp_path)
    assert resumed.returncode == 0, resumed.stderr
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert summary["cache_hits"] == finished
    tasks = pl.read_parquet(tmp_path / "out" / "tasks" / "*.parquet")
    assert tasks["instance_id"].n_unique() == tasks.height == 3
    assert not list(tmp_path.glob("out.staging-*"))
    owner = f"{os.uname().nodename}:{proc.pid}"
    left = docker.from_env().containers.list(
        all=True, filters={"label": f"trajforge.owner={owner}"}
    )
    assert left == []


def test_cli_errors_are_one_line(tmp_path):
    cases = [
        (("mine", "--repo", str(tmp_path / "missing"), "--output", "o"), "no such directory"),
        (("validate", "--input", str(tmp_path / "nothing"), "--output", "o"), "no Parquet files"),
        (("inject", "--repo", ".", "--operators", "bogus", "--output", "o2"), "unknown bogus"),
    ]
    for args, expected in cases:
        proc = run_cli(*args, cwd=tmp_path)
        assert proc.returncode in (0, 2)
        message = proc.stderr.strip().splitlines()
        assert "Traceback" not in proc.stderr
        if proc.returncode == 2:
            assert len(message) == 1 and expected in message[0]
        else:  # a bad source is a counted rejection and the run goes on
            summary = json.loads((tmp_path / "o" / "summary.json").read_text())
            assert summary["rejected"] == {"repo_missing": 1}
    empty = run_cli("mine", "--output", "empty", cwd=tmp_path)  # nothing configured: empty tables
    assert empty.returncode == 0 and "no sources" in empty.stderr
    assert json.loads((tmp_path / "empty" / "summary.json").read_text())["kept"] == 0


def test_docker_down_is_a_counted_rejection(calc_repo, tmp_path):
    path, shas = calc_repo
    write_params(tmp_path / "params.yaml", tmp_path / "cache")
    run_cli(
        "mine", "--repo", str(path), "--commits", shas["fix_add"], "--output", "m", cwd=tmp_path
    )
    proc = run_cli(
        "validate", "--input", "m", "--output", "o", cwd=tmp_path,
        env={"DOCKER_HOST": "unix:///nonexistent/docker.sock"},
    )  # fmt: skip
    assert proc.returncode == 0 and "Traceback" not in proc.stderr
    summary = json.loads((tmp_path / "o" / "summary.json").read_text())
    assert summary["rejected"] == {"sandbox_unavailable": 1}
    detail = pl.read_parquet(tmp_path / "o" / "rejections" / "*.parquet")["detail"][0]
    assert "make setup" in detail


def test_repo_without_tests_is_a_counted_rejection(tmp_path):
    repo = RepoBuilder(tmp_path / "notests")
    repo.commit("init", {"lib.py": "x = 1\n"})
    repo.commit("change", {"lib.py": "x = 2\n"})
    proc = run_cli("mine", "--repo", str(repo.path), "--output", "o", cwd=tmp_path)
    assert proc.returncode == 0 and "Traceback" not in proc.stderr
    summary = json.loads((tmp_path / "o" / "summary.json").read_text())
    assert summary["rejected"] == {"no_tests": 1} and summary["kept"] == 0


def test_local_sandbox_must_be_chosen_and_says_so(calc_repo, tmp_path):
    path, shas = calc_repo
    write_params(tmp_path / "params.yaml", tmp_path / "cache")
    run_cli(
        "mine", "--repo", str(path), "--commits", shas["fix_add"], "--output", "m", cwd=tmp_path
    )
    proc = run_cli("validate", "--input", "m", "--output", "o", "--sandbox", "local", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "NO isolation" in proc.stderr
    tasks = pl.read_parquet(tmp_path / "o" / "tasks" / "*.parquet")
    assert tasks["FAIL_TO_PASS"].to_list() == [["tests/test_ops.py::test_add"]]
    # The install went into the sandbox's own venv, never into the interpreter running trajforge.
    venvs = list((tmp_path / "cache" / "local-envs").glob("venv-*/lib/python*/site-packages"))
    assert any(list(v.glob("calc-*.dist-info")) for v in venvs)
    host = subprocess.run(["pip", "show", "calc"], capture_output=True, check=False)
    assert host.returncode != 0
