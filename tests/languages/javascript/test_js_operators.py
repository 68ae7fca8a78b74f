"""JS/TS bug operators on tree-sitter's trees: each applies, parses, and undoes byte for byte."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from trajforge.generators.languages.javascript.mutations import (
    JS_OPERATORS,
    js_function_targets,
    js_mutants_of_file,
    sample_js_mutants,
)
from trajforge.generators.languages.javascript.syntax import grammar_of, parse, parses
from trajforge.generators.mutants.mutant import Mutant
from trajforge.generators.mutants.targets import FunctionTarget, MutationSourceError
from trajforge.schemas.diff import parse_patch, unified_diff
from trajforge.schemas.errors import ParamsError

JS = """\ufeff// Stack — une pile, déjà testée ✓
'use strict';

class Stack {
  /* push: keeps positives only */
  push(x) {
    if (x > 0 && this.ok) {
      this.items.push(x); // «kept»
    } else {
      this.count += 1;
    }
    return this.items?.length;
  }
}

const add = (a, b) => a + b;

export function total(xs, limit = 3) {
  let sum = 0;
  for (let i = 0; i < xs.length; i++) {
    if (xs[i] === null) continue;
    sum += xs[i];
  }
  while (!done(sum)) {
    sum = Math.max(sum, limit);
  }
  console.log("total", sum);
  return sum > limit ? limit : sum.toFixed?.(2);
}
"""

TS = """// Ranges — 範囲
interface Range { lo: number; hi: 0 | 1 }

export class Ranges<T extends object> {
  private items: Array<Range> = [];

  contains(r: Range, x: number): boolean {
    if (!(r.lo <= x) || x >= r.hi) {
      return false;
    }
    return this.items.every((i: Range) => i.lo < i.hi) && r?.lo !== undefined;
  }

  widen = (r: Range, by: number = 1): Range => {
    const lo = r.lo - by as number;
    for (const item of this.items) {
      item.hi *= 2;
    }
    return { lo: Math.min(lo, r.hi), hi: r.hi } as Range;
  };
}
"""

TSX = """import * as React from 'react';

// Liste — 一覧 with émojis 🎉
export function List({ items, limit }: { items: string[]; limit: number }) {
  const shown = items.slice(0, limit);
  if (shown.length === 0) {
    return <p className="empty">rien</p>;
  }
  return (
    <ul>
      {shown.map((item, i) => (i < limit - 1 ? <li key={i}>{item}</li> : null))}
    </ul>
  );
}
"""

SOURCES = {"src/stack.js": JS, "src/ranges.ts": TS, "src/list.tsx": TSX}


def _git(repo: Path, *args: str, stdin: bytes | None = None) -> bytes:
    return subprocess.run(
        ["git", "-C", str(repo), *args], input=stdin, check=True, capture_output=True
    ).stdout


@pytest.fixture(scope="module")
def mutants() -> dict[str, list[Mutant]]:
    return {path: js_mutants_of_file(path, text) for path, text in SOURCES.items()}


def test_every_operator_applies_to_js_ts_or_tsx(mutants: dict[str, list[Mutant]]) -> None:
    used = {m.operator for found in mutants.values() for m in found}
    assert used == set(JS_OPERATORS)
    for path, found in mutants.items():
        assert len({m.operator for m in found}) >= 8, (path, {m.operator for m in found})


def test_every_mutant_parses_and_changes_one_span_inside_its_function(
    mutants: dict[str, list[Mutant]],
) -> None:
    for path, found in mutants.items():
        grammar = grammar_of(path)
        assert not parse(grammar, SOURCES[path].encode()).root_node.has_error
        targets = {t.qualname: t for t in js_function_targets(path, SOURCES[path])}
        for m in found:
            assert m.original == SOURCES[path]
            assert parses(grammar, m.mutated.removeprefix("\ufeff").encode()), m.description
            head = len(_common_prefix(m.original, m.mutated))
            tail = len(_common_prefix(m.original[head:][::-1], m.mutated[head:][::-1]))
            first = m.original[:head].count("\n") + 1
            last = m.original[: len(m.original) - tail].count("\n") + 1
            target = targets[m.qualname]
            assert target.start_line <= first <= last <= target.end_line, m.description
            assert m.lines and target.start_line <= m.lines[0] <= target.end_line


def _common_prefix(a: str, b: str) -> str:
    n = 0
    while n < min(len(a), len(b)) and a[n] == b[n]:
        n += 1
    return a[:n]


def test_every_mutant_is_undone_byte_exactly_by_its_reverse_patch(
    mutants: dict[str, list[Mutant]], tmp_path: Path
) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    _git(repo, "init", "-q")
    count = 0
    for path, found in mutants.items():
        file = repo / path
        file.parent.mkdir(parents=True, exist_ok=True)
        for m in found:
            file.write_bytes(m.mutated.encode())
            patch = unified_diff(path, m.mutated, m.original)  # the task's patch: the fix
            assert set(parse_patch(patch).files) == {path}
            _git(repo, "apply", "-", stdin=patch.encode())
            assert file.read_bytes() == SOURCES[path].encode(), m.description
            count += 1
    assert count > 60


def test_type_annotations_are_never_mutated(mutants: dict[str, list[Mutant]]) -> None:
    for m in mutants["src/ranges.ts"]:
        assert "hi: 0 | 1" in m.mutated and "by: number = 1" in m.mutated
        assert "Array<Range>" in m.mutated and "<T extends object>" in m.mutated


def test_quiet_calls_and_strings_are_left_alone(mutants: dict[str, list[Mutant]]) -> None:
    for m in mutants["src/stack.js"]:
        assert 'console.log("total", sum);' in m.mutated
    examples = {m.description.split(" in ")[0] for m in mutants["src/stack.js"]}
    assert "flip `>` to `<=`" in examples and "swap `&&` for `||`" in examples


def test_functions_and_qualnames() -> None:
    names = [t.qualname for t in js_function_targets("src/stack.js", JS)]
    assert names == ["Stack.push", "add", "total"]
    names = [t.qualname for t in js_function_targets("src/ranges.ts", TS)]
    assert names == ["Ranges.contains", "Ranges.widen"]


def test_sampling_is_seeded_bounded_and_rejects_unparsable_files() -> None:
    files = {**SOURCES, "src/broken.js": "function f( {\n", "src/flat.js": "export const x = 1;\n"}
    first, rejected = sample_js_mutants(files, seed=7, max_mutants=12, min_complexity=1)
    again, _ = sample_js_mutants(files, seed=7, max_mutants=12, min_complexity=1)
    assert [m.mutant_id for m in first] == [m.mutant_id for m in again]
    assert len(first) == 12 and len({m.mutated for m in first}) == 12
    assert len({m.operator for m in first}) >= 8  # picks go round the operators
    reasons = {path: reason for path, reason, _ in rejected}
    assert reasons == {"src/broken.js": "unparsable_file", "src/flat.js": "no_targets"}
    detail = next(d for p, _, d in rejected if p == "src/broken.js")
    assert "\n" not in detail and "does not parse as javascript" in detail
    totals = [
        (path, t) for path, text in SOURCES.items()
        for t in js_function_targets(path, text) if t.qualname == "total"
    ]  # fmt: skip
    assert len(totals) == 1
    only = sample_js_mutants(SOURCES, seed=1, max_mutants=50, guide=_Runs(*totals[0]))[0]
    assert only and {m.qualname for m in only} == {"total"}


class _Runs:
    """A coverage guide under which a test executes one function's lines and no other."""

    def __init__(self, path: str, target: FunctionTarget) -> None:
        self.path, self.lines = path, range(target.start_line, target.end_line + 1)

    def executes(self, path: str, first: int, last: int) -> bool:
        return path == self.path and any(line in self.lines for line in range(first, last + 1))


def test_bad_input_is_one_clear_error() -> None:
    with pytest.raises(MutationSourceError, match="does not parse as typescript"):
        js_mutants_of_file("a.ts", "let x: = ;\n")
    with pytest.raises(ParamsError, match="unknown JS mutation operator 'nope'"):
        js_mutants_of_file("a.js", JS, operators=["nope"])


def test_a_file_that_is_not_utf8_is_refused_in_one_line() -> None:
    source = "function f(a) {\n  return a < 1 ? '\udcff' : 2;\n}\n"  # a lone byte, as read
    with pytest.raises(MutationSourceError, match=r"a\.js: is not UTF-8 text"):
        js_mutants_of_file("a.js", source)


def test_a_file_the_grammar_refuses_in_part_keeps_its_clear_functions() -> None:
    # a span the grammar refuses (a syntax newer than it) skips its own function, not the file
    refused = "export function odd(x: number) { return x satisfies = ; }\n"
    source = (
        "export function total(a: number, b: number): number {\n"
        "  if (a > b) { return a - b; }\n  return a + b;\n}\n" + refused
    )
    names = [t.qualname for t in js_function_targets("src/index.ts", source)]
    assert names == ["total"]
    mutants, rejected = sample_js_mutants({"src/index.ts": source}, seed=3, max_mutants=20)
    assert mutants and rejected == [] and {m.qualname for m in mutants} == {"total"}
    for mutant in mutants:  # each mutant leaves the refused span as it was, and adds none
        assert mutant.mutated.endswith(refused)
    with pytest.raises(MutationSourceError, match="does not parse as typescript"):
        js_function_targets("src/only.ts", "export function odd(x) { return x satisfies = ; }\n")
