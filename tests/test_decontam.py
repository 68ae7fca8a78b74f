"""Decontamination against real benchmark files (Parquet and JSONL) written by the test."""

from __future__ import annotations

import functools
import json
import random
from pathlib import Path
from typing import Any

import apache_beam as beam
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from trajforge.filters.decontam import BenchmarkError, decontam_key, read_benchmark
from trajforge.pipelines.runtime.runner import make_pipeline
from trajforge.pipelines.runtime.sinks import WriteTable
from trajforge.pipelines.stages.dedup import Decontaminate
from trajforge.schemas.errors import ParamsError, UserError
from trajforge.schemas.params import CurateParams
from trajforge.schemas.rejection import Rejection
from trajforge.schemas.storage import read_records
from trajforge.schemas.task_instance import TaskInstance
from trajforge.schemas.trajectory import Message, Trajectory

NGRAM, THRESHOLD = 13, 0.5
WORDS = [f"{a}_{b}" for a in ("parse", "emit", "node", "cache", "token") for b in range(50)]


def prose(rng: random.Random, words: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(words))


def diff(rng: random.Random, start: int, path: str = "src/core.py") -> str:
    removed = [f"-    {prose(rng, 6)}" for _ in range(6)]
    added = [f"+    {prose(rng, 6)}" for _ in range(8)]
    header = f"diff --git a/{path} b/{path}\n--- a/{path}\n+++ b/{path}\n"
    return header + f"@@ -{start},6 +{start},8 @@\n" + "\n".join(removed + added) + "\n"


def instance(rng: random.Random, instance_id: str, repo: str, commit: str) -> dict[str, Any]:
    return {
        "instance_id": instance_id,
        "repo": repo,
        "base_commit": commit,
        "patch": diff(rng, 10),
        "problem_statement": prose(rng, 80),
        "FAIL_TO_PASS": json.dumps(["tests/test_core.py::test_x"]),  # extra columns are fine
    }


def task(instance_id: str, repo: str, commit: str, patch: str, statement: str) -> Any:
    return TaskInstance(
        instance_id, repo, commit, patch, "", statement, "", "2024-01-01", ("t::a",), (),
        commit, "img", "pytest", "commit", "p1", instance_id, "/tmp/x", (), None,
    )  # fmt: skip


@pytest.fixture
def benchmarks(tmp_path: Path) -> tuple[str, str, list[dict[str, Any]], list[dict[str, Any]]]:
    rng = random.Random(11)
    lite = [
        instance(rng, f"astropy__astropy-{i}", "astropy/astropy", f"{i:040x}") for i in range(5)
    ]
    verified = [
        instance(rng, f"django__django-{i}", "django/django", f"{i:040d}") for i in range(5)
    ]
    lite_path = tmp_path / "swe_bench_lite.parquet"
    pq.write_table(pa.Table.from_pylist(lite), lite_path)
    verified_path = tmp_path / "swe_bench_verified.jsonl"
    verified_path.write_text("".join(json.dumps(row) + "\n" for row in verified))
    return str(lite_path), str(verified_path), lite, verified


def run(tmp_path: Path, records: list[Any], stage: beam.PTransform) -> tuple[list[Any], list[Any]]:
    out = str(tmp_path / "out")
    with make_pipeline("local", []) as pipeline:
        result = pipeline | beam.Create(records) | stage
        schema = type(records[0]).ARROW_SCHEMA
        by_id = functools.partial(_first_field, name=schema.names[0])
        _ = result["kept"] | "WriteKept" >> WriteTable(out, "kept", schema, by_id, 1)
        _ = result["rejections"] | "WriteRejections" >> WriteTable(
            out, "rejections", Rejection.ARROW_SCHEMA, lambda r: r.input, 1
        )
    kept = read_records(type(records[0]), f"{out}/kept")
    return kept, sorted(read_records(Rejection, f"{out}/rejections"), key=lambda r: r.input)


def _first_field(record: Any, name: str) -> str:
    return str(getattr(record, name))


def test_planted_benchmark_overlaps_are_dropped_and_clean_tasks_kept(
    tmp_path: Path, benchmarks: tuple[str, str, list[dict[str, Any]], list[dict[str, Any]]]
) -> None:
    lite_path, verified_path, lite, verified = benchmarks
    rng = random.Random(5)
    clean = [
        task(f"clean-{i}", "owner/proj", f"{i:040x}", diff(rng, 3), prose(rng, 70))
        for i in range(6)
    ]
    # Same repo (spelled as a URL) and base commit as a SWE-bench Lite instance; new text.
    same_commit = task(
        "same-commit", "https://github.com/Astropy/astropy.git", lite[2]["base_commit"],
        diff(rng, 3), prose(rng, 70),
    )  # fmt: skip
    # A benchmark patch at another offset, in another file, re-indented, under a new statement.
    moved = verified[1]["patch"].replace("@@ -10,6 +10,8 @@", "@@ -200,6 +203,8 @@")
    moved = moved.replace("src/core.py", "lib/other.py").replace("    ", "\t")
    patch_copy = task("patch-copy", "owner/proj", "f" * 40, moved, prose(rng, 70))
    # A statement that pastes most of a benchmark statement.
    pasted = "Seen in production: " + lite[4]["problem_statement"].rsplit(" ", 10)[0]
    statement_copy = task("statement-copy", "owner/proj", "e" * 40, diff(rng, 3), pasted)
    # A statement sharing only a short phrase with a benchmark: below the threshold.
    phrase = " ".join(verified[0]["problem_statement"].split()[:15])
    near_miss = task(
        "near-miss", "owner/proj", "d" * 40, diff(rng, 3), phrase + " " + prose(rng, 60)
    )

    records = [*clean, same_commit, patch_copy, statement_copy, near_miss]
    key = functools.partial(decontam_key, fields=("patch", "problem_statement"))
    stage = Decontaminate([lite_path, verified_path], key, NGRAM, THRESHOLD)
    kept, rejections = run(tmp_path, records, stage)

    assert sorted(t.instance_id for t in kept) == sorted(
        [t.instance_id for t in clean] + ["near-miss"]
    )
    reasons = {r.input: r.reason for r in rejections}
    assert reasons == {
        "same-commit": "contaminated:swe_bench_lite",
        "patch-copy": "contaminated:swe_bench_verified",
        "statement-copy": "contaminated:swe_bench_lite",
    }
    details = {r.input: r.detail for r in rejections}
    assert details["same-commit"] == (
        "same repo and base_commit as swe_bench_lite instance astropy__astropy-2"
    )
    assert details["patch-copy"].startswith(
        "patch: 100% of its 13-grams occur in swe_bench_verified"
    )
    assert "django__django-1" in details["patch-copy"]
    assert details["statement-copy"].startswith("problem_statement: ")
    assert {r.stage for r in rejections} == {"curate"}


def test_trajectories_whose_patch_is_a_benchmark_patch_are_dropped(
    tmp_path: Path, benchmarks: tuple[str, str, list[dict[str, Any]], list[dict[str, Any]]]
) -> None:
    lite_path, _, lite, _ = benchmarks
    rng = random.Random(2)

    def trajectory(trajectory_id: str, patch: str) -> Trajectory:
        messages = (Message("user", prose(rng, 40)), Message("assistant", "done"))
        return Trajectory(trajectory_id, "i1", "m", messages, "[]", patch, "submitted", True, 1.0)

    records = [trajectory("copied", lite[0]["patch"]), trajectory("own", diff(rng, 5))]
    key = functools.partial(
        decontam_key, fields=("model_patch", "messages"), id_field="trajectory_id"
    )
    kept, rejections = run(tmp_path, records, Decontaminate([lite_path], key, NGRAM, THRESHOLD))
    assert [t.trajectory_id for t in kept] == ["own"]
    assert [(r.input, r.reason) for r in rejections] == [("copied", "contaminated:swe_bench_lite")]


def test_a_wrong_shaped_benchmark_is_one_clear_error(tmp_path: Path) -> None:
    bad = tmp_path / "my_bench.parquet"
    pq.write_table(
        pa.table({"instance_id": ["a"], "repo": ["o/r"], "problem_statement": ["x"]}), bad
    )
    with pytest.raises(BenchmarkError) as caught:
        Decontaminate([str(bad)], decontam_key, NGRAM, THRESHOLD)
    message = str(caught.value)
    assert message == (
        f"benchmark {bad}: missing columns base_commit, patch (a SWE-bench-style file needs "
        "instance_id, repo, base_commit, patch, problem_statement)"
    )
    assert isinstance(caught.value, UserError) and caught.value.reason == "bad_benchmark"

    partial = tmp_path / "partial.jsonl"
    row = {"instance_id": "a", "repo": "o/r", "base_commit": "c", "patch": "p"}
    partial.write_text(json.dumps({**row, "problem_statement": "s"}) + "\n" + json.dumps(row))
    with pytest.raises(BenchmarkError, match=r"partial\.jsonl: missing columns problem_statement"):
        read_benchmark(str(partial))
    garbled = tmp_path / "garbled.jsonl"
    garbled.write_text('{"instance_id": "a"}\nnot json\n')
    with pytest.raises(BenchmarkError, match=r"garbled\.jsonl: line 2 is not JSON"):
        read_benchmark(str(garbled))
    with pytest.raises(BenchmarkError, match=r"\.csv: must be a \.parquet or \.jsonl file"):
        read_benchmark(str(tmp_path / "bench.csv"))


def test_bad_decontamination_params_name_the_key() -> None:
    with pytest.raises(ParamsError, match=r"curate\.decontam_ngram must be at least 1"):
        Decontaminate.from_params(decontam_key, CurateParams(decontam_ngram=0))
    with pytest.raises(ParamsError, match=r"curate\.decontam_threshold must be in \(0, 1\]"):
        Decontaminate.from_params(decontam_key, CurateParams(decontam_threshold=0.0))
