"""Issue 30, item 6: per-test time limits. One test that hangs for ten minutes among passing ones
fails alone at its ``validate.per_test_timeout_s`` (pytest-timeout, signal method, installed with
the runner); the rest of the suite decides, the repository reaches a task, the hanging test is in
neither list, and a rerun builds nothing.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from reach_repos import CORE_TEST_COUNT, build_hanging_test
from trajforge.verifiers.test_runner import with_test_limit
from wild_runs import run_wild

HANGING = "tests/test_hangs.py::test_waits_for_a_server_that_never_answers"
PYTEST = "python -m pytest -rA --junitxml=/tmp/j.xml"


def test_the_limit_goes_on_pytest_commands_of_images_that_have_the_plugin() -> None:
    install = ("pip install -e .", "pip install pytest coverage pytest-timeout")
    limited = with_test_limit(PYTEST, install, 5)
    assert limited == f"{PYTEST} --timeout=5 --timeout-method=signal"
    assert with_test_limit(limited, install, 5) == limited  # never twice
    assert with_test_limit(PYTEST, install, 0) == PYTEST  # 0: off
    assert with_test_limit(PYTEST, ("pip install pytest",), 5) == PYTEST  # an older image
    assert with_test_limit("make test", install, 5) == "make test"  # not pytest's


@pytest.mark.docker
@pytest.mark.usefixtures("docker_engine")
def test_a_hanging_test_fails_alone_and_the_rest_decides(tmp_path: Path) -> None:
    repo = tmp_path / "sleepy"
    build_hanging_test(repo)
    out = run_wild(repo, tmp_path, validate="  per_test_timeout_s: 5\n")
    assert out.tasks, out.rejections
    assert not [r for r in out.rejections if "timeout" in r["reason"]], out.rejections
    for task in out.tasks:
        assert "--timeout=5 --timeout-method=signal" in task["test_cmd"]
        assert HANGING not in task["FAIL_TO_PASS"] and HANGING not in task["PASS_TO_PASS"]
        assert len(task["FAIL_TO_PASS"]) + len(task["PASS_TO_PASS"]) <= CORE_TEST_COUNT
    assert out.rerun_summary.get("images_built", 0) == 0, out.rerun_summary
    assert sorted(t["instance_id"] for t in out.rerun_tasks) == sorted(
        t["instance_id"] for t in out.tasks
    )
