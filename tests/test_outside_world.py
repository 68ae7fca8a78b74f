"""Issue 30, item 7: tests that need the outside world. The clean run's failures that come from
the sandbox having no network, no key and no service are recognised in the log (a real pytest
run's, here), counted per profile, never PASS_TO_PASS; the pure tests beside them decide, and a
suite where only such tests fail is ``needs_outside_world``.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from reach_repos import CORE_TEST_COUNT, build_outside_world
from trajforge.schemas.test_run import TestRun, TestStatus
from trajforge.verifiers.log_parsers import get_parser
from trajforge.verifiers.outside_world import describe, line_kind, outside_world_tests
from trajforge.verifiers.validation.mutants import nothing_passes
from wild_runs import run_wild

SUITE = """\
import os
import socket

import pytest


def test_pure():
    assert 1 + 1 == 2


def test_key():
    assert os.environ["SOME_API_KEY"]


def test_closed_port():
    socket.create_connection(("127.0.0.1", 9), timeout=2)


def test_unknown_host():
    socket.getaddrinfo("no-such-host.invalid", 80)


def test_plain_bug():
    assert 1 == 2


@pytest.fixture
def server():
    socket.create_connection(("127.0.0.1", 9), timeout=2)


def test_uses_the_server(server):
    pass


class TestClient:
    def test_key(self):
        raise RuntimeError("The api_key client option must be set, or OPENAI_API_KEY")
"""
KEY = "tests/test_suite.py::test_key"


def pytest_run(folder: Path, suite: str) -> TestRun:
    """A real pytest run of ``suite`` (``-rA``, as trajforge's command), as a TestRun."""
    (folder / "tests").mkdir(parents=True)
    (folder / "tests" / "test_suite.py").write_text(suite)
    env = {"PATH": "/usr/bin:/bin"}  # no SOME_API_KEY, whatever this machine has
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-rA", "-p", "no:cacheprovider", "tests"],
        cwd=folder, capture_output=True, text=True, env=env, check=False,
    )  # fmt: skip
    statuses = get_parser("pytest_log")(done.stdout.encode()).statuses
    tests = tuple(TestStatus(t, s) for t, s in sorted(statuses.items()))
    return TestRun("r", "c", "p", "clean", 0, (), done.returncode, True, False, 1.0, tests, (),
                   "d", done.stdout)  # fmt: skip


def test_each_outside_world_failure_is_named_and_a_plain_bug_is_not(tmp_path: Path) -> None:
    run = pytest_run(tmp_path, SUITE)
    found = outside_world_tests(run)
    assert found == {
        KEY: "key",
        "tests/test_suite.py::test_closed_port": "network",
        "tests/test_suite.py::test_unknown_host": "network",
        "tests/test_suite.py::test_uses_the_server": "network",  # an ERROR at setup
        "tests/test_suite.py::TestClient::test_key": "key",
    }
    assert describe(found) == "5 (key 2, network 3)"
    assert run.statuses()["tests/test_suite.py::test_pure"] == "PASSED"


def test_only_outside_world_failures_is_its_own_reason(tmp_path: Path) -> None:
    only = SUITE.replace("assert 1 + 1 == 2", "assert os.environ['OTHER_TOKEN']")
    only = only.replace("assert 1 == 2", "socket.create_connection(('127.0.0.1', 9))")
    verdict = nothing_passes(pytest_run(tmp_path / "only", only))
    assert verdict.reason == "needs_outside_world", verdict
    assert "7 (" in verdict.detail and len(verdict.detail.splitlines()) == 1
    mixed = SUITE.replace("assert 1 + 1 == 2", "assert 1 == 3")  # a plain failure besides
    verdict = nothing_passes(pytest_run(tmp_path / "mixed", mixed))
    assert verdict.reason == "no_passing_test_at_clean", verdict
    assert "5 (key 2, network 3)" in verdict.detail


def test_services_and_hostile_lines() -> None:
    redis = "redis.exceptions.ConnectionError: Error 111 connecting to localhost:6379."
    assert line_kind(redis) == "service"
    assert line_kind("psycopg2.OperationalError: could not connect to server") == "service"
    assert line_kind("AssertionError: assert 'api_key' == 'x'") == ""
    assert line_kind("_" * 100_000 + " a " + "_" * 100_000) == ""


@pytest.mark.docker
@pytest.mark.usefixtures("docker_engine")
def test_the_pure_tests_decide_and_the_rest_are_counted(tmp_path: Path) -> None:
    repo = tmp_path / "webby"
    build_outside_world(repo)
    out = run_wild(repo, tmp_path)
    assert out.tasks, out.rejections
    for task in out.tasks:
        listed = task["FAIL_TO_PASS"] + task["PASS_TO_PASS"]
        assert not [t for t in listed if "test_remote" in t]
        assert len(listed) <= CORE_TEST_COUNT
    (line,) = [out.summary["outside_world_tests"]]
    assert "local/webby@" in line and line.endswith(": 2 (key 1, network 1)"), line
    assert out.rerun_summary.get("images_built", 0) == 0, out.rerun_summary
