"""The before/after report of the EnvBench sample reads environments.py's own --out document
(its Outcome and Repo, serialised as it serialises them) and names each shortfall's class."""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path

import envbench_report
import environments
import pytest
from environments import Outcome, Repo
from repo_factory import RepoBuilder
from trajforge.schemas.params import load_params

PIN = "install_failed: ResolutionImpossible: numpy==1.19.5 vs pandas>=2"


def document(outcomes: dict[str, Outcome]) -> dict:
    """The shape environments.py --out writes for --modes new."""
    return {
        "repositories": [
            {**asdict(Repo(name, f"mirrors/{name}", "0" * 40)), "new": asdict(outcome)}
            for name, outcome in outcomes.items()
        ]
    }


def write(path: Path, outcomes: dict[str, Outcome]) -> str:
    path.write_text(json.dumps(document(outcomes)))
    return str(path)


BEFORE = {
    "pinned": Outcome("new", reason="install_failed", detail=PIN, seconds=120.0),
    "no-tests": Outcome("new", built=True, reason="no_tests", detail="no tests ran", seconds=60.0),
    "tasked": Outcome(
        "new", reached=True, built=True, collected=5, passed=5, tasks=2, seconds=240.0
    ),
    "no-bug": Outcome(
        "new", reached=True, built=True, collected=3, passed=3, task_detail="0 of 3 bugs kept"
    ),
}


def test_levels_count_no_tests_as_collected_and_stop_at_the_first_missed() -> None:
    figures = envbench_report.summary(document(BEFORE))
    assert figures["levels"] == {"installed": 3, "collected": 3, "clean_pass": 2, "task": 1}
    assert figures["no_tests"] == 1
    assert figures["median_minutes"] == 1.5  # 2, 1, 4, 0 minutes
    assert figures["shortfalls"]["pinned"] == ("installed", "install_failed", PIN)
    assert figures["shortfalls"]["no-bug"] == ("task", "no_task", "0 of 3 bugs kept")
    assert "tasked" not in figures["shortfalls"]


def test_each_shortfall_gets_the_issue_class_its_reason_or_detail_names() -> None:
    assert envbench_report.cause_class("install_failed", PIN) == "unresolvable pins"
    assert envbench_report.cause_class("no_tests", "") == "no tests at the newest commit"
    assert envbench_report.cause_class("no_supported_python", "") == "Python not offered"
    assert envbench_report.cause_class("timeout_at_clean", "") == "hanging test"
    assert envbench_report.cause_class("wrong_code_under_test", "") == (
        "project is a runner dependency"
    )
    scm = "metadata: LookupError: setuptools-scm was unable to detect version"
    assert envbench_report.cause_class("install_failed", scm) == "VCS version without git"
    echo = "error: The command '/bin/sh -ec if [ -s /ca.crt ]; then ...' returned 1"
    assert envbench_report.cause_class("install_failed", echo) == "hidden cause"
    assert envbench_report.cause_class("collection_failed", "ImportError: x") == "other"


def test_before_and_after_print_side_by_side(tmp_path: Path, capsys) -> None:
    after = {**BEFORE, "pinned": Outcome("new", reached=True, built=True, collected=1, tasks=1)}
    code = envbench_report.main(
        [write(tmp_path / "before.json", BEFORE), write(tmp_path / "after.json", after)]
    )
    out = capsys.readouterr().out
    assert code == 0
    assert "clean_pass        2 ( 50%)         3 ( 75%)" in out
    assert "unresolvable pins (1)" in out.split("after:")[0]
    assert "pinned:" not in out.split("after:")[1]


def test_a_file_that_is_not_a_benchmark_document_is_one_line(tmp_path: Path, capsys) -> None:
    other = tmp_path / "summary.json"
    other.write_text('{"stage": "validate"}')
    assert envbench_report.main([str(other)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "--modes new --tasks --out" in err


@pytest.mark.docker
def test_a_run_leaves_its_finished_repositories_in_the_partial_file(tmp_path: Path) -> None:
    """A real repository whose Python no base image offers stops at detection, before any build:
    its row is in OUT.partial as soon as it is done, and the report reads that file."""
    builder = RepoBuilder(tmp_path / "future")
    toml = '[project]\nname = "future"\nversion = "1.0"\nrequires-python = ">=4.0"\n'
    head = builder.commit(
        "init", {"pyproject.toml": toml, "tests/test_a.py": "def test_a(): pass\n"}
    )
    repo = Repo("future", str(builder.path), head)
    params = load_params(None)
    partial = tmp_path / "figures.json.partial"

    environments.bench_repo(repo, ["new"], params, 60.0, tasks=True, partial=str(partial))

    rows = json.loads(partial.read_text())["repositories"]
    assert [(r["name"], r["new"]["reason"]) for r in rows] == [("future", "no_supported_python")]
    assert envbench_report.summary({"repositories": rows})["levels"]["installed"] == 0


def test_no_tests_because_no_module_imports_is_not_collected() -> None:
    """The older wording of a suite whose every module failed to import is no collection."""
    outcome = Outcome(
        "new", built=True, reason="no_tests",
        detail="x@1: pytest collects no tests here (2 test modules cannot be collected)",
    )  # fmt: skip
    figures = envbench_report.summary(document({"uncollectable": outcome}))
    assert figures["levels"] == {"installed": 1, "collected": 0, "clean_pass": 0, "task": 0}
    assert figures["no_tests"] == 0
    assert figures["shortfalls"]["uncollectable"][0] == "collected"
