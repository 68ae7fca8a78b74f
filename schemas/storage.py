"""Where records live: Parquet tables, atomic writes and a content-addressed cache.

Paths go through Beam's FileSystems so the same code reads and writes local paths, gs:// and s3://.
Local writes go to a temporary name first and are renamed into place, so a crash never leaves a
half-written file; object stores publish a file only when it is closed.

A path is a name, never a pattern: Beam's FileSystems.match reads ``[``, ``*`` and ``?`` as
glob characters, so every listing escapes the path it is given (``escape_glob``) and local
folders are listed with ``os`` itself; an output named ``runs/exp[1]`` reads back what it wrote.

Object-store credentials and endpoints come from each process's own environment (for s3://, the
standard ``AWS_ACCESS_KEY_ID``, ``AWS_SECRET_ACCESS_KEY``, ``AWS_REGION``, ``AWS_ENDPOINT_URL``), so
they never sit in params, logs or datasets, and a worker on another machine needs only its env.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import shutil
import tempfile
import warnings
from collections.abc import Iterable, Iterator
from typing import Any, TypeVar

import pyarrow as pa
import pyarrow.parquet as pq
from apache_beam.io.filesystems import FileSystems
from apache_beam.options.pipeline_options import PipelineOptions
from trajforge.schemas.botocore_loader import share_botocore_loader
from trajforge.schemas.errors import StorageError, UserError
from trajforge.schemas.records import from_table, to_table

R = TypeVar("R")


def use_environment_options() -> None:
    """Give FileSystems default options where no pipeline set any: Beam's s3:// refuses to open a
    file without them, and a worker process (Dask's) never sees the launcher's pipeline. With
    none given, boto3 reads the process's environment."""
    if getattr(FileSystems, "_pipeline_options", None) is None:
        FileSystems.set_options(PipelineOptions([]))


use_environment_options()
share_botocore_loader()  # Beam's s3:// makes a boto3 session per operation


def is_local(path: str) -> bool:
    return "://" not in path


@contextlib.contextmanager
def _remote(path: str, doing: str) -> Iterator[None]:
    """An object store's failure (no endpoint, refused credentials, no bucket, a 5xx after the
    client's retries) as one line naming the path; local errors pass through as they are."""
    try:
        yield
    except UserError:
        raise
    except Exception as exc:
        if is_local(path):
            raise
        said = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:300]
        raise StorageError(
            f"{path}: the object store failed {doing} it ({said}); check AWS_ENDPOINT_URL, the "
            "credentials (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY), the bucket, and the "
            "store's own logs"
        ) from None


def check_reachable(path: str) -> None:
    """Fail fast, in one line, when an ``s3://`` path's endpoint does not answer or its bucket is
    missing or refused: Beam's own client retries for minutes before it gives up."""
    if not path.startswith("s3://"):
        return
    import boto3
    from botocore.config import Config

    bucket = path[len("s3://") :].split("/", 1)[0]
    quick = Config(connect_timeout=5, read_timeout=30, retries={"max_attempts": 2})
    endpoint = os.environ.get("AWS_ENDPOINT_URL", "AWS's default endpoint")
    try:
        boto3.client("s3", config=quick).head_bucket(Bucket=bucket)
    except Exception as exc:
        said = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:200]
        raise StorageError(
            f"{path}: the bucket {bucket} cannot be reached at {endpoint} ({said}); check "
            "AWS_ENDPOINT_URL, the credentials (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY) and "
            "that the bucket exists"
        ) from None


def write_bytes_atomic(path: str, data: bytes) -> None:
    if is_local(path):
        directory = os.path.dirname(os.path.abspath(path))
        os.makedirs(directory, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=directory, prefix=".tmp-", suffix=os.path.basename(path))
        try:
            with os.fdopen(fd, "wb") as handle:
                handle.write(data)
            os.replace(tmp, path)
        except BaseException:
            if os.path.exists(tmp):
                os.unlink(tmp)
            raise
        return
    with _remote(path, "writing"), FileSystems.create(path) as handle:
        handle.write(data)


def read_bytes(path: str) -> bytes:
    with _remote(path, "reading"), FileSystems.open(path) as handle:
        return handle.read()


def exists(path: str) -> bool:
    with _remote(path, "looking up"):
        return FileSystems.exists(path)


def join(base: str, *parts: str) -> str:
    return FileSystems.join(base, *parts)


def escape_glob(path: str) -> str:
    """``path`` as a pattern that matches exactly it: each glob character in brackets (Beam's
    patterns, like fnmatch's, have no other quoting). Match it with ``match``."""
    return re.sub(r"[\[*?]", lambda found: f"[{found.group()}]", path)


def match(pattern: str) -> list[Any]:
    """Beam's FileSystems.match of one pattern: its files' metadata (path, size_in_bytes). An
    escaped "[" becomes the regex ``[[]``, which Python warns may change meaning one day; it
    means "[" today, and the warning is kept off the user's terminal."""
    with _remote(pattern, "listing"), warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        return FileSystems.match([pattern])[0].metadata_list


def files_under(prefix: str) -> dict[str, int]:
    """Every file below the directory ``prefix`` (recursively) -> its size in bytes."""
    if is_local(prefix):
        found: dict[str, int] = {}
        for root, _, names in os.walk(prefix):
            for name in names:
                path = os.path.join(root, name)
                with contextlib.suppress(OSError):  # a file removed while we list
                    found[path] = os.path.getsize(path)
        return found
    return {m.path: m.size_in_bytes for m in match(join(escape_glob(prefix), "**"))}


def copy_files(sources: list[str], destinations: list[str]) -> None:
    """Server-side copies on an object store (no bytes through this process)."""
    if sources:
        with _remote(destinations[0], "copying into"):
            FileSystems.copy(sources, destinations)


def delete_files(paths: Iterable[str]) -> None:
    """Delete these files (a local folder: whole); a name is never read as a pattern."""
    paths = list(paths)
    local = [p for p in paths if is_local(p)]
    for path in local:  # Beam's local delete would match each path as a glob
        if os.path.isdir(path) and not os.path.islink(path):
            shutil.rmtree(path)
        else:
            os.remove(path)
    remote = [p for p in paths if not is_local(p)]
    if remote:
        with _remote(remote[0], "deleting"):
            FileSystems.delete(remote)


def table_to_parquet_bytes(table: pa.Table) -> bytes:
    sink = io.BytesIO()
    pq.write_table(table, sink, compression="zstd")
    return sink.getvalue()


def write_records(path: str, records: Iterable[Any], schema: pa.Schema) -> None:
    write_bytes_atomic(path, table_to_parquet_bytes(to_table(records, schema)))


def parquet_files(path: str) -> list[str]:
    """The Parquet files of a table: a file, or every ``*.parquet`` under a directory. Local
    paths come back absolute: a worker of a cluster runs in another directory."""
    if is_local(path):
        path = os.path.abspath(path)
    if path.endswith(".parquet"):
        return [path]
    if is_local(path):
        try:
            names = os.listdir(path)
        except (FileNotFoundError, NotADirectoryError):
            return []
        return sorted(
            os.path.join(path, name)
            for name in names
            if name.endswith(".parquet") and os.path.isfile(os.path.join(path, name))
        )
    return sorted(m.path for m in match(join(escape_glob(path), "*.parquet")))


def read_table(path: str, schema: pa.Schema | None = None) -> pa.Table:
    files = parquet_files(path)
    if not files:
        return schema.empty_table() if schema is not None else pa.table({})
    tables = [pq.read_table(io.BytesIO(read_bytes(f))) for f in files]
    table = pa.concat_tables(tables, promote_options="default")
    return table.select(schema.names).cast(schema) if schema is not None else table


def read_records(cls: type[R], path: str) -> list[R]:
    return from_table(cls, read_table(path, cls.ARROW_SCHEMA))  # type: ignore[attr-defined]


class ContentCache:
    """JSON results keyed by a content hash: any worker can reuse any finished result."""

    def __init__(self, root: str, namespace: str) -> None:
        self.root = join(root, namespace)

    def _path(self, key: str) -> str:
        return join(self.root, key[:2], f"{key}.json")

    def get(self, key: str) -> dict[str, Any] | None:
        path = self._path(key)
        if not exists(path):
            return None
        try:
            return json.loads(read_bytes(path))
        except (json.JSONDecodeError, OSError):
            return None  # a torn entry from another writer: recompute

    def put(self, key: str, value: dict[str, Any]) -> None:
        write_bytes_atomic(self._path(key), json.dumps(value, sort_keys=True).encode("utf-8"))
