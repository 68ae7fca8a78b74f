"""Go syntax trees (tree-sitter-go), and the functions a bug may go into.

A file whose tree holds an ERROR or MISSING node is refused as unparsable; an operator's output
is checked the same way, so a mutant always parses. A function target is a ``func`` declaration,
a method (qualname ``Type.Method``, the receiver's type without ``*`` or type parameters), or a
function literal bound to a package-level ``var``; a closure inside a function belongs to that
function, as a Python lambda does.
"""

from __future__ import annotations

from functools import cache

import tree_sitter
import tree_sitter_go
from trajforge.generators.mutants.syntax_tree import TreeFile, TreeFunction, operator_of
from trajforge.generators.mutants.targets import MutationSourceError

FUNCTION_TYPES = frozenset({"function_declaration", "method_declaration", "func_literal"})
# Decisions, as radon counts them for Python: branches, loops, cases, and short circuits.
_DECISIONS = frozenset(
    {"if_statement", "for_statement", "expression_case", "type_case", "communication_case"}
)
_SHORT_CIRCUIT = frozenset({"&&", "||"})


@cache
def language() -> tree_sitter.Language:
    return tree_sitter.Language(tree_sitter_go.language())


def parse(source: bytes) -> tree_sitter.Tree:
    return tree_sitter.Parser(language()).parse(source)


def has_result(function: tree_sitter.Node) -> bool:
    """Whether a function returns values (its body must end in a terminating statement)."""
    return function.child_by_field_name("result") is not None


def statements(node: tree_sitter.Node) -> list[tree_sitter.Node]:
    """The statements of a block or case clause (tree-sitter-go wraps them in a statement_list)."""
    found = next((c for c in node.named_children if c.type == "statement_list"), None)
    return [c for c in found.named_children if c.type != "comment"] if found is not None else []


class GoFile(TreeFile):
    """One parsed file: its functions and the nodes inside each function's body (closures
    included)."""

    def __init__(self, path: str, source: str) -> None:
        super().__init__(path, source, language())
        if self.tree.root_node.has_error:
            raise MutationSourceError(f"{path}: does not parse as Go")
        # a function node's id -> its names' written types (operators.py fills it once)
        self.declared: dict[int, dict[str, str]] = {}
        for node in self.tree.root_node.named_children:
            self._collect(node)

    def _collect(self, node: tree_sitter.Node) -> None:
        if node.type in ("function_declaration", "method_declaration"):
            name, body = node.child_by_field_name("name"), node.child_by_field_name("body")
            if name is None or body is None:
                return  # an assembly-backed declaration has no body
            qualname = self.text_of(name)
            receiver = self._receiver_type(node)
            if receiver:
                qualname = f"{receiver}.{qualname}"
            self.functions.append(TreeFunction(qualname, node, body, _complexity(body)))
        elif node.type == "var_declaration":
            for spec in (c for c in node.named_children if c.type == "var_spec"):
                names = spec.children_by_field_name("name")
                value = spec.child_by_field_name("value")
                values = value.named_children if value is not None else []
                for name, literal in zip(names, values, strict=False):
                    body = literal.child_by_field_name("body")
                    if literal.type == "func_literal" and body is not None:
                        qualname = self.text_of(name)
                        self.functions.append(
                            TreeFunction(qualname, literal, body, _complexity(body))
                        )

    def _receiver_type(self, node: tree_sitter.Node) -> str:
        receiver = node.child_by_field_name("receiver")
        if receiver is None:
            return ""
        stack = list(receiver.named_children)
        while stack:
            child = stack.pop(0)
            if child.type == "type_identifier":
                return self.text_of(child)
            if child.type == "parameter_declaration":
                type_node = child.child_by_field_name("type")
                if type_node is not None:
                    stack.insert(0, type_node)
            elif child.type in ("pointer_type", "generic_type", "parenthesized_type"):
                stack[:0] = child.named_children
        return ""


def _complexity(body: tree_sitter.Node) -> int:
    score, stack = 1, [body]
    while stack:
        node = stack.pop()
        if node.type in _DECISIONS:
            score += 1
        elif node.type == "binary_expression":
            op = operator_of(node)
            score += op is not None and op.type in _SHORT_CIRCUIT
        stack.extend(node.children)
    return score
