"""The export's first pass: ids, repositories and verdicts of the curated tables, nothing heavy.

From it the export knows how many rows each config gets per repository before a row is rendered
(so the split and the shard counts are fixed up front), which input rows it leaves out and why,
and the counts the dataset card reports. Explore task ids count as task ids: their runs become
SFT rows and their transitions transition rows like those of any other task. ``check_inputs``
runs before the export's pipeline starts, so a wrong input is one line, never an error in Beam: a
file that is not readable Parquet or lacks a column the export reads is left out with one line
(the other files go on), and no readable tasks file at all is an error.
"""

from __future__ import annotations

import sys
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

from trajforge.pipelines.release.shards import batches
from trajforge.pipelines.runtime.outputs import only, unreadable
from trajforge.schemas.errors import UserError
from trajforge.schemas.explore_task import ExploreTask
from trajforge.schemas.storage import join, parquet_files
from trajforge.schemas.task_instance import DEFAULT_LANGUAGE, TaskInstance
from trajforge.schemas.trajectory import Trajectory
from trajforge.schemas.transition import Transition
from trajforge.verifiers.grader.gradable import grading_gap

TABLES = ("tasks", "explore_tasks", "trajectories", "transitions")
TRAJECTORY_CONFIGS = ("sft", "sft_xml")
ROW_SOURCE = {  # config -> the rows it is made of (one config row per such row)
    "tasks": "tasks",
    "rl": "tasks",
    "sft": "sft",
    "sft_xml": "sft",
    "explore": "explore",
    "transitions": "transitions",
}
TASK_INDEX = ["instance_id", "repo", "origin", "scores", "language", "test_runner", "test_cmd"]
EXPLORE_INDEX = ["task_id", "repo", "origin", "trajectory_id"]
RUN_INDEX = ["instance_id", "resolved", "origin", "model", "near_miss", "soft_reward", "guidance"]
HINT_COLUMNS = ["trajectory_id", "instance_id", "resolved", "guidance"]  # an rl row's hint
TRANSITION_INDEX = ["instance_id"]
CONVERSATION = ["trajectory_id", "messages", "tools"]  # what an explore row takes of its run
INDEX_ROWS = 4096
SCHEMAS = {
    "tasks": TaskInstance.ARROW_SCHEMA,
    "explore_tasks": ExploreTask.ARROW_SCHEMA,
    "trajectories": Trajectory.ARROW_SCHEMA,
    "transitions": Transition.ARROW_SCHEMA,
}


@dataclass
class Inputs:
    """What the first pass learns; ``repo_rows`` is keyed by ``ROW_SOURCE`` values."""

    files: dict[str, list[str]]  # table -> its Parquet files over every input
    repo_of: dict[str, str] = field(default_factory=dict)  # task or explore task id -> repo
    # task or explore task id -> its language (an sft or rl row's ``language``)
    language_of: dict[str, str] = field(default_factory=dict)
    task_languages: Counter = field(default_factory=Counter)  # tasks and explore tasks
    repo_rows: dict[str, Counter] = field(
        default_factory=lambda: {source: Counter() for source in set(ROW_SOURCE.values())}
    )
    explore_runs: set[str] = field(default_factory=set)  # trajectory ids of explore tasks
    score_names: set[str] = field(default_factory=set)
    task_origins: Counter = field(default_factory=Counter)  # tasks and explore tasks
    trajectory_origins: Counter = field(default_factory=Counter)
    models: Counter = field(default_factory=Counter)
    near_misses: int = 0  # SFT rows of unresolved runs curate kept (near_miss)
    near_miss_low: float | None = None  # the lowest soft_reward among them
    guided_runs: int = 0  # SFT rows of guided retries (their prompt holds guidance)
    dropped: Counter = field(default_factory=Counter)  # reason -> input rows left out
    # tasks the grader refuses (``grading_gap``): no tasks/rl row, their runs stay SFT material
    not_gradable: set[str] = field(default_factory=set)
    read: Counter = field(default_factory=Counter)  # table -> rows read

    def repos(self, config: str) -> Counter:
        """repo -> rows of ``config``."""
        return self.repo_rows[ROW_SOURCE[config]]


def table_files(inputs: Sequence[str], configs: Sequence[str]) -> dict[str, list[str]]:
    """table -> its readable Parquet files over every input, in input order."""
    bad = bad_files(inputs, configs)
    return {t: [f for f in files if f not in bad] for t, files in _all_files(inputs).items()}


def _all_files(inputs: Sequence[str]) -> dict[str, list[str]]:
    return {t: [f for i in inputs for f in parquet_files(join(i, t))] for t in TABLES}


def bad_files(inputs: Sequence[str], configs: Sequence[str]) -> dict[str, str]:
    """path -> why the export leaves it out: not readable Parquet (zero bytes, truncated, another
    format), or without a column the export reads or with one of another type (an older or
    different schema)."""
    found: dict[str, str] = {}
    reads = _columns_read(configs)
    for table, files in _all_files(inputs).items():
        types = only(SCHEMAS[table], reads.get(table, ()))
        for path in files:
            why = unreadable(path, reads.get(table, ()), types)
            if why:
                found[path] = why
    return found


def check_inputs(inputs: Sequence[str], configs: Sequence[str]) -> dict[str, str]:
    """The export's input errors, found from file footers alone: each bad file is one line and is
    left out (returned, path -> why); no readable tasks file at all is a ``UserError``."""
    bad = bad_files(inputs, configs)
    for path, why in bad.items():
        print(f"export: left out {path}: {why}", file=sys.stderr)
    files = table_files(inputs, configs)
    if not files["tasks"] and _all_files(inputs)["tasks"]:
        raise UserError(
            f"export: no readable tasks/*.parquet under {', '.join(inputs)} (see the lines "
            "above); re-run curate to write them again"
        )
    _require_tasks(inputs, files)
    return bad


def _columns_read(configs: Sequence[str]) -> dict[str, list[str]]:
    """table -> the columns an export of ``configs`` may read of it (index and rows)."""
    reads: dict[str, list[str]] = {"tasks": TASK_INDEX, "explore_tasks": EXPLORE_INDEX}
    if any(c in configs for c in TRAJECTORY_CONFIGS):
        reads["trajectories"] = SCHEMAS["trajectories"].names
    elif "explore" in configs:
        reads["trajectories"] = CONVERSATION
    if "rl" in configs:
        reads["trajectories"] = list(dict.fromkeys([*reads.get("trajectories", []), *HINT_COLUMNS]))
    if "transitions" in configs:
        reads["transitions"] = SCHEMAS["transitions"].names
    if "tasks" in configs or "rl" in configs:
        reads["tasks"] = SCHEMAS["tasks"].names
    if "explore" in configs:
        reads["explore_tasks"] = SCHEMAS["explore_tasks"].names
    return reads


def _require_tasks(inputs: Sequence[str], files: dict[str, list[str]]) -> None:
    if not files["tasks"]:
        raise UserError(
            f"export: no tasks/*.parquet under {', '.join(inputs)}; pass curated run directories"
        )


def scan(inputs: Sequence[str], configs: Sequence[str]) -> Inputs:
    """Index the tables the ``configs`` need (tasks and explore tasks always: they name repos)."""
    found = Inputs(table_files(inputs, configs))
    _require_tasks(inputs, found.files)
    _scan_tasks(found)
    _scan_explore(found)
    if any(c in configs for c in TRAJECTORY_CONFIGS):
        _scan_trajectories(found)
    if "transitions" in configs:
        _scan_transitions(found)
    return found


def trajectory_drop(
    instance_id: str, resolved: bool | None, repo_of: dict[str, str], near_miss: bool = False
) -> str:
    """Why a trajectory is not an SFT row ("" when it is one: resolved, or a near miss)."""
    if instance_id not in repo_of:
        return "trajectory_without_task"
    if resolved is None:
        return "trajectory_unverified"
    return "" if resolved or near_miss else "trajectory_unresolved"


def _rows(found: Inputs, table: str, schema, columns: list[str]):
    for batch in batches(found.files[table], schema, INDEX_ROWS, columns):
        for row in batch.to_pylist():
            found.read[table] += 1
            yield row


def _scan_tasks(found: Inputs) -> None:
    gaps: Counter = Counter()
    for row in _rows(found, "tasks", TaskInstance.ARROW_SCHEMA, TASK_INDEX):
        found.repo_of[row["instance_id"]] = row["repo"]
        found.language_of[row["instance_id"]] = row["language"]
        gap = grading_gap(row["language"], row["test_runner"], row["test_cmd"])
        if gap:
            gaps[gap] += 1
            found.not_gradable.add(row["instance_id"])
            found.dropped["task_not_gradable"] += 1
            continue
        found.task_languages[row["language"]] += 1
        found.repo_rows["tasks"][row["repo"]] += 1
        found.task_origins[row["origin"]] += 1
        found.score_names.update(k for k, _ in row["scores"] or ())
    for gap, count in sorted(gaps.items()):
        print(
            f"export: {count} task(s) left out, the grader cannot grade them: {gap}",
            file=sys.stderr,
        )


def _scan_explore(found: Inputs) -> None:
    for row in _rows(found, "explore_tasks", ExploreTask.ARROW_SCHEMA, EXPLORE_INDEX):
        found.repo_of[row["task_id"]] = row["repo"]
        # explore builds its environments with the default language's layer only
        found.language_of[row["task_id"]] = DEFAULT_LANGUAGE
        found.task_languages[DEFAULT_LANGUAGE] += 1
        found.repo_rows["explore"][row["repo"]] += 1
        found.task_origins[row["origin"]] += 1
        found.explore_runs.add(row["trajectory_id"])


def _scan_trajectories(found: Inputs) -> None:
    for row in _rows(found, "trajectories", Trajectory.ARROW_SCHEMA, RUN_INDEX):
        reason = trajectory_drop(
            row["instance_id"], row["resolved"], found.repo_of, bool(row["near_miss"])
        )
        if reason:
            found.dropped[reason] += 1
            continue
        if row["near_miss"] and not row["resolved"]:
            found.near_misses += 1
            low, soft = found.near_miss_low, row["soft_reward"]
            if soft is not None:
                found.near_miss_low = soft if low is None else min(low, soft)
        found.guided_runs += bool(row["guidance"])
        found.repo_rows["sft"][found.repo_of[row["instance_id"]]] += 1
        found.trajectory_origins[row["origin"]] += 1
        found.models[row["model"]] += 1


def _scan_transitions(found: Inputs) -> None:
    for row in _rows(found, "transitions", Transition.ARROW_SCHEMA, TRANSITION_INDEX):
        repo = found.repo_of.get(row["instance_id"])
        if repo is None:
            found.dropped["transition_without_task"] += 1
            continue
        found.repo_rows["transitions"][repo] += 1
