"""JavaScript and TypeScript syntax trees (tree-sitter), and the functions a bug may go into.

The grammar follows the file's suffix: TypeScript for .ts/.mts/.cts, TSX for .tsx, JavaScript
(which reads JSX) for the rest. A file whose tree holds an ERROR or MISSING node (a syntax
newer than the grammar) keeps the functions clear of them as targets, and is refused as
unparsable only when none is; an operator's output is checked the same way (no new refused
span), so a mutant parses as well as its file did.

A function target is a declaration, a method, or a function expression or arrow function bound
to a name (``const f = () => ...``, ``{ f() {} }``, ``x.f = function () {}``); a callback passed
inline belongs to the function it sits in, as a Python lambda does. Its qualname is the dotted
path of enclosing classes and targets ("Stack.push", "outer.inner").
"""

from __future__ import annotations

import posixpath
from collections.abc import Iterator
from functools import cache

import tree_sitter
import tree_sitter_javascript
import tree_sitter_typescript
from trajforge.generators.mutants.syntax_tree import TreeFile, TreeFunction, operator_of
from trajforge.generators.mutants.targets import MutationSourceError

JS_SUFFIXES = (".js", ".jsx", ".mjs", ".cjs", ".ts", ".tsx", ".mts", ".cts")
FUNCTION_TYPES = frozenset(
    {
        "function_declaration",
        "generator_function_declaration",
        "function_expression",
        "function",  # older grammars' name for a function expression
        "generator_function",
        "arrow_function",
        "method_definition",
    }
)
_NAMED_BY_PARENT = {
    "variable_declarator": "name",
    "pair": "key",
    "assignment_expression": "left",
    "public_field_definition": "name",
    "field_definition": "property",
}
_CLASSES = frozenset({"class_declaration", "class", "abstract_class_declaration"})
# Decisions, as radon counts them for Python: branches, loops, handlers, and short circuits.
_DECISIONS = frozenset(
    {
        "if_statement",
        "for_statement",
        "for_in_statement",
        "while_statement",
        "do_statement",
        "catch_clause",
        "ternary_expression",
        "switch_case",
    }
)
_SHORT_CIRCUIT = frozenset({"&&", "||", "??"})


@cache
def _language(grammar: str) -> tree_sitter.Language:
    if grammar == "typescript":
        return tree_sitter.Language(tree_sitter_typescript.language_typescript())
    if grammar == "tsx":
        return tree_sitter.Language(tree_sitter_typescript.language_tsx())
    return tree_sitter.Language(tree_sitter_javascript.language())


def grammar_of(path: str) -> str:
    suffix = posixpath.splitext(path)[1]
    if suffix in (".ts", ".mts", ".cts"):
        return "typescript"
    return "tsx" if suffix == ".tsx" else "javascript"


def parse(grammar: str, source: bytes) -> tree_sitter.Tree:
    return tree_sitter.Parser(_language(grammar)).parse(source)


def parses(grammar: str, source: bytes) -> bool:
    """The source parses with no ERROR or MISSING node anywhere."""
    return not parse(grammar, source).root_node.has_error


class JsFile(TreeFile):
    """One parsed file: its functions and the nodes inside each function's own body."""

    def __init__(self, path: str, source: str) -> None:
        self.grammar = grammar_of(path)
        super().__init__(path, source, _language(self.grammar))
        # the spans the grammar refuses (a syntax newer than it): the functions clear of them
        # are still targets, the file is refused only when none is
        self.errors = error_spans(self.tree.root_node)
        self._collect(self.tree.root_node, [], False)
        if self.errors:
            self.functions = [f for f in self.functions if _clear(f.node)]
            if not self.functions:
                raise MutationSourceError(f"{path}: does not parse as {self.grammar}")

    def parses_with(self, start: int, end: int, new: bytes) -> bool:
        """Whether the file with bytes ``start:end`` replaced by ``new`` still parses as well
        as the file did: cleanly, or with the same refused spans (moved) and no new one."""
        reparsed = self.reparsed(start, end, new)
        if not self.errors:
            return not reparsed.root_node.has_error
        shift = len(new) - (end - start)
        moved = [(a + shift, b + shift) if a >= end else (a, b) for a, b in self.errors]
        return error_spans(reparsed.root_node) == moved

    def body_nodes(self, index: int) -> Iterator[tree_sitter.Node]:
        """Every node of the function's body outside nested targets and type annotations."""
        stack = [self.functions[index].body]
        nested = {f.node.id for f in self.functions}
        while stack:
            node = stack.pop()
            if node.id in nested or _is_type(node):
                continue
            yield node
            stack.extend(reversed(node.children))

    def _collect(self, node: tree_sitter.Node, scope: list[str], in_target: bool) -> None:
        if node.type in _CLASSES:
            class_name = node.child_by_field_name("name")
            scope = [*scope, self.text_of(class_name) if class_name is not None else "<class>"]
        elif node.type in FUNCTION_TYPES and node.is_named:  # not the `function` keyword
            name = self._name(node)
            if name is not None or not in_target:
                body = node.child_by_field_name("body")
                if body is not None:
                    qualname = ".".join([*scope, name or "<anonymous>"])
                    self.functions.append(TreeFunction(qualname, node, body, _complexity(body)))
                    scope, in_target = [*scope, name or "<anonymous>"], True
        for child in node.children:
            self._collect(child, scope, in_target)

    def _name(self, node: tree_sitter.Node) -> str | None:
        own = node.child_by_field_name("name")
        if own is not None:
            return self.text_of(own)
        parent = node.parent
        field = _NAMED_BY_PARENT.get(parent.type) if parent is not None else None
        named = parent.child_by_field_name(field) if parent is not None and field else None
        if named is None:
            return None
        text = self.text_of(named)
        return text.rsplit(".", 1)[-1] if len(text) <= 80 else None


def error_spans(root: tree_sitter.Node) -> list[tuple[int, int]]:
    """The byte spans of the tree's ERROR and MISSING nodes, in order ([] for a clean tree)."""
    spans: list[tuple[int, int]] = []
    stack = [root] if root.has_error else []
    while stack:
        node = stack.pop()
        if node.type == "ERROR" or node.is_missing:
            spans.append((node.start_byte, node.end_byte))
            continue
        stack.extend(reversed([child for child in node.children if child.has_error]))
    return spans


def _clear(node: tree_sitter.Node) -> bool:
    """No refused span inside the function, nor around it (its tree would be a guess)."""
    if node.has_error:
        return False
    parent = node.parent
    while parent is not None:
        if parent.type == "ERROR":
            return False
        parent = parent.parent
    return True


def _is_type(node: tree_sitter.Node) -> bool:
    """TypeScript's type world: annotations, arguments, parameters, declarations of types."""
    kind = node.type
    return (
        kind.startswith("type_")
        or kind.endswith("_type")
        or kind in {"interface_declaration", "abstract_method_signature", "enum_declaration"}
    )


def _complexity(body: tree_sitter.Node) -> int:
    score, stack = 1, [body]
    while stack:
        node = stack.pop()
        if node.type in FUNCTION_TYPES and node is not body:
            continue
        if node.type in _DECISIONS:
            score += 1
        elif node.type == "binary_expression":
            op = operator_of(node)
            score += op is not None and op.type in _SHORT_CIRCUIT
        stack.extend(node.children)
    return score
