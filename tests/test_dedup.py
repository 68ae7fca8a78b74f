"""Exact and near-duplicate dedup: real tasks through the Beam transforms on the FnApiRunner."""

from __future__ import annotations

import functools
import itertools
import random
from collections.abc import Callable
from pathlib import Path
from typing import Any

import apache_beam as beam
import pytest
from apache_beam.testing.util import assert_that, equal_to
from trajforge.filters.exact_dedup import DedupKey, dedup_key, exact_hash, node_id, node_key
from trajforge.filters.minhash_dedup import (
    MinHashConfig,
    dedup_in_memory,
    near_rejection,
    shingle_hashes,
)
from trajforge.filters.text_normalize import normalize_patch, record_text
from trajforge.pipelines.runtime.runner import make_pipeline
from trajforge.pipelines.runtime.sinks import WriteTable
from trajforge.pipelines.stages.dedup import ConnectedComponents, ExactDedup, NearDedup
from trajforge.schemas.errors import ParamsError
from trajforge.schemas.params import CurateParams
from trajforge.schemas.rejection import Rejection
from trajforge.schemas.storage import read_records
from trajforge.schemas.task_instance import TaskInstance

CONFIG = MinHashConfig.from_params(CurateParams())
FIELDS = ["patch", "problem_statement"]
KEY = functools.partial(dedup_key, fields=FIELDS, id_field="instance_id")
WORDS = [f"{a}_{b}" for a in ("get", "set", "load", "user", "item", "path") for b in range(40)]


def code_lines(rng: random.Random, count: int) -> list[str]:
    return [
        f"{rng.choice(WORDS)} = {rng.choice(WORDS)}({rng.choice(WORDS)}, {rng.randint(0, 99)})"
        for _ in range(count)
    ]


def as_patch(removed: list[str], added: list[str], start: int, path: str = "pkg/mod.py") -> str:
    hunk = [f"-    {line}" for line in removed] + [f"+    {line}" for line in added]
    return (
        f"diff --git a/{path} b/{path}\nindex 1a2b3c4..5d6e7f8 100644\n--- a/{path}\n+++ b/{path}\n"
        f"@@ -{start},{len(removed)} +{start},{len(added)} @@ def handler():\n"
        + "\n".join(hunk)
        + "\n"
    )


def task(
    instance_id: str, patch: str, statement: str, quality: float | None = None
) -> TaskInstance:
    scores = {} if quality is None else {"quality": quality}
    return TaskInstance(
        instance_id, "owner/proj", "a" * 40, patch, "", statement, "", "2024-01-01", ("t::a",),
        (), "a" * 40, "img", "pytest", "commit", "p1", instance_id, "/tmp/proj", (), None, scores,
    )  # fmt: skip


def distinct_task(rng: random.Random, instance_id: str) -> TaskInstance:
    statement = " ".join(rng.choice(WORDS) for _ in range(60))
    return task(instance_id, as_patch(code_lines(rng, 12), code_lines(rng, 14), 10), statement)


def run_dedup(
    tmp_path: Path, tasks: list[TaskInstance], build: Callable[[Any], dict[str, Any]]
) -> tuple[list[str], list[Rejection]]:
    """Tasks -> a stage on the FnApiRunner -> Parquet tables -> (kept ids, rejections)."""
    out = str(tmp_path / "out")
    with make_pipeline("local", []) as pipeline:
        result = build(pipeline | "Tasks" >> beam.Create(tasks))
        schema, by_id = TaskInstance.ARROW_SCHEMA, lambda t: t.instance_id
        _ = result["kept"] | "WriteKept" >> WriteTable(out, "kept", schema, by_id, 1)
        _ = result["rejections"] | "WriteRej" >> WriteTable(
            out, "rejections", Rejection.ARROW_SCHEMA, lambda r: r.input, 1
        )
    kept = [t.instance_id for t in read_records(TaskInstance, f"{out}/kept")]
    return sorted(kept), sorted(read_records(Rejection, f"{out}/rejections"), key=_by_input)


def _by_input(rejection: Rejection) -> tuple[str, str]:
    return rejection.input, rejection.reason


def exact_then_near(records: Any) -> dict[str, Any]:
    exact = records | "Exact" >> ExactDedup(KEY)
    near = exact["kept"] | "Near" >> NearDedup(KEY, CONFIG)
    rejections = (exact["rejections"], near["rejections"]) | beam.Flatten()
    return {"kept": near["kept"], "rejections": rejections}


def test_planted_exact_and_near_duplicates_are_removed(tmp_path: Path) -> None:
    rng = random.Random(7)
    tasks = [distinct_task(rng, f"t{i:02d}") for i in range(12)]
    removed, added = code_lines(rng, 12), code_lines(rng, 14)
    statement = " ".join(rng.choice(WORDS) for _ in range(80))
    original = task("orig", as_patch(removed, added, 10), statement)
    # The same change at another offset, in another file, with other whitespace.
    moved = as_patch(removed, [f"{a}   " for a in added], 250, path="lib/other.py")
    exact = task("exact", moved, statement.replace(" ", "  \n "))
    near_added = [*added[:-1], "return get_0(set_1)"]
    near_statement = statement.rsplit(" ", 2)[0] + " and nothing else"
    near = task("near", as_patch(removed, near_added, 40), near_statement)
    kept, rejections = run_dedup(tmp_path, [*tasks, near, exact, original, exact], exact_then_near)

    assert kept == sorted([t.instance_id for t in tasks] + ["exact"])
    by_input = {r.input: r for r in rejections}
    assert set(by_input) == {"orig", "near", "exact"}  # a second copy of "exact" is counted too
    assert by_input["exact"].reason == "exact_duplicate"
    assert by_input["orig"].reason == "exact_duplicate"
    assert by_input["orig"].detail == "duplicate of exact (same normalized text)"
    assert by_input["near"].reason == "near_duplicate"
    assert by_input["near"].detail.startswith("duplicate of exact (jaccard 0.")
    assert {r.stage for r in rejections} == {"curate"}


def test_survivor_is_highest_quality_then_smallest_id_in_any_order(tmp_path: Path) -> None:
    rng = random.Random(3)
    base = distinct_task(rng, "x")
    copies = [
        task("a-low", base.patch, base.problem_statement, quality=0.1),
        task("z-best", base.patch, base.problem_statement + " extra words", quality=0.9),
        task("m-best", base.patch, base.problem_statement + " other words", quality=0.9),
        task("b-none", base.patch, base.problem_statement + " more words"),
    ]
    first = run_dedup(tmp_path / "one", copies, lambda r: r | NearDedup(KEY, CONFIG))
    again = run_dedup(tmp_path / "two", copies[::-1], lambda r: r | NearDedup(KEY, CONFIG))
    assert first == again
    assert first[0] == ["m-best"]  # quality 0.9 beats 0.1 and none; "m" < "z" breaks the tie
    assert {r.input for r in first[1]} == {"a-low", "z-best", "b-none"}
    assert all(r.detail.startswith("duplicate of m-best") for r in first[1])
    in_memory = dedup_in_memory(map(KEY, copies), CONFIG)
    assert sorted((near_rejection(d) for d in in_memory), key=_by_input) == first[1]


def _near_with_rounds(records: Any, rounds: int) -> dict[str, Any]:
    return records | NearDedup(KEY, CONFIG, cc_rounds=rounds)


def chain(length: int, seed: int = 5) -> list[DedupKey]:
    """Each record one token away from the previous one: the ends share almost nothing."""
    rng = random.Random(seed)
    tokens = [rng.choice(WORDS) for _ in range(200)]
    positions = rng.sample(range(200), length)
    keys = []
    for step in range(length):
        keys.append(DedupKey(f"c{step:03d}", " ".join(tokens)))
        tokens[positions[step]] = f"edit{step}"
    return keys


def test_a_long_chain_of_near_duplicates_is_one_component(tmp_path: Path) -> None:
    keys = chain(40)
    first, last = (set(shingle_hashes(k.text, 5).tolist()) for k in (keys[0], keys[-1]))
    assert len(first & last) / len(first | last) < 0.3  # the two ends are not near-duplicates
    tasks = [task(k.id, "", k.text) for k in keys]
    random.Random(1).shuffle(tasks)
    for rounds in (1, 6):  # 1 round leaves work for the residual union-find; 6 converge
        stage = functools.partial(_near_with_rounds, rounds=rounds)
        kept, rejections = run_dedup(tmp_path / str(rounds), tasks, stage)
        assert kept == ["c000"]
        assert len(rejections) == 39
        assert all(r.detail.startswith("duplicate of c000") for r in rejections)
    survivors = {node_id(d.survivor) for d in dedup_in_memory(keys, CONFIG)}
    assert survivors == {"c000"}


@pytest.mark.parametrize("rounds", [0, 2, 8])
def test_connected_components_label_every_node_with_its_smallest(rounds: int) -> None:
    rng = random.Random(rounds)
    ids = [f"n{i:03d}" for i in range(120)]
    rng.shuffle(ids)
    pairs = [*itertools.pairwise(ids[:80]), *itertools.pairwise(ids[80:])]
    edges = [(max(a, b), min(a, b)) for a, b in pairs]
    expected = {node: min(ids[:80]) for node in ids[:80]} | {n: min(ids[80:]) for n in ids[80:]}
    with make_pipeline("local", []) as pipeline:
        labels = pipeline | beam.Create(edges) | ConnectedComponents(rounds)
        assert_that(labels, equal_to(sorted(expected.items())))


def test_normalized_patch_ignores_offsets_headers_and_whitespace() -> None:
    one = as_patch(["x = 1"], ["x  =  2", ""], 10)
    two = as_patch(["x = 1"], ["x = 2", ""], 500, path="elsewhere.py").replace("\n", "\r\n")
    assert normalize_patch(one) == normalize_patch(two) == "@@ def handler():\n-x = 1\n+x = 2"
    assert exact_hash(normalize_patch(one)) == exact_hash(normalize_patch(two))
    sql = "--- a/q.sql\n+++ b/q.sql\n@@ -1,2 +1,1 @@\n--- a comment\n select 1\n"
    assert normalize_patch(sql) == "@@\n--- a comment\n select 1"  # the removed line stays
    assert record_text({"patch": one, "problem_statement": " Fix  X\n"}, FIELDS).endswith("fix x")


def test_node_key_orders_by_rank_then_id() -> None:
    keys = [
        node_key("b", 1.0),
        node_key("a", -2.0),
        node_key("c", float("nan")),
        node_key("a", 1.0),
    ]
    assert [node_id(k) for k in sorted(keys)] == ["a", "b", "a", "c"]
    assert node_key("x", 0.0) == node_key("x", -0.0)


def test_bad_minhash_params_name_the_key() -> None:
    with pytest.raises(ParamsError, match=r"curate\.bands \(30\) must divide curate\.num_perm"):
        MinHashConfig(num_perm=128, bands=30)
    with pytest.raises(ParamsError, match=r"curate\.threshold"):
        MinHashConfig(threshold=1.5)
