"""Multi-SWE-bench's Go names read against our ids, both printed by the host's go command for a
module this test creates: subtests named by URLs and routes, as go-zero's
``TestContentSecurityHandler/http://localhost/a/b?c=d&e=f`` and ``TestPatRouter/GET:/a/b``.

Their parser reads ``go test -v``'s ``--- PASS|FAIL|SKIP: <name>`` lines and keeps each name cut
at its last ``/``: a subtest whose own name holds one is listed cut inside it. The reading here
is written from that rule (``benchmarks/README.md``, Multi-SWE-bench's Go labels)."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest
from trajforge.schemas.candidate import Candidate, DatasetLabels
from trajforge.schemas.label_check import LabelClasses
from trajforge.schemas.task_instance import TaskInstance
from trajforge.schemas.test_run import TestRun, TestStatus
from trajforge.verifiers.languages.go.test_events import parse_test_events, read_modules
from trajforge.verifiers.validation.candidate import ValidationResult
from trajforge.verifiers.validation.label_names import FOLDED, map_names
from trajforge.verifiers.validation.labels import check_labels

GO = shutil.which("go")
GO_MOD = "module example.com/web\n\ngo 1.19\n"
FILES = {
    "go.mod": GO_MOD,
    "handler/handler_test.go": """package handler

import "testing"

func TestSecurity(t *testing.T) {
	urls := []string{"http://localhost/a/b?c=d", "http://localhost/a/b?c=d",
		"http://localhost/a/e", "http://remotehost/"}
	for _, url := range urls {
		t.Run(url, func(t *testing.T) {})
	}
}

func TestRoute(t *testing.T) { t.Run("GET:/a/z", func(t *testing.T) {}) }
""",
    "router/router_test.go": """package router

import "testing"

func TestRoute(t *testing.T) {
	for _, route := range []string{"GET:/a/b", "GET:/a/c"} {
		t.Run(route, func(t *testing.T) {})
	}
}
""",
}
LOCALHOST = "handler::TestSecurity/http://localhost/a/"
FOLDED_IDS = {LOCALHOST + "b?c=d", LOCALHOST + "b?c=d#01", LOCALHOST + "e"}
_THEIR_LINE = re.compile(r"--- (?:PASS|FAIL|SKIP): (\S+)")


def _go(root: Path, *flags: str) -> str:
    done = subprocess.run(
        [GO or "go", "test", *flags, "-count=1", "./..."], cwd=root, capture_output=True,
        text=True, env={"PATH": str(Path(GO or "go").parent), "HOME": str(root),
                        "GOFLAGS": "-mod=mod", "GOPROXY": "off", "GOTOOLCHAIN": "local",
                        "GOCACHE": str(root / ".cache")},
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, str], list[str]]:
    """(our statuses by id, their names) of one run of the module each way."""
    if GO is None:  # the machines this project runs on have Go; a missing one is a setup error
        pytest.fail("no go command on PATH: make setup's machines have one")
    root = tmp_path_factory.mktemp("web")
    for name, text in FILES.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    ours = parse_test_events(_go(root, "-json"), read_modules({".": GO_MOD})).statuses
    theirs = {
        found.group(1).rsplit("/", 1)[0]
        for line in _go(root, "-v").splitlines()
        if (found := _THEIR_LINE.match(line.strip()))
    }
    return ours, sorted(theirs)


def test_their_cut_names_read_as_the_tests_they_cut(runs: tuple[dict[str, str], list[str]]):
    ours, theirs = runs
    assert FOLDED_IDS.issubset(ours)  # go names a repeated subtest name #01
    assert "TestSecurity/http://localhost/a" in theirs and "TestRoute/GET:/a" in theirs
    found = map_names("multi-swe-bench", theirs, ours)
    assert found.ours == {
        "TestSecurity": "handler::TestSecurity",
        "TestSecurity/http://remotehost": "handler::TestSecurity/http://remotehost/",
    }
    assert found.files == {"TestSecurity/http://localhost/a": FOLDED_IDS}
    assert found.group_kind("TestSecurity/http://localhost/a") == FOLDED
    # in two packages, whole or cut: ambiguous, named so
    assert found.unmapped["TestRoute"].startswith("2 tests here answer to it")
    assert found.unmapped["TestRoute/GET:/a"].startswith("3 tests here answer to it")


def _run(state: str, statuses: dict[str, str]) -> TestRun:
    tests = tuple(TestStatus(t, s) for t, s in sorted(statuses.items()))
    return TestRun(
        f"{state}-0", "c1", "p1", state, 0, (), 1, True, False, 0.1, tests, (), "d" * 64, "log"
    )


def _p2p_check(ours: dict[str, str], theirs: list[str], gold: dict[str, str]) -> LabelClasses:
    """Their names as PASS_TO_PASS against a task whose PASS_TO_PASS is what passes both ways."""
    p2p = tuple(sorted(t for t, s in ours.items() if s == gold[t] == "PASSED"))
    task = TaskInstance(
        "acme__web-1", "acme/web", "abc", "p", "tp", "", "", "2024-01-01", (), p2p, "abc",
        "img", "go", "commit", "p1", "c1", "/src", (), None, language="go",
    )  # fmt: skip
    labels = DatasetLabels("multi-swe-bench", "acme__web-1", (), tuple(theirs))
    candidate = Candidate("c1", "acme/web", "/src", "abc", "p", "tp", "commit", "2024",
                          labels=labels)  # fmt: skip
    runs = (_run("base", ours), _run("gold", gold))
    check = check_labels(candidate, ValidationResult(task, None, runs))
    assert check is not None
    return check.PASS_TO_PASS


def test_a_cut_name_is_judged_as_the_one_line_their_parser_printed(
    runs: tuple[dict[str, str], list[str]],
):
    ours, theirs = runs
    p2p = _p2p_check(ours, theirs, ours)
    assert "TestSecurity/http://localhost/a" in p2p.agrees
    assert not FOLDED_IDS & set(p2p.they_missed)  # their one name covers them
    assert p2p.name_unmapped == ("TestRoute", "TestRoute/GET:/a")
    # one of the cut subtests fails with the fix here: their one line is not our PASS_TO_PASS
    broken = {**ours, LOCALHOST + "e": "FAILED"}
    p2p = _p2p_check(ours, theirs, broken)
    assert p2p.we_missed == ("TestSecurity/http://localhost/a",)
    assert p2p.why["TestSecurity/http://localhost/a"].startswith(
        f"{FOLDED}: 1 of its 3 tests not our PASS_TO_PASS ({LOCALHOST}e: "
    )
