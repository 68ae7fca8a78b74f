"""The export's plan and its second pass, one config at a time: source rows -> config shards.

``plan_export`` turns the first pass (``scan``) into the decisions every later step shares: which
configs the inputs can have, the split of every repository and the row count of every config's
split (so shard counts are fixed before a row is rendered). ``write_config`` then streams the one
table a config is made of, in batches, renders the rows that config keeps and hands them to the
shard writers of their split; configs are independent, so each is one unit of work.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from operator import attrgetter
from typing import Any, NamedTuple

import pyarrow as pa
import pyarrow.compute as pc
from trajforge.generators.trajectories.sft import trl_message
from trajforge.pipelines.release.scan import (
    CONVERSATION,
    HINT_COLUMNS,
    Inputs,
    scan,
    trajectory_drop,
)
from trajforge.pipelines.release.shards import ShardWriter, WrittenSplit, batches, route
from trajforge.pipelines.release.split import assign_splits
from trajforge.pipelines.release.tables import (
    Conversation,
    choose_hints,
    explore_table,
    rl_table,
    sft_table,
    sft_xml_table,
    tasks_schema,
    tasks_table,
    transitions_table,
)
from trajforge.schemas.explore_task import ExploreTask
from trajforge.schemas.params import ExportParams
from trajforge.schemas.records import from_row, from_table
from trajforge.schemas.task_instance import TaskInstance
from trajforge.schemas.trajectory import Message, Trajectory
from trajforge.schemas.transition import Transition

OPTIONAL_TABLES = {"explore": "explore_tasks", "transitions": "transitions"}  # config -> table


@dataclass(frozen=True)
class Plan:
    """What the scan decided: the configs to write, the splits and every split's row count."""

    inputs: tuple[str, ...]
    found: Inputs
    counts: dict[str, dict[str, int]]  # config -> split -> rows (configs with rows, in order)
    omitted: dict[str, str]  # config -> why it has no rows
    unavailable: dict[str, str]  # config -> the table the inputs lack
    split_of: dict[str, str]  # repo -> split


def plan_export(inputs: Sequence[str], configs: Sequence[str], params: ExportParams) -> Plan:
    """Scan ``inputs`` for ``configs`` and fix splits and row counts."""
    found = scan(inputs, configs)
    unavailable = {
        c: f"the inputs have no {t} table (curated before the explore stage)"
        for c, t in OPTIONAL_TABLES.items()
        if c in configs and not found.files[t]
    }
    available = [c for c in configs if c not in unavailable]
    split_of = assign_splits(
        {c: set(found.repos(c)) for c in available}, params.validation_fraction, params.seed
    )
    counts = {c: n for c, n in _counts(found, available, split_of).items() if n}
    omitted = {c: _why_empty(c) for c in available if c not in counts}
    return Plan(tuple(inputs), found, counts, omitted, unavailable, split_of)


def _counts(
    found: Inputs, configs: Sequence[str], split_of: dict[str, str]
) -> dict[str, dict[str, int]]:
    counts: dict[str, dict[str, int]] = {}
    for config in configs:
        splits: Counter = Counter()
        for repo, n in found.repos(config).items():
            splits[split_of[repo]] += n
        counts[config] = {s: splits[s] for s in ("train", "validation") if splits[s]}
    return counts


def _why_empty(config: str) -> str:
    return {
        "sft": "no resolved trajectory of an exported task in the inputs",
        "sft_xml": "no resolved trajectory of an exported task in the inputs",
        "explore": "no explore tasks in the inputs",
        "transitions": "no transitions of an exported task in the inputs",
    }.get(config, "no tasks in the inputs")


class Source(NamedTuple):
    """How a config is made: the table its rows come from, which records it keeps, the repo of a
    record (which decides its split) and the records -> Arrow rows renderer."""

    table: str
    cls: Any  # a record class
    keep: Callable[[Any], bool]
    repo: Callable[[Any], str]
    render: Callable[[list[Any]], pa.Table]


def source_of(config: str, plan: Plan, system_prompt: str, batch_rows: int) -> Source:
    found = plan.found
    repo_of = found.repo_of
    if config in ("tasks", "rl"):
        schema = tasks_schema(found.score_names)
        hints = _hints(found, batch_rows) if config == "rl" else {}
        render: Callable[[list[Any]], pa.Table] = (
            (lambda ts: tasks_table(ts, schema))
            if config == "tasks"
            else (lambda ts: rl_table(ts, system_prompt, hints))
        )
        return Source(
            "tasks",
            TaskInstance,
            lambda t: t.instance_id not in found.not_gradable,
            attrgetter("repo"),
            render,
        )
    if config == "explore":
        conversations = _conversations(found, batch_rows)
        return Source(
            "explore_tasks",
            ExploreTask,
            lambda _: True,
            attrgetter("repo"),
            lambda ts: explore_table(ts, conversations),
        )
    if config in ("sft", "sft_xml"):
        table = sft_table if config == "sft" else sft_xml_table
        return Source(
            "trajectories",
            Trajectory,
            lambda t: not trajectory_drop(t.instance_id, t.resolved, repo_of, t.near_miss),
            lambda t: repo_of[t.instance_id],
            lambda ts: table(ts, repo_of, found.language_of),
        )
    if config == "transitions":
        return Source(
            "transitions",
            Transition,
            lambda t: t.instance_id in repo_of,
            lambda t: repo_of[t.instance_id],
            lambda ts: transitions_table(ts, repo_of),
        )
    raise ValueError(f"export: unknown config {config}")


def write_config(
    plan: Plan,
    config: str,
    root: str,
    shard_rows: int,
    system_prompt: str,
    batch_rows: int,
) -> list[WrittenSplit]:
    """``config``'s rows, in input order, as ``root/<config>/<split>-XXXXX-of-YYYYY.parquet``."""
    writers = {
        (config, split): ShardWriter(root, config, split, rows, shard_rows)
        for split, rows in plan.counts[config].items()
    }
    made = source_of(config, plan, system_prompt, batch_rows)
    for batch in batches(plan.found.files[made.table], made.cls.ARROW_SCHEMA, batch_rows):
        records = [r for r in from_table(made.cls, batch) if made.keep(r)]
        route(records, lambda r: plan.split_of[made.repo(r)], {config: made.render}, writers)
    return [writer.written() for writer in writers.values()]


def _hints(found: Inputs, batch_rows: int) -> dict[str, str]:
    """instance id -> the guidance of a guided retry of it (the rl rows' optional hint)."""
    runs = (
        row
        for batch in batches(
            found.files["trajectories"], Trajectory.ARROW_SCHEMA, batch_rows, HINT_COLUMNS
        )
        for row in batch.filter(pc.greater(pc.utf8_length(batch["guidance"]), 0)).to_pylist()
    )
    return choose_hints(runs)


def _conversations(found: Inputs, batch_rows: int) -> dict[str, Conversation]:
    """The messages and tools of the explore tasks' runs, by trajectory id. Explore runs are
    short, and only theirs are held, so the explore rows can be written in one pass."""
    if not found.explore_runs:
        return {}
    wanted = pa.array(sorted(found.explore_runs), pa.string())
    conversations: dict[str, Conversation] = {}
    for batch in batches(
        found.files["trajectories"], Trajectory.ARROW_SCHEMA, batch_rows, CONVERSATION
    ):
        for row in batch.filter(pc.is_in(batch["trajectory_id"], wanted)).to_pylist():
            messages = [trl_message(from_row(Message, m)) for m in row["messages"] or ()]
            conversations[row["trajectory_id"]] = Conversation(messages, row["tools"])
    return conversations
