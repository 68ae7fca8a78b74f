"""Every kept task is solved by its own fix through the grader before it ships (issue 41, item 6).

A repository written here runs pytest with ``--doctest-modules`` (``pytest.ini``) and holds three
fixes, mined and validated once through the real CLI in real containers:

- ``add`` subtracts, fixed with its test: an ordinary task, ``gold_runs == "1/1"``;
- ``double`` adds one too many, caught by its doctest: FAIL_TO_PASS is the doctest
  ``calc/ops.py::calc.ops.double``, whose file is the module under test. The grader once reset it
  as a test file and the task's own fix scored ``no_source_changes`` (reward 0 for every correct
  fix); now the gold resolves through the grader and wrong fixes, doctest rewrites included, do not;
- ``sub`` with a test that writes its result beside itself (snapshot style): validate's runs may
  write there, the grader's test user may not (test folders are read-only to it), so the gold
  cannot pass the grader and the task is rejected ``gold_not_gradable``;
- ``neg`` with unittest classes as cachetools writes them: a mixin in another file holds
  ``test_neg_one``, one class of ``tests/test_neg.py`` inherits it and another overrides it. The
  seal once read the inherited one as a test that "does not run its file's code" (the file
  defines an undecorated ``test_neg_one``, in the other class), so this gold was
  ``forged_result`` on every run; a test's place in its file (``Class.name``) decides now.

From the first commit on, ``tests/test_order.py`` has a test that passes only after another one
ran (which fails everywhere, so it is never graded), as Django suites whose ungraded tests leave
rows behind: it is PASS_TO_PASS in validate's full runs and fails in the grader's run of the
graded tests alone. Each task ships without it (in ``flaky_tests``) instead of being rejected.
"""

from __future__ import annotations

import difflib
import json
import re
from pathlib import Path

import polars as pl
import pytest
from conftest import run_cli, write_params
from repo_factory import OPS_BUGGY, TEST_ADD, TESTS_BASE, RepoBuilder, pyproject
from trajforge.pipelines.evaluation.evaluator import Evaluator
from trajforge.pipelines.evaluation.task_rows import load_tasks
from trajforge.schemas.params import load_params
from trajforge.schemas.test_ids import is_grading_path, is_module_doctest
from trajforge.verifiers.languages.python.doctests import changed_doctests

DOCTEST = "calc/ops.py::calc.ops.double"
DOUBLE_BUGGY = '''

def double(a):
    """Twice ``a``.

    >>> double(4)
    8
    """
    return a + a + 1
'''
DOUBLE_FIXED = DOUBLE_BUGGY.replace("return a + a + 1", "return a + a")
SUB = "\n\ndef sub(a, b):\n    return a - b\n"
# A snapshot-style test: it writes its result beside itself, then reads it back.
TEST_SUB = """\
from pathlib import Path

from calc import ops


def test_sub():
    out = Path(__file__).with_name("sub_result.txt")
    out.write_text(str(ops.sub(5, 3)))
    assert out.read_text() == "2"
"""


def build_doctest_repo(path: Path) -> None:
    repo = RepoBuilder(path)
    files = {
        "pyproject.toml": pyproject(),
        "pytest.ini": "[pytest]\naddopts = --doctest-modules\n",
        "calc/__init__.py": "",
        "calc/ops.py": OPS_BUGGY + DOUBLE_BUGGY,
        "tests/test_ops.py": TESTS_BASE,
        "tests/test_order.py": TEST_ORDER,
    }
    repo.commit("Initial calc, doctests on", files)
    tests = TESTS_BASE.replace("import mul", "import add, mul") + TEST_ADD
    ops = OPS_BUGGY.replace("return a - b", "return a + b")
    repo.commit("Fix add", {"calc/ops.py": ops + DOUBLE_BUGGY, "tests/test_ops.py": tests})
    more = tests + "\n\ndef test_mul_one():\n    assert mul(7, 1) == 7\n"
    repo.commit("Fix double", {"calc/ops.py": ops + DOUBLE_FIXED, "tests/test_ops.py": more})
    tests_neg = {"tests/neg_mixin.py": NEG_MIXIN, "tests/test_neg.py": TEST_NEG}
    repo.commit("Add neg", {"calc/ops.py": ops + DOUBLE_FIXED + NEG, **tests_neg})
    sub = {"calc/ops.py": ops + DOUBLE_FIXED + NEG + SUB, "tests/test_sub.py": TEST_SUB}
    repo.commit("Add sub", sub)


ORDERED = "tests/test_order.py::test_b_finds_the_row"
# A test that passes only when the one before it ran: that one fails everywhere (never graded).
TEST_ORDER = """\
ROWS = []


def test_a_leaves_a_row():
    ROWS.append("row")
    raise AssertionError("fails before and after every fix")


def test_b_finds_the_row():
    assert ROWS == ["row"]
"""
NEG = "\n\ndef neg(a):\n    return -a\n"
NEG_MIXIN = """\
from calc import ops


class NegMixin:
    def test_neg_one(self):
        self.assertEqual(ops.neg(1), -1)
"""
TEST_NEG = """\
import unittest

from neg_mixin import NegMixin

from calc import ops


class NegTest(NegMixin, unittest.TestCase):
    pass


class NegTwiceTest(NegMixin, unittest.TestCase):
    def test_neg_one(self):
        self.assertEqual(ops.neg(ops.neg(1)), 1)
"""
INHERITED = "tests/test_neg.py::NegTest::test_neg_one"


# --- the rules, no containers -------------------------------------------------------------------


def test_a_doctest_id_names_a_source_module_not_a_test_file():
    assert is_module_doctest(DOCTEST)
    assert is_module_doctest("calc/ops.py::calc.ops")  # the module's own docstring
    assert is_module_doctest("ops.py::ops") and is_module_doctest("calc/__init__.py::calc")
    assert is_module_doctest("src/calc/ops.py::calc.ops.Calc.add")
    # tests, a test file's own doctests, a doctest text file, a test of a custom-named file
    for test_id in (
        "tests/test_ops.py::test_add",
        "tests/test_ops.py::TestX::test_a[1.5]",
        "tests/test_ops.py::tests.test_ops.helper",
        "docs/usage.rst::usage.rst",
        "check_ops.py::check_add",
        "calc/ops.py",
    ):
        assert not is_module_doctest(test_id), test_id
    assert not is_grading_path("calc/ops.py")


OWN = f"def add(a, b):\n    return a - b\n{DOUBLE_BUGGY}".encode()


@pytest.mark.parametrize(
    ("theirs", "refused"),
    [
        (OWN.replace(b"a + a + 1", b"a + a"), False),  # the fix
        (OWN.replace(b"Twice ``a``.", b"Twice a, doubled."), False),  # prose is the model's
        (OWN.replace(b"    8\n", b"    9\n"), True),  # the expected output bent to the bug
        (OWN.replace(b">>> double(4)", b">>> double(4) - 1"), True),  # the example bent
        (OWN.replace(b">>> double(4)\n    8\n", b""), True),  # the example dropped
        (b"def add(a, b):\n    return a + b\n", True),  # the function gone
        (OWN + b"\n\ndef double(a):\n    return 2 * a\n", True),  # redefined without a doctest
        (b"def double(a:\n", True),  # does not parse
    ],
)
def test_a_graded_doctest_is_the_tasks_own(theirs, refused):
    why = changed_doctests("calc/ops.py", [DOCTEST], OWN, theirs)
    assert bool(why) is refused, why


def test_a_doctest_the_grader_cannot_read_is_never_taken_on_trust():
    made = b"def double(a):\n    return a + a\n\n\ndouble.__doc__ = '>>> double(4)\\n8\\n'\n"
    (why,) = changed_doctests("calc/ops.py", [DOCTEST], made, made)
    assert "cannot read" in why


# --- end to end: mine, validate, grade ---------------------------------------------------------


@pytest.fixture(scope="module")
def validated(docker_engine, tmp_path_factory):
    root = tmp_path_factory.mktemp("gold")
    build_doctest_repo(root / "calc")
    work = root / "work"
    work.mkdir()
    write_params(work / "params.yaml", root / "cache", gold_runs=1)
    for args in (
        ("mine", "--repo", str(root / "calc"), "--output", "mine"),
        ("validate", "--input", "mine", "--output", "validate"),
    ):
        done = run_cli(*args, cwd=work)
        assert done.returncode == 0, done.stderr
    return work, load_tasks([str(work / "validate")])


@pytest.fixture(scope="module")
def evaluator(validated):
    work, _ = validated
    made = Evaluator(load_params(str(work / "params.yaml")), use_cache=False, timeout_s=20)
    yield made
    made.close()


def _diff(path: str, old: str, new: str) -> str:
    lines = difflib.unified_diff(
        old.splitlines(keepends=True), new.splitlines(keepends=True), f"a/{path}", f"b/{path}"
    )
    return "".join(lines)


def _doctest_task(tasks):
    return next(t for t in tasks.values() if DOCTEST in t.FAIL_TO_PASS)


@pytest.mark.docker
def test_validate_keeps_the_doctest_task_and_grades_every_gold(validated):
    work, tasks = validated
    doctest = _doctest_task(tasks)
    assert doctest.FAIL_TO_PASS == (DOCTEST,)
    assert "tests/test_ops.py::test_mul_one" in doctest.PASS_TO_PASS
    assert {t.gold_runs for t in tasks.values()} == {"1/1"} and len(tasks) == 3
    summary = json.loads((work / "validate" / "summary.json").read_text())
    assert summary["rejected"] == {"gold_not_gradable": 1}
    assert summary["gold_graded"] == 4 and summary["gold_runs_ms"] > 0
    # the test that needs an ungraded one before it: set aside by the grader's run, not graded
    for task in tasks.values():
        assert ORDERED in task.flaky_tests and ORDERED not in task.PASS_TO_PASS, task.instance_id
    assert summary["gold_set_aside_tests"] == 3
    # what the run cost: the tests ran in containers, and two tasks share the core-seconds
    cost = re.fullmatch(
        r"(\d+) \((\d+) s x (\d+) cores\): build (\d+), test (\d+), other (\d+)",
        summary["core_s"],
    )
    assert cost is not None, summary["core_s"]
    core_s, test_s = int(cost[1]), int(cost[5])
    assert test_s > 0 and "sandbox_run_ms" not in summary
    assert summary["core_s_per_task"] == pytest.approx(core_s / 3, abs=1)
    assert summary["tasks_per_core_hour"] == pytest.approx(3 * 3600 / core_s, rel=0.05)


@pytest.mark.docker
def test_a_test_a_class_inherits_is_graded_where_another_class_overrides_it(validated, evaluator):
    _, tasks = validated
    (task,) = [t for t in tasks.values() if INHERITED in t.FAIL_TO_PASS]
    assert "tests/test_neg.py::NegTwiceTest::test_neg_one" in task.FAIL_TO_PASS
    assert task.gold_runs == "1/1"
    again = evaluator.evaluate(task, task.patch)
    assert (again.resolved, again.reason) == (True, "resolved"), again.log


@pytest.mark.docker
def test_a_gold_the_grader_cannot_pass_is_rejected_with_the_graders_reason(validated):
    work, tasks = validated
    assert not any(t.FAIL_TO_PASS == ("tests/test_sub.py::test_sub",) for t in tasks.values())
    frame = pl.read_parquet(work / "validate" / "rejections" / "*.parquet")
    (row,) = frame.filter(pl.col("reason") == "gold_not_gradable").to_dicts()
    assert "gold patch run 1 of 1: tests_failed" in row["detail"]
    assert "tests/test_sub.py::test_sub FAILED" in row["detail"] and "\n" not in row["detail"]


@pytest.mark.docker
def test_the_doctest_tasks_gold_resolves_and_wrong_fixes_do_not(validated, evaluator):
    _, tasks = validated
    task = _doctest_task(tasks)
    gold = evaluator.evaluate(task, task.patch)
    assert (gold.resolved, gold.reason, gold.dropped) == (True, "resolved", ()), gold.log
    wrong = task.patch.replace("+    return a + a\n", "+    return a * a + 1\n")
    assert wrong != task.patch
    failed = evaluator.evaluate(task, wrong)
    assert (failed.resolved, failed.reason) == (False, "tests_failed")
    # The attack: leave the bug, bend the doctest's expected output to it (no container runs).
    start = OPS_BUGGY.replace("return a - b", "return a + b") + DOUBLE_BUGGY
    bent = _diff("calc/ops.py", start, start.replace("    8\n", "    9\n"))
    hacked = evaluator.evaluate(task, bent)
    assert (hacked.resolved, hacked.reason) == (False, "forbidden_file"), hacked.log
    assert "changes a graded doctest" in hacked.log


@pytest.mark.docker
def test_a_rerun_grades_nothing_again(validated):
    work, _ = validated
    again = run_cli("validate", "--input", "mine", "--output", "again", cwd=work)
    assert again.returncode == 0, again.stderr
    summary = json.loads((work / "again" / "summary.json").read_text())
    assert summary["gold_cache_hits"] == summary["gold_graded"] == 4
    first = pl.read_parquet(work / "validate" / "tasks" / "*.parquet").sort("instance_id")
    assert first.equals(pl.read_parquet(work / "again" / "tasks" / "*.parquet").sort("instance_id"))
