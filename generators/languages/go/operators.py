"""Bug operators for Go: Python's and JavaScript's families where the mistake exists in Go, plus
Go's own (a dropped ``if err != nil`` check, ``++`` for ``--``).

An operator reads a tree-sitter node inside a function body (``syntax.GoFile.body_nodes``) and
yields ``Edit``s: replace bytes ``start:end`` of the file with ``new``. Every other byte stays
as it was, so the reverse diff (the task's patch) undoes the bug byte for byte.

Go refuses more than a parser does, and a mutant that does not compile fails every test of its
package for a reason no issue can describe. So each operator keeps to what compiles without
knowing types: an arithmetic, bound or argument swap only where a literal, ``len``/``cap`` or a
declared type in the function says the operands are numbers (or the same type); a constant not
where it would be a duplicate ``case`` or map key, a division by zero, a negative index or an
overflow; nothing removed that ends a function which returns values (``missing return``). What
only the whole file knows (a variable, label or import left unused by a removal) is checked where
the mutant is made (``mutations.py`` with ``scopes.py``).
"""

from __future__ import annotations

from collections.abc import Iterator

import tree_sitter
from trajforge.generators.languages.go.syntax import (
    FUNCTION_TYPES,
    GoFile,
    has_result,
    operator_of,
    statements,
)
from trajforge.generators.mutants import edit_shapes as shapes
from trajforge.generators.mutants.byte_edits import Edit, Operators

GO_OPERATORS: Operators[GoFile] = Operators("Go")
_operator = GO_OPERATORS.register


# Calls whose loss few tests observe (logging), or that hang or crash a run rather than fail a
# test (a lock, a wait group).
_QUIET_OBJECTS = frozenset({"fmt", "log", "logger", "slog", "klog", "glog", "logrus", "zap"})
_QUIET_METHODS = frozenset(
    {"Lock", "Unlock", "RLock", "RUnlock", "Wait", "Done", "Log", "Logf", "Helper"}
)
_NUMERIC_TYPES = frozenset(
    {
        "int", "int8", "int16", "int32", "int64",
        "uint", "uint8", "uint16", "uint32", "uint64", "uintptr",
        "byte", "rune", "float32", "float64",
    }
)  # fmt: skip
_INTEGER_TYPES = _NUMERIC_TYPES - {"float32", "float64"}
_TIGHT = frozenset(
    {
        "identifier",
        "selector_expression",
        "index_expression",
        "call_expression",
        "int_literal",
        "parenthesized_expression",
        "binary_expression",
        "unary_expression",
    }
)
_LITERAL_CAP = 126  # a literal raised past this may overflow an int8/byte operand


def _statement(node: tree_sitter.Node) -> tree_sitter.Node:
    """The statement a node sits in (what the bug's lines are)."""
    while node.parent is not None and node.parent.type not in ("statement_list", "source_file"):
        node = node.parent
    return node


def _function(node: tree_sitter.Node) -> tree_sitter.Node | None:
    """The innermost function (declaration, method or closure) a node sits in."""
    parent = node.parent
    while parent is not None and parent.type not in FUNCTION_TYPES:
        parent = parent.parent
    return parent


def _int_value(file: GoFile, node: tree_sitter.Node) -> int | None:
    """A plain decimal int literal's value (hex, octal, separators: None)."""
    if node.type != "int_literal":
        return None
    text = file.text_of(node)
    return int(text) if text.isdigit() and (text == "0" or not text.startswith("0")) else None


# --- what the function says of its names' types ------------------------------------------------


def _declared_types(file: GoFile, function: tree_sitter.Node) -> dict[str, str]:
    """Names declared with a written type in the function (parameters, ``var x T``) or bound to
    a literal or ``len`` (``i := 0``) -> that type's text; a name declared twice with two types
    is left out."""
    found: dict[str, set[str]] = {}

    def note(name: tree_sitter.Node, type_text: str) -> None:
        found.setdefault(file.text_of(name), set()).add(type_text)

    stack = [function]
    while stack:
        node = stack.pop()
        stack.extend(node.named_children)
        if node.type in ("parameter_declaration", "var_spec"):
            type_node = node.child_by_field_name("type")
            for name in node.children_by_field_name("name"):
                if type_node is not None:
                    note(name, file.text_of(type_node))
                else:
                    found.setdefault(file.text_of(name), set()).add("?")
        elif node.type in ("short_var_declaration", "range_clause"):
            left, right = node.child_by_field_name("left"), node.child_by_field_name("right")
            if left is None:
                continue
            names = left.named_children
            values = right.named_children if right is not None else []
            if node.type == "short_var_declaration" and len(names) == len(values):
                for name, value in zip(names, values, strict=True):
                    note(name, _literal_type(file, value) or "?")
            else:
                for name in names:
                    found.setdefault(file.text_of(name), set()).add("?")
    return {
        name: types.pop() for name, types in found.items() if len(types) == 1 and "?" not in types
    }


def _literal_type(file: GoFile, node: tree_sitter.Node) -> str | None:
    if node.type == "int_literal":
        return "int"
    if node.type == "float_literal":
        return "float64"
    if node.type in ("interpreted_string_literal", "raw_string_literal"):
        return "string"
    if node.type in ("true", "false"):
        return "bool"
    if node.type == "rune_literal":
        return "rune"
    if node.type == "call_expression":
        func = node.child_by_field_name("function")
        if func is not None and file.text_of(func) in ("len", "cap"):
            return "int"
        if func is not None and file.text_of(func) in (*_NUMERIC_TYPES, "string"):
            return file.text_of(func)  # a conversion: int(x), string(r)
    return None


class _Types:
    """The types a function's text shows, asked per expression (no type checker: unknown is
    None, and an operator that needs a type then leaves the expression alone)."""

    def __init__(self, file: GoFile, node: tree_sitter.Node) -> None:
        self.file = file
        function = _function(node)
        outer = function
        while outer is not None and outer.type == "func_literal":
            outer = _function(outer)  # a closure sees its enclosing function's names
        scope = outer or function
        if scope is None:
            self.names: dict[str, str] = {}
        else:
            if scope.id not in file.declared:
                file.declared[scope.id] = _declared_types(file, scope)
            self.names = file.declared[scope.id]

    def of(self, node: tree_sitter.Node) -> str | None:
        if node.type == "parenthesized_expression" and node.named_child_count == 1:
            return self.of(node.named_children[0])
        if node.type == "identifier":
            return self.names.get(self.file.text_of(node))
        if node.type == "unary_expression":
            op, operand = operator_of(node), node.child_by_field_name("operand")
            if op is not None and op.type in ("-", "+", "^") and operand is not None:
                return self.of(operand)
            return None
        if node.type == "binary_expression":
            parts = shapes.binary_parts(node)
            if parts is None or parts[1].type not in ("+", "-", "*", "/", "%"):
                return None
            left, right = self.of(parts[0]), self.of(parts[2])
            if left == right or right is None:
                return left
            return right if left is None else None
        return _literal_type(self.file, node)

    def numeric(self, node: tree_sitter.Node) -> bool:
        return self.of(node) in _NUMERIC_TYPES


# --- comparisons and conditions ---------------------------------------------------------------

_FLIP = {"<": ">=", ">=": "<", ">": "<=", "<=": ">", "==": "!=", "!=": "=="}


@_operator("flip_comparison", "binary_expression", example="`if i < n` -> `if i >= n`")
def _flip_comparison(file: GoFile, node: tree_sitter.Node) -> Iterator[Edit]:
    yield from shapes.flip_operator(node, _FLIP, _statement)


def _condition(node: tree_sitter.Node) -> tree_sitter.Node | None:
    if node.type == "if_statement":
        return node.child_by_field_name("condition")
    for child in node.named_children:  # a for statement: `for cond {` or `for i := 0; cond; i++ {`
        if child.type == "for_clause":
            return child.child_by_field_name("condition")
        if child.type not in ("block", "range_clause", "comment"):
            return child
    return None


@_operator("negate_condition", "if_statement", "for_statement", example="`if ok {` -> `if !(ok) {`")
def _negate_condition(file: GoFile, node: tree_sitter.Node) -> Iterator[Edit]:
    test = _condition(node)
    if test is None:
        return
    yield shapes.negated(file, test)


@_operator("remove_negation", "unary_expression", example="`if !done {` -> `if done {`")
def _remove_negation(file: GoFile, node: tree_sitter.Node) -> Iterator[Edit]:
    yield from shapes.without_negation(file, node, "operand", _statement)


@_operator(
    "swap_if_else", "if_statement", example="`if c { a } else { b }` -> `if c { b } else { a }`"
)
def _swap_if_else(file: GoFile, node: tree_sitter.Node) -> Iterator[Edit]:
    first = node.child_by_field_name("consequence")
    second = node.child_by_field_name("alternative")
    if first is None or second is None or second.type != "block":
        return  # no else, or an `else if` chain: swapping would move a condition
    yield from shapes.swapped(file, first, second, node, "swap the branches")


_BOOL_SWAP = {"&&": "||", "||": "&&"}


@_operator("swap_bool_op", "binary_expression", example="`if a && b` -> `if a || b`")
def _swap_bool_op(file: GoFile, node: tree_sitter.Node) -> Iterator[Edit]:
    yield from shapes.swap_logical(file, node, _BOOL_SWAP, frozenset(_BOOL_SWAP), _statement)


# --- arithmetic ---------------------------------------------------------------------------------

_ARITH_SWAP = {"+": "-", "-": "+", "*": "/", "/": "*"}
_ASSIGN_SWAP = {"+=": "-=", "-=": "+=", "*=": "/=", "/=": "*="}


def _zero(file: GoFile, node: tree_sitter.Node) -> bool:
    value = _int_value(file, node)
    return value == 0 or (node.type == "float_literal" and float(file.text_of(node)) == 0)


def _constant(node: tree_sitter.Node) -> bool:
    return node.type in ("int_literal", "float_literal", "rune_literal")


@_operator(
    "swap_arith_op",
    "binary_expression",
    "assignment_statement",
    example="`total += x` -> `total -= x`, `a * b` -> `a / b`",
)
def _swap_arith_op(file: GoFile, node: tree_sitter.Node) -> Iterator[Edit]:
    if node.type == "assignment_statement":
        op = node.child_by_field_name("operator")
        left, right = node.child_by_field_name("left"), node.child_by_field_name("right")
        if op is None or op.type not in _ASSIGN_SWAP or left is None or right is None:
            return
        left = left.named_children[0] if left.named_child_count == 1 else left
        right = right.named_children[0] if right.named_child_count == 1 else right
        new = _ASSIGN_SWAP[op.type]
    else:
        parts = shapes.binary_parts(node)
        if parts is None or parts[1].type not in _ARITH_SWAP:
            return
        left, op, right = parts
        new = _ARITH_SWAP[op.type]
        if _constant(left) and _constant(right):
            return  # a constant expression: the new value may overflow its type
    types = _Types(file, node)
    kinds = (types.of(left), types.of(right))
    if not any(k in _NUMERIC_TYPES for k in kinds) or any(
        k is not None and k not in _NUMERIC_TYPES for k in kinds
    ):
        return  # `a + b` may join strings (`"n=" + s + 1`...): `-` would not compile
    if new.startswith("/") and _zero(file, right):
        return  # `x * 0` -> `x / 0`: division by a constant zero does not compile
    around = file.data[op.start_byte - 1 : op.start_byte] + file.data[op.end_byte : op.end_byte + 1]
    if new[0].encode() in around:
        return  # `a +-b` would become `a --b`
    yield Edit.of(op, new, _statement(node), f"swap `{op.type}` for `{new}`")


@_operator("swap_inc_dec", "inc_statement", "dec_statement", example="`i++` -> `i--`")
def _swap_inc_dec(file: GoFile, node: tree_sitter.Node) -> Iterator[Edit]:
    op = next((c for c in node.children if c.type in ("++", "--")), None)
    if op is None or node.parent is None or node.parent.type == "for_clause":
        return  # `for i := 0; i < n; i--` runs until the test times out, not until it fails
    new = "--" if op.type == "++" else "++"
    yield Edit.of(op, new, _statement(node), f"`{op.type}` for `{new}`")


# --- bounds and constants ---------------------------------------------------------------------

_ORDER = frozenset({"<", "<=", ">", ">="})


def _plus(file: GoFile, node: tree_sitter.Node, delta: int) -> str | None:
    value = _int_value(file, node)
    if value is not None:
        moved = value + delta
        return str(moved) if 0 <= moved <= _LITERAL_CAP + 1 and value <= _LITERAL_CAP else None
    if node.type in ("int_literal", "float_literal", "rune_literal"):
        return None
    text = file.text_of(node)
    if node.type not in _TIGHT:
        text = f"({text})"
    return f"{text} {'+' if delta > 0 else '-'} 1"


def _bounds(file: GoFile, node: tree_sitter.Node) -> Iterator[tuple[tree_sitter.Node, bool]]:
    """The integer bounds of a node, each with whether a literal there may only go down (an
    index or slice bound: up could leave a constant array or string)."""
    if node.type == "binary_expression":
        parts = shapes.binary_parts(node)
        if parts is not None and parts[1].type in _ORDER and _Types(file, node).numeric(parts[2]):
            yield parts[2], False
    elif node.type == "slice_expression":
        bounds = [node.child_by_field_name(f) for f in ("start", "end", "capacity")]
        literal = sum(b is not None and b.type == "int_literal" for b in bounds)
        for bound in bounds:
            if bound is not None and not (literal > 1 and bound.type == "int_literal"):
                yield bound, True  # two literal bounds could cross: `a[1:2]` -> `a[2:2]`...
    elif node.type == "index_expression":
        index = node.child_by_field_name("index")
        if index is not None and _Types(file, node).of(index) in _INTEGER_TYPES:
            yield index, True


@_operator(
    "off_by_one",
    "binary_expression",
    "slice_expression",
    "index_expression",
    example="`i < len(s)` -> `i < len(s) - 1`, `s[1:]` -> `s[1 + 1:]`",
)
def _off_by_one(file: GoFile, node: tree_sitter.Node) -> Iterator[Edit]:
    for bound, down_only in _bounds(file, node):
        for delta in (1, -1):
            if delta > 0 and down_only and bound.type == "int_literal":
                continue
            new = _plus(file, bound, delta)
            if new is None:
                continue
            what = f"`{file.snippet(bound)}` off by {delta:+d}"
            yield Edit.of(bound, new, _statement(node), what)


def _constant_is_fixed(node: tree_sitter.Node) -> bool:
    """A literal whose change would not compile or would not be a plausible slip: in a type
    (``[3]int``), a ``case`` list (a duplicate case), a composite literal's key (a duplicate
    key), a divisor (``/ 0``), a shift count, or a ``const`` (its users may need its value)."""
    child, parent = node, node.parent
    while parent is not None:
        kind = parent.type
        if kind in ("array_type", "expression_case", "const_spec", "type_case"):
            return True
        if kind == "unary_expression":
            return True  # `-1` -> `-0`, `^0`: rarely a slip, sometimes an overflow
        if kind == "keyed_element" and parent.child_by_field_name("key") == child:
            return True
        if (
            kind in ("slice_expression", "index_expression")
            and child.id != (parent.child_by_field_name("operand") or parent).id
        ):
            return True  # a bound: off_by_one's, which knows which way is safe
        if kind == "call_expression" and _is_make_with_cap(parent):
            return True  # `make([]T, 1, 1)` -> `make([]T, 2, 1)`: len larger than cap
        if kind == "binary_expression":
            op = operator_of(parent)
            if op is not None and op.type in ("/", "%", "<<", ">>", "/=", "%="):
                return True
        if kind in ("statement_list", "block") or kind in FUNCTION_TYPES:
            return False
        child, parent = parent, parent.parent
    return False


def _is_make_with_cap(call: tree_sitter.Node) -> bool:
    func, args = call.child_by_field_name("function"), call.child_by_field_name("arguments")
    return (
        func is not None
        and func.type == "identifier"
        and func.text == b"make"
        and args is not None
        and args.named_child_count == 3
    )


@_operator(
    "change_constant", "int_literal", "true", "false", example="`0` -> `1`, `true` -> `false`"
)
def _change_constant(file: GoFile, node: tree_sitter.Node) -> Iterator[Edit]:
    text = file.text_of(node)
    if _constant_is_fixed(node):
        return
    if node.type == "int_literal":
        value = _int_value(file, node)
        if value is None or value > _LITERAL_CAP:
            return
        new = "1" if value == 0 else "0" if value == 1 else str(value + 1)
    else:
        new = "false" if text == "true" else "true"
    yield Edit.of(node, new, _statement(node), f"change `{text}` to `{new}`")


@_operator("swap_call_args", "call_expression", example="`Between(lo, hi)` -> `Between(hi, lo)`")
def _swap_call_args(file: GoFile, node: tree_sitter.Node) -> Iterator[Edit]:
    args = node.child_by_field_name("arguments")
    if args is None or _is_quiet(file, node):
        return
    named = [a for a in args.named_children if a.type != "comment"]
    if len(named) != 2 or any(c.type == "..." for c in args.children):
        return
    first, second = named
    if file.text_of(first) == file.text_of(second):
        return
    if any(_untyped(arg) for arg in named):
        return  # a constant fits its own parameter, maybe not the other's (-1 as a uint)
    types = _Types(file, node)
    kind = types.of(first)
    if kind is None or kind != types.of(second):
        return  # the other order may not type-check
    callee = node.child_by_field_name("function") or node
    yield from shapes.swapped(
        file, first, second, node, f"swap the arguments of `{file.snippet(callee)}`"
    )


# --- removals ---------------------------------------------------------------------------------


def _untyped(node: tree_sitter.Node) -> bool:
    """A constant whose type its use decides: ``1``, ``-1``, ``"a"``, ``'x'``, ``1 << 3``."""
    if node.type in ("parenthesized_expression", "unary_expression"):
        return all(_untyped(child) for child in node.named_children)
    if node.type == "binary_expression":
        parts = shapes.binary_parts(node)
        return parts is not None and _untyped(parts[0]) and _untyped(parts[2])
    return node.type in (
        "int_literal",
        "float_literal",
        "imaginary_literal",
        "rune_literal",
        "interpreted_string_literal",
        "raw_string_literal",
        "true",
        "false",
        "nil",
    )


def _is_quiet(file: GoFile, call: tree_sitter.Node) -> bool:
    """``fmt.Println(...)``, ``log.Printf(...)``, ``mu.Lock()``, ``t.Helper()``."""
    if call.type != "call_expression":
        return False
    func = call.child_by_field_name("function")
    if func is None or func.type != "selector_expression":
        return False
    operand, name = func.child_by_field_name("operand"), func.child_by_field_name("field")
    return (operand is not None and file.text_of(operand) in _QUIET_OBJECTS) or (
        name is not None and file.text_of(name) in _QUIET_METHODS
    )


def _terminates_function(stmt: tree_sitter.Node) -> bool:
    """Whether the statement is (part of) the terminating statement a function that returns
    values must end with: removing it would be ``missing return``."""
    node: tree_sitter.Node | None = stmt
    while node is not None:
        while node.parent is not None and node.parent.type == "labeled_statement":
            node = node.parent
        holder = node.parent  # a statement_list
        if holder is None or holder.type != "statement_list":
            return False
        owner = holder.parent
        if owner is None or statements(owner)[-1:] != [node]:
            return False
        if owner.type in ("expression_case", "type_case", "default_case", "communication_case"):
            node = owner.parent  # the switch or select
        elif owner.type == "block":
            above = owner.parent
            if above is None:
                return False
            if above.type in FUNCTION_TYPES:
                return has_result(above)
            if above.type == "if_statement":
                while above.parent is not None and above.parent.type == "if_statement":
                    above = above.parent  # an else-if chain ends where its first `if` does
                node = above
            elif above.type in ("statement_list", "labeled_statement"):
                node = owner  # a bare block is a statement of its own
            else:
                return False  # a loop body: a loop terminates by its condition, not its body
        else:
            return False
    return False


def _drop(file: GoFile, stmt: tree_sitter.Node, what: str) -> Iterator[Edit]:
    """Remove a statement from its block: its whole line, where it is alone there (``a(); b()``
    on one line is rare in gofmt'd code, and a ``;`` would be left)."""
    if _terminates_function(stmt):
        return
    if stmt.parent is None or stmt.parent.type != "statement_list":
        return
    edit = shapes.line_removed(file, stmt, what)
    if edit is not None:
        yield edit


@_operator("remove_statement", "expression_statement", example="`s.reset()` -> (removed)")
def _remove_statement(file: GoFile, node: tree_sitter.Node) -> Iterator[Edit]:
    expr = node.named_children[0] if node.named_child_count else None
    if expr is None or expr.type != "call_expression" or _is_quiet(file, expr):
        return
    func = expr.child_by_field_name("function")
    if func is not None and file.text_of(func) == "panic":
        return  # a panic guards an impossible state: removing it is rarely observable
    yield from _drop(file, node, f"remove `{file.snippet(node)}`")


@_operator(
    "remove_assignment",
    "assignment_statement",
    "inc_statement",
    "dec_statement",
    example="`total += x` -> (removed)",
)
def _remove_assignment(file: GoFile, node: tree_sitter.Node) -> Iterator[Edit]:
    if node.parent is None or node.parent.type != "statement_list":
        return  # a for clause's update
    yield from _drop(file, node, f"remove `{file.snippet(node)}`")


def _is_err_check(file: GoFile, node: tree_sitter.Node) -> bool:
    """``if err != nil { return ..., err }``: an error check with an early return."""
    cond = node.child_by_field_name("condition")
    body = node.child_by_field_name("consequence")
    if cond is None or body is None or cond.type != "binary_expression":
        return False
    parts = shapes.binary_parts(cond)
    if parts is None or parts[1].type != "!=" or parts[2].type != "nil":
        return False
    if not file.text_of(parts[0]).lower().endswith("err"):
        return False
    body_statements = statements(body)
    return bool(body_statements) and body_statements[-1].type == "return_statement"


@_operator(
    "remove_conditional", "if_statement", example="`if x == nil { x = []int{} }` -> (removed)"
)
def _remove_conditional(file: GoFile, node: tree_sitter.Node) -> Iterator[Edit]:
    if node.child_by_field_name("alternative") is not None or _is_err_check(file, node):
        return
    if node.parent is not None and node.parent.type == "if_statement":
        return  # the `if` of an `else if`
    cond = node.child_by_field_name("condition")
    yield from _drop(file, node, f"remove `if {file.snippet(cond or node)}`")


@_operator(
    "remove_err_check",
    "if_statement",
    example="`if err != nil { return nil, err }` -> (removed)",
)
def _remove_err_check(file: GoFile, node: tree_sitter.Node) -> Iterator[Edit]:
    if node.child_by_field_name("alternative") is not None or not _is_err_check(file, node):
        return
    if node.parent is not None and node.parent.type == "if_statement":
        return
    cond = node.child_by_field_name("condition")
    yield from _drop(file, node, f"remove the error check `if {file.snippet(cond or node)}`")


@_operator(
    "remove_loop", "for_statement", example="`for _, x := range xs { total += x }` -> (removed)"
)
def _remove_loop(file: GoFile, node: tree_sitter.Node) -> Iterator[Edit]:
    yield from _drop(file, node, f"remove the loop `{file.snippet(node, 30)}`")


_ENDS = frozenset(
    {
        "break_statement",
        "return_statement",
        "continue_statement",
        "goto_statement",
        "fallthrough_statement",
    }
)


@_operator("break_loop_early", "for_statement", example="`for ... { f(x) }` -> `{ f(x); break }`")
def _break_loop_early(file: GoFile, node: tree_sitter.Node) -> Iterator[Edit]:
    if _condition(node) is None and not any(c.type == "range_clause" for c in node.named_children):
        return  # `for {`: a break makes it stop terminating the function (missing return)
    body = node.child_by_field_name("body")
    if body is None:
        return
    body_statements = statements(body)
    last = body_statements[-1] if body_statements else None
    if last is None or last.type in _ENDS:
        return
    if last.type == "expression_statement" and file.text_of(last).startswith("panic("):
        return
    indent = file.data[file.data.rfind(b"\n", 0, last.start_byte) + 1 : last.start_byte]
    if indent.strip():
        return
    new = "\n" + indent.decode("utf-8") + "break"
    yield Edit(last.end_byte, last.end_byte, new, last, "break out after one pass")
