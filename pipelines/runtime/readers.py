"""Stage inputs as Beam collections of records, checked before the pipeline starts.

A wrong input is one line that names it (``UserError``), never a failure deep inside Beam. Each
input file's footer is read first: a file that is not readable Parquet (zero bytes, truncated,
another format), lacks a column the record needs, or holds one of the record's columns with a
type the record cannot take (every column cast to text, say) is left out with one line, and
becomes a ``bad_input_file`` rejection in ``set_aside``; the readable files go on. Nothing
readable at all is a ``UserError``.
"""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Iterator

import apache_beam as beam
import pyarrow.parquet as pq
from trajforge.pipelines.runtime.outputs import readable, row_count, source, stage_table_files
from trajforge.schemas.errors import UserError
from trajforge.schemas.records import from_row
from trajforge.schemas.rejection import Rejection
from trajforge.schemas.storage import join, parquet_files

BAD_INPUT_FILE = "bad_input_file"
BATCH_ROWS = 1024


def candidate_table(path: str) -> str:
    """The candidates table of a mine/inject output (or a directory of Parquet files itself)."""
    if stage_table_files(path, "candidates"):
        return join(path, "candidates")
    table = path
    if not parquet_files(table) or table.endswith(".parquet"):
        raise UserError(
            f"validate: no Parquet files in {path}; pass a `trajforge mine` or "
            "`trajforge inject` output"
        )
    return table


def candidate_files(
    stage: str, paths: list[str], cls: type, set_aside: list[Rejection]
) -> list[str]:
    """The readable candidates files of every input (see ``candidate_table``)."""
    found = [stage_table_files(path, "candidates") or parquet_files(candidate_table(path))
             for path in paths]  # fmt: skip
    files = _checked(stage, found, cls, set_aside)
    if not files:
        raise UserError(
            f"{stage}: no readable candidates Parquet files in {', '.join(paths)} (see the "
            "lines above); rerun `trajforge mine` or `trajforge inject`"
        )
    return files


def record_tables(
    stage: str,
    paths: list[str],
    name: str,
    cls: type,
    required: bool = False,
    set_aside: list[Rejection] | None = None,
) -> list[str]:
    """The readable Parquet files of the inputs' ``name`` tables; ``required`` means at least one
    must be readable. Files left out are lines on stderr and rejections in ``set_aside``."""
    found = [stage_table_files(path, name) for path in paths]
    files = _checked(stage, found, cls, set_aside if set_aside is not None else [])
    if required and not files:
        if any(found):
            raise UserError(
                f"{stage}: no readable {name} Parquet files in {', '.join(paths)} (see the "
                "lines above); rerun the stage that wrote them with this trajforge"
            )
        raise UserError(
            f"{stage}: no {name} Parquet files in {', '.join(paths)}; pass a `validate` output "
            "(or the output of a later stage)"
        )
    return files


def _checked(
    stage: str, found: list[list[str]], cls: type, set_aside: list[Rejection]
) -> list[str]:
    """The files whose footer reads and has every column ``cls`` needs, each column of
    ``cls.ARROW_SCHEMA`` it holds of a type ``cls`` takes; the others set aside."""
    wanted = sorted(
        f.name
        for f in dataclasses.fields(cls)
        if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
    )
    types = getattr(cls, "ARROW_SCHEMA", None)
    good, bad = readable([f for files in found for f in files], wanted, types)
    for path, why in bad.items():
        print(f"{stage}: left out {path}: {why}", file=sys.stderr)
        set_aside.append(Rejection(path, stage, BAD_INPUT_FILE, f"{path}: {why}"))
    return good


def table_rows(files: list[str]) -> int:
    return row_count(files)


def read_records(p: beam.Pipeline, label: str, files: list[str], cls: type):
    """The rows of ``files`` as ``cls`` records; an empty collection when there are none.

    Each file is read by its name (Beam's Parquet reader matches every name as a glob, so an
    output named ``exp[1]`` would read back empty): its row groups are listed, spread over the
    workers, and each is read in batches."""
    if not files:
        return p | f"No{label}" >> beam.Create([])
    return (
        p
        | f"{label}Files" >> beam.Create(files)
        | f"{label}RowGroups" >> beam.FlatMap(_row_groups)
        | f"Spread{label}" >> beam.Reshuffle()
        | f"Read{label}" >> beam.FlatMap(_row_group_rows)
        | f"As{label}" >> beam.Map(lambda row, cls=cls: from_row(cls, row))
    )


def _row_groups(path: str) -> list[tuple[str, int]]:
    return [(path, group) for group in range(pq.ParquetFile(source(path)).num_row_groups)]


def _row_group_rows(part: tuple[str, int]) -> Iterator[dict]:
    path, group = part
    for batch in pq.ParquetFile(source(path)).iter_batches(BATCH_ROWS, row_groups=[group]):
        yield from batch.to_pylist()
