"""The edits the tree-sitter languages' operators share, once each operator has found its nodes.

Go's and JavaScript's operators (``languages/<lang>/operators.py``) differ in their grammar's
node and field names and in what their compiler refuses; what they do with the nodes they found
is the same: read a binary expression's parts, flip its operator, negate a condition, drop a
``!``, swap two spans (branches, arguments), swap ``&&`` and ``||`` with the parentheses that
keep the meaning, remove a statement's own line. A language passes its names and its rules
(where a bug's lines are: ``statement``; which operators regroup with ``&&``: ``logical``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping

import tree_sitter
from trajforge.generators.mutants.byte_edits import Edit
from trajforge.generators.mutants.syntax_tree import TreeFile, operator_of

Node = tree_sitter.Node


def binary_parts(node: Node) -> tuple[Node, Node, Node] | None:
    """A binary expression's left operand, operator token and right operand."""
    left, right, op = (
        node.child_by_field_name("left"),
        node.child_by_field_name("right"),
        operator_of(node),
    )
    if left is None or right is None or op is None:
        return None
    return left, op, right


def flip_operator(
    node: Node, table: Mapping[str, str], statement: Callable[[Node], Node]
) -> Iterator[Edit]:
    """A binary expression's operator replaced by ``table``'s (``<`` by ``>=``)."""
    parts = binary_parts(node)
    if parts is None or parts[1].type not in table:
        return
    op = parts[1]
    new = table[op.type]
    yield Edit.of(op, new, statement(node), f"flip `{op.type}` to `{new}`")


def negated(file: TreeFile, test: Node) -> Edit:
    """A condition ``c`` as ``!(c)``."""
    what = f"negate the condition `{file.snippet(test)}`"
    return Edit.of(test, f"!({file.text_of(test)})", test, what)


def without_negation(
    file: TreeFile, node: Node, operand_field: str, statement: Callable[[Node], Node]
) -> Iterator[Edit]:
    """A unary ``!x`` as ``x``; not ``!!x`` (a cast to boolean, not a condition)."""
    op, operand = operator_of(node), node.child_by_field_name(operand_field)
    if op is None or op.type != "!" or operand is None or operand.type == "unary_expression":
        return
    if node.parent is not None and node.parent.type == "unary_expression":
        return
    yield Edit.of(node, file.text_of(operand), statement(node), "drop a `!`")


def swapped(file: TreeFile, first: Node, second: Node, focus: Node, what: str) -> Iterator[Edit]:
    """Two spans of one parent in each other's place (the text between them kept); nothing
    where they read the same."""
    if file.text_of(first) == file.text_of(second):
        return
    between = file.data[first.end_byte : second.start_byte].decode("utf-8")
    new = file.text_of(second) + between + file.text_of(first)
    yield Edit(first.start_byte, second.end_byte, new, focus, what)


def swap_logical(
    file: TreeFile,
    node: Node,
    table: Mapping[str, str],
    logical: frozenset[str],
    statement: Callable[[Node], Node],
) -> Iterator[Edit]:
    """``a && b`` as ``a || b``. Operands and the whole are parenthesized where && and || would
    regroup (an operand whose operator is ``logical``, a binary or unary parent), so the mutant
    means exactly "the other operator here"."""

    def regroups(side: Node) -> bool:
        op = operator_of(side) if side.type == "binary_expression" else None
        return op is not None and op.type in logical

    parts = binary_parts(node)
    if parts is None or parts[1].type not in table:
        return
    left, op, right = parts
    new_op = table[op.type]
    sides = [
        f"({file.text_of(side)})" if regroups(side) else file.text_of(side)
        for side in (left, right)
    ]
    gap_l = file.data[left.end_byte : op.start_byte].decode("utf-8")
    gap_r = file.data[op.end_byte : right.start_byte].decode("utf-8")
    new = f"{sides[0]}{gap_l}{new_op}{gap_r}{sides[1]}"
    if node.parent is not None and node.parent.type in ("binary_expression", "unary_expression"):
        new = f"({new})"
    yield Edit.of(node, new, statement(node), f"swap `{op.type}` for `{new_op}`")


def line_removed(file: TreeFile, stmt: Node, what: str) -> Edit | None:
    """The statement's whole line removed, where it stands alone on it; else None."""
    line_start = file.data.rfind(b"\n", 0, stmt.start_byte) + 1
    line_end = file.data.find(b"\n", stmt.end_byte)
    line_end = len(file.data) if line_end == -1 else line_end + 1
    before = file.data[line_start : stmt.start_byte]
    after = file.data[stmt.end_byte : line_end]
    if not before.strip() and not after.strip():
        return Edit(line_start, line_end, "", stmt, what)
    return None
