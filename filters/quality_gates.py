"""Quality gates on the exported tables: one great-expectations suite per config, plus Data Docs.

A release is only as good as its worst row, so the export validates every config before anything
is published, and a failing expectation stops it with the expectation named.

great-expectations reads pandas, not Arrow or polars, and nested columns are awkward for it, so
each table is first reduced to a *profile* (``profile``): ids, short strings, numbers and booleans
as they are; text and list columns as their lengths (``FAIL_TO_PASS`` = number of tests,
``messages`` = number of messages); the ``scores`` struct as one ``scores.<name>`` column per
score; a few derived booleans. Profiles are small, so shards can be profiled one by one and
concatenated. The context is ephemeral (in-memory stores), analytics and progress bars are off,
and Data Docs go to a directory the caller chooses.
"""

from __future__ import annotations

import json
import logging
import math
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
from trajforge.filters.explore_scores import EXPLORE_SCORE, EXPLORE_SCORE_RANGES
from trajforge.filters.task_scores import TASK_SCORE_RANGES
from trajforge.filters.trajectory_scores import TRAJECTORY_SCORE_RANGES
from trajforge.schemas.errors import UserError

os.environ.setdefault("GX_ANALYTICS_ENABLED", "false")

SITE = "trajforge"

REQUIRED_COLUMNS: dict[str, tuple[str, ...]] = {
    "tasks": (
        "instance_id", "repo", "base_commit", "patch", "test_patch", "problem_statement",
        "FAIL_TO_PASS", "PASS_TO_PASS", "image_name", "test_cmd", "origin", "difficulty",
        "scores", "bug_patch",
    ),
    "rl": (
        "instance_id", "repo", "base_commit", "bug_patch", "prompt", "image_name", "test_cmd",
        "FAIL_TO_PASS", "PASS_TO_PASS",
    ),
    "sft": (
        "trajectory_id", "instance_id", "repo", "model", "messages", "tools", "resolved",
        "scores",
    ),
    "sft_xml": ("trajectory_id", "instance_id", "repo", "model", "messages", "resolved"),
    "explore": (
        "task_id", "repo", "base_commit", "image_name", "instruction", "actions",
        "expected_files", "expected_outputs", "score", "origin",
    ),
    "transitions": (
        "transition_id", "trajectory_id", "instance_id", "repo", "step", "state", "action",
        "observation", "origin",
    ),
}  # fmt: skip
ID_COLUMNS = {
    "tasks": "instance_id",
    "rl": "instance_id",
    "sft": "trajectory_id",
    "sft_xml": "trajectory_id",
    "explore": "task_id",
    "transitions": "transition_id",
}
SCORE_RANGES = {"tasks": TASK_SCORE_RANGES, "sft": TRAJECTORY_SCORE_RANGES}


class QualityGateError(UserError):
    """A suite failed: the message names every failing expectation and where Data Docs are."""

    reason = "quality_gate_failed"

    def __init__(self, failures: Sequence[str], docs_index: str | None = None) -> None:
        where = f"; Data Docs: {docs_index}" if docs_index else ""
        super().__init__(
            f"export: quality gates failed, nothing published ({'; '.join(failures)}){where}"
        )
        self.failures = tuple(failures)
        self.docs_index = docs_index


@dataclass(frozen=True)
class GateResult:
    suite: str
    success: bool
    expectations: int
    failures: tuple[str, ...]  # "<suite>: <expectation>(<column>): <what was unexpected>"


def profile(config: str, table: pa.Table) -> pd.DataFrame:
    """The columns the suite of ``config`` checks, one row per exported row (see module doc)."""
    columns: dict[str, Any] = {}
    for name in table.column_names:
        column = table.column(name)
        kind = column.type
        if pa.types.is_struct(kind) and name == "scores":
            for field in kind:
                values = pc.struct_field(column, field.name)
                columns[f"scores.{field.name}"] = values.to_pandas()
            columns[name] = column.is_valid().to_pandas()
        elif pa.types.is_struct(kind) or pa.types.is_map(kind):
            columns[name] = column.is_valid().to_pandas()
        elif pa.types.is_list(kind) or pa.types.is_large_list(kind) or kind == pa.large_string():
            lengths = (
                pc.list_value_length(column) if "list" in str(kind) else pc.utf8_length(column)
            )
            columns[name] = lengths.to_pandas()
        else:
            columns[name] = column.to_pandas()
    frame = pd.DataFrame(columns)
    if config == "sft" and "tools" in table.column_names:
        frame["tools_is_json_list"] = [_is_tool_list(t) for t in table.column("tools").to_pylist()]
    if "resolved" in table.column_names and config in ("sft", "sft_xml"):
        resolved = table.column("resolved").to_pylist()
        near = (
            table.column("near_miss").to_pylist()
            if "near_miss" in table.column_names
            else [False] * len(resolved)
        )
        pairs = zip(resolved, near, strict=True)
        frame["resolved_or_near_miss"] = [bool(r) or bool(n) for r, n in pairs]
    if "messages" in table.column_names and config in ("sft", "sft_xml"):
        frame["messages_has_assistant"] = _has_role(table.column("messages"), "assistant")
    if config == "transitions" and "action" in table.column_names:
        frame["action_is_tool_call"] = [
            _is_tool_call(a) for a in table.column("action").to_pylist()
        ]
    return frame


def _has_role(messages: pa.ChunkedArray, role: str) -> np.ndarray:
    """Per row: does any message have ``role``? Computed in Arrow, without Python dicts."""
    found = np.zeros(len(messages), dtype=bool)
    offset = 0
    for chunk in messages.chunks:
        roles = pc.struct_field(pc.list_flatten(chunk), "role")
        rows = pc.list_parent_indices(chunk).to_numpy()
        hits = pc.fill_null(pc.equal(roles, role), False).to_numpy(zero_copy_only=False)
        found[offset + rows[hits]] = True
        offset += len(chunk)
    return found


def _is_tool_list(tools: str | None) -> bool:
    """JSON text of a list of tool schemas that each name their function (``[]`` is fine)."""
    try:
        schemas = json.loads(tools) if tools is not None else None
    except json.JSONDecodeError:
        return False
    return isinstance(schemas, list) and all(
        isinstance(s, dict)
        and isinstance(s.get("function"), dict)
        and isinstance(s["function"].get("name"), str)
        for s in schemas
    )


def _is_tool_call(action: str | None) -> bool:
    """A transition's action: a JSON object naming its tool, with its arguments as text."""
    try:
        value = json.loads(action) if action is not None else None
    except json.JSONDecodeError:
        return False
    return (
        isinstance(value, dict)
        and isinstance(value.get("tool"), str)
        and bool(value["tool"])
        and isinstance(value.get("arguments"), str)
    )


def expectations(config: str, columns: Sequence[str]) -> list[Any]:
    """The suite of one config; ``columns`` are the profile's, to know which scores exist."""
    import great_expectations as gx

    e = gx.expectations
    required = list(REQUIRED_COLUMNS[config])
    ident = ID_COLUMNS[config]
    suite: list[Any] = [
        e.ExpectTableColumnsToMatchSet(
            column_set=required, exact_match=False, notes="the columns trainers rely on"
        ),
        e.ExpectTableRowCountToBeBetween(min_value=1, notes="empty configs are omitted"),
        e.ExpectColumnValuesToNotBeNull(column=ident),
        e.ExpectColumnValuesToBeUnique(column=ident, notes="ids are content hashes"),
        e.ExpectColumnValuesToNotBeNull(column="repo", notes="the split is decided by repo"),
    ]
    if config in ("tasks", "rl"):
        suite += [
            e.ExpectColumnValuesToBeBetween(
                column="FAIL_TO_PASS", min_value=1, notes="number of FAIL_TO_PASS tests"
            ),
            e.ExpectColumnValuesToNotBeNull(column="image_name"),
            e.ExpectColumnValuesToNotBeNull(column="test_cmd"),
        ]
    if config == "tasks":
        suite += [
            e.ExpectColumnValuesToBeBetween(column="patch", min_value=1, notes="patch length"),
            e.ExpectColumnValuesToBeBetween(column="difficulty", min_value=0, max_value=1),
        ]
    if config == "rl":
        suite.append(
            e.ExpectColumnValuesToBeBetween(
                column="prompt", min_value=2, notes="number of prompt messages (system + user)"
            )
        )
    if config in ("sft", "sft_xml"):
        suite += [
            e.ExpectColumnValuesToBeBetween(
                column="messages", min_value=2, notes="number of messages"
            ),
            e.ExpectColumnValuesToBeInSet(column="messages_has_assistant", value_set=[True]),
            e.ExpectColumnValuesToBeInSet(
                column="resolved_or_near_miss",
                value_set=[True],
                notes="SFT keeps resolved trajectories and curate's near misses only",
            ),
        ]
    if config == "sft":
        suite.append(
            e.ExpectColumnValuesToBeInSet(
                column="tools_is_json_list", value_set=[True], notes="tools: JSON list of schemas"
            )
        )
    if config == "explore":
        low, high = EXPLORE_SCORE_RANGES[EXPLORE_SCORE]
        suite += [
            e.ExpectColumnValuesToNotBeNull(column="image_name"),
            e.ExpectColumnValuesToBeBetween(
                column="instruction", min_value=1, notes="instruction length"
            ),
            e.ExpectColumnValuesToBeBetween(
                column="actions", min_value=1, notes="number of replayable actions"
            ),
            e.ExpectColumnValuesToBeBetween(
                column="score", min_value=low, max_value=high, notes="the judge's score"
            ),
        ]
    if config == "transitions":
        suite += [
            e.ExpectColumnValuesToNotBeNull(column="trajectory_id"),
            e.ExpectColumnValuesToBeBetween(column="step", min_value=0),
            e.ExpectColumnValuesToBeInSet(
                column="action_is_tool_call",
                value_set=[True],
                notes='action: JSON {"tool": name, "arguments": text}',
            ),
        ]
    for name, (low, high) in sorted(SCORE_RANGES.get(config, {}).items()):
        if f"scores.{name}" in columns:
            suite.append(
                e.ExpectColumnValuesToBeBetween(
                    column=f"scores.{name}",
                    min_value=low,
                    max_value=None if math.isinf(high) else high,
                    notes=f"score {name} lies in [{low}, {high}]",
                )
            )
    return suite


def run_quality_gates(frames: Mapping[str, pd.DataFrame], docs_dir: str) -> list[GateResult]:
    """Validate each config's profile with its suite and write Data Docs to ``docs_dir``."""
    import great_expectations as gx

    logging.getLogger("great_expectations").setLevel(logging.ERROR)
    context = gx.get_context(project_config=_context_config(docs_dir))
    source = context.data_sources.add_pandas("trajforge")
    results = []
    for config in sorted(frames):
        frame = frames[config]
        batch = source.add_dataframe_asset(name=config).add_batch_definition_whole_dataframe("all")
        suite = context.suites.add(gx.ExpectationSuite(name=config))
        for expectation in expectations(config, list(frame.columns)):
            suite.add_expectation(expectation)
        definition = context.validation_definitions.add(
            gx.ValidationDefinition(name=config, data=batch, suite=suite)
        )
        outcome = definition.run(batch_parameters={"dataframe": frame}, result_format="SUMMARY")
        failures = tuple(_describe(config, r) for r in outcome.results if not r.success)
        results.append(GateResult(config, bool(outcome.success), len(outcome.results), failures))
    context.build_data_docs(site_names=[SITE])
    return results


def enforce(results: Sequence[GateResult], docs_index: str | None = None) -> None:
    """Raise ``QualityGateError`` naming every failing expectation of every suite."""
    failures = [f for result in results for f in result.failures]
    if failures:
        raise QualityGateError(failures, docs_index)


def _context_config(docs_dir: str) -> Any:
    from great_expectations.data_context.types.base import (
        DataContextConfig,
        InMemoryStoreBackendDefaults,
        ProgressBarsConfig,
    )

    return DataContextConfig(
        store_backend_defaults=InMemoryStoreBackendDefaults(init_temp_docs_sites=False),
        data_docs_sites={
            SITE: {
                "class_name": "SiteBuilder",
                "show_how_to_buttons": False,
                "store_backend": {
                    "class_name": "TupleFilesystemStoreBackend",
                    "base_directory": os.path.abspath(docs_dir),
                },
                "site_index_builder": {"class_name": "DefaultSiteIndexBuilder"},
            }
        },
        analytics_enabled=False,
        progress_bars=ProgressBarsConfig(globally=False),
    )


def _describe(config: str, result: Any) -> str:
    """``sft: expect_column_values_to_be_unique(trajectory_id): 1 of 4 rows, e.g. ['t1']``."""
    kind = result.expectation_config.type
    kwargs = result.expectation_config.kwargs
    target = kwargs.get("column", "")
    error = _exception_message(result.exception_info)
    if error is not None:
        return f"{config}: {kind}({target}): error {error}"
    detail = result.result or {}
    if "unexpected_count" in detail:
        sample = detail.get("partial_unexpected_list") or []
        shown = f", e.g. {sample[:3]}" if sample else ""
        return (
            f"{config}: {kind}({target}): {detail['unexpected_count']} of "
            f"{detail.get('element_count')} rows{shown}"
        )
    mismatched = (detail.get("details") or {}).get("mismatched") or {}
    if mismatched.get("missing"):
        return f"{config}: {kind}: missing columns {sorted(mismatched['missing'])}"
    return f"{config}: {kind}({target}): observed {detail.get('observed_value')}"


def _exception_message(info: Any) -> str | None:
    """GE reports an error either flat or keyed by metric id; the first message, or None."""
    if not isinstance(info, dict):
        return None
    entries = [info] if "raised_exception" in info else list(info.values())
    for entry in entries:
        if isinstance(entry, dict) and entry.get("raised_exception"):
            lines = str(entry.get("exception_message") or "exception").splitlines()
            return lines[0] if lines else "exception"
    return None
