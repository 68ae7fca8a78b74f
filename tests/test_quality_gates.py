"""The great-expectations suites pass on good tables and name what fails on corrupted ones."""

from __future__ import annotations

from dataclasses import replace

import pytest
from curated_factory import curated_tasks, make_trajectory
from trajforge.filters.quality_gates import QualityGateError, enforce, profile, run_quality_gates
from trajforge.pipelines.release.tables import rl_table, sft_table, tasks_schema, tasks_table

SYSTEM = "You work on {repo}."


def _tasks_frame(tasks):
    return profile("tasks", tasks_table(tasks, tasks_schema([])))


def test_profile_reduces_nested_columns_to_lengths_and_scores_to_columns():
    tasks = curated_tasks()
    frame = _tasks_frame(tasks)
    assert list(frame["FAIL_TO_PASS"]) == [1] * len(tasks)
    assert list(frame["patch"]) == [len(tasks[0].patch)] * len(tasks)
    assert list(frame["scores.patch_lines"]) == [2.0] * len(tasks)
    assert frame["scores.solve_rate"].isna().all()
    assert list(frame["instance_id"]) == [t.instance_id for t in tasks]


def test_good_tables_pass(tmp_path):
    tasks = curated_tasks()
    repo_of = {t.instance_id: t.repo for t in tasks}
    frames = {
        "tasks": _tasks_frame(tasks),
        "rl": profile("rl", rl_table(tasks, SYSTEM)),
        "sft": profile("sft", sft_table([make_trajectory(t, 0, True) for t in repo_of], repo_of)),
    }
    results = run_quality_gates(frames, str(tmp_path / "docs"))
    assert [(r.suite, r.success, r.failures) for r in results] == [
        ("rl", True, ()),
        ("sft", True, ()),
        ("tasks", True, ()),
    ]
    enforce(results)
    assert (tmp_path / "docs" / "index.html").is_file()


def test_corrupted_tables_fail_naming_the_expectations(tmp_path):
    tasks = curated_tasks()
    broken = [*tasks, tasks[0], replace(tasks[1], instance_id="empty-f2p", FAIL_TO_PASS=())]
    repo_of = {t.instance_id: t.repo for t in tasks}
    runs = [make_trajectory(t, 0, True) for t in repo_of]
    runs.append(replace(make_trajectory(tasks[0].instance_id, 1, True), resolved=False))
    sft = sft_table(runs, repo_of)
    frame = profile("sft", sft)
    frame.loc[0, "scores.tool_error_rate"] = 1.5
    results = run_quality_gates(
        {"tasks": _tasks_frame(broken), "rl": profile("rl", rl_table(broken, SYSTEM)),
         "sft": frame}, str(tmp_path / "docs")
    )  # fmt: skip
    failures = {r.suite: r.failures for r in results}
    assert not any(r.success for r in results)
    for suite in ("tasks", "rl"):
        joined = "\n".join(failures[suite])
        assert f"{suite}: expect_column_values_to_be_unique(instance_id): 2 of 8" in joined
        assert "expect_column_values_to_be_between(FAIL_TO_PASS): 1 of 8 rows" in joined
    assert sorted(f.split(":")[1].strip() for f in failures["sft"]) == [
        "expect_column_values_to_be_between(scores.tool_error_rate)",
        "expect_column_values_to_be_in_set(resolved_or_near_miss)",
    ]
    with pytest.raises(QualityGateError, match=r"quality gates failed.*Data Docs: D") as caught:
        enforce(results, "D")
    assert len(caught.value.failures) == 6
    assert (tmp_path / "docs" / "index.html").is_file()


def test_missing_column_is_named(tmp_path):
    frame = _tasks_frame(curated_tasks()).drop(columns=["image_name"])
    (result,) = run_quality_gates({"tasks": frame}, str(tmp_path / "docs"))
    assert "tasks: expect_table_columns_to_match_set: missing columns ['image_name']" in (
        result.failures
    )
    assert any("(image_name): error" in f for f in result.failures), result.failures
