"""describe, export and import-trajectories as composite PTransforms, on Beam's TestPipeline.

Real inputs only: the calc repository the tests build, curated Parquet tables as curate writes
them, and trajectory files in the nebius format. The runner is the in-process FnApiRunner (the
default runner would try to download Prism).
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import apache_beam as beam
from apache_beam.runners.portability.fn_api_runner import FnApiRunner
from apache_beam.testing.test_pipeline import TestPipeline as BeamTestPipeline
from apache_beam.testing.util import assert_that, equal_to
from curated_factory import curated_tasks, curated_trajectories, make_task, write_curated
from test_import_trajectories import nebius_rows
from trajforge.generators.trajectories.importer import Verdict
from trajforge.pipelines.stages.describe import DescribeTasks
from trajforge.pipelines.stages.export import ExportDataset, ExportReport
from trajforge.pipelines.stages.import_trajectories import ImportTrajectories
from trajforge.schemas.params import ExportParams, Params
from trajforge.schemas.test_run import TestRun, TestStatus

F2P = ("tests/test_ops.py::test_add",)
FAILURE_LOG = (
    "=================================== FAILURES ===================================\n"
    "___________________________________ test_add ___________________________________\n"
    "\n    def test_add():\n>       assert add(2, 2) == 4\nE       assert 0 == 4\n"
    "=========================== short test summary info ============================\n"
)


def beam_pipeline() -> BeamTestPipeline:
    """A TestPipeline on the in-process runner: it runs, and checks every assert_that, on exit."""
    return BeamTestPipeline(runner=FnApiRunner())


# --- import-trajectories -----------------------------------------------------------------------


def test_import_trajectories_keeps_the_first_read_and_grades_by_report(tmp_path):
    lines = "".join(json.dumps(row) + "\n" for row in nebius_rows())
    first, second = tmp_path / "z-first.jsonl", tmp_path / "a-second.jsonl"
    first.write_text(lines)
    second.write_text(lines)  # the same two runs again: duplicates, though its name sorts first
    (tmp_path / "blank.jsonl").write_text("\n")
    (tmp_path / "bad.jsonl").write_text(lines.splitlines()[0][:40] + "\n")
    files = [first, second, tmp_path / "blank.jsonl", tmp_path / "bad.jsonl", tmp_path / "gone"]
    verdicts = {"local__calc-3": Verdict(False)}  # the report says the instance is unresolved

    def trajectories(got: list[Any]) -> None:
        assert len(got) == 2 and len({t.trajectory_id for t in got}) == 2, got
        assert {(t.instance_id, t.resolved, t.reward) for t in got} == {
            ("local__calc-3", False, 0.0)
        }
        assert {t.exit_status for t in got} == {"submitted", "exit_cost"}

    def rejections(got: list[Any]) -> None:
        found = sorted((Path(r.input).name, r.reason, r.stage) for r in got)
        assert found == [
            ("a-second.jsonl", "duplicate", "import"),
            ("a-second.jsonl", "duplicate", "import"),
            ("bad.jsonl:1", "malformed_json", "import"),
            ("blank.jsonl", "empty", "import"),
            ("gone", "unreadable", "import"),
        ], found
        assert all(r.detail.startswith(r.input) and "\n" not in r.detail for r in got)

    with beam_pipeline() as p:
        numbered = p | beam.Create([(n, str(path)) for n, path in enumerate(files)])
        out = numbered | ImportTrajectories("nebius", verdicts)
        assert_that(out["trajectories"], trajectories, label="Trajectories")
        assert_that(out["rejections"], rejections, label="Rejections")


# --- export ------------------------------------------------------------------------------------

EXPORT = ExportParams(name="trajforge-test", shard_rows=2, validation_fraction=0.3, seed=7)


def test_export_dataset_writes_gated_versioned_configs(tmp_path):
    tasks = curated_tasks()
    curated = write_curated(tmp_path / "curated", tasks, curated_trajectories(tasks))
    duplicated = write_curated(tmp_path / "again", tasks[:1])  # one instance_id twice
    good, bad = tmp_path / "good", tmp_path / "bad"

    def passed(got: list[ExportReport]) -> None:
        [report] = got
        assert report.passed and report.version, report
        assert set(report.counts) == {"tasks", "sft", "sft_xml", "rl"}
        assert sum(report.counts["tasks"].values()) == 6
        assert report.counts["tasks"].keys() == {"train", "validation"}
        assert set(report.unavailable) == {"explore", "transitions"}
        assert report.dropped == {
            "trajectory_unresolved": 1,
            "trajectory_unverified": 1,
            "trajectory_without_task": 1,
        }

    def failed(got: list[ExportReport]) -> None:
        [report] = got
        assert not report.passed and report.version == ""
        failures = [f for g in report.gates for f in g.failures]
        assert any("expect_column_values_to_be_unique(instance_id)" in f for f in failures)

    with beam_pipeline() as p:
        good_report = (
            p
            | "GoodInputs" >> beam.Create([(str(curated),)])
            | "ExportGood" >> ExportDataset(str(good), EXPORT)
        )
        bad_report = (
            p
            | "BadInputs" >> beam.Create([(str(curated), str(duplicated))])
            | "ExportBad" >> ExportDataset(str(bad), EXPORT, configs=("tasks", "rl"))
        )
        assert_that(good_report, passed, label="Passed")
        assert_that(bad_report, failed, label="Failed")

    manifest = json.loads((good / "version.json").read_text())
    digests = {
        str(p.relative_to(good)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in good.glob("*/*.parquet")
    }
    assert manifest["files"] == digests and len(digests) == sum(
        len(list((good / c).glob("*.parquet"))) for c in ("tasks", "sft", "sft_xml", "rl")
    )
    assert f"`{manifest['version']}`" in (good / "README.md").read_text()
    assert (good / "data_docs" / "index.html").is_file()
    assert not (bad / "README.md").exists() and not (bad / "version.json").exists()
    assert (bad / "data_docs" / "index.html").is_file()  # the caller moves it beside the output


# --- describe ----------------------------------------------------------------------------------


def _base_run(candidate_id: str) -> TestRun:
    return TestRun(
        run_id=f"run-{candidate_id}",
        candidate_id=candidate_id,
        profile_id="p1",
        state="base",
        attempt=0,
        selection=(),
        exit_code=1,
        suite_ran=True,
        timed_out=False,
        duration_s=0.1,
        tests=(TestStatus(F2P[0], "FAILED"), TestStatus("tests/test_ops.py::test_mul", "PASSED")),
        collection_errors=(),
        log_digest="0" * 64,
        log=FAILURE_LOG,
    )


def test_describe_tasks_writes_statements_and_rejects_what_it_cannot_describe(calc_repo, tmp_path):
    path, shas = calc_repo
    task = make_task(
        "local/calc",
        1,
        source=str(path),
        base_commit=shas["initial"],
        problem_statement="",
        FAIL_TO_PASS=F2P,
        test_patch="",
    )
    no_repo = make_task("local/gone", 2, source=str(tmp_path / "gone"), problem_statement="")
    described = make_task("local/calc", 3, source=str(path))  # has a statement: left as it is
    params = Params(cache_dir=str(tmp_path / "cache")).check()  # no endpoint: the template
    strict = Params(cache_dir=str(tmp_path / "cache")).check()
    strict.describe.min_chars = 10_000  # no statement, the template's included, is that long

    def kept(got: list[Any]) -> None:
        by_id = {t.instance_id: t for t in got}
        assert set(by_id) == {task.instance_id, described.instance_id}, by_id
        statement = by_id[task.instance_id].problem_statement
        assert "assert add(2, 2) == 4" in statement and "test_add" not in statement
        assert by_id[task.instance_id].provenance["problem_statement"] == "template"
        assert by_id[described.instance_id] == described

    def statements(got: list[Any]) -> None:
        assert [(s.instance_id, s.writer, s.accepted, s.reason) for s in got] == [
            (task.instance_id, "template", True, "template")
        ]

    def rejected(got: list[Any]) -> None:
        assert [(r.input, r.stage, r.reason) for r in got] == [
            (no_repo.instance_id, "describe", "repo_missing")
        ]
        assert str(tmp_path / "gone") in got[0].detail

    def strict_rejected(got: list[Any]) -> None:
        by_id = {r.input: r for r in got}
        assert {i: r.reason for i, r in by_id.items()} == {
            task.instance_id: "no_statement",
            no_repo.instance_id: "repo_missing",
        }
        assert "template empty" in by_id[task.instance_id].detail

    def strict_statements(got: list[Any]) -> None:
        assert [(s.writer, s.accepted, s.reason) for s in got] == [("template", False, "empty")]

    with beam_pipeline() as p:
        tasks = p | "Tasks" >> beam.Create([task, no_repo, described])
        runs = p | "Runs" >> beam.Create([_base_run(task.candidate_id)])
        out = (tasks, runs) | "Describe" >> DescribeTasks(params)
        assert_that(out["tasks"], kept, label="Kept")
        assert_that(out["statements"], statements, label="Statements")
        assert_that(out["rejections"], rejected, label="Rejected")
        strict_out = (tasks, runs) | "DescribeStrict" >> DescribeTasks(strict)
        assert_that(strict_out["tasks"], equal_to([described]), label="StrictKept")
        assert_that(strict_out["statements"], strict_statements, label="StrictStatements")
        assert_that(strict_out["rejections"], strict_rejected, label="StrictRejected")
