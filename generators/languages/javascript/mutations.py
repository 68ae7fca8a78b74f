"""Procedural bug injection for JavaScript and TypeScript: the JS counterpart of mutations.py.

The engine is ``mutants/byte_edits.py`` (Go's too): one byte-range replacement inside one
function body, so the reverse diff undoes it exactly. JavaScript's check: a mutant parses as
well as its file did (no new ERROR or MISSING node in tree-sitter's tree).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from trajforge.generators.languages.javascript.operators import JS_OPERATORS
from trajforge.generators.languages.javascript.syntax import JsFile
from trajforge.generators.mutants.byte_edits import Edit, Mutator
from trajforge.generators.mutants.mutant import Mutant
from trajforge.generators.mutants.targets import FunctionTarget

__all__ = ["JS_OPERATORS", "js_function_targets", "js_mutants_of_file", "sample_js_mutants"]


class JsMutator(Mutator[JsFile]):
    """JavaScript's and TypeScript's operators; a mutant must parse as its file did."""

    def acceptor(self, file: JsFile) -> Callable[[int, Edit, bytes], bool]:
        return lambda _index, edit, new: file.parses_with(edit.start, edit.end, new)


JS_MUTATOR = JsMutator(JS_OPERATORS, JsFile)


def js_function_targets(path: str, source: str) -> list[FunctionTarget]:
    """Every function target of a JS/TS file, in source order."""
    return JS_MUTATOR.targets(path, source)


def js_mutants_of_file(
    path: str, source: str, operators: Sequence[str] | None = None, min_complexity: int = 1
) -> list[Mutant]:
    """Every single mutation of every function with ``complexity >= min_complexity``."""
    return JS_MUTATOR.mutants_of_file(path, source, operators, min_complexity)


# ``Language.sample_mutants``: with a guide, only edits on executed lines
sample_js_mutants = JS_MUTATOR.sample
