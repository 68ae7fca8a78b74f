"""GoIssueText on a git repository the test makes: a test's source by id, its failure from
``go test -v`` and ``go test -json`` logs, the names a Go patch is about."""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path

import pytest
from trajforge.generators.languages.go.issue_context import GoIssueText
from trajforge.generators.languages.go.prompts import AGENT_SYSTEM, ISSUE_PROMPT

ADD_TEST = """\
package calc

import "testing"

func TestAdd(t *testing.T) {
	t.Run("neg", func(t *testing.T) {
		if got := Add(-1, -2); got != -3 {
			t.Errorf("Add(-1, -2) = %d, want -3", got)
		}
	})
}

func TestSub(t *testing.T) {
	if Sub(3, 1) != 2 {
		t.Fatal("Sub(3, 1) != 2")
	}
}
"""
ROOT_TEST = """\
package wrap

import "testing"

func TestWrap(t *testing.T) {
	if len(Wrap("abcdef", 3)) != 2 {
		t.Fatalf("two lines expected")
	}
}

// TestAdd in another package: ids with a package find the right one
func TestAdd(t *testing.T) {}
"""

VERBOSE_LOG = """\
=== RUN   TestWrap
--- PASS: TestWrap (0.00s)
PASS
ok  	example.com/wrap	0.002s
=== RUN   TestAdd
=== RUN   TestAdd/neg
    add_test.go:8: Add(-1, -2) = -1, want -3
=== RUN   TestAdd/pos
--- FAIL: TestAdd (0.00s)
    --- FAIL: TestAdd/neg (0.00s)
    --- PASS: TestAdd/pos (0.00s)
=== RUN   TestSub
    add_test.go:15: Sub(3, 1) != 2
--- FAIL: TestSub (0.00s)
=== RUN   TestDiv
--- FAIL: TestDiv (0.00s)
panic: runtime error: integer divide by zero [recovered]
	panic: runtime error: integer divide by zero

goroutine 7 [running]:
testing.tRunner.func1.2({0x5200e0, 0x6279d0})
	/usr/local/go/src/testing/testing.go:1632 +0x230
example.com/wrap/internal/calc.Div(...)
	/repo/internal/calc/calc.go:12
FAIL	example.com/wrap/internal/calc	0.004s
FAIL
"""


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t", *args],
        check=True,
        capture_output=True,
        text=True,
    ).stdout


@pytest.fixture(scope="module")
def repo(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, str]:
    root = tmp_path_factory.mktemp("gorepo")
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    (root / "go.mod").write_text("module example.com/wrap\n\ngo 1.22\n")
    (root / "wrap_test.go").write_text(ROOT_TEST)
    (root / "internal" / "calc").mkdir(parents=True)
    (root / "internal" / "calc" / "add_test.go").write_text(ADD_TEST)
    (root / "internal" / "calc" / "add.go").write_text("package calc\n\nfunc TestSub() {}\n")
    _git(root, "add", "-A")
    _git(root, "commit", "-qm", "tests")
    return str(root), _git(root, "rev-parse", "HEAD^{tree}").strip()


TEXT = GoIssueText(ISSUE_PROMPT)


def test_test_sources_by_package_and_name(repo: tuple[str, str]) -> None:
    path, tree = repo
    ids = [
        "internal/calc::TestAdd/neg",
        "internal/calc::TestSub",
        ".::TestWrap",
        ".::TestAdd",
        "internal/calc::TestMissing",
        "nowhere::TestAdd",
    ]
    sources = TEXT.test_sources(path, tree, ids, max_lines=40)
    assert sources["internal/calc::TestAdd/neg"].startswith("func TestAdd(t *testing.T) {")
    assert 't.Run("neg"' in sources["internal/calc::TestAdd/neg"]
    assert sources["internal/calc::TestSub"].splitlines()[-1] == "}"
    assert "Wrap(" in sources[".::TestWrap"]
    assert sources[".::TestAdd"] == "func TestAdd(t *testing.T) {}"
    assert set(sources) == set(ids[:4])  # a missing test or package shows no source
    short = TEXT.test_sources(path, tree, ["internal/calc::TestAdd"], max_lines=2)
    assert len(short["internal/calc::TestAdd"].splitlines()) == 2


def test_ids_without_a_package_search_the_tree(repo: tuple[str, str]) -> None:
    path, tree = repo
    sources = TEXT.test_sources(path, tree, ["TestSub", "TestWrap", "TestAdd/neg"], 40)
    assert set(sources) == {"TestSub", "TestWrap"}  # TestAdd is in two packages: ambiguous


def test_failure_excerpt_from_a_verbose_log() -> None:
    neg = TEXT.failure_excerpt(VERBOSE_LOG, "internal/calc::TestAdd/neg", 20)
    assert neg.splitlines() == [
        "    add_test.go:8: Add(-1, -2) = -1, want -3",
        "    --- FAIL: TestAdd/neg (0.00s)",
    ]
    parent = TEXT.failure_excerpt(VERBOSE_LOG, "internal/calc::TestAdd", 20)
    assert parent.splitlines() == [  # its failed subtests' output, not the passed ones
        "    add_test.go:8: Add(-1, -2) = -1, want -3",
        "    --- FAIL: TestAdd/neg (0.00s)",
        "--- FAIL: TestAdd (0.00s)",
    ]
    sub = TEXT.failure_excerpt(VERBOSE_LOG, "internal/calc::TestSub", 20)
    assert sub.splitlines() == ["    add_test.go:15: Sub(3, 1) != 2", "--- FAIL: TestSub (0.00s)"]
    div = TEXT.failure_excerpt(VERBOSE_LOG, "internal/calc::TestDiv", 20)
    assert "panic: runtime error: integer divide by zero [recovered]" in div
    assert "goroutine" not in div and "testing.go" not in div
    assert TEXT.failure_excerpt(VERBOSE_LOG, ".::TestWrap", 20) == ""  # it passed
    assert TEXT.failure_excerpt("", "x::TestA", 20) == ""
    assert len(TEXT.failure_excerpt(VERBOSE_LOG, "internal/calc::TestDiv", 1).splitlines()) == 1


def test_failure_excerpt_from_json_events() -> None:
    def event(action: str, test: str | None, output: str | None = None, pkg: str = "") -> str:
        row = {"Action": action, "Package": pkg or "example.com/wrap/internal/calc"}
        if test:
            row["Test"] = test
        if output is not None:
            row["Output"] = output
        return json.dumps(row)

    log = "\n".join(
        [
            event("run", "TestSub"),
            event("output", "TestSub", "=== RUN   TestSub\n"),
            event("output", "TestSub", "    add_test.go:15: Sub(3, 1) != 2\n"),
            event("output", "TestSub", "--- FAIL: TestSub (0.00s)\n"),
            event("fail", "TestSub"),
            event("output", "TestSub", "=== RUN   TestSub\n", pkg="example.com/wrap/other"),
            event(
                "output", "TestSub", "    other_test.go:3: other\n", pkg="example.com/wrap/other"
            ),
            event("output", "TestSub", "--- FAIL: TestSub (0.00s)\n", pkg="example.com/wrap/other"),
            event("output", None, "FAIL\n"),
        ]
    )
    excerpt = TEXT.failure_excerpt(log, "internal/calc::TestSub", 20)
    assert excerpt.splitlines() == [
        "    add_test.go:15: Sub(3, 1) != 2",
        "--- FAIL: TestSub (0.00s)",
    ]
    assert "other_test.go:3" in TEXT.failure_excerpt(log, "other::TestSub", 20)
    assert TEXT.failure_excerpt("{not json\n", "other::TestSub", 20) == ""


def test_patch_names_and_test_name() -> None:
    patch = """\
diff --git a/internal/calc/stack.go b/internal/calc/stack.go
--- a/internal/calc/stack.go
+++ b/internal/calc/stack.go
@@ -10,3 +10,3 @@ func (s *Stack) Push(x int) error {
-	if len(s.items) >= s.limit {
+	if len(s.items) > s.limit {
@@ -30,2 +30,2 @@ type Queue struct {
-	head int
+	head uint
@@ -40,2 +40,3 @@ import (
+func helper[T any](x T) T { return x }
"""
    names = TEXT.patch_names(patch)
    assert {"Stack", "Push", "Queue", "helper", "stack", "internal", "calc"} <= names
    assert "func" not in names and "if" not in names
    assert TEXT.test_name("internal/calc::TestAdd/neg") == "TestAdd"
    assert TEXT.test_name("TestAdd") == "TestAdd"


def test_code_words_and_evidence() -> None:
    words = TEXT.code_words('x := Wrap("Something Quoted", 3) // CommentWord\ny := `Raw Word`')
    assert "Wrap" in words and "Quoted" not in words and "CommentWord" not in words
    assert "Raw" not in words
    failure = "    add_test.go:15: Sub(3, 1) != 2\n--- FAIL: TestSub (0.00s)"
    assert TEXT.evidence(failure, ADD_TEST) == ["add_test.go:15: Sub(3, 1) != 2"]
    assert TEXT.evidence("", ADD_TEST) == [
        't.Errorf("Add(-1, -2) = %d, want -3", got)',
        't.Fatal("Sub(3, 1) != 2")',
    ]


def test_prompts() -> None:
    assert ISSUE_PROMPT.fence == "go" and ISSUE_PROMPT.projects == "Go"
    assert "```go" in ISSUE_PROMPT.example_request
    assert AGENT_SYSTEM.format(test_cmd="go test ./...").count("go test ./...") == 1


REAL_CODE = """\
package calc

func Add(a, b int) int { return a - b }

func Div(a, b int) int { return a / b }
"""
REAL_TESTS = """\
package calc

import "testing"

func TestAdd(t *testing.T) {
	t.Run("neg", func(t *testing.T) {
		if got := Add(-1, -2); got != -3 {
			t.Errorf("Add(-1, -2) = %d, want -3", got)
		}
	})
	t.Run("zero", func(t *testing.T) {})
}

func TestDiv(t *testing.T) {
	zero := 0
	if Div(1, zero) != 0 {
		t.Fatal("unreachable")
	}
}
"""


@pytest.mark.usefixtures("host_go")
@pytest.mark.parametrize("flag", ["-v", "-json"])
def test_failure_excerpt_of_a_real_go_test_run(tmp_path: Path, flag: str) -> None:
    """The host's go test, both ways the runners call it: a failed subtest's message and a
    panic's first line, no goroutine trace."""
    (tmp_path / "go.mod").write_text("module example.com/real\n\ngo 1.21\n")
    (tmp_path / "calc").mkdir()
    (tmp_path / "calc" / "calc.go").write_text(REAL_CODE)
    (tmp_path / "calc" / "calc_test.go").write_text(REAL_TESTS)
    env = {**os.environ, "GOTOOLCHAIN": "local", "GOFLAGS": "-mod=mod", "GOPROXY": "off"}
    log = subprocess.run(
        ["go", "test", flag, "-count=1", "./..."],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    ).stdout
    log = re.sub(r"\(\d+\.\d+s\)", "(0.00s)", log)  # a slow machine's durations
    neg = TEXT.failure_excerpt(log, "calc::TestAdd/neg", 20).splitlines()
    assert [line.strip() for line in neg] == [
        "calc_test.go:8: Add(-1, -2) = 1, want -3",
        "--- FAIL: TestAdd/neg (0.00s)",
    ]
    parent = TEXT.failure_excerpt(log, "calc::TestAdd", 20)
    assert "want -3" in parent and "TestAdd/zero" not in parent
    div = TEXT.failure_excerpt(log, "calc::TestDiv", 20)
    assert div.startswith("panic: runtime error: integer divide by zero")
    assert div.endswith("--- FAIL: TestDiv (0.00s)") and "goroutine" not in div
    assert TEXT.failure_excerpt(log, "calc::TestAdd/zero", 20) == ""
