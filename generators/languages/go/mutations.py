"""Procedural bug injection for Go: the Go counterpart of the Python and JavaScript samplers.

Same records (``Mutant``, ``FunctionTarget``), same sampling (``sampling.draw_sites``: round the
operators, functions drawn by complexity), so inject treats a Go mutant as any other. A mutant is
one byte-range replacement inside one function body, so every other byte of the file is unchanged
and the reverse diff undoes it exactly. A file the go tool leaves out of a linux/amd64 build
(``//go:build ignore``, ``windows``) gives none: no test could see its bug. A mutant is dropped
when it changes nothing, does not parse, or leaves what the Go compiler refuses and a parser
does not see: a local variable or label nothing uses any more, an import whose last reference it
removed (``scopes.py``).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from trajforge.generators.languages.go.operators import GO_OPERATORS
from trajforge.generators.languages.go.scopes import locals_of, qualifiers, unused_locals
from trajforge.generators.languages.go.syntax import GoFile
from trajforge.generators.languages.go.test_files import (
    TARGET_ARCH,
    TARGET_OS,
    excluding_constraint,
)
from trajforge.generators.mutants.byte_edits import Edit, Mutator
from trajforge.generators.mutants.mutant import Mutant
from trajforge.generators.mutants.targets import FunctionTarget

__all__ = ["GO_OPERATORS", "go_function_targets", "go_mutants_of_file", "sample_go_mutants"]


class _Checked:
    """One file's compile facts, computed once per function: its unused names (none, for a file
    that compiles, but the check is by name and compares like with like) and its qualifiers."""

    def __init__(self, file: GoFile) -> None:
        self.file = file
        self._facts: dict[int, tuple[Counter[str], Counter[str], Counter[str]]] = {}
        self._qualifiers: Counter[str] | None = None

    def facts(self, index: int) -> tuple[Counter[str], Counter[str], Counter[str]]:
        """The function's unused names, its qualifiers, and those of them that may be imports
        (not its receiver's, parameters' or locals' ``s.items``)."""
        if index not in self._facts:
            node = self.file.functions[index].node
            declared, unused = locals_of(self.file.data, node)
            used = qualifiers(self.file.data, node)
            imports = Counter({name: n for name, n in used.items() if name not in declared})
            self._facts[index] = unused, used, imports
        return self._facts[index]

    def file_qualifiers(self) -> Counter[str]:
        if self._qualifiers is None:
            self._qualifiers = qualifiers(self.file.data, self.file.tree.root_node)
        return self._qualifiers

    def __call__(self, index: int, edit: Edit, new: bytes) -> bool:
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
        unused, used, imports = self.facts(index)
        if unused_locals(mutated, function) - unused:
            return False
        # the rest of the file is unchanged: its references are the file's less the function's
        rest = self.file_qualifiers() - used
        after = qualifiers(mutated, function)
        return all(after[name] or rest[name] for name in imports)


class GoMutator(Mutator[GoFile]):
    """Go's operators; a file left out of a linux/amd64 build gives none, and a mutant must
    compile as far as its tree tells (``_Checked``)."""

    def excluded(self, path: str, source: str) -> str:
        if constraint := excluding_constraint(source):
            return f"{path}: not built on {TARGET_OS}/{TARGET_ARCH} ({constraint})"
        return ""

    def acceptor(self, file: GoFile) -> _Checked:
        return _Checked(file)


GO_MUTATOR = GoMutator(GO_OPERATORS, GoFile)


def go_function_targets(path: str, source: str) -> list[FunctionTarget]:
    """Every function target of a Go file, in source order."""
    return GO_MUTATOR.targets(path, source)


def go_mutants_of_file(
    path: str, source: str, operators: Sequence[str] | None = None, min_complexity: int = 1
) -> list[Mutant]:
    """Every single mutation of every function with ``complexity >= min_complexity``."""
    return GO_MUTATOR.mutants_of_file(path, source, operators, min_complexity)


# ``Language.sample_mutants``: with a guide, only edits on executed lines
sample_go_mutants = GO_MUTATOR.sample
