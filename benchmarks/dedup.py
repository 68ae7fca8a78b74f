"""Benchmark trajforge's near-duplicate dedup against datasketch's MinHashLSH, used the obvious way.

Synthetic code-like records (100-300 tokens from a Zipf-weighted vocabulary of identifiers,
keywords and operators) with planted copies: near copies by small edits (a token or two replaced,
a short run inserted, deleted or appended; true Jaccard mostly >= 0.9) and looser copies
(3-12% of tokens replaced; true Jaccard well below the threshold). Every approach sees the same
records in the same run:

  (a) trajforge ``NearDedup`` as a Beam pipeline on the local FnApiRunner (Parquet in, rejections
      out), the path ``trajforge curate`` runs;
  (b) trajforge ``dedup_in_memory``: the same steps in one process;
  (c) baseline: for each record a datasketch ``MinHash`` fed one ``update()`` per shingle (its
      default SHA-1 hash), inserted into ``MinHashLSH(threshold, num_perm)``, then queried.

Recall is over planted pairs whose true Jaccard (exact, on 5-token shingle sets) is >= 0.9: found
when both records end in one cluster (a, b) or one is in the other's query result (c).
Precision is over predicted pairs (each dropped record with its survivor for a and b; every
query hit for c): correct when the pair's true Jaccard reaches the threshold.

Usage: .venv/bin/python benchmarks/dedup.py [--records N] [--seed S] [--skip-beam]
The last line is ``speedup_vs_datasketch: X`` = (a) records/s / (c) records/s (or (b) with
``--skip-beam``).
"""

from __future__ import annotations

import argparse
import functools
import glob
import json
import os
import re
import tempfile
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass

import apache_beam as beam
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from datasketch import MinHash, MinHashLSH
from trajforge.filters.exact_dedup import dedup_key, node_id
from trajforge.filters.minhash_dedup import MinHashConfig, dedup_in_memory
from trajforge.pipelines.runtime.runner import make_pipeline
from trajforge.pipelines.stages.dedup import NearDedup

SHINGLE = 5
NEAR_SHARE = 0.10  # records that are a near copy of another
LOOSE_SHARE = 0.05  # records that are a looser copy of another
RECALL_AT = 0.9
KEYWORDS = "def return if else elif for while in not and or import from class self None True False"
OPERATORS = "( ) [ ] { } . , : = == += - + * / < > % !="
_TOKEN = re.compile(r"\w+|[^\w\s]")
_DUPLICATE_OF = re.compile(r"^duplicate of (\S+)")


@dataclass(frozen=True)
class Workload:
    ids: list[str]
    texts: list[str]
    planted: list[tuple[int, int]]  # (original, copy) row indices


def vocabulary(size: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Code-like tokens and Zipf weights: keywords and operators first (the most frequent)."""
    parts = ["get", "set", "user", "value", "item", "data", "node", "path", "name", "count"]
    words = KEYWORDS.split() + OPERATORS.split()
    while len(words) < size:
        a, b = rng.choice(parts, 2)
        words.append(f"{a}_{b}{rng.integers(0, 10_000)}")
    weights = 1.0 / np.arange(10, size + 10) ** 1.05
    return np.array(words[:size]), weights / weights.sum()


def generate(records: int, seed: int) -> Workload:
    rng = np.random.default_rng(seed)
    words, weights = vocabulary(20_000, rng)
    near, loose = int(records * NEAR_SHARE), int(records * LOOSE_SHARE)
    originals = records - near - loose
    cdf = np.cumsum(weights)
    sequences = [
        np.minimum(np.searchsorted(cdf, rng.random(rng.integers(100, 301))), len(words) - 1)
        for _ in range(originals)
    ]
    sources = rng.choice(originals, size=near + loose, replace=False)
    planted = []
    for number, source in enumerate(sources):
        edit = _near_edit if number < near else _loose_edit
        planted.append((int(source), len(sequences)))
        sequences.append(edit(sequences[source], rng, len(words)))
    order = rng.permutation(len(sequences))  # ids in random order: survivors are not the originals
    ids = [""] * len(sequences)
    for rank, row in enumerate(order):
        ids[row] = f"rec{rank:07d}"
    texts = [" ".join(words[seq]) for seq in sequences]
    return Workload(ids, texts, planted)


def _near_edit(tokens: np.ndarray, rng: np.random.Generator, vocab: int) -> np.ndarray:
    tokens = tokens.copy()
    kind = rng.integers(0, 4)
    at = int(rng.integers(0, len(tokens)))
    run = int(rng.integers(1, 7))
    if kind == 0:  # one or two tokens replaced
        for _ in range(int(rng.integers(1, 3))):
            tokens[int(rng.integers(0, len(tokens)))] = rng.integers(0, vocab)
        return tokens
    if kind == 1:  # a short run inserted
        return np.insert(tokens, at, rng.integers(0, vocab, run))
    if kind == 2:  # a short run deleted
        return np.delete(tokens, range(at, min(at + run, len(tokens))))
    return np.append(tokens, rng.integers(0, vocab, run))  # a few tokens appended


def _loose_edit(tokens: np.ndarray, rng: np.random.Generator, vocab: int) -> np.ndarray:
    tokens = tokens.copy()
    changed = rng.choice(len(tokens), size=max(3, int(len(tokens) * rng.uniform(0.03, 0.12))))
    tokens[changed] = rng.integers(0, vocab, len(changed))
    return tokens


def shingle_set(text: str) -> set[tuple[str, ...]]:
    tokens = _TOKEN.findall(text)
    return {tuple(tokens[i : i + SHINGLE]) for i in range(max(1, len(tokens) - SHINGLE + 1))}


def true_jaccard(a: str, b: str) -> float:
    sa, sb = shingle_set(a), shingle_set(b)
    return len(sa & sb) / len(sa | sb)


def run_beam(work: Workload, config: MinHashConfig, tmp: str) -> dict[str, str]:
    """(a): Parquet in, NearDedup on the FnApiRunner, rejections out; dropped id -> survivor id."""
    source = os.path.join(tmp, "records.parquet")
    pq.write_table(pa.table({"id": work.ids, "text": work.texts}), source)
    out = os.path.join(tmp, "rejections")
    key = functools.partial(dedup_key, fields=["text"], id_field="id")
    with make_pipeline("local", []) as pipeline:
        result = (
            pipeline
            | "Read" >> beam.io.ReadFromParquet(source)
            | "NearDedup" >> NearDedup(key, config)
        )
        _ = (
            result["rejections"]
            | "Json" >> beam.Map(lambda r: json.dumps([r.input, r.detail]))
            | "Write" >> beam.io.WriteToText(out, file_name_suffix=".jsonl")
        )
    dropped = {}
    for path in glob.glob(f"{out}*.jsonl"):
        with open(path, encoding="utf-8") as handle:
            for line in handle:
                record_id, detail = json.loads(line)
                match = _DUPLICATE_OF.match(detail)
                assert match, detail
                dropped[record_id] = match.group(1)
    return dropped


def run_in_memory(work: Workload, config: MinHashConfig) -> dict[str, str]:
    """(b): dropped id -> survivor id."""
    rows = zip(work.ids, work.texts, strict=True)
    keys = (dedup_key({"id": i, "text": t}, ["text"], "id") for i, t in rows)
    return {node_id(d.node): node_id(d.survivor) for d in dedup_in_memory(keys, config)}


def run_datasketch(work: Workload, config: MinHashConfig) -> set[tuple[str, str]]:
    """(c): the obvious MinHashLSH usage; every (record, query hit) pair, unordered."""
    lsh = MinHashLSH(threshold=config.threshold, num_perm=config.num_perm)
    sketches = []
    for record_id, text in zip(work.ids, work.texts, strict=True):
        minhash = MinHash(num_perm=config.num_perm)
        tokens = _TOKEN.findall(text)
        for i in range(max(1, len(tokens) - SHINGLE + 1)):
            minhash.update(" ".join(tokens[i : i + SHINGLE]).encode("utf-8"))
        lsh.insert(record_id, minhash)
        sketches.append((record_id, minhash))
    pairs = set()
    for record_id, minhash in sketches:
        for hit in lsh.query(minhash):
            if hit != record_id:
                pairs.add((min(hit, record_id), max(hit, record_id)))
    return pairs


def clusters_to_pairs(dropped: dict[str, str]) -> set[tuple[str, str]]:
    return {(min(a, b), max(a, b)) for a, b in dropped.items()}


def score(
    work: Workload,
    found: Callable[[str, str], bool],
    predicted: Iterable[tuple[str, str]],
    threshold: float,
) -> tuple[float, float]:
    """Recall on planted pairs with true Jaccard >= RECALL_AT; precision of predicted pairs."""
    text = dict(zip(work.ids, work.texts, strict=True))
    positives = [
        (work.ids[a], work.ids[b])
        for a, b in work.planted
        if true_jaccard(work.texts[a], work.texts[b]) >= RECALL_AT
    ]
    recall = sum(found(a, b) for a, b in positives) / max(1, len(positives))
    predicted = list(predicted)
    correct = sum(true_jaccard(text[a], text[b]) >= threshold for a, b in predicted)
    return recall, correct / max(1, len(predicted))


def timed(fn: Callable[[], object]) -> tuple[object, float]:
    start = time.perf_counter()
    value = fn()
    return value, time.perf_counter() - start


def report(name: str, records: int, seconds: float, recall: float, precision: float) -> float:
    rate = records / seconds
    print(
        f"{name:<34} {seconds:8.1f}s {rate:10.0f} records/s  "
        f"recall {recall:.4f}  precision {precision:.4f}"
    )
    return rate


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=200_000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--skip-beam", action="store_true", help="only (b) and (c)")
    args = parser.parse_args(argv)
    config = MinHashConfig()  # CurateParams' defaults: 5-token shingles, 128 perms, 32 bands, 0.8
    work = generate(args.records, args.seed)
    near = sum(true_jaccard(work.texts[a], work.texts[b]) >= RECALL_AT for a, b in work.planted)
    print(
        f"records {args.records}  planted pairs {len(work.planted)} "
        f"({near} at true jaccard >= {RECALL_AT})  shingle {config.shingle_size}  "
        f"num_perm {config.num_perm}  bands {config.bands}  threshold {config.threshold}"
    )
    n = args.records

    def same_cluster(dropped: dict[str, str]) -> Callable[[str, str], bool]:
        return lambda a, b: dropped.get(a, a) == dropped.get(b, b)

    rates = {}
    if not args.skip_beam:
        with tempfile.TemporaryDirectory() as tmp:
            beam_dropped, seconds = timed(lambda: run_beam(work, config, tmp))
        assert isinstance(beam_dropped, dict)
        recall, precision = score(
            work, same_cluster(beam_dropped), clusters_to_pairs(beam_dropped), config.threshold
        )
        rates["beam"] = report("(a) trajforge NearDedup, Beam", n, seconds, recall, precision)
    memory_dropped, seconds = timed(lambda: run_in_memory(work, config))
    assert isinstance(memory_dropped, dict)
    recall, precision = score(
        work, same_cluster(memory_dropped), clusters_to_pairs(memory_dropped), config.threshold
    )
    rates["memory"] = report("(b) trajforge dedup_in_memory", n, seconds, recall, precision)
    if not args.skip_beam:
        print(f"    (a) and (b) drop the same records: {beam_dropped == memory_dropped}")
    baseline_pairs, seconds = timed(lambda: run_datasketch(work, config))
    assert isinstance(baseline_pairs, set)
    recall, precision = score(
        work,
        lambda a, b: (min(a, b), max(a, b)) in baseline_pairs,
        baseline_pairs,
        config.threshold,
    )
    rates["baseline"] = report("(c) datasketch MinHashLSH baseline", n, seconds, recall, precision)
    print(f"speedup_in_memory_vs_datasketch: {rates['memory'] / rates['baseline']:.2f}")
    headline = rates["memory" if args.skip_beam else "beam"]
    print(f"speedup_vs_datasketch: {headline / rates['baseline']:.2f}")


if __name__ == "__main__":
    main()
