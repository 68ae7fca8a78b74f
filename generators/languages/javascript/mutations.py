"""Procedural bug injection for JavaScript and TypeScript: the JS counterpart of mutations.py.

Same records (``Mutant``, ``FunctionTarget``), same sampling (``sampling.draw_sites``: round the
operators, functions drawn by complexity), so inject treats a JS mutant as it treats a Python one.
A mutant is one byte-range replacement inside one function body, so every other byte of the file
is unchanged and the reverse diff undoes it exactly; a mutant that does not parse (an ERROR or
MISSING node in tree-sitter's tree) or changes nothing is dropped.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping, Sequence
from itertools import islice

from trajforge.generators.languages.javascript.operators import JS_OPERATORS, JsEdit, JsOperator
from trajforge.generators.languages.javascript.syntax import JsFile
from trajforge.generators.mutants.mutant import Mutant
from trajforge.generators.mutants.sampling import Site, draw_sites, text_digest
from trajforge.generators.mutants.targets import FunctionTarget, MutationSourceError
from trajforge.schemas.errors import ParamsError
from trajforge.schemas.records import content_id

__all__ = ["JS_OPERATORS", "js_function_targets", "js_mutants_of_file", "sample_js_mutants"]


def _operators(names: Sequence[str] | None) -> list[JsOperator]:
    if names is None:
        return list(JS_OPERATORS.values())
    unknown = [n for n in names if n not in JS_OPERATORS]
    if unknown:
        known = ", ".join(JS_OPERATORS)
        raise ParamsError(f"unknown JS mutation operator {unknown[0]!r}; choose from {known}")
    return [JS_OPERATORS[n] for n in dict.fromkeys(names)]


def _edits(file: JsFile, index: int, ops: Sequence[JsOperator]) -> dict[str, list[JsEdit]]:
    found: dict[str, list[JsEdit]] = {op.name: [] for op in ops}
    for node in file.body_nodes(index):
        for op in ops:
            if node.type in op.node_types:
                found[op.name].extend(op.find(file, node))
    return found


def apply_edit(file: JsFile, edit: JsEdit) -> str:
    """The file's text with one edit: bytes outside ``start:end`` are the original's."""
    data = file.data[: edit.start] + edit.new.encode("utf-8")
    data += file.data[edit.end :]
    return file.bom + data.decode("utf-8")


def _mutant(file: JsFile, index: int, operator: str, edit: JsEdit) -> Mutant | None:
    new = edit.new.encode("utf-8")
    if new == file.data[edit.start : edit.end] or not file.parses_with(edit.start, edit.end, new):
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


def js_function_targets(path: str, source: str) -> list[FunctionTarget]:
    """Every function target of a JS/TS file, in source order."""
    file = JsFile(path, source)
    return [f.target(path) for f in file.functions]


def js_mutants_of_file(
    path: str, source: str, operators: Sequence[str] | None = None, min_complexity: int = 1
) -> list[Mutant]:
    """Every single mutation of every function with ``complexity >= min_complexity``, by
    function, then operator, then position; a mutated text made before is left out."""
    ops = _operators(operators)
    file = JsFile(path, source)
    seen = {text_digest(source)}
    mutants = []
    for index, function in enumerate(file.functions):
        if function.complexity < min_complexity:
            continue
        for name, edits in _edits(file, index, ops).items():
            for edit in edits:
                mutant = _mutant(file, index, name, edit)
                if mutant is not None and text_digest(mutant.mutated) not in seen:
                    seen.add(text_digest(mutant.mutated))
                    mutants.append(mutant)
    return mutants


def sample_js_mutants(
    files: Mapping[str, str],
    *,
    seed: int,
    max_mutants: int,
    operators: Sequence[str] | None = None,
    min_complexity: int = 2,
    include: Callable[[FunctionTarget], bool] | None = None,
) -> tuple[list[Mutant], list[tuple[str, str, str]]]:
    """Up to ``max_mutants`` mutants across files, reproducible from ``seed``: mutations.py's
    ``sample_mutants`` for JS/TS, with its ``(mutants, rejected)`` answer."""
    ops = _operators(operators)
    rejected: list[tuple[str, str, str]] = []
    sites: dict[str, dict[tuple[str, int], list[int]]] = {op.name: {} for op in ops}
    complexity: dict[tuple[str, int], int] = {}
    parsed: dict[str, JsFile] = {}
    for path in sorted(files):
        try:
            file = parsed[path] = JsFile(path, files[path])
        except MutationSourceError as exc:
            rejected.append((path, exc.reason, str(exc)))
            continue
        found = False
        for index, function in enumerate(file.functions):
            if function.complexity < min_complexity or (
                include and not include(function.target(path))
            ):
                continue
            for name, edits in _edits(file, index, ops).items():
                if edits:
                    sites[name][(path, index)] = list(range(len(edits)))
                    complexity[(path, index)] = function.complexity
                    found = True
        if not found:
            detail = f"{path}: no function with complexity >= {min_complexity} to mutate"
            rejected.append((path, "no_targets", detail))
    picks = draw_sites(sites, complexity, random.Random(seed))
    mutants: list[Mutant] = []
    seen = {text_digest(text) for text in files.values()}
    while len(mutants) < max_mutants:
        batch: list[Site] = list(islice(picks, max_mutants - len(mutants)))
        if not batch:
            break
        for site in batch:
            file = parsed[site.path]
            edit = _edits(file, site.function, [JS_OPERATORS[site.operator]])[site.operator]
            mutant = _mutant(file, site.function, site.operator, edit[site.edit])
            if mutant is not None and text_digest(mutant.mutated) not in seen:
                seen.add(text_digest(mutant.mutated))
                mutants.append(mutant)
    return mutants, rejected
