"""curate -> export -> report -> publish --dry-run through the real CLI, on real Parquet tables."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import datasets
import polars as pl
import pyarrow.parquet as pq
import pytest
from conftest import run_cli
from curated_factory import curated_trajectories, make_task
from trajforge.schemas.storage import write_records
from trajforge.schemas.task_instance import TaskInstance
from trajforge.schemas.trajectory import Trajectory

WORDS = ("alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta", "iota", "kappa")


def _patch(seed: int) -> str:
    """A distinct, long enough change: 30 lines of words drawn from the seed."""
    lines = [
        f"+    total_{seed}_{i} = {WORDS[(seed * 7 + i) % len(WORDS)]}({i}, {seed})"
        for i in range(30)
    ]
    path = f"pkg/m{seed}.py"
    header = f"diff --git a/{path} b/{path}\n--- a/{path}\n+++ b/{path}\n"
    return header + "@@ -1,0 +1,30 @@\n" + "\n".join(lines) + "\n"


def _tasks() -> list[TaskInstance]:
    tasks = []
    for r, repo in enumerate(("acme/alpha", "acme/beta", "acme/gamma")):
        for n in range(3):
            seed = r * 10 + n
            tasks.append(
                make_task(repo, seed, patch=_patch(seed), problem_statement=f"Bug number {seed}.")
            )
    original = tasks[0]
    exact = replace(original, instance_id="acme__alpha-exact", candidate_id="c-exact")
    near_patch = original.patch.replace("total_0_29", "total_0_99")
    near = replace(original, instance_id="acme__alpha-near", patch=near_patch)
    return [*tasks, exact, near]


@pytest.mark.slow
def test_curate_export_report_publish(tmp_path: Path):
    tasks = _tasks()
    validated = tmp_path / "validate"
    write_records(str(validated / "tasks" / "part-0.parquet"), tasks, TaskInstance.ARROW_SCHEMA)
    trajectories = curated_trajectories(tasks[:9])
    write_records(
        str(validated / "trajectories" / "part-0.parquet"), trajectories, Trajectory.ARROW_SCHEMA
    )
    contaminated = tasks[4]  # a benchmark instance of the same repo and commit
    bench = tmp_path / "swebench_lite.jsonl"
    bench.write_text(
        json.dumps(
            {
                "instance_id": "bench-1",
                "repo": contaminated.repo,
                "base_commit": contaminated.base_commit,
                "patch": "diff --git a/x b/x\n",
                "problem_statement": "something else entirely",
            }
        )
        + "\n"
    )

    curate = run_cli(
        "curate", "--input", str(validated), "--benchmark", str(bench),
        "--output", str(tmp_path / "curate"), cwd=tmp_path,
    )  # fmt: skip
    assert curate.returncode == 0, curate.stderr
    rejections = pl.read_parquet(tmp_path / "curate" / "rejections" / "*.parquet")
    by_reason = dict(zip(rejections["reason"], rejections["input"], strict=True))
    dropped_run = [t.trajectory_id for t in trajectories if t.instance_id == tasks[4].instance_id]
    assert by_reason["task_dropped"] in dropped_run  # runs of a dropped task go with it
    assert by_reason["exact_duplicate"] in {"acme__alpha-0", "acme__alpha-exact"}
    assert by_reason["near_duplicate"] in {"acme__alpha-0", "acme__alpha-near"}
    assert by_reason["contaminated:swebench_lite"] == contaminated.instance_id
    kept = pl.read_parquet(tmp_path / "curate" / "tasks" / "*.parquet")
    assert kept.height == len(tasks) - 3
    assert kept["difficulty"].is_not_null().all()
    scores = pq.read_table(tmp_path / "curate" / "tasks").column("scores").to_pylist()
    assert all(dict(s)["patch_lines"] >= 30 for s in scores)

    export = run_cli(
        "export", "--input", str(tmp_path / "curate"), "--output", str(tmp_path / "ds"),
        cwd=tmp_path,
    )  # fmt: skip
    assert export.returncode == 0, export.stderr
    loaded = datasets.load_dataset(str(tmp_path / "ds"), "tasks")
    assert set(loaded) == {"train", "validation"}
    assert sum(len(split) for split in loaded.values()) == kept.height
    train_repos = set(loaded["train"]["repo"])
    assert train_repos.isdisjoint(loaded["validation"]["repo"])
    rl = datasets.load_dataset(str(tmp_path / "ds"), "rl")
    assert all(row["FAIL_TO_PASS"] for split in rl.values() for row in split)
    sft = datasets.load_dataset(str(tmp_path / "ds"), "sft")
    assert sum(len(split) for split in sft.values()) > 0
    assert (tmp_path / "ds" / "data_docs" / "index.html").exists()

    report = run_cli(
        "report", "--stage", f"curate={tmp_path / 'curate'}",
        "--stage", f"export={tmp_path / 'ds'}", "--output", str(tmp_path / "report.html"),
        cwd=tmp_path,
    )  # fmt: skip
    assert report.returncode == 0, report.stderr
    page = (tmp_path / "report.html").read_text()
    assert "near_duplicate" in page and "<svg" in page

    token = "hf_secretTOKEN1234567890"
    publish = run_cli(
        "publish", str(tmp_path / "ds"), "--repo-id", "acme/trajforge-tasks", "--dry-run",
        cwd=tmp_path, env={"HF_TOKEN": token},
    )  # fmt: skip
    assert publish.returncode == 0, publish.stderr
    manifest = json.loads((tmp_path / "ds.publish-manifest.json").read_text())
    assert {"README.md"} <= {f["path"] for f in manifest["files"]}
    assert token not in publish.stderr + json.dumps(manifest)
