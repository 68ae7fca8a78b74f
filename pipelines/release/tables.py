"""The exported configs' columns, and records -> rows for each config.

Arrow maps do not load in ``datasets`` (no feature type for them), so the export turns them into
types that do: ``scores`` becomes a struct with one float field per score name (null where a
record has no such score), which also makes ``row["scores"]["difficulty"]`` work in a filter;
``provenance`` (and an explore task's ``expected_files`` / ``expected_outputs``) becomes a list of
``{key, value}`` pairs (their keys are open-ended).

Soft verification and guided retries show in three places: ``sft`` rows carry ``near_miss`` (an
unresolved run curate kept by its soft reward) and ``guidance`` (what a guided retry's prompt was
told; "" for an unguided run), ``sft_xml`` rows ``near_miss``, and ``rl`` rows an optional
``hint``: the guidance of a guided retry of the task (null where it had none), which a trainer
may add to the prompt (Agent-RLVR) or leave out.

Every config says a task's language (``python``, ``javascript``): ``tasks`` and ``rl`` from the
task (with ``test_runner``, whose report format ``test_cmd`` writes), ``sft`` and ``sft_xml``
from the task the run is joined to, so a trainer can filter or balance languages in any config.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, NamedTuple

import pyarrow as pa
from trajforge.filters.task_scores import TASK_SCORE_RANGES
from trajforge.filters.trajectory_scores import TRAJECTORY_SCORE_RANGES, trajectory_scores
from trajforge.generators.trajectories.rl_prompt import rl_prompt
from trajforge.generators.trajectories.sft import swesmith_messages, trl_messages
from trajforge.schemas.explore_task import ExploreTask
from trajforge.schemas.records import to_row
from trajforge.schemas.task_instance import DEFAULT_LANGUAGE, TaskInstance
from trajforge.schemas.trajectory import MESSAGE_TYPE, Trajectory
from trajforge.schemas.transition import Transition

CHAT_MESSAGE = pa.struct([("role", pa.string()), ("content", pa.large_string())])
PAIRS = pa.list_(pa.struct([("key", pa.string()), ("value", pa.string())]))
TRAJECTORY_SCORES = pa.struct([(n, pa.float64()) for n in sorted(TRAJECTORY_SCORE_RANGES)])

RL_SCHEMA = pa.schema(
    [
        ("instance_id", pa.string()),
        ("repo", pa.string()),
        ("prompt", pa.list_(CHAT_MESSAGE)),
        ("image_name", pa.string()),
        ("image_digest", pa.string()),
        ("test_cmd", pa.string()),
        ("FAIL_TO_PASS", pa.list_(pa.string())),
        ("PASS_TO_PASS", pa.list_(pa.string())),
        ("base_commit", pa.string()),
        ("bug_patch", pa.large_string()),
        ("environment_setup_commit", pa.string()),
        ("origin", pa.string()),
        ("difficulty", pa.float64()),
        ("hint", pa.large_string()),  # guidance of a guided retry of the task; null: none
        ("language", pa.string()),
        ("test_runner", pa.string()),
    ]
)
_TRAJECTORY_META = [
    ("trajectory_id", pa.string()),
    ("instance_id", pa.string()),
    ("repo", pa.string()),
    ("model", pa.string()),
    ("origin", pa.string()),
    ("language", pa.string()),  # the joined task's
]
SFT_SCHEMA = pa.schema(
    [
        *_TRAJECTORY_META,
        ("messages", pa.list_(MESSAGE_TYPE)),
        ("tools", pa.large_string()),
        ("resolved", pa.bool_()),
        ("reward", pa.float64()),
        ("exit_status", pa.string()),
        ("near_miss", pa.bool_()),
        ("guidance", pa.large_string()),
        ("scores", TRAJECTORY_SCORES),
    ]
)
SFT_XML_SCHEMA = pa.schema(
    [
        *_TRAJECTORY_META,
        ("messages", pa.list_(CHAT_MESSAGE)),
        ("resolved", pa.bool_()),
        ("near_miss", pa.bool_()),
    ]
)
EXPLORE_COLUMNS = (  # ExploreTask's, less where it ran from (source, profile_id)
    "task_id", "repo", "base_commit", "image_name", "image_digest", "instruction", "actions",
    "expected_files", "expected_outputs", "score", "origin", "trajectory_id", "provenance",
)  # fmt: skip
EXPLORE_PAIRS = ("expected_files", "expected_outputs", "provenance")
EXPLORE_SCHEMA = pa.schema(
    [
        pa.field(n, PAIRS) if n in EXPLORE_PAIRS else ExploreTask.ARROW_SCHEMA.field(n)
        for n in EXPLORE_COLUMNS
    ]
    + [
        ("messages", pa.list_(MESSAGE_TYPE)),  # null when curate kept no run of the task
        ("tools", pa.large_string()),
    ]
)
_TRANSITION = Transition.ARROW_SCHEMA
TRANSITIONS_SCHEMA = _TRANSITION.insert(
    _TRANSITION.get_field_index("instance_id") + 1, pa.field("repo", pa.string())
)


class Conversation(NamedTuple):
    """The part of a run an explore row carries: TRL messages and the tools JSON."""

    messages: list[dict[str, Any]]
    tools: str


def tasks_schema(score_names: Iterable[str]) -> pa.Schema:
    """TaskInstance's columns with ``scores`` as a struct of ``score_names`` plus the known task
    scores, and ``provenance`` as key/value pairs."""
    names = sorted(set(score_names) | set(TASK_SCORE_RANGES))
    schema = TaskInstance.ARROW_SCHEMA
    schema = schema.set(
        schema.get_field_index("scores"),
        pa.field("scores", pa.struct([(n, pa.float64()) for n in names])),
    )
    return schema.set(schema.get_field_index("provenance"), pa.field("provenance", PAIRS))


def tasks_table(tasks: Iterable[TaskInstance], schema: pa.Schema) -> pa.Table:
    names = schema.field("scores").type.names
    rows = []
    for task in tasks:
        row = to_row(task)
        row["scores"] = {n: task.scores.get(n) for n in names}
        row["provenance"] = _pairs(task.provenance)
        rows.append(row)
    return pa.Table.from_pylist(rows, schema=schema)


def _pairs(mapping: Mapping[str, str]) -> list[dict[str, str]]:
    return [{"key": k, "value": v} for k, v in sorted(mapping.items())]


def explore_table(
    tasks: Iterable[ExploreTask], conversations: Mapping[str, Conversation]
) -> pa.Table:
    """One row per explore task, with its run's conversation when ``conversations`` has it."""
    rows = []
    for task in tasks:
        record, run = to_row(task), conversations.get(task.trajectory_id)
        row = {n: _pairs(record[n]) if n in EXPLORE_PAIRS else record[n] for n in EXPLORE_COLUMNS}
        row["messages"], row["tools"] = (run.messages, run.tools) if run else (None, None)
        rows.append(row)
    return pa.Table.from_pylist(rows, schema=EXPLORE_SCHEMA)


def transitions_table(transitions: Iterable[Transition], repo_of: Mapping[str, str]) -> pa.Table:
    rows = [{**to_row(t), "repo": repo_of[t.instance_id]} for t in transitions]
    return pa.Table.from_pylist(rows, schema=TRANSITIONS_SCHEMA)


class HintChoice(NamedTuple):
    """Which guidance becomes a task's ``hint``: a resolved guided run's first, then the lowest
    trajectory id, so the choice does not depend on the order runs are read in."""

    unresolved: bool
    trajectory_id: str
    guidance: str


def choose_hints(runs: Iterable[Mapping[str, Any]]) -> dict[str, str]:
    """instance id -> the hint of its guided runs (rows with ``instance_id``, ``trajectory_id``,
    ``resolved``, ``guidance``); runs without guidance are passed over."""
    best: dict[str, HintChoice] = {}
    for run in runs:
        if not run.get("guidance"):
            continue
        choice = HintChoice(not run.get("resolved"), run["trajectory_id"], run["guidance"])
        known = best.get(run["instance_id"])
        if known is None or choice < known:
            best[run["instance_id"]] = choice
    return {instance_id: choice.guidance for instance_id, choice in best.items()}


def rl_table(
    tasks: Iterable[TaskInstance], system_prompt: str, hints: Mapping[str, str] | None = None
) -> pa.Table:
    """RL rows; ``hints``: instance id -> guidance of a guided retry (``choose_hints``)."""
    hints = hints or {}
    rows = [
        {
            "instance_id": t.instance_id,
            "repo": t.repo,
            "prompt": rl_prompt(t, system_prompt),
            "image_name": t.image_name,
            "image_digest": t.image_digest,
            "test_cmd": t.test_cmd,
            "FAIL_TO_PASS": list(t.FAIL_TO_PASS),
            "PASS_TO_PASS": list(t.PASS_TO_PASS),
            "base_commit": t.base_commit,
            "bug_patch": t.bug_patch,
            "environment_setup_commit": t.environment_setup_commit,
            "origin": t.origin,
            "difficulty": t.difficulty,
            "hint": hints.get(t.instance_id),
            "language": t.language,
            "test_runner": t.test_runner,
        }
        for t in tasks
    ]
    return pa.Table.from_pylist(rows, schema=RL_SCHEMA)


def _meta(
    trajectory: Trajectory, repo_of: Mapping[str, str], language_of: Mapping[str, str]
) -> dict[str, object]:
    return {
        "trajectory_id": trajectory.trajectory_id,
        "instance_id": trajectory.instance_id,
        "repo": repo_of[trajectory.instance_id],
        "model": trajectory.model,
        "origin": trajectory.origin,
        "language": language_of.get(trajectory.instance_id, DEFAULT_LANGUAGE),
    }


def sft_table(
    trajectories: Iterable[Trajectory],
    repo_of: Mapping[str, str],
    language_of: Mapping[str, str] | None = None,
) -> pa.Table:
    """SFT rows; ``language_of``: task id -> the task's language (python where not named)."""
    languages = language_of or {}
    rows = [
        {
            **_meta(t, repo_of, languages),
            "messages": trl_messages(t),
            "tools": t.tools,
            "resolved": t.resolved,
            "reward": t.reward,
            "exit_status": t.exit_status,
            "near_miss": t.near_miss,
            "guidance": t.guidance,
            "scores": trajectory_scores(t),
        }
        for t in trajectories
    ]
    return pa.Table.from_pylist(rows, schema=SFT_SCHEMA)


def sft_xml_table(
    trajectories: Iterable[Trajectory],
    repo_of: Mapping[str, str],
    language_of: Mapping[str, str] | None = None,
) -> pa.Table:
    languages = language_of or {}
    rows = [
        {
            **_meta(t, repo_of, languages),
            "messages": swesmith_messages(t),
            "resolved": t.resolved,
            "near_miss": t.near_miss,
        }
        for t in trajectories
    ]
    return pa.Table.from_pylist(rows, schema=SFT_XML_SCHEMA)
