"""A source file parsed by tree-sitter, as every tree-sitter language's bug operators read it.

One place for what Go's and JavaScript's files share: the text as UTF-8 bytes (a byte order mark
kept aside, so a mutant's text is the original's but for its edit), the functions a bug may go
into, and an incremental reparse of an edited file (the same tree as a fresh parse, at a fraction
of its cost on a large file). The grammar, which functions are targets and what a function's body
yields are the language's (``languages/<lang>/syntax.py``).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import tree_sitter
from trajforge.generators.mutants.targets import FunctionTarget, MutationSourceError


@dataclass(frozen=True)
class TreeFunction:
    """A function a bug may go into."""

    qualname: str
    node: tree_sitter.Node
    body: tree_sitter.Node
    complexity: int

    def target(self, path: str) -> FunctionTarget:
        start, end = self.node.start_point.row + 1, self.node.end_point.row + 1
        return FunctionTarget(path, self.qualname, start, end, self.complexity)


class TreeFile:
    """One file's text, bytes and tree; the language's subclass collects ``functions``."""

    def __init__(self, path: str, source: str, language: tree_sitter.Language) -> None:
        self.path = path
        self.bom = "\ufeff" if source.startswith("\ufeff") else ""
        self.text = source[len(self.bom) :]
        try:
            self.data = self.text.encode("utf-8")
        except UnicodeEncodeError:
            raise MutationSourceError(f"{path}: is not UTF-8 text") from None
        self.language = language
        self.tree = tree_sitter.Parser(language).parse(self.data)
        self.functions: list[TreeFunction] = []

    def text_of(self, node: tree_sitter.Node) -> str:
        return self.data[node.start_byte : node.end_byte].decode("utf-8")

    def snippet(self, node: tree_sitter.Node, limit: int = 40) -> str:
        """The node's code on one line, cut to ``limit`` characters (for a bug's description)."""
        text = " ".join(self.text_of(node).split())
        return text if len(text) <= limit else text[: limit - 3] + "..."

    def body_nodes(self, index: int) -> Iterator[tree_sitter.Node]:
        """Every node of the function's body, in source order."""
        stack = [self.functions[index].body]
        while stack:
            node = stack.pop()
            yield node
            stack.extend(reversed(node.children))

    def reparsed(self, start: int, end: int, new: bytes) -> tree_sitter.Tree:
        """The tree of the file with bytes ``start:end`` replaced by ``new``, parsed
        incrementally from the file's tree."""
        data = self.data[:start] + new + self.data[end:]
        tree = self.tree.copy()
        new_end = start + len(new)
        tree.edit(
            start_byte=start,
            old_end_byte=end,
            new_end_byte=new_end,
            start_point=_point(self.data, start),
            old_end_point=_point(self.data, end),
            new_end_point=_point(data, new_end),
        )
        return tree_sitter.Parser(self.language).parse(data, tree)


def operator_of(node: tree_sitter.Node) -> tree_sitter.Node | None:
    """A binary, unary or assignment expression's operator token."""
    found = node.child_by_field_name("operator")
    if found is not None:
        return found
    return next((c for c in node.children if not c.is_named), None)


def _point(data: bytes, offset: int) -> tuple[int, int]:
    return data.count(b"\n", 0, offset), offset - (data.rfind(b"\n", 0, offset) + 1)
