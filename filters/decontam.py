"""Benchmark decontamination: drop what a benchmark an agent is scored on already contains.

A benchmark is a SWE-bench-style Parquet or JSONL file the user supplies. A record is contaminated
by it when it comes from the same repo and base commit as one of its instances, or when a share of
its patch's or statement's token n-grams at least ``threshold`` occurs in the benchmark. The
benchmark's n-grams are kept as a sorted array of 64-bit hashes (8 bytes each, with a parallel
array naming the instance they came from), built once per process (``load_indexes``).
"""

from __future__ import annotations

import functools
import io
import json
import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np
import pyarrow.parquet as pq
from trajforge.filters.exact_dedup import STAGE
from trajforge.filters.text_normalize import field_value, ngram_hashes, normalize_field, tokenize
from trajforge.schemas.errors import ParamsError, UserError
from trajforge.schemas.rejection import Rejection
from trajforge.schemas.storage import read_bytes

REQUIRED_COLUMNS = ("instance_id", "repo", "base_commit", "patch", "problem_statement")
TEXT_COLUMNS = ("patch", "problem_statement")
CONTAMINATED = "contaminated"


class BenchmarkError(UserError):
    reason = "bad_benchmark"


class DecontamKey(NamedTuple):
    """What decontamination needs of a record; repo and commit are empty when unknown."""

    id: str
    repo: str
    base_commit: str
    texts: tuple[tuple[str, str], ...]  # (field name, normalized text)


class Contamination(NamedTuple):
    benchmark: str
    detail: str


def decontam_key(
    record: Any,
    fields: Sequence[str] = TEXT_COLUMNS,
    id_field: str = "instance_id",
) -> DecontamKey:
    """A task's (or, with ``fields=("model_patch", "messages")``, a trajectory's) DecontamKey."""
    texts = tuple((name, normalize_field(name, field_value(record, name))) for name in fields)
    repo = _get(record, "repo")
    commit = _get(record, "base_commit")
    return DecontamKey(str(field_value(record, id_field)), repo, commit, texts)


def check_overlap_params(ngram: int, threshold: float) -> None:
    """Bad decontamination knobs are one line naming the key."""
    if ngram < 1:
        raise ParamsError(f"params: curate.decontam_ngram must be at least 1, got {ngram}")
    if not 0.0 < threshold <= 1.0:
        raise ParamsError(f"params: curate.decontam_threshold must be in (0, 1], got {threshold}")


def normalize_repo(repo: str) -> str:
    """``https://github.com/Owner/Name.git`` and ``owner/name`` name the same repository."""
    repo = repo.strip().lower().removesuffix("/").removesuffix(".git")
    for prefix in ("https://", "http://", "git@", "ssh://git@"):
        repo = repo.removeprefix(prefix)
    repo = repo.replace("github.com:", "github.com/").removeprefix("github.com/")
    return repo


def benchmark_name(path: str) -> str:
    """The name rejections count under: the file name without its extension(s)."""
    base = os.path.basename(path.rstrip("/"))
    for suffix in (".parquet", ".jsonl", ".json"):
        base = base.removesuffix(suffix)
    return base


def read_benchmark(path: str) -> list[dict[str, str]]:
    """The instances of a benchmark file, checked for the SWE-bench columns dedup needs."""
    if not path.endswith((".parquet", ".jsonl", ".json")):
        raise BenchmarkError(f"benchmark {path}: must be a .parquet or .jsonl file")
    try:
        data = read_bytes(path)
    except OSError as exc:
        raise BenchmarkError(f"benchmark {path}: cannot be read ({exc})") from None
    if path.endswith(".parquet"):
        rows, columns = _parquet_rows(path, data)
    else:
        rows, columns = _jsonl_rows(path, data)
    missing = [c for c in REQUIRED_COLUMNS if c not in columns]
    if missing:
        raise BenchmarkError(
            f"benchmark {path}: missing columns {', '.join(missing)} "
            f"(a SWE-bench-style file needs {', '.join(REQUIRED_COLUMNS)})"
        )
    return [
        {c: "" if row.get(c) is None else str(row[c]) for c in REQUIRED_COLUMNS} for row in rows
    ]


def _parquet_rows(path: str, data: bytes) -> tuple[list[dict[str, Any]], set[str]]:
    try:
        table = pq.read_table(io.BytesIO(data))
    except Exception as exc:  # pyarrow raises several types for a file that is not Parquet
        raise BenchmarkError(f"benchmark {path}: not a readable Parquet file ({exc})") from None
    present = [c for c in REQUIRED_COLUMNS if c in table.column_names]
    return table.select(present).to_pylist(), set(table.column_names)


def _jsonl_rows(path: str, data: bytes) -> tuple[list[dict[str, Any]], set[str]]:
    rows: list[dict[str, Any]] = []
    for number, line in enumerate(data.decode("utf-8", errors="replace").splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError:
            raise BenchmarkError(f"benchmark {path}: line {number} is not JSON") from None
        if not isinstance(row, dict):
            raise BenchmarkError(f"benchmark {path}: line {number} is not a JSON object")
        rows.append(row)
    # A column counts as present only when every row has it.
    columns = set.intersection(*(set(r) for r in rows)) if rows else set()
    return rows, columns


@dataclass(frozen=True)
class BenchmarkIndex:
    """One benchmark, ready for lookups: its (repo, commit) pairs and its hashed n-grams."""

    name: str
    commits: dict[tuple[str, str], str]  # (normalized repo, commit) -> instance_id
    ngrams: np.ndarray  # sorted unique uint64 n-gram hashes of patches and statements
    owners: np.ndarray  # int32: the instance (index into instance_ids) each n-gram came from
    instance_ids: tuple[str, ...]

    @classmethod
    def build(cls, name: str, instances: Sequence[dict[str, str]], n: int) -> BenchmarkIndex:
        commits: dict[tuple[str, str], str] = {}
        hashes, owners = [], []
        for index, row in enumerate(instances):
            key = (normalize_repo(row["repo"]), row["base_commit"].strip().lower())
            commits.setdefault(key, row["instance_id"])
            for column in TEXT_COLUMNS:
                grams = text_ngrams(normalize_field(column, row[column]), n)
                hashes.append(grams)
                owners.append(np.full(len(grams), index, dtype=np.int32))
        all_hashes = np.concatenate(hashes) if hashes else np.empty(0, dtype=np.uint64)
        all_owners = np.concatenate(owners) if owners else np.empty(0, dtype=np.int32)
        unique, first = np.unique(all_hashes, return_index=True)
        ids = tuple(row["instance_id"] for row in instances)
        return cls(name, commits, unique, all_owners[first], ids)

    def overlap(self, grams: np.ndarray) -> tuple[float, str]:
        """Share of ``grams`` (unique hashes) found here, and the instance most came from."""
        if len(grams) == 0 or len(self.ngrams) == 0:
            return 0.0, ""
        positions = np.minimum(np.searchsorted(self.ngrams, grams), len(self.ngrams) - 1)
        found = self.ngrams[positions] == grams
        hits = int(np.count_nonzero(found))
        if not hits:
            return 0.0, ""
        owner = int(np.bincount(self.owners[positions[found]]).argmax())
        return hits / len(grams), self.instance_ids[owner]


def text_ngrams(text: str, n: int) -> np.ndarray:
    """The unique hashed n-grams of a normalized text (none when it is shorter than ``n``)."""
    return np.unique(ngram_hashes(tokenize(text), n, pad_short=False))


def build_index(path: str, n: int) -> BenchmarkIndex:
    return BenchmarkIndex.build(benchmark_name(path), read_benchmark(path), n)


@functools.lru_cache(maxsize=8)
def load_indexes(paths: tuple[str, ...], n: int) -> tuple[BenchmarkIndex, ...]:
    """Every benchmark's index, built once per process and shared by the DoFns in it."""
    return tuple(build_index(path, n) for path in paths)


def contamination(
    key: DecontamKey, indexes: Sequence[BenchmarkIndex], n: int, threshold: float
) -> Contamination | None:
    """The first benchmark (in the order given) that ``key`` overlaps, or None when clean."""
    commit = (normalize_repo(key.repo), key.base_commit.strip().lower())
    grams = [(name, text_ngrams(text, n)) for name, text in key.texts]
    for index in indexes:
        if key.repo and key.base_commit and commit in index.commits:
            instance = index.commits[commit]
            detail = f"same repo and base_commit as {index.name} instance {instance}"
            return Contamination(index.name, detail)
        for name, field_grams in grams:
            share, instance = index.overlap(field_grams)
            if share >= threshold and share > 0:
                detail = (
                    f"{name}: {share:.0%} of its {n}-grams occur in {index.name} "
                    f"(mostly instance {instance})"
                )
                return Contamination(index.name, detail)
    return None


def contamination_rejection(key: DecontamKey, found: Contamination) -> Rejection:
    return Rejection(key.id, STAGE, f"{CONTAMINATED}:{found.benchmark}", found.detail)


def _get(record: Any, name: str) -> str:
    try:
        value = field_value(record, name)
    except (KeyError, AttributeError):
        return ""
    return "" if value is None else str(value)
