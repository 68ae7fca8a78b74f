"""Candidate: a change that might become a task, before anything has been executed."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

import pyarrow as pa

META_TYPE = pa.struct(
    [
        ("commit", pa.string()),
        ("message", pa.string()),
        ("author_date", pa.string()),
        ("files_changed", pa.int32()),
        ("lines_added", pa.int32()),
        ("lines_removed", pa.int32()),
        ("skipped_files", pa.list_(pa.string())),
    ]
)


LABELS_TYPE = pa.struct(
    [
        ("dataset", pa.string()),
        ("instance_id", pa.string()),
        ("FAIL_TO_PASS", pa.list_(pa.string())),
        ("PASS_TO_PASS", pa.list_(pa.string())),
        ("image_name", pa.string()),
    ]
)


@dataclass(frozen=True)
class DatasetLabels:
    """What a published dataset says about an imported row: checked by validate, never trusted."""

    dataset: str  # swe-bench | swe-smith | swe-gym | nebius | multi-swe-bench | swe-polybench
    instance_id: str  # the dataset's own id, kept as the task's instance_id
    FAIL_TO_PASS: tuple[str, ...] = ()
    PASS_TO_PASS: tuple[str, ...] = ()
    image_name: str = ""  # the dataset's image, for the record (we build our own)


@dataclass(frozen=True)
class CandidateMeta:
    commit: str  # the commit that introduced the change (base_commit is its first parent)
    message: str
    author_date: str
    files_changed: int
    lines_added: int
    lines_removed: int
    skipped_files: tuple[str, ...] = ()  # binary / vendored / generated files left out of patches


@dataclass(frozen=True)
class Candidate:
    candidate_id: str
    repo: str  # display name, SWE-bench style ("owner/name", "pypi/toolz")
    source: str  # what a worker needs to materialise the repo again: path, URL or "pypi:NAME"
    base_commit: str
    patch: str  # the fix: non-test files
    test_patch: str  # test files
    origin: str  # commit | release | bug/<operator> | bug/llm | explore
    created_at: str
    meta: CandidateMeta = field(default_factory=lambda: CandidateMeta("", "", "", 0, 0, 0))
    # Synthesized bugs: the task starts at base_commit + bug_patch, and `patch` undoes it.
    bug_patch: str = ""
    # Rows imported from a published dataset (`import-tasks`): its labels, for `label_check`.
    labels: DatasetLabels | None = None

    ARROW_SCHEMA: ClassVar[pa.Schema] = pa.schema(
        [
            ("candidate_id", pa.string()),
            ("repo", pa.string()),
            ("source", pa.string()),
            ("base_commit", pa.string()),
            ("patch", pa.large_string()),
            ("test_patch", pa.large_string()),
            ("origin", pa.string()),
            ("created_at", pa.string()),
            ("meta", META_TYPE),
            ("bug_patch", pa.large_string()),
            ("labels", LABELS_TYPE),
        ]
    )
