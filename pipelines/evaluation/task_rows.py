"""Tasks to evaluate, from where trajforge leaves them: a stage output or an exported dataset.

A stage output (``data/curate``) holds TaskInstance rows as written; an export (or the same
dataset pulled from the Hub) holds the ``tasks`` config, whose ``scores`` is a struct and
``provenance`` key/value pairs: both read back as the same TaskInstance. Where a task's code lives
is its ``source`` (a path, a git URL, ``pypi:NAME``); on another machine ``--source REPO=PATH``
says where that repository is now.
"""

from __future__ import annotations

import dataclasses
import os
import sys
from collections.abc import Iterable, Mapping

import pyarrow as pa
import pyarrow.parquet as pq
from trajforge.pipelines.runtime import outputs
from trajforge.schemas.errors import UserError
from trajforge.schemas.records import from_row
from trajforge.schemas.storage import is_local
from trajforge.schemas.task_instance import TaskInstance

# A task cannot be run without these (the rest of TaskInstance has defaults or may be empty).
REQUIRED = (
    "instance_id", "repo", "base_commit", "patch", "test_patch", "FAIL_TO_PASS", "PASS_TO_PASS",
    "image_name", "test_cmd", "source",
)  # fmt: skip


# The types a task's columns must have; ``scores`` and ``provenance`` are left out: an export
# writes them as a struct and key/value pairs, and ``task_of`` reads either.
TYPES = pa.schema([f for f in TaskInstance.ARROW_SCHEMA if f.name not in ("scores", "provenance")])


TaskPaths = str | os.PathLike[str] | Iterable[str | os.PathLike[str]]


def load_tasks(directories: TaskPaths, sources: Mapping[str, str] | None = None) -> dict:
    """instance_id -> TaskInstance over every path (the first row of an id wins), with
    ``source`` replaced where ``sources`` names the task's repo. A path is a stage output or an
    export (a folder or an object store prefix) or one tasks Parquet file; one path alone need
    not be in a list (a string is never read as its characters). A file that cannot be read (or
    holds a column of another type) is one line on stderr and left out; a path that holds no
    readable tasks is one UserError line."""
    tasks: dict[str, TaskInstance] = {}
    for directory in _paths(directories):
        files = [directory] if _is_table(directory) else outputs.table_files(directory, "tasks")
        if not files:
            raise UserError(
                f"evaluate: {directory} holds no tasks (no tasks/ Parquet files); pass the output "
                "of validate or a later stage, or an exported dataset"
            )
        good, bad = outputs.readable(files, REQUIRED, TYPES)
        for path, why in bad.items():
            print(f"evaluate: left out {path}: {why}", file=sys.stderr)
        if not good:
            raise UserError(
                f"evaluate: {directory} holds no readable tasks (see the lines above); pass the "
                "output of validate or a later stage, or an exported dataset"
            )
        for path in good:
            for row in pq.read_table(outputs.source(path)).to_pylist():
                task = task_of(row, sources or {})
                tasks.setdefault(task.instance_id, task)
    return tasks


def _paths(given: object) -> list[str]:
    if isinstance(given, str | os.PathLike):
        return [os.fspath(given)]
    if isinstance(given, bytes) or not isinstance(given, Iterable):
        raise UserError(
            f"load_tasks: {given!r} is not a path; pass a stage output or an export (a str or "
            "os.PathLike), or a list of them"
        )
    paths = list(given)
    for path in paths:
        if not isinstance(path, str | os.PathLike):
            raise UserError(f"load_tasks: {path!r} in the list is not a path (a str or PathLike)")
    return [os.fspath(path) for path in paths]


def _is_table(path: str) -> bool:
    """One Parquet file given by itself (local: a file; remote: by its name)."""
    return os.path.isfile(path) if is_local(path) else path.endswith(".parquet")


def task_of(row: dict, sources: Mapping[str, str]) -> TaskInstance:
    """A stage's row or an export's ``tasks`` row as a TaskInstance."""
    row = dict(row)
    if isinstance(row.get("scores"), dict):  # the export's struct: null where a task has none
        row["scores"] = {k: v for k, v in row["scores"].items() if v is not None}
    if isinstance(row.get("provenance"), list):  # the export's key/value pairs (or a map)
        pairs = [(p["key"], p["value"]) if isinstance(p, dict) else p for p in row["provenance"]]
        row["provenance"] = dict(pairs)
    for name in ("hints_text", "problem_statement", "created_at", "environment_setup_commit",
                 "origin", "profile_id", "candidate_id"):  # fmt: skip
        row.setdefault(name, "")
    row.setdefault("flaky_tests", ())
    row.setdefault("difficulty", None)
    task = from_row(TaskInstance, row)
    where = sources.get(task.repo)
    return dataclasses.replace(task, source=where) if where else task


def parse_sources(pairs: Iterable[str]) -> dict[str, str]:
    """``REPO=PATH_OR_URL`` pairs (``--source``) as a mapping; one UserError line for a bad one."""
    mapping: dict[str, str] = {}
    for pair in pairs:
        repo, sep, where = pair.partition("=")
        if not sep or not repo.strip() or not where.strip():
            raise UserError(
                f"--source {pair!r}: expected REPO=PATH_OR_URL (e.g. pypi/toolz=pypi:toolz or "
                "owner/name=/srv/repos/name)"
            )
        mapping[repo.strip()] = where.strip()
    return mapping
