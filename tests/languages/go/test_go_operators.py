"""Go's bug operators on a small Go package: every operator finds its bug, each mutant's undo is
byte-exact, and the mutants compile with the host's ``go`` (one ``go build ./...`` over a module
holding each mutant as its own package)."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest
from trajforge.generators.languages.go.mutations import (
    GO_OPERATORS,
    go_function_targets,
    go_mutants_of_file,
    sample_go_mutants,
)
from trajforge.generators.mutants.mutant import Mutant
from trajforge.schemas.errors import ParamsError

STACK = """\
package calc

import (
	"errors"
	"fmt"
	"strings"
)

// ErrEmpty is returned by Pop on an empty stack.
var ErrEmpty = errors.New("empty stack")

type Stack struct {
	items []int
	limit int
}

func (s *Stack) Push(x int) error {
	if len(s.items) >= s.limit && s.limit > 0 {
		return fmt.Errorf("full at %d", s.limit)
	}
	s.items = append(s.items, x)
	return nil
}

func (s *Stack) Pop() (int, error) {
	if len(s.items) == 0 {
		return 0, ErrEmpty
	}
	top := s.items[len(s.items)-1]
	s.items = s.items[:len(s.items)-1]
	return top, nil
}

func (s *Stack) Reset(keep bool) {
	if keep {
		s.items = s.items[:0]
	} else {
		s.items = nil
	}
	s.clear()
}

func (s *Stack) clear() { s.limit = 0 }

func Sum(xs []int) int {
	total := 0
	for i := 0; i < len(xs); i++ {
		total += xs[i]
	}
	return total
}

func Clamp(x, lo, hi int) int {
	if x < lo {
		return lo
	} else if x > hi {
		return hi
	}
	return x
}

func Between(lo, hi int) []int {
	var out []int
	for i := lo; i <= hi; i++ {
		out = append(out, i)
	}
	return out
}

func ParseAll(words []string) ([]int, error) {
	var out []int
	for _, w := range words {
		n, err := parse(w)
		if err != nil {
			return nil, err
		}
		out = append(out, n)
	}
	return out, nil
}

func Drain(steps []func() error) error {
	var err error
	for _, step := range steps {
		err = step()
		if err != nil {
			return err
		}
	}
	return err
}

func parse(w string) (int, error) {
	if w == "" {
		return 0, errors.New("empty word")
	}
	n := 0
	for _, c := range w {
		if c < '0' || c > '9' {
			return 0, fmt.Errorf("not a digit: %q", c)
		}
		n = n*10 + int(c-'0')
	}
	return n, nil
}

func Window(xs []int, from, size int) []int {
	if from+size > len(xs) {
		size = len(xs) - from
	}
	return xs[from : from+size]
}

func Contains(hay, needle string) bool {
	found := strings.Contains(hay, needle)
	if !found {
		return false
	}
	return true
}

func Label(n int, name string) string {
	return "item " + name + string(rune('a'+n))
}

func Count(xs []int, want int) int {
	n := 0
	for _, x := range xs {
		if x == want {
			n++
		}
	}
	return n
}

func Kind(n int) string {
	switch n {
	case 0:
		return "zero"
	case 1:
		return "one"
	}
	if n < 0 {
		return "negative"
	}
	return "many"
}

func Find(grid [][]int, want int) (int, int) {
outer:
	for r, row := range grid {
		for c, v := range row {
			if v == want {
				fmt.Println("found")
				return r, c
			}
			if v > want {
				continue outer
			}
		}
	}
	return -1, -1
}

func Loop(xs []int) int {
	for {
		if len(xs) == 0 {
			return 0
		}
		xs = xs[1:]
	}
}

func Scale(xs []float64, by float64) {
	for i := range xs {
		xs[i] = xs[i] * by
	}
}
"""

# Where Go's rules bite: terminating statements, labels, closures, scopes, type switches.
EDGES = """\
package edges

func Block(x int) int {
	{
		if x > 0 {
			return 1
		}
		panic("no")
	}
}

func Labeled(x int) int {
L:
	for {
		x++
		if x > 3 {
			break L
		}
	}
	return x
}

func Receive(ch chan int, done chan struct{}) int {
	select {
	case v := <-ch:
		return v + 1
	case <-done:
		return 0
	}
}

func Kind(v any) int {
	switch t := v.(type) {
	case int:
		if t > 2 {
			return t
		}
	case string:
		return len(t)
	}
	return 0
}

func Closure(xs []int) (total int) {
	for _, x := range xs {
		func() {
			if x > 0 {
				total += x
			}
		}()
	}
	return
}

func Shadow(m map[string]int, k string) int {
	if v, ok := m[k]; ok {
		return v
	}
	n := len(m)
	if n > 2 {
		n--
	}
	return n
}

func Goto(n int) int {
	i := 0
loop:
	if i < n {
		i += 2
		goto loop
	}
	return i
}

func Either(a, b bool) int {
	if a || b {
		return 1
	} else {
		return 2
	}
}
"""

GO_MOD = "module example.com/mutants\n\ngo 1.21\n"


@pytest.fixture(scope="module")
def mutants() -> list[Mutant]:
    return go_mutants_of_file("calc/stack.go", STACK)


def test_every_operator_finds_a_bug(mutants: list[Mutant]) -> None:
    found = {m.operator for m in mutants}
    assert found == set(GO_OPERATORS), set(GO_OPERATORS) - found


def _edit_span(original: str, mutated: str) -> tuple[int, int, int]:
    """Common prefix and suffix lengths: the mutated text is one replaced range."""
    prefix = 0
    while prefix < min(len(original), len(mutated)) and original[prefix] == mutated[prefix]:
        prefix += 1
    suffix = 0
    while (
        suffix < min(len(original), len(mutated)) - prefix
        and original[-1 - suffix] == mutated[-1 - suffix]
    ):
        suffix += 1
    return prefix, len(original) - suffix, len(mutated) - suffix


def test_mutants_differ_and_sit_in_their_function(mutants: list[Mutant]) -> None:
    targets = {t.qualname: t for t in go_function_targets("calc/stack.go", STACK)}
    assert {"Stack.Push", "Stack.Pop", "Sum", "Find"} <= set(targets)
    for mutant in mutants:
        assert mutant.original == STACK and mutant.mutated != STACK
        start, end, _ = _edit_span(STACK, mutant.mutated)
        first = STACK.count("\n", 0, start) + 1
        last = STACK.count("\n", 0, max(start, end - 1)) + 1
        target = targets[mutant.qualname]
        assert target.start_line <= first and last <= target.end_line, mutant.description
        assert mutant.lines and set(mutant.lines) <= set(
            range(target.start_line, target.end_line + 1)
        )


def test_the_undo_is_byte_exact(tmp_path: Path, mutants: list[Mutant]) -> None:
    """The task's patch is the reverse diff: git applies it to the mutant and gets the file
    back, byte for byte (a sample across operators)."""
    by_operator: dict[str, Mutant] = {}
    for mutant in mutants:
        by_operator.setdefault(mutant.operator, mutant)
    git = ["git", "-c", "core.autocrlf=false"]
    for mutant in by_operator.values():
        repo = tmp_path / mutant.operator
        (repo / "calc").mkdir(parents=True)
        subprocess.run([*git, "init", "-q", str(repo)], check=True)
        target = repo / "calc" / "stack.go"
        target.write_text(mutant.original)
        subprocess.run([*git, "-C", str(repo), "add", "-A"], check=True)
        subprocess.run(
            [
                *git,
                "-C",
                str(repo),
                "-c",
                "user.name=t",
                "-c",
                "user.email=t@t",
                "commit",
                "-qm",
                "o",
            ],
            check=True,
        )
        target.write_text(mutant.mutated)
        undo = subprocess.run(
            [*git, "-C", str(repo), "diff", "-R"], check=True, capture_output=True
        ).stdout
        subprocess.run([*git, "-C", str(repo), "apply"], input=undo, check=True)
        assert target.read_bytes() == STACK.encode(), mutant.description


def _build_each(tmp_path: Path, mutants: list[Mutant]) -> dict[int, str]:
    """``go build ./...`` over a module with mutant i as package ``m<i>``: {i: compiler errors}."""
    (tmp_path / "go.mod").write_text(GO_MOD)
    for i, mutant in enumerate(mutants):
        folder = tmp_path / f"m{i}"
        folder.mkdir()
        (folder / "code.go").write_text(mutant.mutated)
    for i, source in enumerate((STACK, EDGES)):
        (tmp_path / f"orig{i}").mkdir()
        (tmp_path / f"orig{i}" / "code.go").write_text(source)
    proc = subprocess.run(
        ["go", "build", "./..."],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env={**_go_env(tmp_path)},
        timeout=600,
    )
    errors: dict[int, str] = {}
    for line in proc.stderr.splitlines():
        match = re.match(r"^(?:\./)?m(\d+)/", line)
        if match:
            errors.setdefault(int(match.group(1)), line)
        assert not line.startswith(("orig", "./orig")), line
    return errors


def _go_env(tmp_path: Path) -> dict[str, str]:
    return {
        **os.environ,
        "GOFLAGS": "-mod=mod",
        "GOPROXY": "off",
        "GOTOOLCHAIN": "local",
    }


@pytest.mark.usefixtures("host_go")
def test_every_mutant_compiles(tmp_path: Path, mutants: list[Mutant]) -> None:
    every = mutants + go_mutants_of_file("edges/edges.go", EDGES)
    errors = _build_each(tmp_path, every)
    failed = [f"{every[i].operator}: {every[i].description}: {e}" for i, e in errors.items()]
    assert not failed, "\n".join(failed)


def test_go_rules_that_decide_which_edits_exist() -> None:
    made = go_mutants_of_file("edges/edges.go", EDGES)
    removed = {(m.qualname, m.operator) for m in made if m.operator.startswith("remove")}
    # `panic("no")` ends Block's body, `for {` ends Labeled's path to its label
    assert not any(m.qualname == "Block" and "panic" not in m.mutated for m in made)
    # the label's only use: its `break L` stays (remove_conditional of `if x > 3`)
    assert ("Labeled", "remove_conditional") not in removed
    # `goto loop` is the label's only use: the `if` holding it stays; `i += 2` may go
    assert ("Goto", "remove_conditional") not in removed
    assert ("Goto", "remove_assignment") in removed
    # the closure's `if x > 0` may go: `x` is the range's own, read nowhere else, so not
    assert ("Closure", "remove_conditional") not in removed
    # `n--` may go (n is read by the return), and the `if` around it
    assert {("Shadow", "remove_assignment"), ("Shadow", "remove_conditional")} <= removed
    assert any(m.qualname == "Either" and m.operator == "swap_if_else" for m in made)
    # `t` is read in both clauses: removing one clause's `if` leaves the other's read
    assert ("Kind", "remove_conditional") in removed


def test_removals_that_would_not_compile_are_not_made(mutants: list[Mutant]) -> None:
    descriptions = [m.description for m in mutants]
    # `n, err := parse(w)`: without its check, err is declared and not used
    assert not any("remove the error check" in d and "ParseAll" in d for d in descriptions)
    # `continue outer` is the label's only use
    assert not any(
        "continue outer" in m.original and "continue outer" not in m.mutated for m in mutants
    )
    # `fmt.Println("found")` is quiet; the file's other fmt uses keep the import
    assert not any(m.operator == "remove_statement" and "Println" in m.description for m in mutants)
    # the `for {` of Loop ends a function that returns: it is never removed nor broken out of
    assert not any(
        m.qualname == "Loop" and m.operator in ("remove_loop", "break_loop_early") for m in mutants
    )
    # a `case 0:` constant would duplicate `case 1:`
    assert not any(m.qualname == "Kind" and "change `0`" in m.description for m in mutants)
    # `a + b` on strings is never made `a - b`; `xs[i] * by` on floats may be
    assert not any(m.qualname == "Contains" and m.operator == "swap_arith_op" for m in mutants)
    # in `"item " + name + string(...)` only the rune arithmetic inside may swap
    label = [m for m in mutants if m.qualname == "Label" and m.operator == "swap_arith_op"]
    assert len(label) == 1 and "string(rune('a'-n))" in label[0].mutated


def test_an_unused_import_or_variable_is_refused() -> None:
    source = """\
package p

import "strings"

func Up(s string) string {
	v, err := get(s)
	if err != nil {
		return ""
	}
	if v != "" {
		s = strings.ToUpper(v)
	}
	return s
}

func get(s string) (string, error) { return s, nil }
"""
    made = go_mutants_of_file("p/p.go", source)
    assert made
    for mutant in made:
        assert "strings." in mutant.mutated, mutant.description  # the import stays used
        assert "if err" in mutant.mutated or "if !(err" in mutant.mutated, mutant.description


def test_err_check_removed_where_err_stays_used() -> None:
    source = """\
package p

func Run(steps []func() error) error {
	var err error
	for _, step := range steps {
		err = step()
		if err != nil {
			return err
		}
	}
	return err
}
"""
    made = go_mutants_of_file("p/p.go", source, operators=["remove_err_check"])
    assert [m.description for m in made] == ["remove the error check `if err != nil` in Run line 7"]


def test_sampling_is_deterministic_and_an_unparsable_file_is_a_row() -> None:
    files = {"calc/stack.go": STACK, "calc/broken.go": "package calc\n\nfunc Broken( {\n"}
    first, rejected = sample_go_mutants(files, seed=7, max_mutants=12)
    again, _ = sample_go_mutants(files, seed=7, max_mutants=12)
    other, _ = sample_go_mutants(files, seed=8, max_mutants=12)
    assert [m.mutant_id for m in first] == [m.mutant_id for m in again]
    assert [m.mutant_id for m in first] != [m.mutant_id for m in other]
    assert len(first) == 12 and len({m.mutated for m in first}) == 12
    assert len({m.operator for m in first}) >= 8  # picks go round the operators
    assert rejected == [
        ("calc/broken.go", "unparsable_file", "calc/broken.go: does not parse as Go")
    ]


def test_a_file_no_linux_amd64_build_compiles_gives_no_mutant() -> None:
    ignored = "//go:build ignore\n\n" + STACK
    made, rejected = sample_go_mutants({"gen/main.go": ignored}, seed=1, max_mutants=5)
    assert made == []
    assert rejected == [
        ("gen/main.go", "no_targets", "gen/main.go: not built on linux/amd64 (//go:build ignore)")
    ]


class _OnlyLines:
    def __init__(self, path: str, lines: range) -> None:
        self.path, self.lines = path, lines

    def executes(self, path: str, first: int, last: int) -> bool:
        return path == self.path and any(line in self.lines for line in range(first, last + 1))


def test_a_guide_keeps_the_draw_to_executed_lines() -> None:
    sum_lines = range(STACK.splitlines().index("func Sum(xs []int) int {") + 1, 200)
    sum_lines = range(sum_lines.start, sum_lines.start + 8)
    made, _ = sample_go_mutants(
        {"calc/stack.go": STACK},
        seed=1,
        max_mutants=50,
        guide=_OnlyLines("calc/stack.go", sum_lines),
    )
    assert made and {m.qualname for m in made} == {"Sum"}


def test_unknown_operator_is_one_line() -> None:
    with pytest.raises(ParamsError, match="unknown Go mutation operator 'nope'"):
        sample_go_mutants({"a.go": STACK}, seed=1, max_mutants=1, operators=["nope"])


def test_a_receiver_is_no_import() -> None:
    """``s.items`` is the receiver's: removing its file's last ``s.`` compiles (a package's last
    ``pkg.`` would not)."""
    source = """\
package p

type Stack[T any] struct{ items []T }

func (s *Stack[T]) Push(x T) {
	if len(s.items) < 10 {
		s.items = append(s.items, x)
	}
}
"""
    made = go_mutants_of_file("p/p.go", source, operators=["remove_conditional"])
    assert [m.description for m in made] == ["remove `if len(s.items) < 10` in Stack.Push line 6"]


GO_REPO = {
    "go.mod": "module example.com/calc\n\ngo 1.21\n",
    "calc/stack.go": STACK,
    "calc/stack_test.go": 'package calc\n\nimport "testing"\n\nfunc TestSum(t *testing.T) {\n'
    '\tif Sum([]int{1, 2}) != 3 {\n\t\tt.Fatal("sum")\n\t}\n}\n',
    "edges/edges.go": EDGES,
    "calc/stack_windows.go": STACK.replace("package calc", "package calc\n\nvar _ = 0", 1),
    "gen/main.go": "//go:build ignore\n\n" + STACK.replace("package calc", "package main", 1),
    "calc/testdata/fixture.go": STACK,
    "vendor/example.com/dep/dep.go": STACK,
    "api/v1/user.pb.go": STACK.replace("package calc", "package v1", 1),
}


@pytest.mark.usefixtures("host_go")
def test_inject_on_a_go_repository(tmp_path: Path) -> None:
    """inject through the registry's Go: bugs only in library sources linux/amd64 builds, each
    bug_patch applies with git, the tree then builds with go, and its patch gives the clean
    files back byte for byte."""
    from repo_factory import RepoBuilder
    from trajforge.generators.bugs.injector import inject_snapshot
    from trajforge.generators.sources.specs import SourceOptions, open_source
    from trajforge.schemas.diff import parse_patch
    from trajforge.schemas.params import InjectParams, Params

    builder = RepoBuilder(tmp_path / "calc")
    builder.commit("calc", dict(GO_REPO))
    repo = open_source(str(builder.path), SourceOptions(cache_dir=str(tmp_path / "cache")))
    params = InjectParams(max_candidates=10, seed=5, min_complexity=1)
    result = inject_snapshot(repo, params, Params().mine.skip_globs)
    assert result.language == "go"
    candidates = result.candidates
    assert len(candidates) == 10 and len({c.origin for c in candidates}) >= 6
    touched = {f for c in candidates for f in parse_patch(c.bug_patch).files}
    assert touched <= {"calc/stack.go", "edges/edges.go"}, touched
    work = tmp_path / "work"
    subprocess.run(["git", "clone", "-q", str(builder.path), str(work)], check=True)
    clean = {name: (work / name).read_bytes() for name in touched}
    git = ["git", "-C", str(work)]
    for c in candidates:
        subprocess.run([*git, "apply", "-"], input=c.bug_patch.encode(), check=True)
        built = subprocess.run(
            ["go", "build", "./calc", "./edges"],
            cwd=work,
            capture_output=True,
            text=True,
            env=_go_env(tmp_path),
        )
        assert built.returncode == 0, (c.origin, built.stderr)
        subprocess.run([*git, "apply", "-"], input=c.patch.encode(), check=True)
        assert {name: (work / name).read_bytes() for name in touched} == clean, c.origin
