"""Stage inputs as Beam collections of records, checked before the pipeline starts.

A wrong input is one line that names it (``UserError``), never a failure deep inside Beam.
"""

from __future__ import annotations

import dataclasses

import apache_beam as beam
import pyarrow.parquet as pq
from trajforge.pipelines.runtime.outputs import row_count
from trajforge.schemas.errors import UserError
from trajforge.schemas.records import from_row
from trajforge.schemas.storage import join, parquet_files


def candidate_table(path: str) -> str:
    """The candidates table of a mine/inject output (or a directory of Parquet files itself)."""
    table = join(path, "candidates")
    if not parquet_files(table):
        table = path
    if not parquet_files(table) or table.endswith(".parquet"):
        raise UserError(
            f"validate: no Parquet files in {path}; pass a `trajforge mine` or "
            "`trajforge inject` output"
        )
    return table


def record_tables(
    stage: str, paths: list[str], name: str, cls: type, required: bool = False
) -> list[str]:
    """The ``name`` tables of the inputs; ``required`` means at least one input must have one."""
    tables = [t for path in paths if (t := _record_table(stage, path, name, cls))]
    if required and not tables:
        raise UserError(
            f"{stage}: no {name} Parquet files in {', '.join(paths)}; pass a `validate` output "
            "(or the output of a later stage)"
        )
    return tables


def _record_table(stage: str, path: str, name: str, cls: type) -> str | None:
    """``path/name`` when it holds Parquet files whose columns the record class can read."""
    table = join(path, name)
    files = parquet_files(table)
    if not files:
        return None
    wanted = {
        f.name
        for f in dataclasses.fields(cls)
        if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
    }
    missing = sorted(wanted - set(pq.read_schema(files[0]).names))
    if missing:
        raise UserError(
            f"{stage}: {table} lacks columns {', '.join(missing)} (an older or different schema); "
            "rerun the stage that wrote it with this trajforge"
        )
    return table


def table_rows(tables: list[str]) -> int:
    return row_count([f for t in tables for f in parquet_files(t)])


def read_records(p: beam.Pipeline, label: str, tables: list[str], cls: type):
    """The rows of ``tables`` as ``cls`` records; an empty collection when there are none."""
    if not tables:
        return p | f"No{label}" >> beam.Create([])
    reads = [
        p | f"Read{label}{i}" >> beam.io.ReadFromParquet(join(table, "*.parquet"))
        for i, table in enumerate(tables)
    ]
    return (
        reads
        | f"All{label}" >> beam.Flatten()
        | f"As{label}" >> beam.Map(lambda row, cls=cls: from_row(cls, row))
    )
