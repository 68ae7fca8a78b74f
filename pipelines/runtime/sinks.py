"""Writing stage outputs: sorted Parquet shards into a staging directory, published atomically.

Rows are spread over shards by a hash of their id and sorted inside each shard, so a rerun writes
the same bytes, and no shard needs the whole table in one process. The stage writes into a staging
directory beside its output and only a finished run replaces the output, so a crash never leaves a
half-written output directory (the next run clears stale staging directories). On an object store
(s3://, gs://), where nothing renames, staging is inside the output and a marker file commits the
run (``object_outputs.py``).

An output directory is only ever replaced when trajforge wrote it: every published output holds
a ``MARKER`` file, and ``check_output`` refuses (before any work) an existing directory without
one, the working directory or a parent of it, and a directory that is or holds an input.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import uuid
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import apache_beam as beam
import pyarrow as pa
from trajforge.pipelines.runtime import object_outputs
from trajforge.pipelines.runtime.outputs import MARKER
from trajforge.schemas.errors import UserError
from trajforge.schemas.records import to_table
from trajforge.schemas.storage import (
    is_local,
    join,
    parquet_files,
    table_to_parquet_bytes,
    write_bytes_atomic,
)


class WriteTable(beam.PTransform):
    """Records -> ``<directory>/<name>/part-XXXXX.parquet``, sorted by ``sort_key``; its output is
    the paths of the shards written (one per non-empty shard), so a sink is never a dead end that
    a runner may leave out (``stage_run`` joins them all)."""

    def __init__(
        self,
        directory: str,
        name: str,
        schema: pa.Schema,
        sort_key: Callable[[Any], str],
        shards: int,
    ) -> None:
        super().__init__(f"Write{name.title()}")
        self.directory = directory
        self.name = name
        self.schema = schema
        self.sort_key = sort_key
        self.shards = shards

    def expand(self, records):
        shards, sort_key = self.shards, self.sort_key
        return (
            records
            | "KeyByShard" >> beam.Map(lambda r: (_shard(sort_key(r), shards), r))
            | "GroupByShard" >> beam.GroupByKey()
            | "WriteShard" >> beam.MapTuple(self._write_shard)
        )

    def _write_shard(self, shard: int, records: Iterable[Any]) -> str:
        table = to_table(sorted(records, key=self.sort_key), self.schema)
        path = join(self.directory, self.name, f"part-{shard:05d}-of-{self.shards:05d}.parquet")
        write_bytes_atomic(path, table_to_parquet_bytes(table))
        return path


def _shard(key: str, shards: int) -> int:
    return int(hashlib.sha256(key.encode()).hexdigest()[:8], 16) % shards


# What an output of an older trajforge (written before the marker) holds besides table folders of
# Parquet files; such a directory is replaced like a marked one when its summary.json or
# version.json reads as trajforge's (a user's folder with a README.md and a summary.json of its
# own is not: its README would be deleted).
LEGACY_FILES = {"summary.json", "version.json", "README.md", "data_docs"}
LEGACY_KEYS = {"summary.json": {"stage", "inputs", "kept"}, "version.json": {"version", "files"}}


def check_output(stage: str, output: str, inputs: Sequence[str] = ()) -> None:
    """Refuse, with one line, an ``output`` that a run must not replace: the working directory
    or a parent of it, a directory that is or holds one of ``inputs`` (stage inputs, source
    repositories), a file, or a directory trajforge did not write (non-empty, no ``MARKER``)."""
    if not is_local(output):
        object_outputs.check_output(stage, output, inputs)
        return
    path = os.path.realpath(output)
    cwd = os.path.realpath(os.getcwd())
    if _within(cwd, path):
        where = "the current directory" if cwd == path else "a parent of the current directory"
        raise UserError(
            f"{stage}: --output {output} is {where}; a run replaces its output, so pass a new "
            f"directory (e.g. data/{stage})"
        )
    for given in inputs:
        if is_local(given) and _within(os.path.realpath(given), path):
            raise UserError(
                f"{stage}: --output {output} is or holds the input {given}; a run replaces its "
                "output, so pass a directory of its own"
            )
    if os.path.lexists(path) and not os.path.isdir(path):
        raise UserError(f"{stage}: --output {output} is a file; pass a directory")
    if os.path.isdir(path) and not replaceable(path):
        raise UserError(
            f"{stage}: --output {output} exists and was not written by trajforge; pass a new "
            "directory (or remove it yourself)"
        )


def replaceable(directory: str) -> bool:
    """True for an empty directory, one holding ``MARKER``, or an older trajforge output."""
    names = os.listdir(directory)
    if not names or MARKER in names:
        return True
    ours = [n for n in LEGACY_KEYS if n in names]
    if not ours or not all(_written_by_us(os.path.join(directory, n)) for n in ours):
        return False
    return all(n in LEGACY_FILES or _only_parquet(os.path.join(directory, n)) for n in names)


def _written_by_us(path: str) -> bool:
    """``path`` (summary.json or version.json) is a JSON object with the keys trajforge writes."""
    try:
        with open(path, "rb") as handle:
            data = json.loads(handle.read(1_000_000))
    except (OSError, ValueError):
        return False
    return isinstance(data, dict) and LEGACY_KEYS[os.path.basename(path)] <= set(data)


def _only_parquet(path: str) -> bool:
    """A table folder: Parquet files only (in split subfolders too), and at least one."""
    if not os.path.isdir(path) or os.path.islink(path):
        return False
    found = False
    for _, _, files in os.walk(path):
        if any(not f.endswith(".parquet") for f in files):
            return False
        found = found or bool(files)
    return found


def _within(inner: str, outer: str) -> bool:
    """``inner`` is ``outer`` or lies below it (both real paths)."""
    return inner == outer or inner.startswith(outer.rstrip(os.sep) + os.sep)


def staging_dir(output: str) -> str:
    """A fresh staging directory beside ``output`` (holding ``MARKER``); stale ones of the same
    output, left by a killed run, are removed: exactly ``<output>.staging-<8 hex>``, no glob.
    On an object store the staging folder is inside ``output`` (``object_outputs``)."""
    if not is_local(output):
        return object_outputs.staging_dir(output)
    output = os.path.abspath(output)
    parent, base = os.path.split(output)
    os.makedirs(parent, exist_ok=True)
    stale = re.compile(re.escape(f"{base}.staging-") + r"[0-9a-f]{8}")
    for name in os.listdir(parent):
        path = os.path.join(parent, name)
        if stale.fullmatch(name) and os.path.isdir(path) and not os.path.islink(path):
            shutil.rmtree(path, ignore_errors=True)
    staging = f"{output}.staging-{uuid.uuid4().hex[:8]}"
    _mark(staging)
    return staging


def _mark(directory: str) -> None:
    os.makedirs(directory, exist_ok=True)
    with open(os.path.join(directory, MARKER), "w") as handle:
        handle.write("written by trajforge: a rerun may replace this directory\n")


def ensure_tables(staging: str, schemas: dict[str, pa.Schema]) -> None:
    """Every table gets at least one file, so readers see its schema even when it is empty."""
    for name, schema in schemas.items():
        if not parquet_files(join(staging, name)):
            path = join(staging, name, "part-00000-of-00001.parquet")
            write_bytes_atomic(path, table_to_parquet_bytes(schema.empty_table()))


def publish(staging: str, output: str) -> None:
    """Swap the finished staging directory into place (a rename on one file system); an existing
    ``output`` is replaced only when trajforge wrote it (``check_output`` said so up front). On
    an object store the marker commits it instead (``object_outputs.publish``)."""
    if not is_local(output):
        object_outputs.publish(staging, output)
        return
    output = os.path.abspath(output)
    _mark(staging)
    if os.path.isdir(output) and not replaceable(output):
        raise UserError(
            f"{output} exists and was not written by trajforge; the finished run is left in "
            f"{staging}"
        )
    old = f"{output}.old-{uuid.uuid4().hex[:8]}"
    if os.path.exists(output):
        os.replace(output, old)
    os.replace(staging, output)
    shutil.rmtree(old, ignore_errors=True)
