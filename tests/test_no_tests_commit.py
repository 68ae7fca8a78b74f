"""Issue 30, item 8: no tests at the newest commit. ``inject`` says so before anything is built
and takes the newest first-parent ancestor that has a suite (``inject.max_commits_back``), in one
line of the summary; that commit reaches a task through ``validate``, and a rerun builds nothing.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from conftest import run_cli
from reach_repos import build_no_tests, build_tests_deleted
from wild_runs import rows, run_wild, write_params


def commits(repo: Path) -> list[str]:
    out = subprocess.run(
        ["git", "-C", str(repo), "rev-list", "--first-parent", "HEAD"],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    return out.stdout.split()


def inject(repo: Path, work: Path, *extra: str) -> subprocess.CompletedProcess:
    params = write_params(work / "params.yaml")
    return run_cli(
        "inject", "--repo", str(repo), "--max-candidates", "3", *extra,
        "--params", str(params), "--output", str(work / "out"), cwd=work,
    )  # fmt: skip


@pytest.mark.slow
def test_no_tests_anywhere_within_the_bound_is_its_own_reason(tmp_path: Path) -> None:
    deleted, never = tmp_path / "deleted", tmp_path / "never"
    build_tests_deleted(deleted)
    build_no_tests(never)
    for repo, extra in ((never, ()), (deleted, ("--commit", "HEAD"))):
        work = tmp_path / f"run-{repo.name}-{len(extra)}"
        work.mkdir()
        done = inject(repo, work, *extra)
        assert done.returncode == 0, done.stderr
        assert not rows(work / "out" / "candidates")
        (rejection,) = rows(work / "out" / "rejections")
        assert rejection["reason"] == "no_tests_at_commit", rejection
        assert len(rejection["detail"].splitlines()) == 1
        assert commits(repo)[0][:12] in rejection["detail"]


@pytest.mark.slow
def test_max_commits_back_zero_takes_only_the_newest(tmp_path: Path) -> None:
    repo = tmp_path / "deleted"
    build_tests_deleted(repo)
    work = tmp_path / "run"
    work.mkdir()
    params = write_params(work / "params.yaml")
    params.write_text(params.read_text().replace("combos: 0", "combos: 0\n  max_commits_back: 0"))
    done = run_cli(
        "inject", "--repo", str(repo), "--params", str(params), "--output", str(work / "out"),
        cwd=work,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert [r["reason"] for r in rows(work / "out" / "rejections")] == ["no_tests_at_commit"]


@pytest.mark.docker
@pytest.mark.usefixtures("docker_engine")
def test_tests_deleted_in_the_last_commit_reach_a_task(tmp_path: Path) -> None:
    repo = tmp_path / "moved"
    build_tests_deleted(repo)
    newest, tested = commits(repo)[:2]
    out = run_wild(repo, tmp_path)
    assert set(out.candidates["base_commit"]) == {tested}
    line = out.inject_summary["older_commit_taken"]
    assert tested[:12] in line and newest[:12] in line and "no test files" in line
    assert out.tasks, out.rejections
    assert {t["base_commit"] for t in out.tasks} == {tested}
    assert out.rerun_summary.get("images_built", 0) == 0, out.rerun_summary
    # Reach in levels, once per repository, in the summary (and again on the rerun, from cache)
    levels = "1 repositories: installed 1, collected 1, clean 1, task 1"
    assert out.summary["reach"] == levels and "reach_short" not in out.summary, out.summary
    assert out.rerun_summary["reach"] == levels, out.rerun_summary
    assert sorted(t["instance_id"] for t in out.rerun_tasks) == sorted(
        t["instance_id"] for t in out.tasks
    )
