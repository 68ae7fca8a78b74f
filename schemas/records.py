"""Frozen dataclasses <-> Arrow rows, so each record declares its columns once.

A record class carries ``ARROW_SCHEMA`` beside its fields; ``to_row``/``from_row`` convert nested
dataclasses to Arrow structs and tuples to lists, and back. ``check_schema`` is what the round-trip
tests use to prove the dataclass and the schema name the same columns.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import types
import typing
from typing import Any, TypeVar, Union, get_args, get_origin, get_type_hints

import pyarrow as pa

R = TypeVar("R")


def content_id(*parts: object, length: int = 16) -> str:
    """A stable id from content, so a rerun produces the same ids and the same bytes."""
    payload = json.dumps(parts, sort_keys=True, ensure_ascii=False, default=str)
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()[:length]


def to_row(record: Any) -> dict[str, Any]:
    """A record as a plain dict that ``pa.Table.from_pylist`` accepts."""
    return {f.name: _to_plain(getattr(record, f.name)) for f in dataclasses.fields(record)}


def _to_plain(value: Any) -> Any:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return to_row(value)
    if isinstance(value, tuple | list):
        return [_to_plain(v) for v in value]
    if isinstance(value, dict):  # maps in key order: the same record always gives the same bytes
        return {k: _to_plain(value[k]) for k in sorted(value)}
    return value


def from_row(cls: type[R], row: dict[str, Any]) -> R:
    """Rebuild a record from a row read back from Arrow (lists become tuples again)."""
    hints = get_type_hints(cls)
    kwargs = {}
    for field in dataclasses.fields(cls):  # type: ignore[arg-type]
        if field.name in row:
            kwargs[field.name] = _from_plain(hints[field.name], row[field.name])
    return cls(**kwargs)


def _from_plain(hint: Any, value: Any) -> Any:
    if value is None:
        return None
    origin = get_origin(hint)
    if origin in (Union, types.UnionType):
        inner = [a for a in get_args(hint) if a is not type(None)]
        return _from_plain(inner[0], value) if len(inner) == 1 else value
    if origin is tuple:
        item = get_args(hint)[0]
        return tuple(_from_plain(item, v) for v in value)
    if origin is dict:
        _, val_t = get_args(hint)
        pairs = value.items() if isinstance(value, dict) else value  # Arrow maps read as pairs
        return {k: _from_plain(val_t, v) for k, v in pairs}
    if isinstance(hint, type) and dataclasses.is_dataclass(hint):
        return from_row(hint, value)
    return value


def to_table(records: typing.Iterable[Any], schema: pa.Schema) -> pa.Table:
    return pa.Table.from_pylist([to_row(r) for r in records], schema=schema)


def from_table(cls: type[R], table: pa.Table) -> list[R]:
    return [from_row(cls, row) for row in table.to_pylist()]


def check_schema(cls: type[Any]) -> None:
    """Raise if the dataclass fields and the Arrow schema disagree on column names or order."""
    fields = [f.name for f in dataclasses.fields(cls)]
    columns = list(cls.ARROW_SCHEMA.names)
    if fields != columns:
        raise AssertionError(f"{cls.__name__}: fields {fields} != schema columns {columns}")
