"""Procedural bug injection for Go: the Go counterpart of the Python and JavaScript samplers.

Same records (``Mutant``, ``FunctionTarget``), same sampling (``sampling.draw_sites``: round the
operators, functions drawn by complexity), so inject treats a Go mutant as any other. A mutant is
one byte-range replacement inside one function body, so every other byte of the file is unchanged
and the reverse diff undoes it exactly. A mutant is dropped when it changes nothing, does not
parse, or leaves what the Go compiler refuses and a parser does not see: a local variable or
label nothing uses any more, an import whose last reference it removed (``scopes.py``).
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Mapping, Sequence
from itertools import islice

from trajforge.generators.languages.base import SiteGuide, Unparsable
from trajforge.generators.languages.go.operators import GO_OPERATORS, GoEdit, GoOperator
from trajforge.generators.languages.go.scopes import qualifiers, unused_locals
from trajforge.generators.languages.go.syntax import GoFile
from trajforge.generators.mutants.mutant import Mutant
from trajforge.generators.mutants.sampling import Sites, draw_sites, text_digest
from trajforge.generators.mutants.targets import FunctionTarget, MutationSourceError
from trajforge.schemas.errors import ParamsError
from trajforge.schemas.records import content_id

__all__ = [
    "GO_OPERATORS",
    "apply_edit",
    "go_function_targets",
    "go_mutants_of_file",
    "sample_go_mutants",
]


def _operators(names: Sequence[str] | None) -> list[GoOperator]:
    if names is None:
        return list(GO_OPERATORS.values())
    unknown = [n for n in names if n not in GO_OPERATORS]
    if unknown:
        known = ", ".join(GO_OPERATORS)
        raise ParamsError(f"unknown Go mutation operator {unknown[0]!r}; choose from {known}")
    return [GO_OPERATORS[n] for n in dict.fromkeys(names)]


def _edits(file: GoFile, index: int, ops: Sequence[GoOperator]) -> dict[str, list[GoEdit]]:
    found: dict[str, list[GoEdit]] = {op.name: [] for op in ops}
    for node in file.body_nodes(index):
        for op in ops:
            if node.type in op.node_types:
                found[op.name].extend(op.find(file, node))
    return found


def apply_edit(file: GoFile, edit: GoEdit) -> str:
    """The file's text with one edit: bytes outside ``start:end`` are the original's."""
    data = file.data[: edit.start] + edit.new.encode("utf-8") + file.data[edit.end :]
    return file.bom + data.decode("utf-8")


class _Checked:
    """One file's compile facts, computed once per function: its unused names (none, for a file
    that compiles, but the check is by name and compares like with like) and its qualifiers."""

    def __init__(self, file: GoFile) -> None:
        self.file = file
        self._facts: dict[int, tuple[Counter[str], Counter[str]]] = {}
        self._qualifiers: Counter[str] | None = None

    def facts(self, index: int) -> tuple[Counter[str], Counter[str]]:
        if index not in self._facts:
            node = self.file.functions[index].node
            self._facts[index] = (
                unused_locals(self.file.data, node),
                qualifiers(self.file.data, node),
            )
        return self._facts[index]

    def file_qualifiers(self) -> Counter[str]:
        if self._qualifiers is None:
            self._qualifiers = qualifiers(self.file.data, self.file.tree.root_node)
        return self._qualifiers

    def compiles(self, index: int, edit: GoEdit, new: bytes) -> bool:
        """The mutated file parses, and leaves no name unused that the original used: no local
        or label of the function, no qualifier (an import) of the file."""
        tree = self.file.reparsed(edit.start, edit.end, new)
        if tree.root_node.has_error:
            return False
        mutated = self.file.data[: edit.start] + new + self.file.data[edit.end :]
        original = self.file.functions[index].node
        function = tree.root_node.descendant_for_byte_range(
            original.start_byte, original.start_byte
        )
        while function is not None and function.type != original.type:
            function = function.parent
        if function is None or function.start_byte != original.start_byte:
            return False
        unused, used = self.facts(index)
        if unused_locals(mutated, function) - unused:
            return False
        # the rest of the file is unchanged: its references are the file's less the function's
        rest = self.file_qualifiers() - used
        after = qualifiers(mutated, function)
        return all(after[name] or rest[name] for name in used)


def _mutant(checked: _Checked, index: int, operator: str, edit: GoEdit) -> Mutant | None:
    file = checked.file
    new = edit.new.encode("utf-8")
    if new == file.data[edit.start : edit.end]:
        return None
    if not checked.compiles(index, edit, new):
        return None
    mutated = apply_edit(file, edit)
    first, last = edit.focus.start_point.row + 1, edit.focus.end_point.row + 1
    qualname = file.functions[index].qualname
    return Mutant(
        mutant_id=content_id(file.path, operator, mutated),
        path=file.path,
        qualname=qualname,
        operator=operator,
        original=file.bom + file.text,
        mutated=mutated,
        lines=tuple(range(first, last + 1)),
        description=f"{edit.what} in {qualname} line {first}",
    )


def _lines(edit: GoEdit) -> tuple[int, int]:
    return edit.focus.start_point.row + 1, edit.focus.end_point.row + 1


def go_function_targets(path: str, source: str) -> list[FunctionTarget]:
    """Every function target of a Go file, in source order."""
    file = GoFile(path, source)
    return [f.target(path) for f in file.functions]


def go_mutants_of_file(
    path: str, source: str, operators: Sequence[str] | None = None, min_complexity: int = 1
) -> list[Mutant]:
    """Every single mutation of every function with ``complexity >= min_complexity``, by
    function, then operator, then position; a mutated text made before is left out."""
    ops = _operators(operators)
    checked = _Checked(GoFile(path, source))
    seen = {text_digest(source)}
    mutants = []
    for index, function in enumerate(checked.file.functions):
        if function.complexity < min_complexity:
            continue
        for name, edits in _edits(checked.file, index, ops).items():
            for edit in edits:
                mutant = _mutant(checked, index, name, edit)
                if mutant is not None and text_digest(mutant.mutated) not in seen:
                    seen.add(text_digest(mutant.mutated))
                    mutants.append(mutant)
    return mutants


def sample_go_mutants(
    files: Mapping[str, str],
    *,
    seed: int,
    max_mutants: int,
    operators: Sequence[str] | None = None,
    min_complexity: int = 2,
    guide: SiteGuide | None = None,
) -> tuple[list[Mutant], Unparsable]:
    """Up to ``max_mutants`` mutants across files, reproducible from ``seed``: the contract of
    ``Language.sample_mutants``. With a ``guide``, only edits on lines a passing test executes
    are drawn. A file that does not parse is a ``(path, reason, line)`` row, never an error."""
    ops = _operators(operators)
    rejected: Unparsable = []
    sites: Sites = {op.name: {} for op in ops}
    complexity: dict[tuple[str, int], int] = {}
    checked: dict[str, _Checked] = {}
    for path in sorted(files):
        try:
            file = GoFile(path, files[path])
        except MutationSourceError as exc:
            rejected.append((path, exc.reason, str(exc)))
            continue
        checked[path] = _Checked(file)
        found = False
        for index, function in enumerate(file.functions):
            if function.complexity < min_complexity:
                continue
            for name, edits in _edits(file, index, ops).items():
                kept = [
                    k
                    for k, edit in enumerate(edits)
                    if guide is None or guide.executes(path, *_lines(edit))
                ]
                if kept:
                    sites[name][(path, index)] = kept
                    complexity[(path, index)] = function.complexity
                    found = True
        if not found:
            detail = f"{path}: no function with complexity >= {min_complexity} to mutate"
            rejected.append((path, "no_targets", detail))
    picks = draw_sites(sites, complexity, random.Random(seed))
    mutants: list[Mutant] = []
    seen = {text_digest(text) for text in files.values()}
    while len(mutants) < max_mutants:
        batch = list(islice(picks, max_mutants - len(mutants)))
        if not batch:
            break
        for site in batch:
            check = checked[site.path]
            edit = _edits(check.file, site.function, [GO_OPERATORS[site.operator]])[site.operator]
            mutant = _mutant(check, site.function, site.operator, edit[site.edit])
            if mutant is not None and text_digest(mutant.mutated) not in seen:
                seen.add(text_digest(mutant.mutated))
                mutants.append(mutant)
    return mutants, rejected
