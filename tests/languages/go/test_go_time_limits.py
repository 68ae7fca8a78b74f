"""Go's per-test limit (``verifiers/languages/go/time_limits.py``), one policy in validate's run
and the grader's: a package whose tests together take longer than the limit, each under it, is
graded PASSED by both; a test that hangs is stopped at the limit and FAILED by both, the tests
its package finished before it keep their statuses.

The clock itself (``in_container/go_watch.py``) is read line by line here; the two runs use a
real go 1.19 in a real image of a two-package module, with a limit of a few seconds.
"""

from __future__ import annotations

import json
import time

import pytest
from go_forge import go_image
from trajforge.generators.languages.go.base_image import ensure_go_base_image
from trajforge.generators.languages.go.detection import Module
from trajforge.generators.languages.go.runners import REPORT_PATH, module_command
from trajforge.schemas.task_instance import TaskInstance
from trajforge.verifiers.languages.go import time_limits
from trajforge.verifiers.languages.go.in_container.go_watch import Clock
from trajforge.verifiers.languages.go.test_events import parse_test_events
from trajforge.verifiers.patch_verifier import verify_patch
from trajforge.verifiers.sandbox.base import SessionSpec
from trajforge.verifiers.sandbox.docker import DockerSandbox
from trajforge.verifiers.sandbox.git_tree import archive, git

LIMIT_S = 3
MODULE = "example.com/long"
SLEEP = "time.Sleep(1200 * time.Millisecond)"  # each test under the limit, four over it
SLOW_TESTS = f"""\
package slow

import (
\t"testing"
\t"time"
)

func TestA(t *testing.T) {{
\t{SLEEP}
\tif Half(4) != 2 {{
\t\tt.Fatal(Half(4))
\t}}
}}

func TestB(t *testing.T) {{
\tt.Run("x", func(t *testing.T) {{ {SLEEP} }})
\tt.Run("y", func(t *testing.T) {{ {SLEEP} }})
}}

func TestC(t *testing.T) {{ {SLEEP} }}
"""
HANG_TESTS = """\
package hang

import (
\t"testing"
\t"time"
)

func TestBefore(t *testing.T) {}

func TestHang(t *testing.T) { time.Sleep(time.Hour) }

func TestAfter(t *testing.T) {}
"""
BUGGY = "package slow\n\n// Half halves n.\nfunc Half(n int) int { return n / 3 }\n"
FILES = {
    "go.mod": f"module {MODULE}\n\ngo 1.19\n",
    "slow/slow.go": BUGGY,
    "slow/slow_test.go": SLOW_TESTS,
    "hang/hang.go": "package hang\n",
    "hang/hang_test.go": HANG_TESTS,
}
SLOW_IDS = ("slow::TestA", "slow::TestB", "slow::TestB/x", "slow::TestB/y", "slow::TestC")


def _verbose(clock: Clock, at: float, *lines: str) -> None:
    for line in lines:
        clock.see(line, at)


def test_the_clock_lets_a_long_package_run_and_finds_a_hang():
    """As go 1.19 prints a test binary's -v lines: a subtest's result only with its parent's
    (a sibling's start says it ended)."""
    clock = Clock(2)
    _verbose(clock, 0, "=== RUN   TestA", "--- PASS: TestA (1.50s)", "=== RUN   TestB")
    _verbose(clock, 1.5, "=== RUN   TestB/x")
    _verbose(clock, 3.0, "=== RUN   TestB/y")
    assert clock.overdue(4.9) is None  # TestB runs 4.9 s, each of its subtests under 2
    _verbose(clock, 4.9, "--- PASS: TestB (4.90s)", "    --- PASS: TestB/x (1.50s)",
             "    --- PASS: TestB/y (1.90s)")  # fmt: skip
    _verbose(clock, 5, "=== RUN   TestHang", "trajforge: output, not progress")
    assert clock.overdue(6.9) is None
    assert clock.overdue(7.1) == ("", "TestHang")


def test_a_paused_parallel_test_waits_off_the_clock_and_events_count_too():
    clock = Clock(2)
    event = {"Action": "run", "Package": "p", "Test": "TestPar"}
    clock.see(json.dumps(event), 0)
    clock.see(json.dumps({**event, "Action": "pause"}), 0.1)
    clock.see(json.dumps({**event, "Test": "TestSeq"}), 0.1)
    assert clock.overdue(2.5) == ("p", "TestSeq")  # the sequential test hangs, not TestPar
    clock.see(json.dumps({**event, "Action": "pass", "Test": "TestSeq"}), 2.5)
    clock.see(json.dumps({**event, "Action": "cont"}), 2.5)
    assert clock.overdue(4.4) is None
    assert clock.overdue(4.6) == ("p", "TestPar")


def test_the_grader_reads_the_limit_the_task_s_lists_were_made_under():
    command = module_command([Module(".", MODULE)], 7)
    assert "-timeout 0" in command and "go-watch.py 7" in command
    assert time_limits.per_test_s(command, 300) == 7
    assert time_limits.per_test_s(command, 5) == 5  # never more than the run's own time
    assert time_limits.per_test_s("go test -json ./...", 300) == 60  # validate's default
    assert "-timeout" not in module_command([Module(".", MODULE)], 0)


@pytest.fixture(scope="module")
def image(tmp_path_factory, docker_engine):
    root = tmp_path_factory.mktemp("golimits")
    fixed = {"slow/slow.go": BUGGY.replace("n / 3", "n / 2")}
    repo, base, fix, tag = go_image(root, ensure_go_base_image(say=lambda _line: None), FILES,
                                    fixed)  # fmt: skip
    box = DockerSandbox()
    yield box, repo, base, fix, tag
    box.close()
    box.remove_image(tag)


def test_validate_s_run_passes_a_long_package_and_stops_a_hang(image):
    box, repo, _, fix, tag = image
    command = module_command([Module(".", MODULE)], LIMIT_S)
    with box.session(SessionSpec(image=tag)) as session:
        session.put_archive(archive(str(repo.path), fix, prefix="repo/"))
        started = time.monotonic()
        done = session.exec(command, timeout_s=120)
        took = time.monotonic() - started
        report = session.read_file_checked(REPORT_PATH).data or b""
    statuses = parse_test_events(report, {MODULE: "."}).statuses
    assert {t: statuses.get(t) for t in SLOW_IDS} == dict.fromkeys(SLOW_IDS, "PASSED"), done.output
    assert statuses["hang::TestBefore"] == "PASSED" and statuses["hang::TestHang"] == "FAILED"
    assert "hang::TestAfter" not in statuses  # the binary was stopped before it
    assert done.exit_code == 1 and b"ran over the per-test limit" in report
    assert took < 60, took  # the hang cost about the limit, not the run's time


def _task(repo, base: str, fix: str, tag: str, graded: tuple[str, ...]) -> TaskInstance:
    return TaskInstance(
        instance_id="long-go-1", repo="local/long", base_commit=base,
        patch=git(str(repo.path), "diff", base, fix).decode(), test_patch="",
        problem_statement="Half is a third", hints_text="", created_at="2024-01-01",
        FAIL_TO_PASS=("slow::TestA",), PASS_TO_PASS=graded, environment_setup_commit=base,
        image_name=tag, test_cmd=module_command([Module(".", MODULE)], LIMIT_S),
        origin="mined", profile_id="go-long", candidate_id="long-go-1", source=str(repo.path),
        flaky_tests=(), difficulty=None, env_recipe="", language="go", test_runner="go",
    )  # fmt: skip


def test_the_grader_passes_a_long_package_and_stops_a_hang(image):
    box, repo, base, fix, tag = image
    long = _task(repo, base, fix, tag, SLOW_IDS[1:])
    gold = verify_patch(box, long, str(repo.path), long.patch, 120, None)
    assert (gold.resolved, gold.reason, gold.trusted) == (True, "resolved", True), gold.log[-3000:]
    assert gold.test_report == dict.fromkeys(SLOW_IDS, "PASSED")
    hung = _task(repo, base, fix, tag, (*SLOW_IDS[1:], "hang::TestBefore", "hang::TestHang"))
    started = time.monotonic()
    stopped = verify_patch(box, hung, str(repo.path), hung.patch, 120, None)
    took = time.monotonic() - started
    assert (stopped.resolved, stopped.reason, stopped.trusted) == (False, "tests_failed", True), (
        stopped.log[-3000:]
    )
    assert stopped.test_report["hang::TestHang"] == "FAILED"
    assert stopped.test_report["hang::TestBefore"] == "PASSED"
    assert all(stopped.test_report[t] == "PASSED" for t in SLOW_IDS)
    assert "ran over the per-test limit of 3s" in stopped.log
    assert took < 60, took
