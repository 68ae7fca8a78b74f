"""Procedural bug injection: every single-site mutation of a file's functions, or a sample of them.

A mutant rewrites one node inside one function body and leaves every other byte of the file as it
was, so its reverse diff (the task's ``patch``) touches only the bug. libcst gives the tree and
where each node sits in the text; the rewritten node is printed under the indentation of its
enclosing blocks and spliced into the original text. A splice that would not reproduce the
original node exactly falls back to printing the whole module (slower, equally exact).

Qualnames are dotted paths of the enclosing classes and functions ("Stack.push", "outer.inner"),
without Python's ``<locals>``.
"""

from __future__ import annotations

import dataclasses
import random
import re
import textwrap
import warnings
from bisect import bisect_right
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from functools import cached_property
from itertools import pairwise

import libcst as cst
from libcst._nodes.internal import CodegenState  # printing a node under enclosing indentation
from trajforge.generators.languages.python.operators import OPERATORS, Edit, Operator, Parents
from trajforge.generators.mutants.mutant import Mutant
from trajforge.generators.mutants.sampling import Site, draw_mutants, text_digest
from trajforge.generators.mutants.targets import FunctionTarget, MutationSourceError
from trajforge.schemas.errors import ParamsError

__all__ = [
    "OPERATORS",
    "FunctionSource",
    "FunctionTarget",
    "Mutant",
    "MutationSourceError",
    "function_targets",
    "mutants_of_file",
    "pick_functions",
    "replace_function",
    "sample_mutants",
]

_NEWLINE = re.compile(r"\r\n?|\n")  # how libcst counts lines, so offsets agree with positions


# --- parsing and functions --------------------------------------------------------------------


@dataclass(frozen=True)
class _Function:
    qualname: str
    node: cst.FunctionDef
    parents: Parents  # from the module down to the def's parent


def _parse(path: str, source: str) -> cst.Module:
    """libcst's tree of a file that Python itself compiles, or MutationSourceError."""
    try:
        module = cst.parse_module(source)
        _compile(source, path)
    except (cst.ParserSyntaxError, SyntaxError, ValueError, RecursionError) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise MutationSourceError(f"{path}: not valid Python ({first}); no mutants") from exc
    return module


def _compile(source: str, path: str) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        compile(source, path, "exec", dont_inherit=True)


def _is_docstring(stmt: cst.CSTNode) -> bool:
    if not isinstance(stmt, cst.SimpleStatementLine | cst.SimpleStatementSuite):
        return False
    first = stmt.body[0]
    return isinstance(first, cst.Expr) and isinstance(
        first.value, cst.SimpleString | cst.ConcatenatedString
    )


# Never mutated: nested defs and classes are their own targets; annotations, decorators and
# default values (Parameters) are declarations, not behaviour.
_SKIP = (cst.FunctionDef, cst.ClassDef, cst.Annotation, cst.Decorator, cst.Parameters)


def _body_nodes(func: cst.FunctionDef, parents: Parents) -> Iterator[tuple[cst.CSTNode, Parents]]:
    """Every node of a function's own body with its ancestors, in source order."""
    chain = (*parents, func)
    body = func.body
    statements: Sequence[cst.CSTNode] = body.body
    if statements and _is_docstring(statements[0]):
        statements = statements[1:]
    yield body, chain
    if isinstance(body, cst.SimpleStatementSuite):
        if len(statements) < len(body.body):
            return  # `def f(): "doc"` has nothing else
        yield from _walk_children(body, chain)
        return
    for stmt in statements:
        yield from _walk(stmt, (*chain, body))


def _walk(node: cst.CSTNode, parents: Parents) -> Iterator[tuple[cst.CSTNode, Parents]]:
    if isinstance(node, _SKIP):
        return
    yield node, parents
    yield from _walk_children(node, parents)


def _walk_children(node: cst.CSTNode, parents: Parents) -> Iterator[tuple[cst.CSTNode, Parents]]:
    chain = (*parents, node)
    for child in _children(node):
        yield from _walk(child, chain)


# Whitespace, comments and punctuation: never mutated, and most of a tree's nodes.
_TRIVIA = (
    cst.BaseParenthesizableWhitespace,
    cst.EmptyLine,
    cst.TrailingWhitespace,
    cst.Newline,
    cst.Comment,
    cst.LeftParen,
    cst.RightParen,
    cst.Comma,
    cst.Semicolon,
)
# Fields in source order where libcst declares them in another order.
_SOURCE_ORDER: dict[type, tuple[str, ...]] = {
    cst.IfExp: ("body", "test", "orelse"),
    cst.ExceptHandler: ("type", "name", "body"),
}
_FIELDS: dict[type, tuple[str, ...]] = {}


def _children(node: cst.CSTNode) -> list[cst.CSTNode]:
    """``node.children`` without trivia, read from the fields: libcst's property rebuilds the
    node to list them, which made walking most of the cost of a survey."""
    kind = type(node)
    names = _FIELDS.get(kind)
    if names is None:
        names = _SOURCE_ORDER.get(kind) or tuple(f.name for f in dataclasses.fields(node))
        _FIELDS[kind] = names
    found: list[cst.CSTNode] = []
    for name in names:
        value = getattr(node, name)
        if isinstance(value, cst.CSTNode):
            if not isinstance(value, _TRIVIA):
                found.append(value)
        elif isinstance(value, tuple | list):
            found.extend(
                v for v in value if isinstance(v, cst.CSTNode) and not isinstance(v, _TRIVIA)
            )
    return found


def _complexity(nodes: Iterable[cst.CSTNode]) -> int:
    """Radon's cyclomatic complexity of a function's own nodes (lambdas in, nested defs out)."""
    score = 1
    for node in nodes:
        if isinstance(node, cst.If | cst.IfExp | cst.With | cst.BooleanOperation | cst.MatchCase):
            score += 1
        elif isinstance(node, cst.For | cst.While):
            score += 1 + (node.orelse is not None)
        elif isinstance(node, cst.Try | cst.TryStar):
            score += len(node.handlers) + (node.orelse is not None)
        elif isinstance(node, cst.CompFor):
            score += 1 + len(node.ifs)
    return score


def _functions(module: cst.Module) -> list[_Function]:
    found: list[_Function] = []

    def visit(node: cst.CSTNode, names: tuple[str, ...], parents: Parents) -> None:
        if isinstance(node, cst.FunctionDef):
            qualname = ".".join((*names, node.name.value))
            found.append(_Function(qualname, node, parents))
        if isinstance(node, cst.FunctionDef | cst.ClassDef):
            names = (*names, node.name.value)
        if isinstance(node, cst.BaseExpression):
            return  # no def or class statement lives inside an expression
        chain = (*parents, node)
        for child in _children(node):
            visit(child, names, chain)

    visit(module, (), ())
    return found


# --- one file: edits, splices, mutants ---------------------------------------------------------


class _Spans(CodegenState):
    """Prints a module once and records where each node's text starts and ends (offsets).

    ``whole`` spans include the whitespace and comments a node owns (what a splice replaces);
    ``syntactic`` ones leave them out, as libcst's PositionProvider does (what a mutant's lines
    report). One pass of offset arithmetic instead of libcst's two line/column passes.
    """

    def __init__(self, module: cst.Module) -> None:
        super().__init__(module.default_indent, module.default_newline)
        self.offset = 0
        self.whole: dict[cst.CSTNode, tuple[int, int]] = {}
        self.inner: dict[cst.CSTNode, tuple[int, int]] = {}
        self._starts: list[int] = []

    def syntactic(self, node: cst.CSTNode) -> tuple[int, int]:
        return self.inner.get(node) or self.whole[node]

    def add_indent_tokens(self) -> None:
        self.tokens.extend(self.indent_tokens)
        self.offset += sum(map(len, self.indent_tokens))

    def add_token(self, value: str) -> None:
        self.tokens.append(value)
        self.offset += len(value)

    def before_codegen(self, node: cst.CSTNode) -> None:
        self._starts.append(self.offset)

    def after_codegen(self, node: cst.CSTNode) -> None:
        self.whole.setdefault(node, (self._starts.pop(), self.offset))

    @contextmanager
    def record_syntactic_position(
        self,
        node: cst.CSTNode,
        *,
        start_node: cst.CSTNode | None = None,
        end_node: cst.CSTNode | None = None,
    ) -> Iterator[None]:
        start = self.offset
        try:
            yield
        finally:
            end = self.offset
            if start_node is not None:
                start = self.syntactic(start_node)[0]
            if end_node is not None:
                end = self.syntactic(end_node)[1]
            self.inner[node] = (start, end)


class _File:
    """A parsed file: its functions, the edits each operator finds, and the text of a mutant."""

    def __init__(self, path: str, source: str) -> None:
        self.path = path
        # A UTF-8 byte order mark stays in every text we return, but Python refuses it in a str.
        self.bom = "\ufeff" if source.startswith("\ufeff") else ""
        self.source = source[len(self.bom) :]
        self.module = _parse(path, self.source)
        self.functions = _functions(self.module)
        self._edits: dict[tuple[int, str], list[Edit]] = {}
        self._walked: dict[int, dict[cst.CSTNode, Parents]] = {}

    @cached_property
    def _spans(self) -> _Spans:
        spans = _Spans(self.module)
        self.module._codegen(spans)
        return spans

    @cached_property
    def _line_starts(self) -> list[int]:
        return [0, *(m.end() for m in _NEWLINE.finditer(self.source))]

    def lines(self, node: cst.CSTNode) -> tuple[int, int]:
        """First and last line of a node's code, comments and whitespace around it left out."""
        start, end = self._spans.syntactic(node)
        return bisect_right(self._line_starts, start), bisect_right(self._line_starts, end)

    def target(self, index: int) -> FunctionTarget:
        first, last = self.lines(self.functions[index].node)
        qualname = self.functions[index].qualname
        return FunctionTarget(self.path, qualname, first, last, self.complexity(index))

    def complexity(self, index: int) -> int:
        return _complexity(self._nodes(index))

    def edits(self, index: int, operators: Sequence[Operator]) -> dict[str, list[Edit]]:
        """The edits of each operator in one function, in source order (cached)."""
        missing = [op for op in operators if (index, op.name) not in self._edits]
        if missing:
            found: dict[str, list[Edit]] = {op.name: [] for op in missing}
            for node, parents in self._nodes(index).items():
                for op in missing:
                    if isinstance(node, op.node_types):
                        found[op.name].extend(op.find(node, parents))
            for name, edits in found.items():
                self._edits[(index, name)] = edits
        return {op.name: self._edits[(index, op.name)] for op in operators}

    def _nodes(self, index: int) -> dict[cst.CSTNode, Parents]:
        """A function's own nodes in source order, each with its ancestors (cached)."""
        if index not in self._walked:
            function = self.functions[index]
            nodes = dict(_body_nodes(function.node, function.parents))
            self._walked[index] = nodes
        return self._walked[index]

    def mutant(self, index: int, operator: str, edit: Edit) -> Mutant | None:
        """The mutant an edit makes, or None when it changes nothing or does not compile."""
        body = self._splice(index, edit)
        if body == self.source:
            return None
        try:
            _compile(body, self.path)
        except (SyntaxError, ValueError, RecursionError):
            return None
        texts = self.bom + self.source, self.bom + body
        qualname = self.functions[index].qualname
        return Mutant.of_edit(
            self.path, qualname, operator, texts, self.lines(edit.focus), edit.what
        )

    def _splice(self, index: int, edit: Edit) -> str:
        start, end = self._spans.whole[edit.target]
        function = self.functions[index]
        parents = (
            function.parents if edit.target is function.node else self._nodes(index)[edit.target]
        )
        indents = self._indents((*parents, edit.target))
        # An elif prints as `if` unless its parent says otherwise.
        elif_ = isinstance(parents[-1], cst.If) and parents[-1].orelse is edit.target
        if self._print(edit.target, indents, elif_) != self.source[start:end]:
            # e.g. the last line of a file without a final newline, which libcst prints with one
            # and then takes back: print the whole module instead
            return self._print_module(edit)
        new = self._print(edit.replacement, indents, elif_)
        return self.source[:start] + new + self.source[end:]

    def _print_module(self, edit: Edit) -> str:
        module = self.module.deep_replace(edit.target, edit.replacement)
        assert isinstance(module, cst.Module)
        return module.code

    def _print(self, node: cst.CSTNode, indents: list[str], elif_: bool) -> str:
        module = self.module
        state = CodegenState(module.default_indent, module.default_newline, indent_tokens=indents)
        if elif_:
            node._codegen(state, is_elif=True)
        else:
            node._codegen(state)
        return "".join(state.tokens)

    def _indents(self, chain: Parents) -> list[str]:
        """The indentation the blocks around ``chain[-1]`` add, outermost first."""
        default = self.module.default_indent
        indents = []
        for parent, child in pairwise(chain):
            if isinstance(parent, cst.IndentedBlock) or (
                isinstance(parent, cst.Match) and isinstance(child, cst.MatchCase)
            ):
                indent = parent.indent
                indents.append(default if indent is None else indent)
        return indents


def _operators(names: Sequence[str] | None) -> list[Operator]:
    if names is None:
        return list(OPERATORS.values())
    unknown = [n for n in names if n not in OPERATORS]
    if unknown:
        raise ParamsError(
            f"unknown mutation operator {unknown[0]!r}; choose from {', '.join(OPERATORS)}"
        )
    return [OPERATORS[n] for n in dict.fromkeys(names)]


# --- public API -------------------------------------------------------------------------------


def function_targets(path: str, source: str) -> list[FunctionTarget]:
    """Every function and method of a file (nested ones included), in source order."""
    file = _File(path, source)
    return [file.target(i) for i in range(len(file.functions))]


def mutants_of_file(
    path: str,
    source: str,
    operators: Sequence[str] | None = None,
    min_complexity: int = 1,
) -> list[Mutant]:
    """Every single mutation of every function with ``complexity >= min_complexity``.

    Ordered by function, then operator (in the order given, else OPERATORS'), then position; a
    mutated text that an earlier mutant already produced is left out.
    """
    ops = _operators(operators)
    file = _File(path, source)
    seen = {text_digest(source)}
    mutants = []
    for index in range(len(file.functions)):
        if file.complexity(index) < min_complexity:
            continue
        for name, edits in file.edits(index, ops).items():
            for edit in edits:
                mutant = file.mutant(index, name, edit)
                if mutant is not None and text_digest(mutant.mutated) not in seen:
                    seen.add(text_digest(mutant.mutated))
                    mutants.append(mutant)
    return mutants


def sample_mutants(
    files: Mapping[str, str],
    *,
    seed: int,
    max_mutants: int,
    operators: Sequence[str] | None = None,
    min_complexity: int = 2,
    covers: Callable[[str, int, int], bool] | None = None,
) -> tuple[list[Mutant], list[tuple[str, str, str]]]:
    """Up to ``max_mutants`` mutants across files, reproducible from ``seed``.

    Picks follow ``sampling.draw_sites`` (round the operators, functions by complexity). Only
    picked edits are printed and compiled, so a large repository costs one survey
    parse per file plus one parse per file that gets a mutant. ``covers(path, first, last)``
    (when given) keeps only the edits whose lines it accepts: coverage-guided injection.
    Returns ``(mutants, rejected)``
    with ``(path, reason, detail)`` for each file that gave nothing to mutate.
    """
    ops = _operators(operators)
    rejected: list[tuple[str, str, str]] = []
    sites: dict[str, dict[tuple[str, int], list[int]]] = {op.name: {} for op in ops}
    complexity: dict[tuple[str, int], int] = {}
    for path in sorted(files):
        try:
            file = _File(path, files[path])
        except MutationSourceError as exc:
            rejected.append((path, exc.reason, str(exc)))
            continue
        found = False
        for index in range(len(file.functions)):
            score = file.complexity(index)
            if score < min_complexity:
                continue
            for name, edits in file.edits(index, ops).items():
                kept = [
                    k
                    for k, edit in enumerate(edits)
                    if covers is None or covers(path, *file.lines(edit.focus))
                ]
                if kept:
                    sites[name][(path, index)] = kept
                    complexity[(path, index)] = score
                    found = True
        if not found:
            detail = f"{path}: no function with complexity >= {min_complexity} to mutate"
            rejected.append((path, "no_targets", detail))

    def make(batch: list[Site]) -> Iterator[Mutant | None]:
        made = _materialize(batch, files)
        return (made.get(site) for site in batch)

    mutants = draw_mutants(sites, complexity, seed, max_mutants, files.values(), make)
    return mutants, rejected


def _materialize(batch: list[Site], files: Mapping[str, str]) -> dict[Site, Mutant | None]:
    """Print and compile the picked sites, parsing each file once."""
    by_path: dict[str, list[Site]] = defaultdict(list)
    for site in batch:
        by_path[site.path].append(site)
    made: dict[Site, Mutant | None] = {}
    for path, path_sites in by_path.items():
        file = _File(path, files[path])
        for site in path_sites:
            edit = file.edits(site.function, [OPERATORS[site.operator]])[site.operator][site.edit]
            made[site] = file.mutant(site.function, site.operator, edit)
    return made


def replace_function(
    source: str, qualname: str, new_function_source: str, index: int | None = None
) -> str:
    """``source`` with the function ``qualname`` swapped for ``new_function_source``.

    The new text may be indented or not; it is re-indented to the old function's place. The old
    function's comments above it stay, and so do its decorators unless the new text has its own.
    With two functions of the same qualname (a property and its setter) the first is replaced,
    unless ``index`` (the function's position, ``FunctionSource.index``) says which.
    """
    file = _File("<source>", source)
    if index is None:
        index = next((i for i, f in enumerate(file.functions) if f.qualname == qualname), None)
    elif not (0 <= index < len(file.functions) and file.functions[index].qualname == qualname):
        index = None
    if index is None:
        raise MutationSourceError(f"no function {qualname!r} in the file", "function_not_found")
    old = file.functions[index].node
    new = _one_function(new_function_source)
    if new.name.value != old.name.value:
        raise MutationSourceError(
            f"the rewrite defines {new.name.value!r}, not {old.name.value!r}", "bad_rewrite"
        )
    if not new.decorators:
        new = new.with_changes(
            decorators=old.decorators, lines_after_decorators=old.lines_after_decorators
        )
    new = new.with_changes(leading_lines=old.leading_lines)
    result = file._splice(index, Edit(old, new, old, "rewrite"))
    try:
        _compile(result, "<rewrite>")
    except (SyntaxError, ValueError) as exc:
        raise MutationSourceError(
            f"the rewrite of {qualname} breaks the file: {exc}", "bad_rewrite"
        ) from exc
    return file.bom + result


@dataclass(frozen=True)
class FunctionSource:
    """A function to rewrite whole (model-written bugs), with its text."""

    target: FunctionTarget
    index: int  # its position among the file's functions (``replace_function``'s ``index``)
    code: str  # the def with its decorators, at column 0, without the comments above it


def pick_functions(
    files: Mapping[str, str],
    *,
    seed: int,
    count: int,
    min_complexity: int = 2,
    max_chars: int = 6000,
    include: Callable[[FunctionTarget], bool] | None = None,
) -> tuple[list[FunctionSource], list[tuple[str, str, str]]]:
    """Up to ``count`` distinct functions across files, reproducible from ``seed``.

    The procedural operators' choice, one pick per function: functions with complexity >=
    ``min_complexity``, drawn with weight = complexity, so complex functions are favoured. A
    function longer than ``max_chars`` is left out (a model could not write it back whole).
    Returns ``(functions, rejected)`` with ``(path, reason, detail)`` like ``sample_mutants``.
    """
    rejected: list[tuple[str, str, str]] = []
    eligible: dict[tuple[str, int], int] = {}
    parsed: dict[str, _File] = {}
    for path in sorted(files):
        try:
            file = _File(path, files[path])
        except MutationSourceError as exc:
            rejected.append((path, exc.reason, str(exc)))
            continue
        parsed[path] = file
        found = False
        for index in range(len(file.functions)):
            score = file.complexity(index)
            if include and not include(file.target(index)):
                continue
            if score >= min_complexity and len(_function_code(file, index)) <= max_chars:
                eligible[(path, index)] = score
                found = True
        if not found:
            detail = f"{path}: no function with complexity >= {min_complexity} to rewrite"
            rejected.append((path, "no_targets", detail))
    rng = random.Random(seed)
    chosen: list[FunctionSource] = []
    while eligible and len(chosen) < count:
        keys = list(eligible)
        key = rng.choices(keys, [eligible[k] for k in keys])[0]
        del eligible[key]
        file = parsed[key[0]]
        chosen.append(FunctionSource(file.target(key[1]), key[1], _function_code(file, key[1])))
    return chosen, rejected


def _function_code(file: _File, index: int) -> str:
    node = file.functions[index].node.with_changes(leading_lines=())
    return file.module.code_for_node(node)


def _one_function(text: str) -> cst.FunctionDef:
    try:
        module = cst.parse_module(textwrap.dedent(text).strip("\n") + "\n")
    except cst.ParserSyntaxError as exc:
        first = str(exc).strip().splitlines()[0]
        raise MutationSourceError(
            f"the rewrite is not valid Python ({first})", "bad_rewrite"
        ) from exc
    if len(module.body) != 1 or not isinstance(module.body[0], cst.FunctionDef):
        raise MutationSourceError(
            "the rewrite must be exactly one function definition", "bad_rewrite"
        )
    return module.body[0]
