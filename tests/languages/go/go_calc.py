"""A std-only Go project the Go tests write themselves as a git repository: two packages, tests
with subtests, a skipped test, a package without tests; and its expected test ids."""

from __future__ import annotations

from pathlib import Path

from repo_factory import RepoBuilder

GO_MOD = "module example.com/calc\n\ngo 1.19\n"
CALC = """\
package calc

// Add returns a plus b.
func Add(a, b int) int { return a + b }

// Sub returns a minus b.
func Sub(a, b int) int { return a - b }

// Abs returns the distance of n from zero.
func Abs(n int) int {
\tif n < 0 {
\t\treturn -n
\t}
\treturn n
}
"""
CALC_TESTS = """\
package calc

import "testing"

func TestAdd(t *testing.T) {
\tt.Run("pos", func(t *testing.T) {
\t\tif Add(2, 3) != 5 {
\t\t\tt.Fatal("2+3")
\t\t}
\t})
\tt.Run("neg", func(t *testing.T) {
\t\tif Add(-2, -3) != -5 {
\t\t\tt.Fatal("-2-3")
\t\t}
\t})
}

func TestSub(t *testing.T) {
\tif Sub(5, 3) != 2 {
\t\tt.Fatal("5-3")
\t}
}

func TestAbs(t *testing.T) {
\tif Abs(-4) != 4 || Abs(4) != 4 {
\t\tt.Fatal("abs")
\t}
}
"""
TEXT = """\
package text

import "strings"

// Shout upper-cases s and adds a bang.
func Shout(s string) string { return strings.ToUpper(s) + "!" }
"""
TEXT_TESTS = """\
package text

import "testing"

func TestShout(t *testing.T) {
\tif got := Shout("hi"); got != "HI!" {
\t\tt.Fatalf("got %q", got)
\t}
}

func TestLater(t *testing.T) {
\tt.Skip("not yet")
}
"""
MAIN = """\
package main

import (
\t"fmt"

\t"example.com/calc"
)

func main() { fmt.Println(calc.Add(1, 2)) }
"""
FILES = {
    "go.mod": GO_MOD,
    "calc.go": CALC,
    "calc_test.go": CALC_TESTS,
    "internal/text/text.go": TEXT,
    "internal/text/text_test.go": TEXT_TESTS,
    "cmd/calc/main.go": MAIN,
}
CLEAN = {
    ".::TestAdd": "PASSED",
    ".::TestAdd/pos": "PASSED",
    ".::TestAdd/neg": "PASSED",
    ".::TestSub": "PASSED",
    ".::TestAbs": "PASSED",
    "internal/text::TestShout": "PASSED",
    "internal/text::TestLater": "SKIPPED",
}


def calc_repo(root: Path) -> tuple[RepoBuilder, str]:
    """The project committed (fixed dates: the same commit, so the same image, every time)."""
    repo = RepoBuilder(root / "calc")
    return repo, repo.commit("calc in go", dict(FILES))
