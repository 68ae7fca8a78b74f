"""The export's file side: record batches in, sorted config shards out.

``batches`` streams a table's Parquet files as the record schema (a missing column is one clear
error), ``route`` hands a batch of records to the writers of their split, and ``ShardWriter``
cuts one config's rows of one split into equal shards named the way ``datasets`` expects; once
closed, what it wrote is a ``WrittenSplit``, the value the export's later steps (gate, card) get.
"""

from __future__ import annotations

import io
import os
from collections import defaultdict
from collections.abc import Callable, Iterator
from typing import NamedTuple, TypeVar

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
from trajforge.filters.quality_gates import profile
from trajforge.pipelines.release.card import SplitFacts
from trajforge.pipelines.runtime import progress
from trajforge.schemas.errors import UserError
from trajforge.schemas.storage import (
    is_local,
    read_bytes,
    table_to_parquet_bytes,
    write_bytes_atomic,
)

R = TypeVar("R")


def route(
    records: list[R],
    split: Callable[[R], str],
    render: dict[str, Callable[[list[R]], pa.Table]],
    writers: dict[tuple[str, str], ShardWriter],
) -> None:
    """Group one batch of records by split and hand each config's rows to its writer."""
    by_split: dict[str, list[R]] = defaultdict(list)
    for record in records:
        by_split[split(record)].append(record)
    for name, group in sorted(by_split.items()):
        for config, make in render.items():
            if (config, name) in writers:
                writers[(config, name)].add(make(group))
                progress.tick(config, len(group))


class WrittenSplit(NamedTuple):
    """One config's split on disk: its shards (in order), their profiles, schema and sizes."""

    config: str
    split: str
    paths: list[str]
    profiles: list[pd.DataFrame]
    schema: pa.Schema | None
    facts: SplitFacts


class ShardWriter:
    """Rows of one config and split -> ``<config>/<split>-XXXXX-of-YYYYY.parquet``.

    The row count is known up front, so the shard count is too, and shards are equal in size
    to within one row."""

    def __init__(self, root: str, config: str, split: str, total: int, shard_rows: int) -> None:
        shards = max(1, -(-total // shard_rows))
        self.sizes = [total // shards + (1 if i < total % shards else 0) for i in range(shards)]
        self.root, self.config, self.split = root, config, split
        self.pending: list[pa.Table] = []
        self.pending_rows = 0
        self.paths: list[str] = []
        self.profiles: list[pd.DataFrame] = []
        self.schema: pa.Schema | None = None
        self.num_bytes = 0
        self.download_size = 0

    def add(self, table: pa.Table) -> None:
        self.schema = table.schema
        self.pending.append(table)
        self.pending_rows += table.num_rows
        while (
            len(self.paths) < len(self.sizes) and self.pending_rows >= self.sizes[len(self.paths)]
        ):
            self._flush(self.sizes[len(self.paths)])

    def _flush(self, rows: int) -> None:
        table = pa.concat_tables(self.pending)
        shard, rest = table.slice(0, rows), table.slice(rows)
        self.pending = [rest] if rest.num_rows else []
        self.pending_rows -= rows
        name = f"{self.split}-{len(self.paths):05d}-of-{len(self.sizes):05d}.parquet"
        path = os.path.join(self.root, self.config, name)
        data = table_to_parquet_bytes(shard.combine_chunks())
        write_bytes_atomic(path, data)
        self.paths.append(path)
        self.profiles.append(profile(self.config, shard))
        self.num_bytes += shard.nbytes
        self.download_size += len(data)

    def close(self) -> None:
        if self.pending_rows or len(self.paths) != len(self.sizes):
            raise RuntimeError(
                f"export: {self.config}/{self.split} got a different row count than counted"
            )

    def facts(self) -> SplitFacts:
        return SplitFacts(sum(self.sizes), self.num_bytes, self.download_size, len(self.paths))

    def written(self) -> WrittenSplit:
        """What a closed writer wrote."""
        self.close()
        return WrittenSplit(
            self.config, self.split, self.paths, self.profiles, self.schema, self.facts()
        )


def batches(
    files: list[str], schema: pa.Schema, rows: int, columns: list[str] | None = None
) -> Iterator[pa.Table]:
    """Batches of every file, as ``schema`` (or its ``columns``); a file that lacks a column is
    one clear error naming it."""
    names = columns or schema.names
    target = pa.schema([schema.field(n) for n in names])
    for path in files:
        handle = pq.ParquetFile(path if is_local(path) else io.BytesIO(read_bytes(path)))
        missing = [n for n in names if n not in handle.schema_arrow.names]
        if missing:
            raise UserError(
                f"export: {path} lacks columns {', '.join(missing)}; re-run curate with this "
                "trajforge version"
            )
        for batch in handle.iter_batches(batch_size=rows, columns=names):
            table = pa.Table.from_batches([batch]).select(names)
            try:
                yield table.cast(target)
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
                raise UserError(
                    f"export: {path} does not match the record schema ({exc})"
                ) from None
