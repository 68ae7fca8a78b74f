"""Near-duplicate dedup with MinHash LSH: signatures, band keys, bucket checks, components.

The pieces are pure functions so the Beam transform (``pipelines.stages.dedup.NearDedup``) and the
in-memory path (``dedup_in_memory``) run the same logic and reach the same decisions:

1. ``signatures``: datasketch MinHash over the record's hashed token shingles.
2. ``band_hashes``: ``bands`` hashes of ``rows`` values each; records sharing (band, hash) land in
   one bucket, the candidates.
3. ``verify_bucket``: candidates are kept only when their estimated Jaccard (the share of equal
   signature values) reaches the threshold; the verified members of a bucket are joined by a
   union-find and emitted as a star to the bucket cluster's smallest node, never as all pairs.
4. Connected components over those edges (``large_star``/``small_star``/``component_label``
   steps in Beam, ``UnionFind`` in memory). Nodes sort in survivor order (``node_key``), so a
   component's smallest node is its survivor.
"""

from __future__ import annotations

import math
import struct
from collections.abc import Hashable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Generic, NamedTuple, TypeVar

import numpy as np
import xxhash
from datasketch import MinHash
from trajforge.filters.exact_dedup import STAGE, DedupKey, node_id, node_key
from trajforge.filters.text_normalize import fmix64, ngram_hashes, tokenize
from trajforge.schemas.errors import ParamsError
from trajforge.schemas.params import CurateParams
from trajforge.schemas.rejection import Rejection

NEAR = "near_duplicate"
ALL_PAIRS_LIMIT = 256  # buckets up to this size compare every pair; larger ones compare to leaders
_POLY = np.uint64(0x9E3779B97F4A7C15)
H = TypeVar("H", bound=Hashable)


@dataclass(frozen=True)
class MinHashConfig:
    """The MinHash LSH knobs of ``CurateParams``, checked: a bad value names its key."""

    shingle_size: int = 5
    num_perm: int = 128
    bands: int = 32
    threshold: float = 0.8
    seed: int = 1

    def __post_init__(self) -> None:
        for key, value in (
            ("shingle_size", self.shingle_size),
            ("num_perm", self.num_perm),
            ("bands", self.bands),
        ):
            if value < 1:
                raise ParamsError(f"params: curate.{key} must be at least 1, got {value}")
        if self.num_perm % self.bands:
            raise ParamsError(
                f"params: curate.bands ({self.bands}) must divide curate.num_perm "
                f"({self.num_perm}) into equal rows"
            )
        if not 0.0 < self.threshold <= 1.0:
            raise ParamsError(f"params: curate.threshold must be in (0, 1], got {self.threshold}")

    @property
    def rows(self) -> int:
        return self.num_perm // self.bands

    @classmethod
    def from_params(cls, params: CurateParams) -> MinHashConfig:
        return cls(params.shingle_size, params.num_perm, params.bands, params.threshold)


class Verified(NamedTuple):
    """A bucket member that matched: its cluster's smallest node and its best match."""

    node: str
    root: str
    neighbor: str
    jaccard: float


class NearDuplicate(NamedTuple):
    """A dropped record: the survivor of its component and its closest verified match."""

    node: str
    survivor: str
    neighbor: str
    jaccard: float


def has_content(text: str) -> bool:
    """Empty texts have no shingles, so no signature: they are never near-duplicates."""
    return bool(text.strip())


def shingle_hashes(text: str, shingle_size: int) -> np.ndarray:
    return ngram_hashes(tokenize(text), shingle_size)


def signatures(texts: Sequence[str], config: MinHashConfig) -> np.ndarray:
    """(len(texts), num_perm) uint32 MinHash values; give only texts that ``has_content``.

    Shingles are hashed once (xxh3 per token, see ``ngram_hashes``); datasketch's
    ``MinHash.generator`` (``MinHash.bulk``'s streaming form) permutes them with its vectorized
    ``update_batch``, the 32 high bits of each shingle hash standing in for its hash function.
    """
    shift = np.uint64(32)
    shingles = ((shingle_hashes(text, config.shingle_size) >> shift).tolist() for text in texts)
    minhashes = MinHash.generator(
        shingles, num_perm=config.num_perm, seed=config.seed, hashfunc=int
    )
    rows = [m.hashvalues for m in minhashes]
    if not rows:
        return np.empty((0, config.num_perm), dtype=np.uint32)
    return np.stack(rows).astype(np.uint32, copy=False)


def band_hashes(sigs: np.ndarray, config: MinHashConfig) -> np.ndarray:
    """(n, bands) uint64: one hash of each band's ``rows`` signature values."""
    rows = sigs.reshape(len(sigs), config.bands, config.rows).astype(np.uint64)
    hashes = np.zeros(rows.shape[:2], dtype=np.uint64)
    for row in range(config.rows):
        hashes = hashes * _POLY + rows[:, :, row]
    return fmix64(hashes)


def band_keys(band_row: np.ndarray) -> list[bytes]:
    """A record's shuffle keys, band index then band hash, for a GroupByKey on band buckets."""
    return [struct.pack(">HQ", band, value) for band, value in enumerate(band_row.tolist())]


def bucket_id(members: Sequence[str]) -> str:
    """Buckets with the same members (a pair colliding in many bands) get one id: checked once."""
    return xxhash.xxh3_128_hexdigest("\0".join(members).encode("utf-8"))


def verify_bucket(members: Iterable[tuple[str, np.ndarray]], threshold: float) -> list[Verified]:
    """The members of one bucket whose estimated Jaccard with another reaches ``threshold``.

    Up to ``ALL_PAIRS_LIMIT`` members every pair is compared (exact within the bucket). A larger
    bucket (boilerplate shared by many records) compares each member only to the earlier members
    that started a cluster, so it costs O(members x clusters) rather than O(members^2); a pair of
    non-leaders it misses is usually caught in another band.
    """
    unique = dict(members)
    nodes = sorted(unique)
    if len(nodes) < 2:
        return []
    sigs = np.stack([unique[node] for node in nodes])
    pairs = (
        _all_pairs(sigs, threshold) if len(nodes) <= ALL_PAIRS_LIMIT else _leaders(sigs, threshold)
    )
    clusters: UnionFind[int] = UnionFind()
    best: dict[int, tuple[float, int]] = {}
    for i, j, jaccard in pairs:
        clusters.union(i, j)
        for node, other in ((i, j), (j, i)):
            if (-jaccard, other) < best.get(node, (math.inf, 0)):
                best[node] = (-jaccard, other)
    return [
        Verified(nodes[i], nodes[clusters.find(i)], nodes[other], -negative)
        for i, (negative, other) in sorted(best.items())
    ]


def _all_pairs(sigs: np.ndarray, threshold: float) -> list[tuple[int, int, float]]:
    sims = (sigs[:, None, :] == sigs[None, :, :]).mean(axis=2)
    first, second = np.nonzero(np.triu(sims >= threshold, k=1))
    return [(int(i), int(j), float(sims[i, j])) for i, j in zip(first, second, strict=True)]


def _leaders(sigs: np.ndarray, threshold: float) -> list[tuple[int, int, float]]:
    pairs: list[tuple[int, int, float]] = []
    leaders: list[int] = []
    for i in range(len(sigs)):
        if leaders:
            sims = (sigs[leaders] == sigs[i]).mean(axis=1)
            hits = np.nonzero(sims >= threshold)[0]
            pairs.extend((leaders[h], i, float(sims[h])) for h in hits)
            if len(hits):
                continue
        leaders.append(i)
    return pairs


class UnionFind(Generic[H]):
    """Disjoint sets whose root is always the smallest member (the survivor, for node keys)."""

    def __init__(self) -> None:
        self.parent: dict[H, H] = {}

    def find(self, item: H) -> H:
        root = item
        while (parent := self.parent.get(root, root)) != root:
            root = parent
        while item != root:  # path compression
            self.parent[item], item = root, self.parent[item]
        return root

    def union(self, a: H, b: H) -> None:
        ra, rb = self.find(a), self.find(b)
        if ra != rb:
            small, large = (ra, rb) if ra < rb else (rb, ra)  # type: ignore[operator]
            self.parent[large] = small


# Connected components in Beam: alternating large-star and small-star rounds (Kiveris et al.,
# "Connected Components in MapReduce and Beyond", 2014). Edges are (larger, smaller) node pairs.


def large_star(node: str, neighbors: Iterable[str]) -> Iterator[tuple[str, str]]:
    """Link every larger neighbor of ``node`` to the smallest node of its neighborhood."""
    around = set(neighbors)
    smallest = min(around | {node})
    for other in around:
        if other > node:
            yield other, smallest


def small_star(node: str, smaller: Iterable[str]) -> Iterator[tuple[str, str]]:
    """Link ``node`` and its smaller neighbors to the smallest of them."""
    around = set(smaller) | {node}
    smallest = min(around)
    for other in around:
        if other != smallest:
            yield other, smallest


def component_label(node: str, neighbors: Iterable[str]) -> str:
    """The smallest node in reach; after enough star rounds, the component's smallest node."""
    return min(set(neighbors) | {node})


def resolve_labels(residual: Iterable[tuple[str, str]]) -> dict[str, str]:
    """Labels still joined by an edge after the star rounds -> their component's smallest label."""
    sets: UnionFind[str] = UnionFind()
    for a, b in residual:
        sets.union(a, b)
    return {label: root for label in list(sets.parent) if (root := sets.find(label)) != label}


def near_rejection(duplicate: NearDuplicate) -> Rejection:
    survivor, neighbor = node_id(duplicate.survivor), node_id(duplicate.neighbor)
    via = "" if neighbor == survivor else f" via {neighbor}"
    detail = f"duplicate of {survivor}{via} (jaccard {duplicate.jaccard:.2f})"
    return Rejection(node_id(duplicate.node), STAGE, NEAR, detail)


def bucket_members(band_column: np.ndarray) -> Iterator[np.ndarray]:
    """Row indices sharing a band hash, for every hash held by two rows or more."""
    order = np.argsort(band_column, kind="stable")
    ordered = band_column[order]
    starts = np.flatnonzero(np.r_[True, ordered[1:] != ordered[:-1]])
    ends = np.r_[starts[1:], len(ordered)]
    for start, end in zip(starts, ends, strict=True):
        if end - start > 1:
            yield np.sort(order[start:end])


def dedup_in_memory(keys: Iterable[DedupKey], config: MinHashConfig) -> list[NearDuplicate]:
    """Near-duplicates of a collection held in one process, by the same steps as ``NearDedup``.

    For small runs, tests and the benchmark; the Beam transform is the path that scales.
    """
    texts = {node_key(k.id, k.rank): k.text for k in keys if has_content(k.text)}
    nodes = sorted(texts)  # row order is survivor order, so sorted rows are sorted nodes
    sigs = signatures([texts[node] for node in nodes], config)
    bands = band_hashes(sigs, config)
    buckets = {tuple(m.tolist()) for b in range(config.bands) for m in bucket_members(bands[:, b])}
    components: UnionFind[str] = UnionFind()
    best: dict[str, tuple[float, str]] = {}
    for bucket in sorted(buckets):
        for match in verify_bucket([(nodes[i], sigs[i]) for i in bucket], config.threshold):
            components.union(match.node, match.root)
            candidate = (-match.jaccard, match.neighbor)
            best[match.node] = min(best.get(match.node, candidate), candidate)
    duplicates = []
    for node in sorted(best):
        survivor = components.find(node)
        if survivor != node:
            negative, neighbor = best[node]
            duplicates.append(NearDuplicate(node, survivor, neighbor, -negative))
    return duplicates
