"""Reach in levels in a validate summary: the per-level sets of repository names fold into one
line and the repositories that stopped short, with the level each stopped after."""

from __future__ import annotations

from trajforge.pipelines.runtime.reach import fold, passed_any
from trajforge.schemas.test_run import TestRun, TestStatus


def test_levels_fold_into_one_line_and_the_repositories_short_of_a_task() -> None:
    extra: dict[str, object] = {
        "reach.seen": ["a/app", "b/lib", "c/none", "d/keys"],
        "reach.installed": ["a/app", "b/lib", "d/keys"],
        "reach.collected": ["b/lib", "d/keys"],
        "reach.clean": "b/lib",  # one value comes back as a plain string
        "reach.task": "b/lib",
        "images_built": 3,
    }
    fold(extra)
    assert extra == {
        "images_built": 3,
        "reach": "4 repositories: installed 3, collected 2, clean 1, task 1",
        "reach_short": [
            "a/app: stopped after installed",
            "c/none: stopped after detection",
            "d/keys: stopped after collected",
        ],
    }


def test_a_summary_without_levels_is_left_alone() -> None:
    extra: dict[str, object] = {"images_built": 1}
    fold(extra)
    assert extra == {"images_built": 1}


def _run(state: str, *statuses: str) -> TestRun:
    tests = tuple(TestStatus(f"t.py::test_{i}", s) for i, s in enumerate(statuses))
    return TestRun("r", "c", "p", state, 0, (), 1, True, False, 0.1, tests, (), "digest", "log")


def test_a_clean_pass_needs_a_passing_test_at_the_clean_state() -> None:
    assert passed_any([_run("clean", "FAILED", "PASSED")])
    assert passed_any([_run("base", "PASSED")])
    assert not passed_any([_run("clean", "FAILED", "ERROR")])
    assert not passed_any([_run("gold", "PASSED")])
