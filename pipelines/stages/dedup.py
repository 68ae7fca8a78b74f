"""Curation's dedup and decontamination as composite PTransforms (logic in ``filters``).

Each transform takes a PCollection of records plus a key function that turns one record into
what the filter needs (``filters.exact_dedup.dedup_key`` / ``filters.decontam.decontam_key``
with ``functools.partial``), and returns ``{"kept": records, "rejections": Rejection}``.

Survivor rule (exact and near): in a group of duplicates the record with the highest rank
(``DedupKey.rank``; by default its quality score, else its reward) survives; ties go to the
smallest id. Ids should be unique: records sharing an id are judged as one.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

import apache_beam as beam
import numpy as np
from apache_beam.metrics import Metrics
from trajforge.filters.decontam import (
    DecontamKey,
    check_overlap_params,
    contamination,
    contamination_rejection,
    load_indexes,
)
from trajforge.filters.exact_dedup import (
    STAGE,
    DedupKey,
    exact_hash,
    exact_rejection,
    node_key,
    survivor_order,
)
from trajforge.filters.minhash_dedup import (
    MinHashConfig,
    NearDuplicate,
    band_hashes,
    band_keys,
    bucket_id,
    component_label,
    has_content,
    large_star,
    near_rejection,
    resolve_labels,
    signatures,
    small_star,
    verify_bucket,
)
from trajforge.pipelines.runtime.stage_fn import REJECTED
from trajforge.schemas.params import CurateParams

UNJUDGED = "unjudged"
TEXTS = "texts"
BANDS = "bands"
NOTIFY = "notify"
CC_ROUNDS = 4  # large-star + small-star rounds before the residual union-find

Edge = tuple[str, str]  # (larger node, smaller node)


class ExactDedup(beam.PTransform):
    """Records -> kept / rejections ("exact_duplicate"): one GroupByKey on the normalized hash."""

    def __init__(self, key: Callable[[Any], DedupKey]) -> None:
        super().__init__()
        self.key = key

    def expand(self, records):
        grouped = records | "KeyByHash" >> beam.ParDo(_KeyByHashFn(self.key)).with_outputs(
            UNJUDGED, main="keyed"
        )
        decided = (
            grouped.keyed
            | "GroupByHash" >> beam.GroupByKey()
            | "PickSurvivor" >> beam.ParDo(_PickSurvivorFn()).with_outputs(REJECTED, main="kept")
        )
        kept = (grouped[UNJUDGED], decided.kept) | "AllKept" >> beam.Flatten()
        return {"kept": kept, "rejections": decided[REJECTED]}


class _KeyByHashFn(beam.DoFn):
    """(hash, (node, record)); a record with no text is kept unjudged (tagged UNJUDGED)."""

    def __init__(self, key: Callable[[Any], DedupKey]) -> None:
        self.key = key

    def process(self, record: Any) -> Iterator[Any]:
        k = self.key(record)
        if not has_content(k.text):
            Metrics.counter(STAGE, "dedup_empty_text").inc()
            yield beam.pvalue.TaggedOutput(UNJUDGED, record)
            return
        yield exact_hash(k.text), (node_key(k.id, k.rank), record)


class _PickSurvivorFn(beam.DoFn):
    def process(self, element: Any) -> Iterator[Any]:
        _, members = element
        (survivor, record), *others = survivor_order(members)
        yield record
        for node, _ in others:
            Metrics.counter(STAGE, "exact_duplicate").inc()
            yield beam.pvalue.TaggedOutput(REJECTED, exact_rejection(node, survivor))


class NearDedup(beam.PTransform):
    """Records -> kept / rejections ("near_duplicate"), by MinHash LSH in Beam.

    Signatures per batch of records; a GroupByKey on (band index, band hash) finds candidate
    buckets; members of multi-record buckets are joined to their signatures and checked per bucket
    (estimated Jaccard >= threshold); verified edges go through ``ConnectedComponents``; a final
    join with the records drops every record that is not its component's survivor.
    """

    def __init__(
        self,
        key: Callable[[Any], DedupKey],
        config: MinHashConfig,
        cc_rounds: int = CC_ROUNDS,
        batch_size: int = 512,
    ) -> None:
        super().__init__()
        self.key = key
        self.config = config
        self.cc_rounds = cc_rounds
        self.batch_size = batch_size

    @classmethod
    def from_params(cls, key: Callable[[Any], DedupKey], params: CurateParams) -> NearDedup:
        return cls(key, MinHashConfig.from_params(params))

    def expand(self, records):
        config = self.config
        keyed = records | "KeyByNode" >> beam.ParDo(_KeyByNodeFn(self.key)).with_outputs(
            TEXTS, main="records"
        )
        signed = (
            keyed[TEXTS]
            | "Batch" >> beam.BatchElements(min_batch_size=1, max_batch_size=self.batch_size)
            | "Sign" >> beam.ParDo(_SignFn(config)).with_outputs(BANDS, main="sigs")
        )
        memberships = (
            signed[BANDS]
            | "GroupByBand" >> beam.GroupByKey()
            | "Buckets" >> beam.FlatMapTuple(_bucket_memberships)
        )
        checked = (
            {"sig": signed.sigs, "bucket": memberships}
            | "JoinSignatures" >> beam.CoGroupByKey()
            | "SigByBucket" >> beam.FlatMapTuple(_signature_by_bucket)
            | "GroupByBucket" >> beam.GroupByKey()
            | "VerifyBucket"
            >> beam.FlatMapTuple(lambda _, members: verify_bucket(members, config.threshold))
        )
        edges = checked | "Edges" >> beam.FlatMap(
            lambda m: [(m.node, m.root)] if m.node != m.root else []
        )
        best = (
            checked
            | "BestMatch" >> beam.Map(lambda m: (m.node, (-m.jaccard, m.neighbor)))
            | "KeepBest" >> beam.CombinePerKey(min)
        )
        labels = edges | "Components" >> ConnectedComponents(self.cc_rounds)
        decided = (
            {"record": keyed.records, "label": labels, "best": best}
            | "JoinDecisions" >> beam.CoGroupByKey()
            | "Decide" >> beam.ParDo(_DecideFn()).with_outputs(REJECTED, main="kept")
        )
        return {"kept": decided.kept, "rejections": decided[REJECTED]}


class _KeyByNodeFn(beam.DoFn):
    """(node, record) and, tagged, (node, text) for records with text to sign."""

    def __init__(self, key: Callable[[Any], DedupKey]) -> None:
        self.key = key

    def process(self, record: Any) -> Iterator[Any]:
        k = self.key(record)
        node = node_key(k.id, k.rank)
        yield node, record
        if has_content(k.text):
            yield beam.pvalue.TaggedOutput(TEXTS, (node, k.text))
        else:
            Metrics.counter(STAGE, "dedup_empty_text").inc()


class _SignFn(beam.DoFn):
    """A batch of (node, text) -> (node, signature bytes) and, tagged, (band key, node)."""

    def __init__(self, config: MinHashConfig) -> None:
        self.config = config

    def process(self, batch: list[tuple[str, str]]) -> Iterator[Any]:
        sigs = signatures([text for _, text in batch], self.config)
        bands = band_hashes(sigs, self.config)
        for (node, _), sig, band_row in zip(batch, sigs, bands, strict=True):
            yield node, sig.tobytes()
            for band_key in band_keys(band_row):
                yield beam.pvalue.TaggedOutput(BANDS, (band_key, node))


def _bucket_memberships(_: bytes, nodes: Iterable[str]) -> Iterable[tuple[str, str]]:
    members = sorted(set(nodes))
    if len(members) < 2:
        return []
    bucket = bucket_id(members)
    return [(node, bucket) for node in members]


def _signature_by_bucket(node: str, joined: dict[str, list]) -> Iterable[tuple[str, Any]]:
    if not joined["sig"]:
        return []
    sig = np.frombuffer(joined["sig"][0], dtype=np.uint32)
    return [(bucket, (node, sig)) for bucket in sorted(set(joined["bucket"]))]


class _DecideFn(beam.DoFn):
    def process(self, element: Any) -> Iterator[Any]:
        node, joined = element
        labels, best = joined["label"], joined["best"]
        survivor = labels[0] if labels else node
        for record in joined["record"]:
            if survivor == node:
                yield record
                continue
            Metrics.counter(STAGE, "near_duplicate").inc()
            negative, neighbor = best[0]
            duplicate = NearDuplicate(node, survivor, neighbor, -negative)
            yield beam.pvalue.TaggedOutput(REJECTED, near_rejection(duplicate))


class ConnectedComponents(beam.PTransform):
    """Edges (larger, smaller) -> (node, smallest node of its component) for every edge node.

    ``rounds`` of alternating large-star / small-star (Kiveris et al. 2014) contract each
    component towards a star around its smallest node, in GroupByKeys spread over workers (a
    Beam pipeline cannot loop until convergence, so the rounds are unrolled). Each node is then
    labelled with the smallest node in reach; an edge whose two ends still carry different labels
    (a component that needed more rounds) is a residual edge between labels, and the few of them
    are merged by one union-find on one worker and applied as a side input. So the answer is exact
    whatever ``rounds`` is; rounds only move the work from the one worker to the many.
    """

    def __init__(self, rounds: int = CC_ROUNDS) -> None:
        super().__init__()
        self.rounds = rounds

    def expand(self, edges):
        for number in range(self.rounds):
            edges = (
                edges
                | f"LargeStarKeys{number}" >> beam.FlatMap(_both_directions)
                | f"LargeStarGroup{number}" >> beam.GroupByKey()
                | f"LargeStar{number}" >> beam.FlatMapTuple(large_star)
                | f"SmallStarGroup{number}" >> beam.GroupByKey()
                | f"SmallStar{number}" >> beam.FlatMapTuple(small_star)
            )
        labelled = (
            edges
            | "LabelKeys" >> beam.FlatMap(_both_directions)
            | "LabelGroup" >> beam.GroupByKey()
            | "Label" >> beam.ParDo(_LabelFn()).with_outputs(NOTIFY, main="labels")
        )
        residual_roots = (
            {"label": labelled.labels, "neighbor": labelled[NOTIFY]}
            | "JoinNeighborLabels" >> beam.CoGroupByKey()
            | "ResidualEdges" >> beam.FlatMapTuple(_residual_edges)
            | "CollectResidual" >> beam.combiners.ToList()
            | "ResolveResidual" >> beam.Map(_counted_resolve)
        )
        return labelled.labels | "ApplyResidual" >> beam.Map(
            _apply_roots, roots=beam.pvalue.AsSingleton(residual_roots)
        )


def _both_directions(edge: Edge) -> list[Edge]:
    return [edge, (edge[1], edge[0])]


class _LabelFn(beam.DoFn):
    """(node, neighbors) -> (node, label) and, tagged, the label sent to each larger neighbor."""

    def process(self, element: Any) -> Iterator[Any]:
        node, neighbors = element
        neighbors = set(neighbors)
        label = component_label(node, neighbors)
        yield node, label
        for other in neighbors:
            if other > node:
                yield beam.pvalue.TaggedOutput(NOTIFY, (other, label))


def _residual_edges(_: str, joined: dict[str, list]) -> list[Edge]:
    (label,) = joined["label"]
    return [(label, other) for other in set(joined["neighbor"]) if other != label]


def _apply_roots(labelled: Edge, roots: dict[str, str]) -> Edge:
    node, label = labelled
    return node, roots.get(label, label)


def _counted_resolve(residual: Sequence[Edge]) -> dict[str, str]:
    Metrics.counter(STAGE, "cc_residual_edges").inc(len(residual))
    return resolve_labels(residual)


class Decontaminate(beam.PTransform):
    """Records -> kept / rejections ("contaminated:<benchmark>"), one rejection per record.

    The benchmark files are read here first, so a wrong-shaped file fails before the pipeline
    runs (a ``BenchmarkError``); each worker then builds the hashed indexes once in ``setup``.
    """

    def __init__(
        self,
        benchmarks: Sequence[str],
        key: Callable[[Any], DecontamKey],
        ngram: int,
        threshold: float,
    ) -> None:
        super().__init__()
        check_overlap_params(ngram, threshold)
        self.benchmarks = tuple(benchmarks)
        self.key = key
        self.ngram = ngram
        self.threshold = threshold
        load_indexes(self.benchmarks, ngram)

    @classmethod
    def from_params(cls, key: Callable[[Any], DecontamKey], params: CurateParams) -> Decontaminate:
        return cls(params.benchmarks, key, params.decontam_ngram, params.decontam_threshold)

    def expand(self, records):
        fn = _DecontaminateFn(self.benchmarks, self.key, self.ngram, self.threshold)
        checked = records | "CheckBenchmarks" >> beam.ParDo(fn).with_outputs(REJECTED, main="kept")
        return {"kept": checked.kept, "rejections": checked[REJECTED]}


class _DecontaminateFn(beam.DoFn):
    def __init__(
        self,
        benchmarks: tuple[str, ...],
        key: Callable[[Any], DecontamKey],
        ngram: int,
        threshold: float,
    ) -> None:
        self.benchmarks = benchmarks
        self.key = key
        self.ngram = ngram
        self.threshold = threshold

    def setup(self) -> None:
        self.indexes = load_indexes(self.benchmarks, self.ngram)

    def process(self, record: Any) -> Iterator[Any]:
        key = self.key(record)
        found = contamination(key, self.indexes, self.ngram, self.threshold)
        if found is None:
            yield record
            return
        Metrics.counter(STAGE, f"contaminated_{found.benchmark}").inc()
        yield beam.pvalue.TaggedOutput(REJECTED, contamination_rejection(key, found))
