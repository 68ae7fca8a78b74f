"""Reading stage outputs: the one place that knows their layout and which table a stage keeps.

A stage output is ``<dir>/summary.json`` plus ``<dir>/<table>/*.parquet``; an export nests its
configs under ``<dir>/data/<config>/`` and may split them into subfolders. Stats, the report, the
export and every stage's inputs read through here, so they agree on what a directory holds.

Every published output holds ``MARKER``. On an object store (``runtime/object_outputs.py``) the
marker is the commit: it lists the files the run published, readers read exactly those, and an
output with a run's staging folder but no marker is refused (cut off, or still being written).
"""

from __future__ import annotations

import io
import json
import os
from collections.abc import Iterable

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
from trajforge.schemas.errors import UserError
from trajforge.schemas.storage import (
    escape_glob,
    exists,
    files_under,
    is_local,
    join,
    match,
    parquet_files,
    read_bytes,
)

# What a stage keeps, by preference, when its summary.json does not say (older outputs, imports).
KEPT_TABLES = ("tasks", "explore_tasks", "trajectories", "candidates")
# Written into every output a stage publishes: only a directory holding it is ever replaced, and
# on an object store it lists the published files (JSON: {"files": {relative path: bytes}}).
MARKER = ".trajforge-output"
# A run's staging folder: beside a local output (``<output>.staging-<8 hex>``), inside an object
# store's (``<output>/.staging-<8 hex>/``).
STAGING = ".staging-"


def stage_table_files(directory: str, table: str) -> list[str]:
    """The Parquet files of one table of a stage output: on an object store, those its marker
    lists (a ``UserError`` line for a run cut off or under way); else every file in the folder."""
    if is_local(directory):
        return parquet_files(join(directory, table))
    listed = published(directory)
    if listed is None:
        return parquet_files(join(directory, table))
    prefix = f"{table}/"
    return sorted(
        join(directory, name)
        for name in listed
        if name.startswith(prefix) and name.endswith(".parquet") and "/" not in name[len(prefix) :]
    )


def published(directory: str) -> dict[str, int] | None:
    """The files an object-store output's marker lists (relative path -> bytes); None where the
    directory holds no marker and no sign of a run (data trajforge did not write). A staging
    folder without a marker is a run cut off or under way: one ``UserError`` line. A run's own
    staging folder (read back before it is published) is None too: its files are the run's."""
    if directory.rstrip("/").rsplit("/", 1)[-1].startswith(STAGING):
        return None
    marker = join(directory, MARKER)
    if exists(marker):
        try:
            found = json.loads(read_bytes(marker)).get("files")
        except (OSError, ValueError, AttributeError):
            found = None
        if not isinstance(found, dict):
            raise UserError(f"{marker} is not a trajforge marker; rerun the stage that wrote it")
        return found
    if match(join(escape_glob(directory), f"{STAGING}*", MARKER)):
        raise UserError(
            f"{directory} holds a run that was cut off or is still writing (a staging folder, "
            "no marker); rerun the stage that writes it, or wait for it to finish"
        )
    return None


def table_files(directory: str, table: str) -> list[str]:
    """Parquet files of one table, in a stage output or an export (splits may be subfolders)."""
    if not is_local(directory):
        return stage_table_files(directory, table)
    found: list[str] = []
    for root in (os.path.join(directory, table), os.path.join(directory, "data", table)):
        for parent, dirs, files in os.walk(root):
            dirs[:] = sorted(d for d in dirs if not d.startswith("."))
            found.extend(
                os.path.join(parent, f)
                for f in sorted(files)
                if f.endswith(".parquet") and not f.startswith(".")
            )
    return found


def tables(directory: str) -> list[str]:
    """Names of the tables a stage output holds, sorted."""
    if not is_local(directory):
        listed = published(directory)
        names = listed if listed is not None else _relative(directory)
        return sorted({n.split("/")[0] for n in names if "/" in n and n.endswith(".parquet")})
    if not os.path.isdir(directory):
        return []
    return sorted(name for name in os.listdir(directory) if table_files(directory, name))


def _relative(directory: str) -> list[str]:
    root = directory.rstrip("/") + "/"
    return [p[len(root) :] for p in files_under(directory) if not p[len(root) :].startswith(".")]


def summary(directory: str) -> dict | None:
    """The stage's summary.json, or None when it is missing or unreadable."""
    path = join(directory, "summary.json")
    if not exists(path):
        return None
    try:
        found = json.loads(read_bytes(path))
    except (OSError, ValueError):
        return None
    return found if isinstance(found, dict) else None


def kept_table(directory: str) -> str | None:
    """The table that counts as kept: as the summary says, else the first of KEPT_TABLES found."""
    said = (summary(directory) or {}).get("kept_table")
    if isinstance(said, str) and table_files(directory, said):
        return said
    return next((t for t in KEPT_TABLES if table_files(directory, t)), None)


def source(path: str) -> str | io.BytesIO:
    """Local files are read in place; remote ones (gs://, s3://) through Beam's FileSystems."""
    return path if is_local(path) else io.BytesIO(read_bytes(path))


def unreadable(
    path: str, columns: Iterable[str] = (), types: pa.Schema | None = None
) -> str | None:
    """Why ``path`` cannot be read as a table with ``columns`` (from its footer alone), or None:
    zero bytes, truncated or not Parquet at all, an older or different schema (a column of
    ``columns`` missing, or one of ``types`` present with a type its readers cannot take)."""
    try:
        schema = pq.read_schema(source(path))
    except (OSError, ValueError, pa.ArrowException) as exc:  # ArrowInvalid is a ValueError
        text = str(exc).strip() or type(exc).__name__
        return f"not a readable Parquet file ({text.splitlines()[0].split('. ')[0].rstrip('.')})"
    names = set(schema.names)
    missing = [c for c in columns if c not in names]
    if missing:
        return (
            f"lacks columns {', '.join(missing)} (an older or different schema); rerun the "
            "stage that wrote it with this trajforge"
        )
    for wanted in types or ():
        if wanted.name in names:
            found = schema.field(wanted.name).type
            if not compatible(found, wanted.type):
                return (
                    f"column {wanted.name} is {_shown(found)}, not {_shown(wanted.type)} (an older "
                    "or different schema); rerun the stage that wrote it with this trajforge"
                )
    return None


def readable(
    files: list[str], columns: Iterable[str] = (), types: pa.Schema | None = None
) -> tuple[list[str], dict[str, str]]:
    """``files`` split into the readable ones and the others (path -> why, see ``unreadable``)."""
    good: list[str] = []
    bad: dict[str, str] = {}
    columns = list(columns)
    for path in files:
        why = unreadable(path, columns, types)
        if why:
            bad[path] = why
        else:
            good.append(path)
    return good, bad


def only(schema: pa.Schema, names: Iterable[str]) -> pa.Schema:
    """The fields of ``schema`` named in ``names`` (the columns a reader takes)."""
    wanted = set(names)
    return pa.schema([field for field in schema if field.name in wanted])


def compatible(found: pa.DataType, wanted: pa.DataType) -> bool:
    """Whether a column written as ``found`` reads back as ``wanted`` does: the same kind of value
    (text, whole number, number, flag, time, list, struct, map) all the way down, whatever the
    width or flavour (``large_string``, ``int32``, a dictionary); an all-null column fits any
    type, a map may be its key/value list (as an export writes it), and a struct may lack or add
    fields (records give them defaults)."""
    types = pa.types
    if types.is_null(found):
        return True
    if types.is_dictionary(found):
        found = found.value_type
    if types.is_dictionary(wanted):
        wanted = wanted.value_type
    kinds = (
        lambda t: types.is_string(t) or types.is_large_string(t) or types.is_string_view(t),
        lambda t: types.is_binary(t) or types.is_large_binary(t) or types.is_fixed_size_binary(t),
        types.is_integer,
        types.is_boolean,
        types.is_temporal,
    )
    for kind in kinds:
        if kind(wanted):
            return kind(found)
    if types.is_floating(wanted) or types.is_decimal(wanted):
        return types.is_floating(found) or types.is_integer(found) or types.is_decimal(found)
    if types.is_map(wanted):
        if types.is_map(found):
            return compatible(found.key_type, wanted.key_type) and compatible(
                found.item_type, wanted.item_type
            )
        pairs = _listed(found)
        return (
            pairs is not None
            and types.is_struct(pairs)
            and {"key", "value"} <= {pairs.field(i).name for i in range(pairs.num_fields)}
            and compatible(pairs.field("key").type, wanted.key_type)
            and compatible(pairs.field("value").type, wanted.item_type)
        )
    if _listed(wanted) is not None:
        item = _listed(found)
        return item is not None and compatible(item, _listed(wanted))
    if types.is_struct(wanted):
        if not types.is_struct(found):
            return False
        present = {found.field(i).name: found.field(i).type for i in range(found.num_fields)}
        return all(
            compatible(present[child.name], child.type)
            for child in (wanted.field(i) for i in range(wanted.num_fields))
            if child.name in present
        )
    return found.equals(wanted)


def _listed(type_: pa.DataType) -> pa.DataType | None:
    """The item type of any list type; None for anything else."""
    types = pa.types
    if (
        types.is_list(type_)
        or types.is_large_list(type_)
        or types.is_fixed_size_list(type_)
        or types.is_list_view(type_)
        or types.is_large_list_view(type_)
    ):
        return type_.value_type
    return None


def _shown(type_: pa.DataType) -> str:
    text = str(type_)
    return text if len(text) <= 60 else text[:57] + "..."


def row_count(files: list[str]) -> int:
    return sum(pq.ParquetFile(source(f)).metadata.num_rows for f in files)


def column(files: list[str], name: str) -> list:
    values: list = []
    for f in files:
        values.extend(pq.read_table(source(f), columns=[name]).column(name).to_pylist())
    return values


def read_frame(files: list[str], columns: list[str] | None = None) -> pl.DataFrame:
    """The wanted columns that exist (all when None), from every file; files may differ."""
    frames = []
    for path in files:
        names = pq.read_schema(source(path)).names
        present = names if columns is None else [c for c in columns if c in names]
        if present:
            frames.append(pl.read_parquet(source(path), columns=present, glob=False))
        else:  # none of the wanted columns: still count the rows
            rows = pq.ParquetFile(source(path)).metadata.num_rows
            frames.append(pl.repeat(None, rows, eager=True).alias("_row").to_frame())
    if not frames:
        return pl.DataFrame()
    return pl.concat(frames, how="diagonal_relaxed")
