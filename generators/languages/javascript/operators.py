"""Bug operators for JavaScript and TypeScript: Python's set where the mistake exists in JS, plus
two of its own (loose equality, a dropped optional chain).

An operator reads a tree-sitter node inside a function body (``js_syntax.JsFile.body_nodes``) and
yields ``Edit``s: replace bytes ``start:end`` of the file with ``new``. Every other byte of the
file stays as it was, so the reverse diff (the task's patch) touches only the bug and undoes it
byte for byte. An edit that would not parse is dropped where the mutant is made
(``mutations.py``). Like Python's operators, these skip rewrites a test rarely observes
(a ``console`` call, a string built for a message).
"""

from __future__ import annotations

from collections.abc import Iterator

import tree_sitter
from trajforge.generators.languages.javascript.syntax import JsFile, operator_of
from trajforge.generators.mutants import edit_shapes as shapes
from trajforge.generators.mutants.byte_edits import Edit, Operators

JS_OPERATORS: Operators[JsFile] = Operators("JS")
_operator = JS_OPERATORS.register


_QUIET_OBJECTS = {"console", "logger", "log"}
_TIGHT = frozenset(
    {
        "identifier",
        "member_expression",
        "subscript_expression",
        "call_expression",
        "number",
        "parenthesized_expression",
        "this",
        "property_identifier",
    }
)


def _statement(node: tree_sitter.Node) -> tree_sitter.Node:
    """The statement a node sits in (what the bug's lines are)."""
    while node.parent is not None and not node.type.endswith(("statement", "declaration")):
        node = node.parent
    return node


def _is_quiet(file: JsFile, node: tree_sitter.Node) -> bool:
    """``console.log(...)``, ``logger.debug(...)``: a call whose loss few tests observe."""
    if node.type == "await_expression" and node.named_child_count:
        node = node.named_children[0]
    if node.type != "call_expression":
        return False
    func = node.child_by_field_name("function")
    if func is None or func.type != "member_expression":
        return False
    obj = func.child_by_field_name("object")
    return obj is not None and file.text_of(obj) in _QUIET_OBJECTS


def _is_string(node: tree_sitter.Node | None) -> bool:
    return node is not None and node.type in ("string", "template_string")


# --- comparisons and conditions ---------------------------------------------------------------

_FLIP = {
    "<": ">=",
    ">=": "<",
    ">": "<=",
    "<=": ">",
    "===": "!==",
    "!==": "===",
    "==": "!=",
    "!=": "==",
}


@_operator("flip_comparison", "binary_expression", example="`if (i < n)` -> `if (i >= n)`")
def _flip_comparison(file: JsFile, node: tree_sitter.Node) -> Iterator[Edit]:
    yield from shapes.flip_operator(node, _FLIP, _statement)


_CONDITIONAL = ("if_statement", "while_statement", "do_statement")


@_operator("negate_condition", *_CONDITIONAL, example="`while (queue.length)` -> `while (!(...))`")
def _negate_condition(file: JsFile, node: tree_sitter.Node) -> Iterator[Edit]:
    paren = node.child_by_field_name("condition")
    if paren is None or paren.type != "parenthesized_expression" or paren.named_child_count != 1:
        return
    test = paren.named_children[0]
    yield shapes.negated(file, test)


@_operator("remove_negation", "unary_expression", example="`if (!done)` -> `if (done)`")
def _remove_negation(file: JsFile, node: tree_sitter.Node) -> Iterator[Edit]:
    yield from shapes.without_negation(file, node, "argument", _statement)


@_operator(
    "swap_if_else", "if_statement", "ternary_expression", example="`c ? a : b` -> `c ? b : a`"
)
def _swap_if_else(file: JsFile, node: tree_sitter.Node) -> Iterator[Edit]:
    first = node.child_by_field_name("consequence")
    second = node.child_by_field_name("alternative")
    if node.type == "if_statement":
        if second is None or second.named_child_count != 1:
            return
        second = second.named_children[0]  # the else_clause's body
        if second.type == "if_statement":
            return  # an `else if` chain: swapping would move a condition
        if first is None or first.type != "statement_block" or second.type != "statement_block":
            return
    if first is None or second is None:
        return
    yield from shapes.swapped(file, first, second, node, "swap the branches")


_BOOL_SWAP = {"&&": "||", "||": "&&"}
_LOGICAL = frozenset({"&&", "||", "??"})  # the operators `&&` and `||` regroup with


@_operator("swap_bool_op", "binary_expression", example="`if (a && b)` -> `if (a || b)`")
def _swap_bool_op(file: JsFile, node: tree_sitter.Node) -> Iterator[Edit]:
    yield from shapes.swap_logical(file, node, _BOOL_SWAP, _LOGICAL, _statement)


_ARITH_SWAP = {
    "+": "-",
    "-": "+",
    "*": "/",
    "/": "*",
    "+=": "-=",
    "-=": "+=",
    "*=": "/=",
    "/=": "*=",
}


@_operator(
    "swap_arith_op",
    "binary_expression",
    "augmented_assignment_expression",
    example="`total += x` -> `total -= x`",
)
def _swap_arith_op(file: JsFile, node: tree_sitter.Node) -> Iterator[Edit]:
    parts = shapes.binary_parts(node)
    if parts is None or parts[1].type not in _ARITH_SWAP:
        return
    left, op, right = parts
    if _is_string(left) or _is_string(right):
        return  # `"a" + b` is a concatenation: `-` gives NaN, not a plausible bug
    new = _ARITH_SWAP[op.type]
    around = file.data[op.start_byte - 1 : op.start_byte] + file.data[op.end_byte : op.end_byte + 1]
    if new[0].encode() in around:
        return  # `a +-b` would become `a --b`
    yield Edit.of(op, new, _statement(node), f"swap `{op.type}` for `{new}`")


# --- bounds and constants ---------------------------------------------------------------------

_ORDER = frozenset({"<", "<=", ">", ">="})
_SLICING = frozenset({"slice", "substring", "substr", "splice", "at", "charAt"})


def _plus(file: JsFile, node: tree_sitter.Node, delta: int) -> str:
    if node.type == "number" and file.text_of(node).isdigit():
        return str(int(file.text_of(node)) + delta)
    text = file.text_of(node)
    tight = _TIGHT | {"binary_expression"} if _arith(node) else _TIGHT
    if node.type not in tight:
        text = f"({text})"
    return f"{text} {'+' if delta > 0 else '-'} 1"


def _arith(node: tree_sitter.Node) -> bool:
    op = operator_of(node) if node.type == "binary_expression" else None
    return op is not None and op.type in ("+", "-", "*", "/", "%", "**")


def _bounds(file: JsFile, node: tree_sitter.Node) -> Iterator[tree_sitter.Node]:
    if node.type == "binary_expression":
        parts = shapes.binary_parts(node)
        if parts is not None and parts[1].type in _ORDER:
            yield parts[2]
    elif node.type == "subscript_expression":
        index = node.child_by_field_name("index")
        if index is not None and (index.type in ("identifier", "number") or _arith(index)):
            yield index
    elif node.type == "call_expression":
        func, args = node.child_by_field_name("function"), node.child_by_field_name("arguments")
        prop = func.child_by_field_name("property") if func is not None else None
        if prop is not None and args is not None and file.text_of(prop) in _SLICING:
            yield from (a for a in args.named_children if a.type not in ("spread_element",))


@_operator(
    "off_by_one",
    "binary_expression",
    "subscript_expression",
    "call_expression",
    example="`i < n` -> `i < n - 1`, `s.slice(1)` -> `s.slice(2)`",
)
def _off_by_one(file: JsFile, node: tree_sitter.Node) -> Iterator[Edit]:
    for bound in _bounds(file, node):
        if _is_string(bound):
            continue
        for delta in (1, -1):
            new = _plus(file, bound, delta)
            if new.startswith("-") and bound.type == "number":
                continue
            what = f"`{file.snippet(bound)}` off by {delta:+d}"
            yield Edit.of(bound, new, _statement(node), what)


@_operator("change_constant", "number", "true", "false", example="`0` -> `1`, `true` -> `false`")
def _change_constant(file: JsFile, node: tree_sitter.Node) -> Iterator[Edit]:
    text = file.text_of(node)
    if node.type == "number":
        if not text.isdigit() or len(text) > 15:
            return  # hex, floats, bigints, separators: rarely a plausible slip
        new = "1" if text == "0" else "0" if text == "1" else str(int(text) + 1)
    else:
        new = "false" if text == "true" else "true"
    yield Edit.of(node, new, _statement(node), f"change `{text}` to `{new}`")


@_operator("swap_call_args", "call_expression", example="`range(a, b)` -> `range(b, a)`")
def _swap_call_args(file: JsFile, node: tree_sitter.Node) -> Iterator[Edit]:
    args = node.child_by_field_name("arguments")
    if args is None or args.type != "arguments" or _is_quiet(file, node):
        return
    named = [a for a in args.named_children if a.type != "comment"]
    if len(named) != 2 or any(a.type == "spread_element" for a in named):
        return
    first, second = named
    callee = node.child_by_field_name("function") or node
    yield from shapes.swapped(
        file, first, second, node, f"swap the arguments of `{file.snippet(callee)}`"
    )


# --- removals ---------------------------------------------------------------------------------


def _drop(file: JsFile, stmt: tree_sitter.Node, what: str) -> Iterator[Edit]:
    """Remove a statement from its block: its whole line when it is alone there, else its bytes.

    A statement that is a branch or loop body on its own (``if (x) f();``) becomes ``;``.
    """
    parent = stmt.parent
    if parent is None:
        return
    if parent.type not in ("statement_block", "switch_case", "switch_default", "program"):
        yield Edit(stmt.start_byte, stmt.end_byte, ";", stmt, what)
        return
    yield shapes.line_removed(file, stmt, what) or Edit(
        stmt.start_byte, stmt.end_byte, "", stmt, what
    )


_CALLS = frozenset({"call_expression", "await_expression", "new_expression"})
_ASSIGNS = frozenset(
    {"assignment_expression", "augmented_assignment_expression", "update_expression"}
)


def _expression_of(stmt: tree_sitter.Node) -> tree_sitter.Node | None:
    return stmt.named_children[0] if stmt.named_child_count else None


@_operator("remove_statement", "expression_statement", example="`this.items.push(x);` -> (removed)")
def _remove_statement(file: JsFile, node: tree_sitter.Node) -> Iterator[Edit]:
    expr = _expression_of(node)
    if expr is None or expr.type not in _CALLS or _is_quiet(file, expr):
        return
    yield from _drop(file, node, f"remove `{file.snippet(node)}`")


@_operator("remove_assignment", "expression_statement", example="`total += x;` -> (removed)")
def _remove_assignment(file: JsFile, node: tree_sitter.Node) -> Iterator[Edit]:
    expr = _expression_of(node)
    if expr is None or expr.type not in _ASSIGNS:
        return
    yield from _drop(file, node, f"remove `{file.snippet(node)}`")


@_operator("remove_conditional", "if_statement", example="`if (x == null) x = [];` -> (removed)")
def _remove_conditional(file: JsFile, node: tree_sitter.Node) -> Iterator[Edit]:
    if node.child_by_field_name("alternative") is not None:
        return
    if node.parent is not None and node.parent.type == "else_clause":
        return  # the `if` of an `else if`
    cond = node.child_by_field_name("condition")
    yield from _drop(file, node, f"remove `if {file.snippet(cond or node)}`")


_LOOPS = ("for_statement", "for_in_statement", "while_statement", "do_statement")


@_operator("remove_loop", *_LOOPS, example="`for (const x of xs) total += x;` -> (removed)")
def _remove_loop(file: JsFile, node: tree_sitter.Node) -> Iterator[Edit]:
    yield from _drop(file, node, f"remove the loop `{file.snippet(node, 30)}`")


@_operator("drop_return_value", "return_statement", example="`return result;` -> `return;`")
def _drop_return_value(file: JsFile, node: tree_sitter.Node) -> Iterator[Edit]:
    value = node.named_children[0] if node.named_child_count else None
    keyword = node.children[0] if node.child_count else None
    if value is None or keyword is None or value.type in ("undefined", "comment"):
        return
    yield Edit(keyword.end_byte, value.end_byte, "", node, "drop the returned value")


@_operator("break_loop_early", *_LOOPS, example="`for (...) { f(x); }` -> `{ f(x); break; }`")
def _break_loop_early(file: JsFile, node: tree_sitter.Node) -> Iterator[Edit]:
    body = node.child_by_field_name("body")
    if body is None or body.type != "statement_block" or not body.named_child_count:
        return
    last = body.named_children[-1]
    if last.type in ("break_statement", "return_statement", "throw_statement", "comment"):
        return
    yield Edit(last.end_byte, last.end_byte, " break;", last, "break out after one pass")


# --- JavaScript's own ---------------------------------------------------------------------------

_LOOSE = {"===": "==", "!==": "!="}


@_operator("loosen_equality", "binary_expression", example="`x === 0` -> `x == 0`")
def _loosen_equality(file: JsFile, node: tree_sitter.Node) -> Iterator[Edit]:
    parts = shapes.binary_parts(node)
    if parts is None or parts[1].type not in _LOOSE:
        return
    op = parts[1]
    yield Edit.of(op, _LOOSE[op.type], _statement(node), f"loosen `{op.type}`")


@_operator("remove_optional_chain", "optional_chain", example="`a?.b` -> `a.b`")
def _remove_optional_chain(file: JsFile, node: tree_sitter.Node) -> Iterator[Edit]:
    after = node.next_sibling
    if after is None or node.parent is None:
        return
    # `a?.b` -> `a.b`; `a?.[i]` -> `a[i]`; `f?.()` -> `f()`
    new = "." if after.type in ("property_identifier", "private_property_identifier") else ""
    yield Edit.of(node, new, _statement(node), "drop the optional chain `?.`")
