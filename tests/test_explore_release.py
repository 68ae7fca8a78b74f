"""Explore tasks and transitions through curate -> export, via the real CLI and real Parquet."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import datasets
import polars as pl
import pytest
from conftest import run_cli
from curated_factory import curated_tasks, make_task, make_trajectory, write_curated
from trajforge.filters.quality_gates import profile, run_quality_gates
from trajforge.pipelines.release.tables import explore_table, transitions_table
from trajforge.pipelines.stages.export import export_dataset
from trajforge.schemas.explore_task import ExploreTask, ReplayAction
from trajforge.schemas.params import ExportParams
from trajforge.schemas.records import content_id
from trajforge.schemas.storage import write_records
from trajforge.schemas.task_instance import TaskInstance
from trajforge.schemas.trajectory import Trajectory
from trajforge.schemas.transition import Transition

LIST = ReplayAction("bash", '{"command": "ls calc"}')
NOTE = ReplayAction("create", '{"path": "NOTES.md", "file_text": "sum and difference\\n"}')
STATEMENTS = {  # far apart, so near-dedup keeps both (they share the factory's patch)
    "acme/alpha": "`add` returns the difference instead of the sum for positive operands.",
    "acme/beta": "Calling sub with a negative number raises TypeError since release 2.0 shipped.",
}
PARAMS = "curate:\n  min_scores: {fail_to_pass: 1, explore_score: 3}\nexport:\n  seed: 3\n"


def make_explore(repo: str, n: int, instruction: str, actions, score: float) -> ExploreTask:
    task_id = content_id("explore", repo, n)
    return ExploreTask(
        task_id=task_id,
        repo=repo,
        source=f"/repos/{repo}",
        base_commit=content_id(repo, length=40),
        image_name=f"trajforge/env:{repo.replace('/', '-')}",
        profile_id="p1",
        instruction=instruction,
        actions=tuple(actions),
        expected_files={"NOTES.md": "c" * 64},
        expected_outputs={"0": "d" * 64},
        trajectory_id=content_id(task_id, 0),  # make_trajectory's id for attempt 0
        origin="explore/template",
        score=score,
        provenance={"writer": "template"},
    )


def explore_run(task: ExploreTask) -> Trajectory:
    return replace(make_trajectory(task.task_id, 0, True), origin=task.origin)


def steps(run: Trajectory, count: int = 2) -> list[Transition]:
    return [
        Transition(
            transition_id=content_id("transition", run.trajectory_id, i),
            trajectory_id=run.trajectory_id,
            instance_id=run.instance_id,
            step=i,
            state=json.dumps({"changed_files": [], "last_exit_code": None}),
            action=json.dumps({"tool": "bash", "arguments": '{"command": "ls"}'}),
            observation="calc\n",
            exit_code=0,
            changed_files=(),
            origin=run.origin,
        )
        for i in range(count)
    ]


def explore_tasks() -> dict[str, ExploreTask]:
    keep = make_explore("acme/alpha", 1, "Write NOTES.md describing add.", [LIST, NOTE], 4.0)
    # the same instruction and actions, up to case, spacing and JSON key order: a duplicate
    reordered = ReplayAction("create", '{"file_text": "sum and difference\\n","path": "NOTES.md"}')
    duplicate = make_explore(
        "acme/alpha", 2, "write  NOTES.md describing ADD.", [LIST, reordered], 3.0
    )
    return {
        "keep": keep,
        "duplicate": duplicate,
        "low": make_explore("acme/alpha", 3, "List the calc package.", [LIST], 1.0),
        "other_repo": make_explore("acme/delta", 4, "List calc, then take notes.", [NOTE], 5.0),
    }


def write_inputs(root: Path) -> dict:
    tasks = [make_task(repo, 1, problem_statement=text) for repo, text in STATEMENTS.items()]
    runs = [make_trajectory(t.instance_id, 0, True) for t in tasks]
    rollout = root / "rollout"
    write_records(str(rollout / "tasks" / "part-0.parquet"), tasks, TaskInstance.ARROW_SCHEMA)
    write_records(str(rollout / "trajectories" / "part-0.parquet"), runs, Trajectory.ARROW_SCHEMA)
    rollout_steps = [s for run in runs for s in steps(run)]
    write_records(
        str(rollout / "transitions" / "part-0.parquet"), rollout_steps, Transition.ARROW_SCHEMA
    )

    explore = explore_tasks()
    explore_runs = {name: explore_run(task) for name, task in explore.items()}
    orphan = replace(explore_runs["keep"], trajectory_id="no-such-run")
    explore_steps = [s for run in [*explore_runs.values(), orphan] for s in steps(run)]
    out = root / "explore"
    write_records(
        str(out / "explore_tasks" / "part-0.parquet"),
        explore.values(),
        ExploreTask.ARROW_SCHEMA,
    )
    write_records(
        str(out / "trajectories" / "part-0.parquet"),
        explore_runs.values(),
        Trajectory.ARROW_SCHEMA,
    )
    write_records(
        str(out / "transitions" / "part-0.parquet"), explore_steps, Transition.ARROW_SCHEMA
    )
    return {"explore": explore, "explore_runs": explore_runs, "rollout_runs": runs}


# The tests on ``released`` run curate and export through the real CLI: two Beam pipelines in
# subprocesses, about 15 s of real work on an idle machine, so `make test-fast` leaves them to CI.
THROUGH_THE_CLI = pytest.mark.slow


@pytest.fixture(scope="module")
def released(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict]:
    root = tmp_path_factory.mktemp("explore_release")
    made = write_inputs(root)
    params = root / "params.yaml"
    params.write_text(PARAMS)
    curate = run_cli(
        "curate", "--input", str(root / "rollout"), "--input", str(root / "explore"),
        "--output", str(root / "curate"), "--params", str(params), cwd=root,
    )  # fmt: skip
    assert curate.returncode == 0, curate.stderr
    export = run_cli(
        "export", "--input", str(root / "curate"), "--output", str(root / "ds"),
        "--params", str(params), cwd=root,
    )  # fmt: skip
    assert export.returncode == 0, export.stderr
    return root, made


@THROUGH_THE_CLI
def test_curate_dedups_thresholds_and_drops_what_follows(released):
    root, made = released
    explore, runs = made["explore"], made["explore_runs"]
    rejections = pl.read_parquet(root / "curate" / "rejections" / "*.parquet")
    why = {(r["input"], r["reason"]): r["detail"] for r in rejections.iter_rows(named=True)}
    duplicate, low = explore["duplicate"].task_id, explore["low"].task_id
    assert explore["keep"].task_id in why[(duplicate, "exact_duplicate")]
    assert (low, "score_below:explore_score") in why
    for name in ("duplicate", "low"):
        assert (runs[name].trajectory_id, "task_dropped") in why
    kept = pl.read_parquet(root / "curate" / "explore_tasks" / "*.parquet")
    assert set(kept["task_id"]) == {explore["keep"].task_id, explore["other_repo"].task_id}
    transitions = pl.read_parquet(root / "curate" / "transitions" / "*.parquet")
    kept_runs = set(
        pl.read_parquet(root / "curate" / "trajectories" / "*.parquet")["trajectory_id"]
    )
    assert set(transitions["trajectory_id"]) == kept_runs
    dropped_steps = rejections.filter(pl.col("reason") == "trajectory_dropped")
    dropped_runs = {runs["duplicate"].trajectory_id, runs["low"].trajectory_id, "no-such-run"}
    assert set(dropped_steps["input"]) == {
        content_id("transition", run, i) for run in dropped_runs for i in range(2)
    }


def _rows(directory: Path, config: str) -> list[dict]:
    loaded = datasets.load_dataset(str(directory), config)
    return [row for split in loaded.values() for row in split]


@THROUGH_THE_CLI
def test_explore_config_has_the_kept_tasks_with_their_runs(released):
    root, made = released
    explore = made["explore"]
    rows = {row["task_id"]: row for row in _rows(root / "ds", "explore")}
    assert set(rows) == {explore["keep"].task_id, explore["other_repo"].task_id}
    row = rows[explore["keep"].task_id]
    assert row["instruction"] == "Write NOTES.md describing add."
    assert [a["tool"] for a in row["actions"]] == ["bash", "create"]
    assert row["expected_files"] == [{"key": "NOTES.md", "value": "c" * 64}]
    assert row["score"] == 4.0 and row["origin"] == "explore/template"
    assert row["trajectory_id"] == made["explore_runs"]["keep"].trajectory_id
    assert [m["role"] for m in row["messages"]][:3] == ["system", "user", "assistant"]
    assert json.loads(row["tools"])[0]["function"]["name"] == "bash"


@THROUGH_THE_CLI
def test_sft_and_transitions_carry_explore_runs_split_by_repo(released):
    root, made = released
    explore, runs = made["explore"], made["explore_runs"]
    sft = _rows(root / "ds", "sft")
    explore_ids = {runs[n].trajectory_id for n in ("keep", "other_repo")}
    assert {r["trajectory_id"] for r in sft if r["origin"] == "explore/template"} == explore_ids
    assert len(sft) == len(made["rollout_runs"]) + 2
    transitions = _rows(root / "ds", "transitions")
    assert {t["trajectory_id"] for t in transitions} == {r["trajectory_id"] for r in sft}
    delta = [t for t in transitions if t["instance_id"] == explore["other_repo"].task_id]
    assert {t["repo"] for t in delta} == {"acme/delta"} and len(delta) == 2
    split_of: dict[str, str] = {}
    for config in ("tasks", "sft", "explore", "transitions"):
        for split, rows in datasets.load_dataset(str(root / "ds"), config).items():
            for repo in rows["repo"]:
                assert split_of.setdefault(repo, split) == split, (config, repo)


@THROUGH_THE_CLI
def test_card_documents_the_new_configs_and_their_gates_passed(released):
    root, _ = released
    card = (root / "ds" / "README.md").read_text()
    assert "### `explore`" in card and "### `transitions`" in card
    assert "`expected_files`" in card and "`action`" in card
    assert "Explore tasks: 2, of which 2 template-made (no model" in card
    for suite in ("explore", "transitions"):
        assert f"- `{suite}`: " in card and "great-expectations checks passed" in card
    assert (root / "ds" / "data_docs" / "index.html").is_file()
    manifest = json.loads((root / "ds" / "version.json").read_text())
    assert set(manifest["counts"]) == {"tasks", "rl", "sft", "sft_xml", "explore", "transitions"}


@THROUGH_THE_CLI
def test_export_of_the_new_configs_alone(released, tmp_path):
    root, _ = released
    only = run_cli(
        "export", "--input", str(root / "curate"), "--output", str(tmp_path / "ds"),
        "--configs", "explore,transitions", cwd=tmp_path,
    )  # fmt: skip
    assert only.returncode == 0, only.stderr
    assert {p.name for p in (tmp_path / "ds").iterdir() if p.is_dir()} == {
        "explore",
        "transitions",
        "data_docs",
    }


def test_explore_and_transition_suites_name_what_fails(tmp_path):
    explore = explore_tasks()
    bad = [
        replace(explore["keep"], score=7.0),
        replace(explore["low"], instruction="", actions=()),
        explore["keep"],  # the same task_id twice
    ]
    run = explore_run(explore["keep"])
    broken_steps = [replace(s, step=-1, action="{}") for s in steps(run, 1)]
    repo_of = {run.instance_id: "acme/alpha"}
    frames = {
        "explore": profile("explore", explore_table(bad, {})),
        "transitions": profile("transitions", transitions_table(broken_steps, repo_of)),
    }
    results = {r.suite: r for r in run_quality_gates(frames, str(tmp_path / "docs"))}
    failures = " | ".join(f for r in results.values() for f in r.failures)
    assert not results["explore"].success and not results["transitions"].success
    for expected in (
        "expect_column_values_to_be_unique(task_id)",
        "expect_column_values_to_be_between(score)",
        "expect_column_values_to_be_between(instruction)",
        "expect_column_values_to_be_between(actions)",
        "expect_column_values_to_be_between(step)",
        "expect_column_values_to_be_in_set(action_is_tool_call)",
    ):
        assert expected in failures, expected


def test_inputs_from_before_explore_make_the_new_configs_unavailable_not_empty(tmp_path):
    curated = write_curated(tmp_path / "curated", curated_tasks())  # no explore or transitions
    result = export_dataset([str(curated)], str(tmp_path / "out"), ExportParams())
    assert set(result.unavailable) == {"explore", "transitions"}
    assert "explore" not in result.omitted and "explore" not in result.counts
    assert "no explore_tasks table" in (tmp_path / "out" / "README.md").read_text()
