"""Published dataset files: found on disk and read row by row, a bad file or row set aside.

Accepted as published: JSON Lines (``*.jsonl``, as ``Dataset.to_json`` writes, also when named
``*.json``), a JSON list (``*.json`` or ``*.jsonl``: ``load_swebench_dataset`` reads either name
as one JSON document), Parquet (``*.parquet``: hub
shards such as ``data/test-00000-of-00001.parquet``), and Hugging Face directories: a
``datasets.save_to_disk`` directory (``state.json`` beside Arrow stream files, or a
``dataset_dict.json`` over one such directory per split) and a hub snapshot (walked for the
data files; hidden folders such as ``.cache`` and the card's JSON are left out).

``read_rows`` yields ``(where, row)`` for each row (``where`` is ``path:LINE`` or
``path#row=N``) and a ``Rejection`` for what cannot be read: the rest of the file goes on where
it can (a bad JSON line is one rejection), and a file that cannot be opened at all is one
``bad_input_file`` rejection naming it. Rows are untrusted (``schemas/json_rows.py``): a row over
``MAX_ROW_BYTES`` is ``row_too_large`` before it is parsed (a JSON line is never held whole); one
nested past the parser, not UTF-8 or holding a lone surrogate is ``bad_row``; so every row read
can be written to Arrow. A Git LFS pointer checked out in place of the data is one
``bad_input_file`` saying so.
"""

from __future__ import annotations

import io
import json
import os
from collections.abc import Iterator
from typing import Any, BinaryIO

import pyarrow as pa
import pyarrow.parquet as pq
from trajforge.generators.imports.rows import STAGE
from trajforge.schemas import json_rows
from trajforge.schemas.rejection import Rejection
from trajforge.schemas.storage import is_local

SUFFIXES = (".jsonl", ".json", ".parquet", ".arrow")
# JSON that describes a Hugging Face dataset rather than holding its rows
METADATA = frozenset({"state.json", "dataset_info.json", "dataset_infos.json", "dataset_dict.json"})
BAD_INPUT_FILE = "bad_input_file"
BATCH_ROWS = 256
MAX_ROW_BYTES = json_rows.MAX_ROW_BYTES
# A data file checked out without git-lfs (as hub and GitHub copies of the datasets often are)
LFS_POINTER = b"version https://git-lfs.github.com/spec/"
Read = tuple[str, dict[str, Any]] | Rejection


def dataset_files(paths: list[str]) -> tuple[list[str], list[Rejection]]:
    """The data files the paths name, in a stable order without repeats, and a rejection for
    each path that holds none."""
    files: list[str] = []
    rejections: list[Rejection] = []
    for path in paths:
        if is_local(path) and os.path.isdir(path):
            found = _directory(path)
            if not found:
                wanted = ", ".join(f"*{s}" for s in SUFFIXES)
                detail = (
                    f"{path}: no dataset files in it ({wanted}, or a Hugging Face dataset "
                    "directory); check the path"
                )
                rejections.append(Rejection(path, STAGE, BAD_INPUT_FILE, detail))
            files.extend(found)
        elif is_local(path) and not os.path.exists(path):
            detail = f"{path}: no such file or directory; check the path"
            rejections.append(Rejection(path, STAGE, BAD_INPUT_FILE, detail))
        else:
            files.append(path)
    unique: dict[str, str] = {}
    for f in files:
        unique.setdefault(os.path.abspath(f) if is_local(f) else f, f)
    return list(unique.values()), rejections


def _directory(path: str) -> list[str]:
    if os.path.isfile(os.path.join(path, "state.json")):  # one save_to_disk split
        return _saved_split(path)
    if os.path.isfile(os.path.join(path, "dataset_dict.json")):  # save_to_disk of splits
        found: list[str] = []
        for split in _splits(path):
            found.extend(_saved_split(os.path.join(path, split)))
        return found
    found = []
    for root, dirs, names in os.walk(path):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        if "state.json" in names:  # a saved split inside a snapshot: its listed files only
            dirs[:] = []
            found.extend(_saved_split(root))
            continue
        found.extend(
            os.path.join(root, n)
            for n in sorted(names)
            if n.endswith(SUFFIXES) and n not in METADATA and not n.startswith(".")
        )
    return found


def _saved_split(path: str) -> list[str]:
    """The Arrow files ``state.json`` lists (their order is the rows' order)."""
    try:
        with open(os.path.join(path, "state.json"), encoding="utf-8") as handle:
            state = json.load(handle)
        names = [entry["filename"] for entry in state["_data_files"]]
    except (OSError, ValueError, KeyError, TypeError, RecursionError):
        return sorted(
            os.path.join(path, n) for n in os.listdir(path) if n.endswith(".arrow")
        )  # a state.json we cannot read: every Arrow file, by name
    return [os.path.join(path, n) for n in names]


def _splits(path: str) -> list[str]:
    try:
        with open(os.path.join(path, "dataset_dict.json"), encoding="utf-8") as handle:
            splits = json.load(handle)["splits"]
        return [s for s in splits if isinstance(s, str)]
    except (OSError, ValueError, KeyError, TypeError, RecursionError):
        return sorted(
            d for d in os.listdir(path) if os.path.isfile(os.path.join(path, d, "state.json"))
        )


def read_rows(path: str) -> Iterator[Read]:
    """Every row of one file (see the module's docstring)."""
    try:
        handle = _open(path)
    except OSError as exc:
        yield _bad_file(path, f"cannot be read ({exc}); check its permissions")
        return
    with handle:
        if path.endswith(".parquet"):
            yield from _parquet(path, handle)
        elif path.endswith(".arrow"):
            yield from _arrow(path, handle)
        elif path.endswith(".json") or _starts_a_list(handle):
            yield from _json_list(path, handle)
        else:
            yield from _json_lines(path, handle)


def _starts_a_list(handle: BinaryIO) -> bool:
    """A JSON list under a .jsonl name (pretty-printed or not): read as one document."""
    head = handle.read(4096).lstrip()
    handle.seek(0)
    return head.startswith(b"[")


def _open(path: str) -> BinaryIO:
    if is_local(path):
        return open(path, "rb")
    from apache_beam.io.filesystems import FileSystems

    return FileSystems.open(path)


def _bad_file(path: str, why: str) -> Rejection:
    return Rejection(path, STAGE, BAD_INPUT_FILE, f"{path}: {why}")


def _json_lines(path: str, handle: BinaryIO) -> Iterator[Read]:
    for number, line in json_rows.lines(handle, MAX_ROW_BYTES):
        where = f"{path}:{number}"
        if isinstance(line, json_rows.RowError):
            yield _bad_row(where, line)
            continue
        if not line.strip():
            continue
        if number == 1 and line.startswith(LFS_POINTER):
            yield _bad_file(path, "is a Git LFS pointer, not the data; run `git lfs pull` first")
            return
        try:
            row = json_rows.loads(line, MAX_ROW_BYTES)
        except json_rows.RowError as exc:
            if number == 1 and exc.why.startswith("not UTF-8"):
                # a binary file, not a bad line: one rejection for the file
                yield _bad_file(path, f"{exc.why}; is it JSONL?")
                return
            yield _bad_row(where, exc)
            continue
        yield where, row


def _bad_row(where: str, error: json_rows.RowError) -> Rejection:
    fix = "the row is left out" if error.reason == json_rows.TOO_LARGE else "fix it"
    return Rejection(where, STAGE, error.reason, f"{where}: {error.why}; {fix}")


def _json_list(path: str, handle: BinaryIO) -> Iterator[Read]:
    data = handle.read()
    try:
        opener, members = json_rows.document(data, MAX_ROW_BYTES)
    except json_rows.RowError as exc:
        if exc.why.startswith("extra data"):  # JSON Lines named .json (as `Dataset.to_json`)
            yield from _json_lines(path, io.BytesIO(data))
            return
        yield _bad_file(path, f"{exc.why}; copy it again")
        return
    if opener == b"{":  # a single row
        where = f"{path}#row=0"
        if len(data) > MAX_ROW_BYTES:
            yield _bad_row(where, json_rows.too_large(len(data), MAX_ROW_BYTES))
            return
        row: dict[str, Any] = {}
        for key, value in members:
            if isinstance(value, json_rows.RowError):
                yield _bad_row(where, value)
                return
            row[str(key)] = value
        yield where, row
        return
    for number, value in members:
        where = f"{path}#row={number}"
        yield _bad_row(where, value) if isinstance(value, json_rows.RowError) else (where, value)


def _parquet(path: str, handle: BinaryIO) -> Iterator[Read]:
    try:
        parquet = pq.ParquetFile(handle)
    except (pa.ArrowException, OSError, ValueError) as exc:
        yield _bad_file(path, f"not a readable Parquet file ({exc}); copy it again")
        return
    yield from _batches(path, parquet.iter_batches(batch_size=BATCH_ROWS))


def _arrow(path: str, handle: BinaryIO) -> Iterator[Read]:
    """``save_to_disk`` writes Arrow stream files; an Arrow file (random access) reads too."""
    try:
        reader: Any = pa.ipc.open_stream(handle)
    except (pa.ArrowException, OSError, ValueError):
        try:
            handle.seek(0)
            file_reader = pa.ipc.open_file(handle)
            reader = (file_reader.get_batch(i) for i in range(file_reader.num_record_batches))
        except (pa.ArrowException, OSError, ValueError) as exc:
            yield _bad_file(path, f"not a readable Arrow file ({exc}); copy it again")
            return
    yield from _batches(path, reader)


def _batches(path: str, batches: Any) -> Iterator[Read]:
    number = 0
    try:
        for batch in batches:
            for row in batch.to_pylist():
                where = f"{path}#row={number}"
                size = json_rows.text_bytes(row)
                if size > MAX_ROW_BYTES:
                    yield _bad_row(where, json_rows.too_large(size, MAX_ROW_BYTES))
                else:
                    yield where, row
                number += 1
    except (pa.ArrowException, OSError, ValueError) as exc:
        yield _bad_file(path, f"unreadable after row {number} ({exc}); copy it again")
