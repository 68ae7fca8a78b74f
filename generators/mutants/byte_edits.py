"""Bug injection by one byte-range edit on a tree-sitter tree: the engine Go's and JavaScript's
samplers share.

An operator reads a node inside a function body and yields ``Edit``s (replace bytes
``start:end`` of the file with ``new``). Every other byte stays as it was, so the reverse diff
(the task's patch) undoes the bug byte for byte. The engine walks each function's body, offers
each node to the operators that read its type, and makes a ``Mutant`` of an edit the language
accepts (``Mutator.accepts``: it parses, and for Go it compiles as far as a tree can tell); an
edit that changes nothing, or makes a text made before, is left out. Sampling is
``sampling.draw_sites``'s, as for Python: round the operators, functions drawn by complexity,
reproducible from a seed, and with a coverage guide only at edits on executed lines.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar

import tree_sitter
from trajforge.generators.mutants.mutant import Mutant
from trajforge.generators.mutants.sampling import Site, Sites, draw_mutants, text_digest
from trajforge.generators.mutants.syntax_tree import TreeFile
from trajforge.generators.mutants.targets import FunctionTarget, MutationSourceError, Unparsable
from trajforge.schemas.errors import ParamsError

F = TypeVar("F", bound=TreeFile)


class LineGuide(Protocol):
    """What sampling asks a coverage guide (``Language``'s ``SiteGuide`` is one)."""

    def executes(self, path: str, first: int, last: int) -> bool: ...


@dataclass(frozen=True)
class Edit:
    """Replace bytes ``start:end`` with ``new``; ``focus`` is the code the bug sits in."""

    start: int
    end: int
    new: str
    focus: tree_sitter.Node  # its lines select the tests that cover the mutant
    what: str  # e.g. "flip `<` to `>=`"; the engine appends where

    @classmethod
    def of(cls, node: tree_sitter.Node, new: str, focus: tree_sitter.Node, what: str) -> Edit:
        """``node``'s bytes replaced by ``new``."""
        return cls(node.start_byte, node.end_byte, new, focus, what)

    def lines(self) -> tuple[int, int]:
        """The first and last line (1-based) of the code the bug sits in."""
        return self.focus.start_point.row + 1, self.focus.end_point.row + 1


@dataclass(frozen=True)
class Operator(Generic[F]):
    name: str
    node_types: frozenset[str]  # the walk calls ``find`` on these nodes only
    find: Callable[[F, tree_sitter.Node], Iterator[Edit]]
    example: str  # one line, for reports and docs


class Operators(dict[str, Operator[F]]):
    """A language's operators by name, filled by ``register`` as its module is read."""

    def __init__(self, language: str) -> None:
        super().__init__()
        self.language = language

    def register(
        self, name: str, *node_types: str, example: str
    ) -> Callable[[Callable[[F, tree_sitter.Node], Iterator[Edit]]], Any]:
        def add(find: Callable[[F, tree_sitter.Node], Iterator[Edit]]) -> Any:
            self[name] = Operator(name, frozenset(node_types), find, example)
            return find

        return add

    def pick(self, names: Sequence[str] | None) -> list[Operator[F]]:
        """The operators ``names`` asks for (all of them for None), each once."""
        if names is None:
            return list(self.values())
        unknown = [n for n in names if n not in self]
        if unknown:
            known = ", ".join(self)
            raise ParamsError(
                f"unknown {self.language} mutation operator {unknown[0]!r}; choose from {known}"
            )
        return [self[n] for n in dict.fromkeys(names)]


def apply_edit(file: TreeFile, edit: Edit) -> str:
    """The file's text with one edit: bytes outside ``start:end`` are the original's."""
    data = file.data[: edit.start] + edit.new.encode("utf-8") + file.data[edit.end :]
    return file.bom + data.decode("utf-8")


class Mutator(Generic[F]):
    """One language's sampler: its file reader, its operators, and what it accepts."""

    def __init__(self, operators: Operators[F], read: Callable[[str, str], F]) -> None:
        self.operators = operators
        self.read = read  # (path, source) -> the parsed file; MutationSourceError if it is none

    def excluded(self, path: str, source: str) -> str:
        """Why no bug in this file could be seen by a test ("" when one could)."""
        return ""

    def acceptor(self, file: F) -> Callable[[int, Edit, bytes], bool]:
        """Whether the file with an edit in its ``index``-th function is still a program (the
        language's check; the answer may keep per-file facts between calls)."""
        raise NotImplementedError

    def targets(self, path: str, source: str) -> list[FunctionTarget]:
        """Every function target of a file, in source order."""
        file = self.read(path, source)
        return [f.target(path) for f in file.functions]

    def mutants_of_file(
        self,
        path: str,
        source: str,
        operators: Sequence[str] | None = None,
        min_complexity: int = 1,
    ) -> list[Mutant]:
        """Every single mutation of every function with ``complexity >= min_complexity``, by
        function, then operator, then position; a mutated text made before is left out."""
        ops = self.operators.pick(operators)
        file = self.read(path, source)
        accepts = self.acceptor(file)
        seen = {text_digest(source)}
        mutants = []
        for index, function in enumerate(file.functions):
            if function.complexity < min_complexity:
                continue
            for name, edits in _edits(file, index, ops).items():
                for edit in edits:
                    mutant = _mutant(file, accepts, index, name, edit)
                    if mutant is not None and text_digest(mutant.mutated) not in seen:
                        seen.add(text_digest(mutant.mutated))
                        mutants.append(mutant)
        return mutants

    def sample(
        self,
        files: Mapping[str, str],
        *,
        seed: int,
        max_mutants: int,
        operators: Sequence[str] | None = None,
        min_complexity: int = 2,
        guide: LineGuide | None = None,
    ) -> tuple[list[Mutant], Unparsable]:
        """Up to ``max_mutants`` mutants across files, reproducible from ``seed``: the contract
        of ``Language.sample_mutants``. With a ``guide``, only edits on lines a passing test
        executes are drawn. A file that does not
        parse is a ``(path, reason, detail)`` row, never an error."""
        ops = self.operators.pick(operators)
        rejected: Unparsable = []
        sites: Sites = {op.name: {} for op in ops}
        complexity: dict[tuple[str, int], int] = {}
        parsed: dict[str, tuple[F, Callable[[int, Edit, bytes], bool]]] = {}
        for path in sorted(files):
            try:
                file = self.read(path, files[path])
            except MutationSourceError as exc:
                rejected.append((path, exc.reason, str(exc)))
                continue
            if why := self.excluded(path, files[path]):
                rejected.append((path, "no_targets", why))
                continue
            parsed[path] = file, self.acceptor(file)
            found = False
            for index, function in enumerate(file.functions):
                if function.complexity < min_complexity:
                    continue
                for name, edits in _edits(file, index, ops).items():
                    kept = [
                        k
                        for k, edit in enumerate(edits)
                        if guide is None or guide.executes(path, *edit.lines())
                    ]
                    if kept:
                        sites[name][(path, index)] = kept
                        complexity[(path, index)] = function.complexity
                        found = True
            if not found:
                detail = f"{path}: no function with complexity >= {min_complexity} to mutate"
                rejected.append((path, "no_targets", detail))

        def make(batch: list[Site]) -> Iterator[Mutant | None]:
            for site in batch:
                file, accepts = parsed[site.path]
                operator = self.operators[site.operator]
                edit = _edits(file, site.function, [operator])[site.operator][site.edit]
                yield _mutant(file, accepts, site.function, site.operator, edit)

        mutants = draw_mutants(sites, complexity, seed, max_mutants, files.values(), make)
        return mutants, rejected


def _edits(file: F, index: int, ops: Sequence[Operator[F]]) -> dict[str, list[Edit]]:
    found: dict[str, list[Edit]] = {op.name: [] for op in ops}
    for node in file.body_nodes(index):
        for op in ops:
            if node.type in op.node_types:
                found[op.name].extend(op.find(file, node))
    return found


def _mutant(
    file: TreeFile,
    accepts: Callable[[int, Edit, bytes], bool],
    index: int,
    operator: str,
    edit: Edit,
) -> Mutant | None:
    new = edit.new.encode("utf-8")
    if new == file.data[edit.start : edit.end] or not accepts(index, edit, new):
        return None
    texts = file.bom + file.text, apply_edit(file, edit)
    qualname = file.functions[index].qualname
    return Mutant.of_edit(file.path, qualname, operator, texts, edit.lines(), edit.what)
