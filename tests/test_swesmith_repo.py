"""The end-to-end benchmark's SWE-smith-style baseline reads labels from two verbose pytest logs as
SWE-smith's ``parse_log_pytest`` and ``get_valid_report`` do (benchmarks/swesmith_repo.py)."""

from __future__ import annotations

from swesmith_repo import TEST_REQUIREMENTS, parse_log_pytest, valid_report

# base + test changes: the new test fails, one test was removed by the fix's test changes later
BASE_LOG = """\
============================= test session starts ==============================
collecting ... collected 5 items

toolz/tests/test_dicttoolz.py::test_merge PASSED                         [ 20%]
toolz/tests/test_dicttoolz.py::test_new_feature FAILED                   [ 40%]
toolz/tests/test_dicttoolz.py::test_param[a-1] PASSED                    [ 60%]
toolz/tests/test_dicttoolz.py::test_skipped SKIPPED (no numpy)           [ 80%]
toolz/tests/test_dicttoolz.py::test_gone FAILED                          [100%]

=========================== short test summary info ============================
FAILED toolz/tests/test_dicttoolz.py::test_new_feature
========================= 2 failed, 2 passed, 1 skipped ========================
"""
# with the fix: the new test passes, a parametrized case breaks, a test appears, one is gone
GOLD_LOG = """\
toolz/tests/test_dicttoolz.py::test_merge PASSED                         [ 20%]
toolz/tests/test_dicttoolz.py::test_new_feature PASSED                   [ 40%]
toolz/tests/test_dicttoolz.py::test_param[a-1] FAILED                    [ 60%]
toolz/tests/test_dicttoolz.py::test_skipped SKIPPED (no numpy)           [ 80%]
toolz/tests/test_dicttoolz.py::test_added PASSED                         [100%]
"""


def test_labels_from_two_logs_follow_swesmith_grading() -> None:
    statuses = parse_log_pytest(BASE_LOG)
    assert statuses["toolz/tests/test_dicttoolz.py::test_new_feature"] == "FAILED"
    assert statuses["toolz/tests/test_dicttoolz.py::test_param[a-1]"] == "PASSED"
    assert statuses["toolz/tests/test_dicttoolz.py::test_skipped"] == "SKIPPED"
    assert len(statuses) == 5  # the summary's "FAILED <id>" lines name no status after an id

    report = valid_report(BASE_LOG, GOLD_LOG)
    prefix = "toolz/tests/test_dicttoolz.py::"
    assert sorted(report["FAIL_TO_PASS"]) == [
        prefix + "test_added",  # absent before, passing after: SWE-smith counts it
        prefix + "test_gone",  # failing before, absent after: SWE-smith counts it too
        prefix + "test_new_feature",
    ]
    assert report["PASS_TO_PASS"] == [prefix + "test_merge"]
    assert report["PASS_TO_FAIL"] == [prefix + "test_param[a-1]"]
    assert report["FAIL_TO_FAIL"] == []


def test_a_log_without_verbose_lines_gives_no_labels() -> None:
    crashed = "ImportError while loading conftest '/repo/conftest.py'.\nE   ModuleNotFoundError\n"
    assert parse_log_pytest(crashed) == {}
    assert valid_report(crashed, crashed)["FAIL_TO_PASS"] == []


def test_test_requirement_files_are_the_root_ones_for_tests() -> None:
    names = ["requirements-test.txt", "requirements_dev.txt", "test-requirements.txt",
             "requirements.txt", "docs-requirements.txt", "requirements-tests.txt"]  # fmt: skip
    assert [n for n in names if TEST_REQUIREMENTS.match(n)] == [
        "requirements-test.txt", "requirements_dev.txt", "test-requirements.txt",
        "requirements-tests.txt",
    ]  # fmt: skip
