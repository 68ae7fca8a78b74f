"""Stage outputs read back by type and by name (issue 26, item 8).

Types: a Parquet file whose columns were all cast to text has every column a stage wants, by
name; it must still be one line naming the file and the column, a ``bad_input_file`` rejection,
and the good files go on, in validate, curate, export, report and evaluate, never a traceback.

Names: Beam's FileSystems read ``[``, ``*`` and ``?`` as glob characters, so an output named
``exp[1]*?`` read back empty. Written, counted, read by the next stage, stats and the report, on
local disk and on a real S3 endpoint (SeaweedFS).
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from conftest import run_cli, write_params
from curated_factory import curated_tasks, curated_trajectories, make_task, write_curated
from s3_store import BUCKET, objects, seaweedfs
from trajforge.pipelines.runtime.outputs import compatible
from trajforge.schemas.candidate import Candidate, CandidateMeta
from trajforge.schemas.storage import escape_glob, match, write_records

pytestmark = pytest.mark.s3

GLOBBY = "exp[1]*?"


def _as_text(path: Path, into: Path) -> None:
    """``path``'s table with every column cast to text (what a careless export does)."""
    table = pq.read_table(path)
    pq.write_table(
        pa.table({n: pa.array([str(v) for v in table.column(n).to_pylist()], pa.string())
                  for n in table.column_names}),
        into,
    )  # fmt: skip


def _named(proc: subprocess.CompletedProcess, stage: str, name: str, column: str) -> None:
    assert "Traceback" not in proc.stderr, proc.stderr
    lines = [line for line in proc.stderr.splitlines() if name in line]
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith(f"{stage}: ") and f"column {column} is string" in lines[0], lines


def _rejected(out: Path) -> list[str]:
    table = pq.read_table(out / "rejections").to_pylist()
    return sorted(Path(r["input"]).name for r in table if r["reason"] == "bad_input_file")


def test_compatible_types():
    s, ls = pa.string(), pa.large_string()
    assert compatible(ls, s) and compatible(pa.int32(), pa.int64()) and compatible(pa.null(), s)
    assert compatible(pa.list_(pa.field("element", s)), pa.list_(s))
    assert compatible(pa.dictionary(pa.int8(), s), s) and compatible(pa.int64(), pa.float64())
    pairs = pa.list_(pa.struct([("key", s), ("value", s)]))
    assert compatible(pairs, pa.map_(s, s))  # an export's provenance
    assert compatible(pa.struct([("a", s)]), pa.struct([("a", ls), ("b", pa.int32())]))
    for found, wanted in [
        (s, pa.list_(s)), (s, pa.map_(s, pa.float64())), (s, pa.bool_()), (s, pa.float64()),
        (pa.float64(), pa.int64()), (pa.list_(pa.int64()), pa.list_(s)),
        (pa.struct([("a", pa.int64())]), pa.struct([("a", s)])), (s, pa.struct([("a", s)])),
    ]:  # fmt: skip
        assert not compatible(found, wanted), (found, wanted)


def test_all_text_columns_are_one_line_and_the_good_files_go_on(tmp_path):
    write_params(tmp_path / "params.yaml", tmp_path / "cache")
    tasks = curated_tasks()
    curated = write_curated(tmp_path / "in", tasks, curated_trajectories(tasks))
    _as_text(next((curated / "tasks").glob("*.parquet")), curated / "tasks" / "part-text.parquet")
    runs = curated / "trajectories"
    _as_text(next(runs.glob("*.parquet")), runs / "part-text.parquet")

    proc = run_cli("curate", "--input", "in", "--output", "cur", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    _named(proc, "curate", "tasks/part-text.parquet", "FAIL_TO_PASS")
    _named(proc, "curate", "trajectories/part-text.parquet", "messages")
    assert _rejected(tmp_path / "cur") == ["part-text.parquet"] * 2
    assert pq.read_table(tmp_path / "cur" / "tasks").num_rows > 0  # the good files went on

    proc = run_cli("export", "--input", "in", "--output", "ds", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    _named(proc, "export", "tasks/part-text.parquet", "FAIL_TO_PASS")

    proc = run_cli("report", "--stage", "curate=in", "--output", "r.html", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    _named(proc, "report", "tasks/part-text.parquet", "difficulty")
    _named(proc, "report", "trajectories/part-text.parquet", "resolved")
    assert "2 unreadable files left out" in (tmp_path / "r.html").read_text()

    (tmp_path / "p.jsonl").write_text('{"instance_id": "elsewhere", "model_patch": "x"}\n')
    proc = run_cli("evaluate", "--tasks", "in", "--predictions", "p.jsonl", "--output", "ev",
                   "--sandbox", "local", cwd=tmp_path)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    _named(proc, "evaluate", "tasks/part-text.parquet", "FAIL_TO_PASS")
    assert "evaluate: 1 predictions, 0 resolved" in proc.stdout


def test_validate_sets_aside_candidates_cast_to_text(tmp_path):
    write_params(tmp_path / "params.yaml", tmp_path / "cache")
    candidate = Candidate(
        candidate_id="c1", repo="local/gone", source=str(tmp_path / "gone"),
        base_commit="0" * 40, patch="", test_patch="", origin="commit",
        created_at="2024-01-01T00:00:00Z",
        meta=CandidateMeta("0" * 40, "m", "2024-01-01T00:00:00Z", 1, 1, 1),
    )  # fmt: skip
    table = tmp_path / "mined" / "candidates"
    write_records(str(table / "part-0.parquet"), [candidate], Candidate.ARROW_SCHEMA)
    _as_text(table / "part-0.parquet", table / "part-text.parquet")
    proc = run_cli("validate", "--input", "mined", "--output", "out", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    _named(proc, "validate", "part-text.parquet", "meta")
    reasons = sorted(
        r["reason"] for r in pq.read_table(tmp_path / "out" / "rejections").to_pylist()
    )
    assert reasons == ["bad_input_file", "repo_missing"]  # the good file went on


# names with glob characters -------------------------------------------------------------------


def test_an_escaped_name_matches_exactly_its_file(tmp_path, recwarn):
    names = ("a[1]", "b*", "c?", "[!x]", "plain", "a]b", "x[[]", "a1", "bb", "cc")
    for name in names:
        (tmp_path / name).write_text(name)
    for name in names:
        found = [m.path for m in match(escape_glob(str(tmp_path / name)))]
        assert found == [str(tmp_path / name)], (name, found)
    assert not [w for w in recwarn if issubclass(w.category, FutureWarning)]


def _chain(tmp_path: Path, out: str, env: dict[str, str] | None = None) -> None:
    """curate into ``out``; its summary counts what it wrote; the next stage, stats and the
    report read it back."""
    write_params(tmp_path / "params.yaml", tmp_path / "cache")
    write_curated(tmp_path / "in", [make_task("acme/alpha", 1), make_task("acme/beta", 2)])
    first = run_cli("curate", "--input", "in", "--output", out, cwd=tmp_path, env=env)
    assert first.returncode == 0 and "Traceback" not in first.stderr, first.stderr
    assert "2 inputs, 2 kept, 0 rejected" in first.stderr, first.stderr
    second = run_cli("curate", "--input", out, "--output", f"{out}-again", cwd=tmp_path, env=env)
    assert "2 inputs, 2 kept, 0 rejected" in second.stderr, second.stderr
    stats = run_cli("stats", out, cwd=tmp_path, env=env)
    assert stats.returncode == 0 and "tasks               2 rows" in stats.stdout, stats.stdout
    report = run_cli("report", "--stage", f"curate={out}", "--output", "r.html", cwd=tmp_path,
                     env=env)  # fmt: skip
    assert report.returncode == 0 and "Traceback" not in report.stderr, report.stderr


def test_a_local_output_named_with_glob_characters_reads_back(tmp_path):
    _chain(tmp_path, f"runs/{GLOBBY}/cur")
    assert (tmp_path / "runs" / GLOBBY / "cur" / "tasks").is_dir()
    # a sibling that the name, read as a pattern, would match is never read or removed
    (tmp_path / "runs" / "exp1ab").mkdir()
    _chain(tmp_path, f"runs/{GLOBBY}/cur")
    assert (tmp_path / "runs" / "exp1ab").is_dir()


@pytest.fixture(scope="module")
def s3(tmp_path_factory: pytest.TempPathFactory):
    with seaweedfs(tmp_path_factory.mktemp("seaweedfs")) as env:
        yield env


def test_an_s3_output_named_with_glob_characters_reads_back(s3, tmp_path):
    _chain(tmp_path, f"s3://{BUCKET}/{GLOBBY}/cur", env=s3)
    written = objects(s3, f"{GLOBBY}/cur")
    assert "summary.json" in written and any(n.startswith("tasks/") for n in written)
