"""Exact dedup: records whose normalized text hashes the same, and which of them survives.

Dedup sees every record as a ``DedupKey`` (id, normalized text, rank), so tasks and trajectories
share one implementation. The survivor of a group of duplicates is the record with the highest
rank (its quality score), then the smallest id: ``node_key`` encodes that order into one string,
so "the survivor" is simply the smallest key, in a GroupByKey, a union-find or a sort alike.
"""

from __future__ import annotations

import math
import struct
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, NamedTuple, TypeVar

import xxhash
from trajforge.filters.text_normalize import (
    collapse_whitespace,
    field_value,
    optional_value,
    record_text,
)
from trajforge.schemas.rejection import Rejection

STAGE = "curate"
EXACT = "exact_duplicate"
RANK_WIDTH = 16  # hex digits of the rank prefix of a node key
T = TypeVar("T")


class DedupKey(NamedTuple):
    """What dedup needs of a record: its id, its normalized text and its rank (higher wins)."""

    id: str
    text: str
    rank: float = 0.0


def quality_rank(record: Any) -> float:
    """The default survivor rank: ``scores["quality"]``, else the reward, else resolved, else 0."""
    scores = optional_value(record, "scores")
    if isinstance(scores, Mapping) and scores.get("quality") is not None:
        return float(scores["quality"])
    reward = optional_value(record, "reward")
    if reward is not None:
        return float(reward)
    return 1.0 if optional_value(record, "resolved") else 0.0


def dedup_key(
    record: Any,
    fields: Sequence[str],
    id_field: str = "instance_id",
    rank: Callable[[Any], float] = quality_rank,
) -> DedupKey:
    """A task's or trajectory's DedupKey; with ``functools.partial`` it is a Beam key function."""
    return DedupKey(str(field_value(record, id_field)), record_text(record, fields), rank(record))


def node_key(record_id: str, rank: float) -> str:
    """A string whose order is the survivor order: higher rank first, then smaller id.

    The rank is negated and its IEEE-754 bits made order-preserving as 16 hex digits; NaN ranks
    last. The id follows, so ``node_id`` gets it back.
    """
    value = math.inf if math.isnan(rank) else -rank + 0.0  # + 0.0 turns -0.0 into 0.0
    bits = struct.unpack(">Q", struct.pack(">d", value))[0]
    bits = bits ^ 0xFFFFFFFFFFFFFFFF if bits >> 63 else bits | 1 << 63
    return f"{bits:0{RANK_WIDTH}x}{record_id}"


def node_id(node: str) -> str:
    return node[RANK_WIDTH:]


def exact_hash(text: str) -> str:
    """128-bit hash of the normalized text (whitespace collapsed once more, to be safe)."""
    return xxhash.xxh3_128_hexdigest(collapse_whitespace(text).encode("utf-8"))


def survivor_order(members: Iterable[tuple[str, T]]) -> list[tuple[str, T]]:
    """(node, record) pairs of one duplicate group, the survivor first (records sharing a node
    stay in input order, so each but the first is still dropped and counted)."""
    return sorted(members, key=lambda member: member[0])


def exact_rejection(node: str, survivor: str) -> Rejection:
    detail = f"duplicate of {node_id(survivor)} (same normalized text)"
    return Rejection(node_id(node), STAGE, EXACT, detail)
