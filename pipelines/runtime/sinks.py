"""Writing stage outputs: sorted Parquet shards into a staging directory, published atomically.

Rows are spread over shards by a hash of their id and sorted inside each shard, so a rerun writes
the same bytes, and no shard needs the whole table in one process. The stage writes into a staging
directory beside its output and only a finished run replaces the output, so a crash never leaves a
half-written output directory (the next run clears stale staging directories).
"""

from __future__ import annotations

import glob
import hashlib
import os
import shutil
import uuid
from collections.abc import Callable, Iterable
from typing import Any

import apache_beam as beam
import pyarrow as pa
from trajforge.schemas.records import to_table
from trajforge.schemas.storage import (
    join,
    parquet_files,
    table_to_parquet_bytes,
    write_bytes_atomic,
)


class WriteTable(beam.PTransform):
    """Records -> ``<directory>/<name>/part-XXXXX.parquet``, sorted by ``sort_key``."""

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


def staging_dir(output: str) -> str:
    parent = os.path.dirname(os.path.abspath(output))
    os.makedirs(parent, exist_ok=True)
    for stale in glob.glob(f"{os.path.abspath(output)}.staging-*"):
        shutil.rmtree(stale, ignore_errors=True)  # left by a killed run
    return f"{os.path.abspath(output)}.staging-{uuid.uuid4().hex[:8]}"


def ensure_tables(staging: str, schemas: dict[str, pa.Schema]) -> None:
    """Every table gets at least one file, so readers see its schema even when it is empty."""
    for name, schema in schemas.items():
        if not parquet_files(join(staging, name)):
            path = join(staging, name, "part-00000-of-00001.parquet")
            write_bytes_atomic(path, table_to_parquet_bytes(schema.empty_table()))


def publish(staging: str, output: str) -> None:
    """Swap the finished staging directory into place (a rename on one file system)."""
    output = os.path.abspath(output)
    old = f"{output}.old-{uuid.uuid4().hex[:8]}"
    if os.path.exists(output):
        os.replace(output, old)
    os.replace(staging, output)
    shutil.rmtree(old, ignore_errors=True)
