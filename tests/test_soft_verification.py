"""Soft verification (SERA): soft_reward on hand-made patches, the near misses curate keeps for
SFT, and what the export, its quality gates and its card make of them."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import datasets
import polars as pl
import pytest
from conftest import run_cli, write_params
from curated_factory import curated_tasks, make_trajectory, write_curated
from trajforge.filters.trajectory_scores import is_near_miss, trajectory_scores
from trajforge.pipelines.stages.export import export_dataset
from trajforge.schemas.diff import unified_diff
from trajforge.schemas.params import ExportParams
from trajforge.verifiers.soft_verification import f2p_pass_rate, gold_units, soft_reward

ORIGINAL = "".join(f"line {n}\n" for n in range(1, 31))  # "line 1" .. "line 30"


def _edit(path: str, *lines: int, text: str = "changed") -> str:
    """A real git-style diff of ``path`` (ORIGINAL) with ``lines`` (1-based) replaced."""
    rows = ORIGINAL.splitlines(keepends=True)
    for n in lines:
        rows[n - 1] = f"{text} {n}\n"
    return unified_diff(path, ORIGINAL, "".join(rows))


GOLD = _edit("pkg/mod.py", 5, 20)  # two single-line fixes, far apart


def test_the_gold_patch_itself_scores_one():
    assert soft_reward(GOLD, GOLD) == 1.0
    # the same lines changed differently touch the same lines: full recall
    assert soft_reward(GOLD, _edit("pkg/mod.py", 5, 20, text="other")) == 1.0


def test_a_disjoint_patch_scores_zero():
    assert soft_reward(GOLD, _edit("pkg/mod.py", 12)) == 0.0  # same file, other lines
    assert soft_reward(GOLD, _edit("pkg/other.py", 5, 20)) == 0.0  # same lines, other file
    assert soft_reward(GOLD, "") == 0.0  # no patch at all


def test_half_the_gold_lines_scores_one_half():
    assert soft_reward(GOLD, _edit("pkg/mod.py", 5)) == 0.5
    assert soft_reward(GOLD, _edit("pkg/mod.py", 20)) == 0.5
    # edits outside the gold patch's files neither help nor hurt
    assert soft_reward(GOLD, _edit("pkg/mod.py", 5) + _edit("tests/test_mod.py", 20)) == 0.5


def test_hand_written_hunks_and_new_files():
    gold = (
        "diff --git a/calc/ops.py b/calc/ops.py\n--- a/calc/ops.py\n+++ b/calc/ops.py\n"
        "@@ -1,2 +1,2 @@\n def add(a, b):\n-    return a - b\n+    return a + b\n"
        "diff --git a/calc/new.py b/calc/new.py\nnew file mode 100644\n--- /dev/null\n"
        "+++ b/calc/new.py\n@@ -0,0 +1 @@\n+VALUE = 1\n"
    )
    # line 2 is removed and the new line sits between 2 and 3; the new file is one unit
    assert gold_units(gold) == {("calc/ops.py", 2), ("calc/ops.py", 3), ("calc/new.py", None)}
    ops_only = gold.split("diff --git a/calc/new.py")[0]
    assert soft_reward(gold, gold) == 1.0
    assert soft_reward(gold, ops_only) == round(2 / 3, 6)
    assert soft_reward(ops_only, "") == 0.0 and soft_reward("", gold) is None


def test_f2p_pass_rate_is_the_share_of_fail_to_pass_tests_passing():
    f2p = ("t::a", "t::b", "t::c", "t::d")
    report = {"t::a": "PASSED", "t::b": "FAILED", "t::c": "PASSED", "t::p2p": "PASSED"}
    assert f2p_pass_rate(f2p, report) == 0.5  # t::d is missing from the report: not passed
    assert f2p_pass_rate(f2p, {}) == 0.0 and f2p_pass_rate((), report) is None


def _run(task_id: str, n: int, resolved: bool, soft: float | None, **changes):
    run = make_trajectory(task_id, n, resolved)
    return replace(run, soft_reward=soft, f2p_pass_rate=0.0 if not resolved else 1.0, **changes)


def test_scores_and_the_near_miss_rule():
    close = _run("t", 0, False, 0.75)
    assert trajectory_scores(close)["soft_reward"] == 0.75
    assert trajectory_scores(close)["f2p_pass_rate"] == 0.0
    assert "soft_reward" not in trajectory_scores(make_trajectory("t", 1, False))  # imported runs
    assert is_near_miss(close, 0.5) and is_near_miss(close, 0.75)
    assert not is_near_miss(close, 0.8) and not is_near_miss(close, None)
    assert not is_near_miss(_run("t", 2, True, 1.0), 0.5)  # resolved: not a near miss
    assert not is_near_miss(replace(close, exit_status="step_limit"), 0.5)  # never submitted
    assert not is_near_miss(replace(close, resolved=None), 0.5)  # never verified


@pytest.mark.slow
def test_curate_marks_near_misses_and_the_export_keeps_them_for_sft(tmp_path: Path):
    """The real CLI curate on a rollout-shaped output, then the export: near misses become sft
    rows marked as such, the gates pass, and the card says how many and why."""
    tasks = curated_tasks()
    task = tasks[0].instance_id  # five runs of one task (curate keeps every run of a task)
    runs = [
        _run(task, 0, True, 1.0),
        _run(task, 1, False, 0.75),  # close: kept as a near miss
        _run(task, 2, False, 0.25),  # far: stays out of sft
        _run(task, 3, False, 0.9, exit_status="step_limit"),  # cut off: stays out
        _run(task, 4, False, None),  # no soft reward (e.g. imported): stays out
    ]
    write_curated(tmp_path / "rollout", tasks, runs)
    params = write_params(
        tmp_path / "params.yaml", tmp_path / "cache", "curate:\n  near_miss_soft_reward: 0.5\n"
    )
    done = run_cli(
        "curate", "--params", str(params), "--input", "rollout", "--output", "curate",
        cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    summary = json.loads((tmp_path / "curate/summary.json").read_text())
    assert summary["near_misses"] == 1
    curated = pl.read_parquet(tmp_path / "curate/trajectories/*.parquet")
    assert curated.height == 5
    near_ids = curated.filter(pl.col("near_miss")).get_column("trajectory_id").to_list()
    assert near_ids == [runs[1].trajectory_id]

    result = export_dataset(
        [str(tmp_path / "curate")], str(tmp_path / "dataset"), ExportParams(shard_rows=10)
    )
    sft = datasets.load_dataset(str(tmp_path / "dataset"), "sft")
    rows = [row for split in sft.values() for row in split]
    assert sorted((r["trajectory_id"], r["resolved"], r["near_miss"]) for r in rows) == sorted(
        [(runs[0].trajectory_id, True, False), (runs[1].trajectory_id, False, True)]
    )
    near = next(r for r in rows if r["near_miss"])
    assert near["scores"]["soft_reward"] == 0.75 and near["scores"]["f2p_pass_rate"] == 0.0
    xml = datasets.load_dataset(str(tmp_path / "dataset"), "sft_xml")
    assert sorted(r["near_miss"] for split in xml.values() for r in split) == [False, True]
    assert result.dropped["trajectory_unresolved"] == 3
    card = (tmp_path / "dataset/README.md").read_text()
    assert "## Near misses and guided retries" in card
    assert "1 `sft` row(s) are unresolved runs kept as near misses" in card
    assert "`curate.near_miss_soft_reward`" in card and "(the lowest: 0.75)" in card


@pytest.mark.slow
def test_without_a_threshold_nothing_is_a_near_miss(tmp_path: Path):
    tasks = curated_tasks()
    runs = [_run(tasks[0].instance_id, 0, False, 1.0, near_miss=True)]  # marked by an old curate
    write_curated(tmp_path / "rollout", tasks, runs)
    params = write_params(tmp_path / "params.yaml", tmp_path / "cache")
    done = run_cli(
        "curate", "--params", str(params), "--input", "rollout", "--output", "curate",
        cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    curated = pl.read_parquet(tmp_path / "curate/trajectories/*.parquet")
    assert curated.get_column("near_miss").to_list() == [False]  # the mark is decided again


def test_a_bad_threshold_is_one_line(tmp_path: Path):
    params = write_params(
        tmp_path / "params.yaml", tmp_path / "cache", "curate:\n  near_miss_soft_reward: 1.5\n"
    )
    write_curated(tmp_path / "rollout", curated_tasks(), [])
    done = run_cli(
        "curate", "--params", str(params), "--input", "rollout", "--output", "curate",
        cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode != 0
    assert "curate.near_miss_soft_reward must be in (0, 1] or null, got 1.5" in done.stderr
