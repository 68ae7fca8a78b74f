"""The label check: a dataset's FAIL_TO_PASS / PASS_TO_PASS against ours, test by test.

Unit tests of the classifier on hand-built runs and tasks, the record's round trip, the summary
figures and the report section from a written table; then one run of the real ``trajforge
validate`` (real Docker) on candidates written here with planted disagreements.
"""

from __future__ import annotations

import dataclasses
import json
import subprocess
from pathlib import Path

import polars as pl
import pyarrow.parquet as pq
import pytest
from conftest import run_cli, write_params
from repo_factory import COUNTER, OPS_BUGGY, OPS_FIXED, TESTS_BASE, RepoBuilder, pyproject
from trajforge.pipelines.report.data import (
    LABEL_CHECK_COLUMNS,
    label_class_counts,
    label_differences,
    label_figures_of,
)
from trajforge.pipelines.report.html import write_report
from trajforge.pipelines.runtime.outputs import read_frame
from trajforge.schemas.candidate import Candidate, CandidateMeta, DatasetLabels
from trajforge.schemas.label_check import LabelCheck, LabelClasses
from trajforge.schemas.records import check_schema
from trajforge.schemas.rejection import Rejection
from trajforge.schemas.storage import read_records, write_records
from trajforge.schemas.task_instance import TaskInstance
from trajforge.schemas.test_run import TestRun, TestStatus
from trajforge.verifiers.validation.candidate import ValidationResult
from trajforge.verifiers.validation.labels import check_labels, class_counts

pytestmark = pytest.mark.docker

F = "tests/test_ops.py::"


def _run(state: str, attempt: int, statuses: dict[str, str], selection=(), suite_ran=True):
    tests = tuple(TestStatus(t, s) for t, s in sorted(statuses.items()))
    return TestRun(
        f"{state}-{attempt}", "c1", "p1", state, attempt, tuple(selection), 1, suite_ran, False,
        0.1, tests, (), "d" * 64, "log",
    )  # fmt: skip


def _task(f2p, p2p, flaky=()) -> TaskInstance:
    return TaskInstance(
        "acme__calc-1", "acme/calc", "abc", "p", "tp", "", "", "2024-01-01", tuple(f2p),
        tuple(p2p), "abc", "img", "pytest", "commit", "p1", "c1", "/src", tuple(flaky), None,
    )  # fmt: skip


def _candidate(f2p=(), p2p=(), labels=True) -> Candidate:
    found = DatasetLabels("swe-bench", "acme__calc-1", tuple(f2p), tuple(p2p)) if labels else None
    return Candidate(
        "c1", "acme/calc", "/src", "abc", "p", "tp", "commit", "2024-01-01", labels=found
    )


BASE = {F + "a": "FAILED", F + "x": "FAILED", F + "b": "PASSED", F + "p": "PASSED",
        F + "w": "PASSED", F + "s": "SKIPPED", F + "q": "FAILED", F + "f": "FAILED"}  # fmt: skip
GOLD = {F + "a": "PASSED", F + "x": "PASSED", F + "b": "PASSED", F + "p": "PASSED",
        F + "w": "PASSED", F + "s": "SKIPPED", F + "q": "FAILED", F + "f": "PASSED"}  # fmt: skip


def _kept(task: TaskInstance, base=BASE, gold=GOLD) -> ValidationResult:
    runs = (_run("base", 0, base), _run("gold", 0, gold))
    return ValidationResult(task, None, runs)


def test_no_labels_no_check():
    result = _kept(_task([F + "a"], [F + "b"]))
    assert check_labels(_candidate(labels=False), result) is None


def test_same_lists_are_confirmed():
    result = _kept(_task([F + "a", F + "x"], [F + "b"], flaky=[F + "f"]))
    check = check_labels(_candidate([F + "x", F + "a"], [F + "b"]), result)
    assert check is not None
    assert check.verdict == "confirmed" and check.reason == ""
    assert check.label("FAIL_TO_PASS") == LabelClasses(agrees=(F + "a", F + "x"))
    assert check.label("PASS_TO_PASS") == LabelClasses(agrees=(F + "b",))
    assert check.detail == "FAIL_TO_PASS: 2 agree; PASS_TO_PASS: 1 agree"
    assert (check.instance_id, check.dataset, check.repo) == (
        "acme__calc-1",
        "swe-bench",
        "acme/calc",
    )


def test_every_class_with_what_we_saw():
    # Ours: F2P a, x; P2P b, p; flaky f. Theirs: F2P a, f (flaky), gone (absent), s (skipped),
    # p (our P2P), w (passes with the bug); P2P b, q (fails with the bug).
    task = _task([F + "a", F + "x"], [F + "b", F + "p"], flaky=[F + "f"])
    theirs_f2p = [F + t for t in ("a", "f", "gone", "s", "p", "w")]
    check = check_labels(_candidate(theirs_f2p, [F + "b", F + "q"]), _kept(task))
    assert check is not None and check.verdict == "differs"
    f2p, p2p = check.FAIL_TO_PASS, check.PASS_TO_PASS
    assert f2p.agrees == (F + "a",)
    assert f2p.flaky_here == (F + "f",)
    assert f2p.not_run_here == (F + "gone", F + "s")
    assert f2p.they_missed == (F + "x",)
    assert f2p.we_missed == (F + "p", F + "w")
    assert f2p.why == {
        F + "gone": "not in our run at base",
        F + "s": "skipped at base here",
        F + "p": "our PASS_TO_PASS",
        F + "w": "passes with the bug here",
    }
    assert p2p.agrees == (F + "b",) and p2p.they_missed == (F + "p",)
    assert p2p.we_missed == (F + "q",) and p2p.why == {
        F + "q": "FAILED with the bug and FAILED without it here"
    }
    assert check.detail == (
        "FAIL_TO_PASS: 1 agree, 1 flaky here, 2 not run here, 1 they missed, 2 we missed; "
        "PASS_TO_PASS: 1 agree, 1 they missed, 1 we missed"
    )
    assert class_counts(check) == {
        "agrees": 2, "flaky_here": 1, "not_run_here": 2, "they_missed": 2, "we_missed": 3,
        "name_unmapped": 0,
    }  # fmt: skip


def test_their_f2p_that_is_our_p2p_and_fails_after_the_fix():
    gold = {**GOLD, F + "a": "ERROR"}
    task = _task([F + "x"], [F + "b"])
    check = check_labels(_candidate([F + "a", F + "x", F + "b"], []), _kept(task, gold=gold))
    assert check is not None
    assert check.FAIL_TO_PASS.we_missed == (F + "a", F + "b")
    assert check.FAIL_TO_PASS.why == {
        F + "a": "ERROR with the fix here",
        F + "b": "our PASS_TO_PASS",
    }
    assert check.PASS_TO_PASS.they_missed == (F + "b",)


def test_missing_at_gold_is_not_run_here():
    gold = {k: v for k, v in GOLD.items() if k != F + "a"}
    check = check_labels(_candidate([F + "a", F + "x"], []), _kept(_task([F + "x"], []), gold=gold))
    assert check is not None
    assert check.FAIL_TO_PASS.not_run_here == (F + "a",)
    assert check.FAIL_TO_PASS.why == {F + "a": "not in our run at gold"}


def test_rejected_candidate_is_classed_from_its_runs():
    # Rejected for a PASS->FAIL (q passes at base, fails at gold); a reran FAIL->PASS flips.
    base = {**BASE, F + "q": "PASSED"}
    runs = (
        _run("base", 0, base),
        _run("gold", 0, GOLD),
        _run("base", 1, {F + "a": "FAILED", F + "f": "FAILED"}, selection=[F + "a", F + "f"]),
        _run("gold", 1, {F + "a": "PASSED", F + "f": "FAILED"}, selection=[F + "a", F + "f"]),
    )
    rejection = Rejection("c1", "validate", "pass_to_fail", "the fix breaks 1 test(s)")
    result = ValidationResult(None, rejection, runs)
    check = check_labels(_candidate([F + "a", F + "f", F + "w"], [F + "b", F + "q"]), result)
    assert check is not None
    assert (check.verdict, check.reason) == ("rejected", "pass_to_fail")
    assert check.FAIL_TO_PASS.agrees == (F + "a",)
    assert check.FAIL_TO_PASS.flaky_here == (F + "f",)
    assert check.FAIL_TO_PASS.we_missed == (F + "w",)
    assert check.FAIL_TO_PASS.they_missed == (F + "x",)  # FAIL->PASS in our runs too
    assert check.PASS_TO_PASS.agrees == (F + "b",)
    assert check.PASS_TO_PASS.we_missed == (F + "q",)
    assert check.PASS_TO_PASS.why == {F + "q": "FAILED with the fix here"}
    assert check.detail.startswith("rejected here (pass_to_fail); FAIL_TO_PASS: 1 agree,")


def test_rejected_at_base_keeps_what_base_shows():
    rejection = Rejection("c1", "validate", "no_failing_test_at_base", "every test passes")
    result = ValidationResult(None, rejection, (_run("base", 0, BASE),))
    check = check_labels(_candidate([F + "a", F + "w"], [F + "b", F + "q"]), result)
    assert check is not None and check.verdict == "rejected"
    assert check.FAIL_TO_PASS.we_missed == (F + "w",)  # passes with the bug: no fix run needed
    assert check.FAIL_TO_PASS.not_run_here == (F + "a",)
    assert check.FAIL_TO_PASS.why[F + "a"] == "no run with the fix here"
    assert check.PASS_TO_PASS.we_missed == (F + "q",)
    assert check.PASS_TO_PASS.not_run_here == (F + "b",)


def test_no_runs_at_all():
    rejection = Rejection("c1", "validate", "infra_failure", "the sandbox broke twice")
    check = check_labels(_candidate([F + "a"], [F + "b"]), ValidationResult(None, rejection, ()))
    assert check is not None
    assert check.FAIL_TO_PASS.not_run_here == (F + "a",)
    assert check.PASS_TO_PASS.why == {F + "b": "no test run here"}
    assert check.detail == (
        "rejected here (infra_failure); FAIL_TO_PASS: 1 not run here; PASS_TO_PASS: 1 not run here"
    )


def test_injected_bug_has_no_gold_run_of_its_own():
    """The mutant path reports the bug's runs (full, targeted) only; the task's lists decide."""
    runs = (_run("base", 0, BASE), _run("base", 1, {F + "a": "FAILED"}, selection=[F + "a"]))
    task = _task([F + "a"], [F + "b", F + "w"])
    check = check_labels(
        _candidate([F + "a", F + "q"], [F + "b", F + "w"]), ValidationResult(task, None, runs)
    )
    assert check is not None and check.verdict == "differs"
    assert check.FAIL_TO_PASS.we_missed == (F + "q",)
    assert check.FAIL_TO_PASS.why == {F + "q": "FAILED with the bug here; not our FAIL_TO_PASS"}


def test_covering_answer_reads_the_tests_it_left_out_as_at_clean():
    """A bug the covering tests decided ran only those (and the tests the dataset names); a test
    it left out is read as it ran at clean, as its PASS_TO_PASS is, not as absent."""
    base = _run("base", 0, {F + "a": "FAILED", F + "b": "PASSED"}, selection=[F + "a", F + "b"])
    clean = _run("clean", 0, {F + "a": "PASSED", F + "b": "PASSED", F + "e": "ERROR"})
    task = _task([F + "a"], [F + "b"])
    task = dataclasses.replace(task, provenance={"mutant_runs": "covering"})
    result = ValidationResult(task, None, (base,))
    check = check_labels(_candidate([F + "a"], [F + "b", F + "e"]), result, (clean,))
    assert check is not None and check.PASS_TO_PASS.we_missed == (F + "e",)
    assert check.PASS_TO_PASS.why == {F + "e": "ERROR with the bug and ERROR without it here"}
    # the same row decided by a full run that did not list it: absent from our run at base
    full = dataclasses.replace(task, provenance={"mutant_runs": "audit"})
    check = check_labels(
        _candidate([F + "a"], [F + "b", F + "e"]), ValidationResult(full, None, (base,)), (clean,)
    )
    assert check is not None and check.PASS_TO_PASS.not_run_here == (F + "e",)


def _sample() -> LabelCheck:
    return LabelCheck(
        "c1", "acme__calc-1", "swe-bench", "acme/calc", "differs", "",
        "FAIL_TO_PASS: 1 agree, 1 we missed; PASS_TO_PASS: 1 not run here",
        LabelClasses(agrees=(F + "a",), we_missed=(F + "w",),
                     why={F + "w": "passes with the bug here"}),
        LabelClasses(not_run_here=(F + "s",), why={F + "s": "skipped at base here"}),
    )  # fmt: skip


def test_record_round_trips_through_parquet(tmp_path):
    check_schema(LabelCheck)
    path = str(tmp_path / "t.parquet")
    write_records(path, [_sample()], LabelCheck.ARROW_SCHEMA)
    assert pq.read_schema(path).names == LabelCheck.ARROW_SCHEMA.names
    assert read_records(LabelCheck, path) == [_sample()]


def _labels_stage(root: Path, checks: list[LabelCheck]) -> str:
    out = root / "validate"
    write_records(
        str(out / "label_check" / "part-00000-of-00001.parquet"), checks, LabelCheck.ARROW_SCHEMA
    )
    (out / "summary.json").write_text(
        json.dumps({"stage": "validate", "inputs": 2, "kept": 1, "rejected": {"x": 1}})
    )
    return str(out)


def test_summary_figures_and_report_section(tmp_path):
    confirmed = LabelCheck(
        "c0", "acme__calc-0", "swe-gym", "acme/calc", "confirmed", "",
        "FAIL_TO_PASS: 1 agree; PASS_TO_PASS: none", LabelClasses(agrees=(F + "a",)),
        LabelClasses(),
    )  # fmt: skip
    rejected = LabelCheck(
        "c2", "acme__calc-2", "nebius", "acme/calc", "rejected", "no_fail_to_pass",
        "rejected here (no_fail_to_pass); FAIL_TO_PASS: 1 we missed; PASS_TO_PASS: none",
        LabelClasses(we_missed=(F + "<b>",), why={F + "<b>": "FAILED with the fix here"}),
        LabelClasses(),
    )  # fmt: skip
    out = _labels_stage(tmp_path, [confirmed, _sample(), rejected])
    frame = read_frame([f"{out}/label_check/part-00000-of-00001.parquet"], LABEL_CHECK_COLUMNS)
    assert label_figures_of(frame) == {
        "labels confirmed": "1 of 3",
        "labels differ": 1,
        "labels rejected here": 1,
        "labels FAIL_TO_PASS": "2 agree, 2 we missed",
        "labels PASS_TO_PASS": "1 not run here",
    }
    assert label_figures_of(frame.head(0)) == {}
    assert label_class_counts(frame)["PASS_TO_PASS"]["not_run_here"] == 1
    assert label_differences(frame)["instance_id"].to_list() == ["acme__calc-2", "acme__calc-1"]
    html = Path(write_report({"validate": out}, str(tmp_path / "r.html"), "run")).read_text()
    section = html[html.index("<section id=labels>") :]
    section = section[: section.index("</section>")]
    assert "1 of 3 imported tasks confirmed" in section
    assert "acme__calc-2" in section and "acme__calc-1" in section
    assert "acme__calc-0" not in section  # confirmed rows are counted, not listed
    assert "passes with the bug here" in section
    assert "&lt;b&gt;" in section and "<b>" not in section  # test ids are escaped
    assert ">we missed</td><td class=n>2</td><td class=n>0</td>" in section


def test_report_without_imports_has_no_label_section(tmp_path):
    out = _labels_stage(tmp_path, [])
    html = Path(write_report({"validate": out}, str(tmp_path / "r.html"), "run")).read_text()
    assert "id=labels" not in html


# End to end: the real CLI, real Docker, candidates with labels written here.

TESTS_FIXED = (
    TESTS_BASE.replace("import mul", "import add, mul")
    + "\n\ndef test_add():\n    assert add(2, 3) == 5\n"
    + "\n\ndef test_neg_flaky():\n    from calc import ops\n    from tests.counter import bump\n"
    "    n = bump()\n    assert getattr(ops, 'neg', lambda a: a)(1) == -1 and n == 1\n"
)
SKIPPED = "import pytest\n\n\n@pytest.mark.skip(reason='not here')\ndef test_skipped():\n    pass\n"


def _diff(repo: RepoBuilder, a: str, b: str, *paths: str) -> str:
    """Exactly git's diff (``RepoBuilder.git`` strips its output: a last context line would go)."""
    command = ["git", "-C", str(repo.path), "diff", "--no-renames", a, b, "--", *paths]
    return subprocess.run(command, capture_output=True, text=True, check=True).stdout


def _imported(cid: str, repo: RepoBuilder, base: str, patch: str, test_patch: str, labels):
    return Candidate(
        cid, "acme/calc", str(repo.path), base, patch, test_patch, "commit", "2024-01-02",
        CandidateMeta("", "imported", "2024-01-02", 2, 10, 1), labels=labels,
    )  # fmt: skip


@pytest.fixture(scope="module")
def validated(docker_engine, tmp_path_factory):
    work = tmp_path_factory.mktemp("labels")
    repo = RepoBuilder(work / "calc")
    files: dict[str, str | None] = {
        "pyproject.toml": pyproject(), "calc/__init__.py": "", "calc/ops.py": OPS_BUGGY,
        "tests/__init__.py": "", "tests/counter.py": COUNTER, "tests/test_ops.py": TESTS_BASE,
        "tests/test_skip.py": SKIPPED,
    }  # fmt: skip
    base = repo.commit("Initial calc", files)
    fixed = OPS_FIXED + "\n\ndef neg(a):\n    return -a\n"
    fix = repo.commit("Fix add, add neg", {"calc/ops.py": fixed, "tests/test_ops.py": TESTS_FIXED})
    noop = repo.commit("A comment", {"calc/ops.py": "# nothing fixed\n" + OPS_BUGGY})
    patch, test_patch = _diff(repo, base, fix, "calc"), _diff(repo, base, fix, "tests")
    no_fix = _diff(repo, base, noop, "calc")  # only a comment: the same tests, nothing fixed
    skipped = "tests/test_skip.py::test_skipped"
    candidates = [
        _imported("cand-differs", repo, base, patch, test_patch, DatasetLabels(
            "swe-bench", "acme__calc-differs",
            FAIL_TO_PASS=(F + "test_add", F + "test_mul", F + "test_neg_flaky", F + "test_gone"),
            PASS_TO_PASS=(skipped,),
        )),
        _imported("cand-confirmed", repo, base, patch, test_patch, DatasetLabels(
            "swe-gym", "acme__calc-confirmed", (F + "test_add",), (F + "test_mul",),
        )),
        _imported("cand-rejected", repo, base, no_fix, test_patch, DatasetLabels(
            "nebius", "acme__calc-rejected", (F + "test_add",), (F + "test_mul",),
        )),
        _imported("cand-plain", repo, base, patch, test_patch, None),
    ]  # fmt: skip
    table = work / "imported" / "candidates" / "part-00000-of-00001.parquet"
    write_records(str(table), candidates, Candidate.ARROW_SCHEMA)
    write_params(work / "params.yaml", work / "cache")
    done = run_cli("validate", "--input", "imported", "--output", "out", cwd=work)
    assert done.returncode == 0, done.stderr
    checks = {
        c.candidate_id: c for c in read_records(LabelCheck, str(work / "out" / "label_check"))
    }
    return work, checks, done.stderr


def test_e2e_planted_disagreements_are_classed(validated):
    _, checks, _ = validated
    assert set(checks) == {"cand-differs", "cand-confirmed", "cand-rejected"}  # labels only
    differs = checks["cand-differs"]
    assert differs.verdict == "differs" and differs.instance_id == "acme__calc-differs"
    f2p, p2p = differs.FAIL_TO_PASS, differs.PASS_TO_PASS
    assert f2p.agrees == (F + "test_add",)
    assert f2p.flaky_here == (F + "test_neg_flaky",)  # flipped between identical runs here
    assert f2p.not_run_here == (F + "test_gone",)  # no such test here
    assert f2p.we_missed == (F + "test_mul",)  # a wrong label: it passes with the bug
    assert f2p.why == {
        F + "test_gone": "not in our run at base",
        F + "test_mul": "our PASS_TO_PASS",
    }
    assert p2p.not_run_here == ("tests/test_skip.py::test_skipped",)
    assert p2p.why == {"tests/test_skip.py::test_skipped": "skipped at base here"}
    assert p2p.they_missed == (F + "test_mul",)
    assert differs.detail == (
        "FAIL_TO_PASS: 1 agree, 1 flaky here, 1 not run here, 1 we missed; "
        "PASS_TO_PASS: 1 not run here, 1 they missed"
    )


def test_e2e_confirmed_and_rejected(validated):
    _, checks, _ = validated
    assert checks["cand-confirmed"].verdict == "confirmed"
    rejected = checks["cand-rejected"]
    assert (rejected.verdict, rejected.reason) == ("rejected", "no_fail_to_pass")
    assert rejected.FAIL_TO_PASS.we_missed == (F + "test_add",)
    assert rejected.FAIL_TO_PASS.why == {F + "test_add": "FAILED with the fix here"}
    assert rejected.PASS_TO_PASS.agrees == (F + "test_mul",)


def test_e2e_summary_line_and_tables(validated):
    work, _, stderr = validated
    assert "labels confirmed: 1 of 3" in stderr
    summary = json.loads((work / "out" / "summary.json").read_text())
    assert summary["labels confirmed"] == "1 of 3"
    assert summary["labels rejected here"] == 1 and summary["labels differ"] == 1
    tasks = pl.read_parquet(work / "out" / "tasks" / "*.parquet")
    assert "acme__calc-differs" in tasks["instance_id"].to_list()  # the dataset's id is kept
    again = run_cli("validate", "--input", "imported", "--output", "again", cwd=work)
    assert again.returncode == 0, again.stderr
    first = sorted((work / "out" / "label_check").glob("*.parquet"))
    second = sorted((work / "again" / "label_check").glob("*.parquet"))
    assert first and [f.read_bytes() for f in first] == [f.read_bytes() for f in second]
    report = run_cli("report", "--stage", "validate=out", "--output", "r.html", cwd=work)
    assert report.returncode == 0, report.stderr
    html = (work / "r.html").read_text()
    section = html[html.index("<section id=labels>") :]
    assert "1 of 3 imported tasks confirmed" in section and "acme__calc-differs" in section
