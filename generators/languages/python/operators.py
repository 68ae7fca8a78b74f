"""Bug-injection operators: each finds the places where one small, plausible mistake fits.

An operator only builds libcst nodes: given a node inside a function body (and its ancestors) it
yields Edits, "rewrite this node as that one". mutations.py decides where operators may
look (function bodies only: never docstrings, decorators, annotations or default values) and
turns an Edit into source text, byte-identical outside the rewritten node.

Operators skip rewrites that rarely change what a test can observe (a log message, an error text,
a ``break`` after a ``return``), because such mutants seldom yield a FAIL_TO_PASS test.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

import libcst as cst
from libcst import MaybeSentinel

Parents = tuple[cst.CSTNode, ...]  # outermost first; parents[-1] is the node's parent

_EMPTY = cst.Module(body=[])
_SPACE = cst.SimpleWhitespace(" ")
_NO_SPACE = cst.SimpleWhitespace("")

# Calls whose removal or whose text rarely changes what a test can observe.
_QUIET_CALLS = {
    "print",
    "debug",
    "info",
    "warning",
    "warn",
    "error",
    "exception",
    "critical",
    "log",
}


@dataclass(frozen=True)
class Edit:
    """Rewrite ``target`` as ``replacement``; ``focus`` is the code the bug sits in."""

    target: cst.CSTNode
    replacement: cst.CSTNode
    focus: cst.CSTNode  # its lines select the tests that cover the mutant
    what: str  # e.g. "flip `<` to `>=`"; the engine appends where


Finder = Callable[[cst.CSTNode, Parents], Iterator[Edit]]


@dataclass(frozen=True)
class Operator:
    name: str
    node_types: tuple[type[cst.CSTNode], ...]  # the walk calls ``find`` on these nodes only
    find: Finder
    example: str  # one line, for reports and docs


OPERATORS: dict[str, Operator] = {}


def _operator(
    name: str, *node_types: type[cst.CSTNode], example: str
) -> Callable[[Finder], Finder]:
    def register(find: Finder) -> Finder:
        OPERATORS[name] = Operator(name, node_types, find, example)
        return find

    return register


def code(node: cst.CSTNode) -> str:
    return _EMPTY.code_for_node(node)


def snippet(node: cst.CSTNode, limit: int = 50) -> str:
    """One short line of a node's code, for descriptions."""
    text = " ".join(code(node).split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _call_name(call: cst.Call) -> str:
    func = call.func
    if isinstance(func, cst.Name):
        return func.value
    if isinstance(func, cst.Attribute):
        return func.attr.value
    return ""


def _is_quiet_call(node: cst.BaseExpression) -> bool:
    if isinstance(node, cst.Await):
        node = node.expression
    return isinstance(node, cst.Call) and _call_name(node) in _QUIET_CALLS


def _is_string(node: cst.BaseExpression) -> bool:
    return isinstance(node, cst.SimpleString | cst.ConcatenatedString | cst.FormattedString)


_ATOMS = (
    cst.Name,
    cst.Attribute,
    cst.Call,
    cst.Subscript,
    cst.Integer,
    cst.Float,
    cst.SimpleString,
    cst.List,
    cst.Tuple,
    cst.Dict,
    cst.Set,
)


def _parenthesized(
    expr: cst.BaseExpression, atoms: tuple[type, ...] = _ATOMS
) -> cst.BaseExpression:
    """``expr`` safe to use as an operand: wrapped in parentheses unless it binds tightly."""
    if expr.lpar or isinstance(expr, atoms):
        return expr
    return expr.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])


def _plus(expr: cst.BaseExpression, delta: int) -> cst.BinaryOperation:
    tight: tuple[type, ...] = (*_ATOMS, cst.UnaryOperation)
    arith = (cst.Add, cst.Subtract, cst.Multiply, cst.Divide, cst.FloorDivide, cst.Modulo)
    if isinstance(expr, cst.BinaryOperation) and isinstance(expr.operator, arith):
        tight = (*tight, cst.BinaryOperation)
    if isinstance(expr, cst.UnaryOperation) and isinstance(expr.operator, cst.Not):
        tight = _ATOMS
    op: cst.BaseBinaryOp = cst.Add(_SPACE, _SPACE) if delta > 0 else cst.Subtract(_SPACE, _SPACE)
    return cst.BinaryOperation(_parenthesized(expr, tight), op, cst.Integer("1"))


def _leading(stmt: cst.CSTNode) -> list[cst.EmptyLine]:
    """Comment and blank lines above a statement (every statement kind has them)."""
    return list(getattr(stmt, "leading_lines", ()))


def _without(items: Sequence[cst.CSTNode], node: cst.CSTNode) -> list[cst.CSTNode]:
    return [item for item in items if item is not node]


# --- removing statements without leaving an empty block ---------------------------------------


def _drop_statement(
    stmt: cst.BaseStatement, parents: Parents, focus: cst.CSTNode, what: str
) -> Edit | None:
    """Remove a statement from its block; the only statement of a block becomes ``pass``.

    Comment lines above the removed statement move to the next one, so the bug does not show up
    as a missing comment.
    """
    block = parents[-1] if parents else None
    if not isinstance(block, cst.IndentedBlock):
        return None
    body = list(block.body)
    index = next(i for i, s in enumerate(body) if s is stmt)
    leading = _leading(stmt)
    if len(body) == 1:
        new_body: list[cst.BaseStatement] = [
            cst.SimpleStatementLine([cst.Pass()], leading_lines=leading)
        ]
        return Edit(block, block.with_changes(body=new_body), focus, what)
    del body[index]
    footer = list(block.footer)
    if index < len(body):
        after = body[index]
        body[index] = after.with_changes(leading_lines=[*leading, *_leading(after)])
    else:
        footer = [*leading, *footer]
    return Edit(block, block.with_changes(body=body, footer=footer), focus, what)


def _drop_small(small: cst.BaseSmallStatement, parents: Parents, what: str) -> Edit | None:
    line = parents[-1]
    if not isinstance(line, cst.SimpleStatementLine | cst.SimpleStatementSuite):
        return None
    if len(line.body) > 1:
        rest = _without(line.body, small)
        if small is line.body[-1]:
            rest[-1] = rest[-1].with_changes(semicolon=MaybeSentinel.DEFAULT)
        return Edit(line, line.with_changes(body=rest), small, what)
    if isinstance(line, cst.SimpleStatementSuite):
        return Edit(line, line.with_changes(body=[cst.Pass()]), small, what)
    return _drop_statement(line, parents[:-1], small, what)


# --- comparisons and conditions ---------------------------------------------------------------

_CMP_SYMBOL: dict[type, str] = {
    cst.LessThan: "<",
    cst.LessThanEqual: "<=",
    cst.GreaterThan: ">",
    cst.GreaterThanEqual: ">=",
    cst.Equal: "==",
    cst.NotEqual: "!=",
    cst.Is: "is",
    cst.IsNot: "is not",
    cst.In: "in",
    cst.NotIn: "not in",
}
# The negation first, then the boundary slip (``<`` written for ``<=``).
_CMP_FLIPS: dict[type, tuple[type, ...]] = {
    cst.LessThan: (cst.GreaterThanEqual, cst.LessThanEqual),
    cst.LessThanEqual: (cst.GreaterThan, cst.LessThan),
    cst.GreaterThan: (cst.LessThanEqual, cst.GreaterThanEqual),
    cst.GreaterThanEqual: (cst.LessThan, cst.GreaterThan),
    cst.Equal: (cst.NotEqual,),
    cst.NotEqual: (cst.Equal,),
    cst.Is: (cst.IsNot,),
    cst.IsNot: (cst.Is,),
    cst.In: (cst.NotIn,),
    cst.NotIn: (cst.In,),
}


def _cmp_op(kind: type, old: cst.BaseCompOp) -> cst.BaseCompOp:
    before = getattr(old, "whitespace_before", _SPACE)
    after = getattr(old, "whitespace_after", _SPACE)
    if kind in (cst.IsNot, cst.NotIn):
        between: cst.BaseCompOp = kind(
            whitespace_before=before, whitespace_between=_SPACE, whitespace_after=after
        )
        return between
    new: cst.BaseCompOp = kind(whitespace_before=before, whitespace_after=after)
    return new


@_operator("flip_comparison", cst.ComparisonTarget, example="`if i < n:` -> `if i >= n:`")
def _flip_comparison(node: cst.CSTNode, parents: Parents) -> Iterator[Edit]:
    assert isinstance(node, cst.ComparisonTarget)
    old = node.operator
    for kind in _CMP_FLIPS.get(type(old), ()):
        new = node.with_changes(operator=_cmp_op(kind, old))
        what = f"flip `{_CMP_SYMBOL[type(old)]}` to `{_CMP_SYMBOL[kind]}`"
        yield Edit(node, new, parents[-1], what)


@_operator("negate_condition", cst.If, cst.While, example="`while queue:` -> `while not queue:`")
def _negate_condition(node: cst.CSTNode, parents: Parents) -> Iterator[Edit]:
    assert isinstance(node, cst.If | cst.While)
    test = node.test
    if (
        isinstance(test, cst.UnaryOperation)
        and isinstance(test.operator, cst.Not)
        and not test.lpar
    ):
        yield Edit(test, test.expression, test, f"drop `not` from `{snippet(test)}`")
        return
    negated: cst.BaseExpression = cst.UnaryOperation(cst.Not(_SPACE), _parenthesized(test))
    gap = node.whitespace_before_test if isinstance(node, cst.If) else node.whitespace_after_while
    if not code(gap):  # `if(x):` needs `if(not (x)):`
        negated = negated.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])
    yield Edit(test, negated, test, f"negate `{snippet(test)}`")


@_operator("swap_if_else", cst.If, cst.IfExp, example="`if a: x() else: y()` -> bodies swapped")
def _swap_if_else(node: cst.CSTNode, parents: Parents) -> Iterator[Edit]:
    if isinstance(node, cst.IfExp):
        body, orelse = node.body, node.orelse
        if code(body) == code(orelse):
            return
        loose = (cst.IfExp, cst.Lambda, cst.NamedExpr)
        new_body = _parenthesized(orelse) if isinstance(orelse, loose) else orelse
        new_else = _parenthesized(body) if isinstance(body, loose) else body
        swapped = node.with_changes(body=new_body, orelse=new_else)
        yield Edit(node, swapped, node, f"swap the branches of `{snippet(node)}`")
        return
    assert isinstance(node, cst.If)
    else_ = node.orelse
    if not isinstance(else_, cst.Else):
        return
    a, b = node.body, else_.body
    if code(a) == code(b):
        return
    new_a: cst.BaseSuite = b
    new_b: cst.BaseSuite = a
    if isinstance(a, cst.IndentedBlock) and isinstance(b, cst.IndentedBlock):
        new_a, new_b = a.with_changes(body=b.body), b.with_changes(body=a.body)
    swapped_if = node.with_changes(body=new_a, orelse=else_.with_changes(body=new_b))
    yield Edit(node, swapped_if, node, f"swap the if/else bodies of `if {snippet(node.test)}`")


@_operator("swap_bool_op", cst.BooleanOperation, example="`if a and b:` -> `if a or b:`")
def _swap_bool_op(node: cst.CSTNode, parents: Parents) -> Iterator[Edit]:
    assert isinstance(node, cst.BooleanOperation)
    old = node.operator
    if isinstance(old, cst.And):
        yield Edit(
            old, cst.Or(old.whitespace_before, old.whitespace_after), node, "change `and` to `or`"
        )
    elif isinstance(old, cst.Or):
        yield Edit(
            old, cst.And(old.whitespace_before, old.whitespace_after), node, "change `or` to `and`"
        )


# --- arithmetic and constants -----------------------------------------------------------------

_ARITH: dict[type, tuple[type, str, str]] = {
    cst.Add: (cst.Subtract, "+", "-"),
    cst.Subtract: (cst.Add, "-", "+"),
    cst.Multiply: (cst.Divide, "*", "/"),
    cst.Divide: (cst.Multiply, "/", "*"),
    cst.FloorDivide: (cst.Multiply, "//", "*"),
    cst.Modulo: (cst.FloorDivide, "%", "//"),
    cst.Power: (cst.Multiply, "**", "*"),
    cst.LeftShift: (cst.RightShift, "<<", ">>"),
    cst.RightShift: (cst.LeftShift, ">>", "<<"),
    cst.BitAnd: (cst.BitOr, "&", "|"),
    cst.BitOr: (cst.BitAnd, "|", "&"),
    cst.BitXor: (cst.BitOr, "^", "|"),
    cst.AddAssign: (cst.SubtractAssign, "+=", "-="),
    cst.SubtractAssign: (cst.AddAssign, "-=", "+="),
    cst.MultiplyAssign: (cst.DivideAssign, "*=", "/="),
    cst.DivideAssign: (cst.MultiplyAssign, "/=", "*="),
    cst.FloorDivideAssign: (cst.MultiplyAssign, "//=", "*="),
    cst.ModuloAssign: (cst.FloorDivideAssign, "%=", "//="),
    cst.LeftShiftAssign: (cst.RightShiftAssign, "<<=", ">>="),
    cst.RightShiftAssign: (cst.LeftShiftAssign, ">>=", "<<="),
    cst.BitAndAssign: (cst.BitOrAssign, "&=", "|="),
    cst.BitOrAssign: (cst.BitAndAssign, "|=", "&="),
}


@_operator(
    "swap_arith_op", cst.BinaryOperation, cst.AugAssign, example="`total += x` -> `total -= x`"
)
def _swap_arith_op(node: cst.CSTNode, parents: Parents) -> Iterator[Edit]:
    assert isinstance(node, cst.BinaryOperation | cst.AugAssign)
    operand = node.left if isinstance(node, cst.BinaryOperation) else node.value
    if _is_string(operand):  # "a" + b, "%s" % x: text building, not arithmetic
        return
    old = node.operator
    if type(old) not in _ARITH:
        return
    kind, before, after = _ARITH[type(old)]
    new = kind(
        whitespace_before=getattr(old, "whitespace_before", _SPACE),
        whitespace_after=getattr(old, "whitespace_after", _SPACE),
    )
    yield Edit(old, new, node, f"change `{before}` to `{after}`")


def _int_literal(value: int, like: str) -> cst.BaseExpression:
    """``value`` written in the base ``like`` is written in (hex stays hex)."""
    magnitude = abs(value)
    prefix = like[:2].lower()
    text = {"0x": hex, "0o": oct, "0b": bin}.get(prefix, str)(magnitude)
    literal = cst.Integer(text)
    return cst.UnaryOperation(cst.Minus(), literal) if value < 0 else literal


def _bound_positions(node: cst.CSTNode) -> Iterator[cst.BaseExpression]:
    """The bounds of ``range(...)`` calls and slices (not steps)."""
    if (
        isinstance(node, cst.Call)
        and _call_name(node) == "range"
        and isinstance(node.func, cst.Name)
    ):
        args = [a for a in node.args if a.keyword is None and not a.star]
        if len(args) == len(node.args) and 1 <= len(args) <= 3:
            yield from (a.value for a in args[:2])
    elif isinstance(node, cst.Slice):
        yield from (b for b in (node.lower, node.upper) if b is not None)


@_operator(
    "off_by_one",
    cst.Integer,
    cst.Call,
    cst.Slice,
    example="`range(n)` -> `range(n + 1)`, `x[1:]` -> `x[2:]`",
)
def _off_by_one(node: cst.CSTNode, parents: Parents) -> Iterator[Edit]:
    if isinstance(node, cst.Integer):
        value = node.evaluated_value
        for delta in (1, -1):
            new = _int_literal(value + delta, node.value)
            if node.lpar:
                new = new.with_changes(lpar=node.lpar, rpar=node.rpar)
            yield Edit(node, new, node, f"change `{node.value}` to `{code(new)}`")
        return
    for bound in _bound_positions(node):
        if isinstance(bound, cst.Integer) or (
            isinstance(bound, cst.UnaryOperation) and isinstance(bound.expression, cst.Integer)
        ):
            continue  # literal bounds are the Integer rule's
        for delta in (1, -1):
            new = _plus(bound, delta)
            yield Edit(bound, new, node, f"change bound `{snippet(bound)}` to `{snippet(new)}`")


def _string_value(node: cst.SimpleString) -> str:
    return node.value[len(node.prefix) + len(node.quote) : -len(node.quote)]


def _in_message(node: cst.CSTNode, parents: Parents) -> bool:
    """Inside a raise, an assert message or a print/log call: text no test is likely to check."""
    chain = (*parents, node)
    for i, parent in enumerate(parents):
        if isinstance(parent, cst.Raise):
            return True
        if isinstance(parent, cst.Assert) and chain[i + 1] is parent.msg:
            return True
        if isinstance(parent, cst.Call) and _call_name(parent) in _QUIET_CALLS:
            return True
    return False


_VALUE_SLOTS = (cst.Assign, cst.AnnAssign, cst.Return, cst.Arg, cst.DictElement, cst.Element)


@_operator(
    "change_constant",
    cst.Name,
    cst.Integer,
    cst.Float,
    cst.SimpleString,
    example="`return True` -> `return False`, `sep = ','` -> `sep = ''`",
)
def _change_constant(node: cst.CSTNode, parents: Parents) -> Iterator[Edit]:
    if isinstance(node, cst.Name):
        swap = {"True": "False", "False": "True"}.get(node.value)
        if swap is not None:
            yield Edit(
                node, node.with_changes(value=swap), node, f"change `{node.value}` to `{swap}`"
            )
        return
    if _in_message(node, parents):
        return
    new: cst.BaseExpression | None = None
    if isinstance(node, cst.Integer):
        if node.evaluated_value not in (0, 1):  # 0 and 1 belong to off_by_one
            new = node.with_changes(value="0")
    elif isinstance(node, cst.Float):
        new = node.with_changes(value="1.0" if node.evaluated_value == 0 else "0.0")
    elif isinstance(node, cst.SimpleString):
        empty = not _string_value(node)
        new = node.with_changes(
            value=f"{node.prefix}{node.quote}{' ' if empty else ''}{node.quote}"
        )
    assert isinstance(node, cst.BaseExpression)
    if new is not None:
        yield Edit(node, new, node, f"change `{snippet(node, 30)}` to `{snippet(new, 30)}`")
    if isinstance(parents[-1], _VALUE_SLOTS):
        none = cst.Name("None", lpar=node.lpar, rpar=node.rpar)
        yield Edit(node, none, node, f"change `{snippet(node, 30)}` to `None`")


@_operator("swap_call_args", cst.Call, example="`divmod(a, b)` -> `divmod(b, a)`")
def _swap_call_args(node: cst.CSTNode, parents: Parents) -> Iterator[Edit]:
    assert isinstance(node, cst.Call)
    if _call_name(node) in _QUIET_CALLS:
        return
    args = list(node.args)
    positional = 0
    while positional < len(args) and args[positional].keyword is None and not args[positional].star:
        positional += 1
    for i in range(positional - 1):
        a, b = args[i], args[i + 1]
        if code(a.value) == code(b.value):
            continue
        new_args = [*args[:i], a.with_changes(value=b.value), b.with_changes(value=a.value)]
        new = node.with_changes(args=[*new_args, *args[i + 2 :]])
        what = f"swap arguments `{snippet(a.value, 25)}` and `{snippet(b.value, 25)}`"
        yield Edit(node, new, node, f"{what} of `{_call_name(node) or 'call'}()`")


# --- removing code ----------------------------------------------------------------------------


@_operator("remove_statement", cst.Expr, example="`self.items.append(x)` -> (removed)")
def _remove_statement(node: cst.CSTNode, parents: Parents) -> Iterator[Edit]:
    assert isinstance(node, cst.Expr)
    value = node.value
    call = value.expression if isinstance(value, cst.Await) else value
    if not isinstance(call, cst.Call) or _is_quiet_call(value):
        return
    edit = _drop_small(node, parents, f"remove call `{snippet(node)}`")
    if edit is not None:
        yield edit


@_operator(
    "remove_assignment",
    cst.Assign,
    cst.AugAssign,
    cst.AnnAssign,
    example="`count = count + 1` -> (removed)",
)
def _remove_assignment(node: cst.CSTNode, parents: Parents) -> Iterator[Edit]:
    if isinstance(node, cst.AnnAssign) and node.value is None:
        return
    assert isinstance(node, cst.BaseSmallStatement)
    edit = _drop_small(node, parents, f"remove assignment `{snippet(node)}`")
    if edit is not None:
        yield edit


@_operator("remove_conditional", cst.If, example="`if x is None: x = []` -> (removed)")
def _remove_conditional(node: cst.CSTNode, parents: Parents) -> Iterator[Edit]:
    assert isinstance(node, cst.If)
    if node.orelse is None:  # an elif's parent is an If, which _drop_statement refuses
        edit = _drop_statement(node, parents, node, f"remove `if {snippet(node.test)}` block")
        if edit is not None:
            yield edit


@_operator("remove_loop", cst.For, cst.While, example="`for x in xs: total += x` -> (removed)")
def _remove_loop(node: cst.CSTNode, parents: Parents) -> Iterator[Edit]:
    assert isinstance(node, cst.For | cst.While)
    head = (
        f"for {snippet(node.target)} in {snippet(node.iter)}"
        if isinstance(node, cst.For)
        else (f"while {snippet(node.test)}")
    )
    edit = _drop_statement(node, parents, node, f"remove `{head}` loop")
    if edit is not None:
        yield edit


@_operator("drop_return_value", cst.Return, example="`return result` -> `return`")
def _drop_return_value(node: cst.CSTNode, parents: Parents) -> Iterator[Edit]:
    assert isinstance(node, cst.Return)
    value = node.value
    if value is None or (isinstance(value, cst.Name) and value.value == "None"):
        return
    new = node.with_changes(value=None, whitespace_after_return=MaybeSentinel.DEFAULT)
    yield Edit(node, new, node, f"drop the value of `return {snippet(value, 40)}`")


def _handler_name(handler: cst.ExceptHandler) -> str:
    return f"except {snippet(handler.type, 40)}" if handler.type is not None else "except"


@_operator(
    "remove_except_handler",
    cst.Try,
    example="`try: f() except KeyError: ... except ValueError: ...` -> one handler dropped",
)
def _remove_except_handler(node: cst.CSTNode, parents: Parents) -> Iterator[Edit]:
    assert isinstance(node, cst.Try)
    handlers = list(node.handlers)
    if len(handlers) >= 2:
        for handler in handlers:
            new = node.with_changes(handlers=_without(handlers, handler))
            yield Edit(node, new, handler, f"drop the `{_handler_name(handler)}` handler")
        return
    if len(handlers) != 1:
        return
    what = f"unwrap the try around `{_handler_name(handlers[0])}`"
    if node.finalbody is not None:
        if node.orelse is None:
            yield Edit(node, node.with_changes(handlers=[]), node, what)
        return
    block = parents[-1]
    if not isinstance(node.body, cst.IndentedBlock) or not isinstance(block, cst.IndentedBlock):
        return
    inner = list(node.body.body)
    if node.orelse is not None:
        if not isinstance(node.orelse.body, cst.IndentedBlock):
            return
        inner += node.orelse.body.body
    inner[0] = inner[0].with_changes(leading_lines=[*node.leading_lines, *_leading(inner[0])])
    body = list(block.body)
    index = next(i for i, s in enumerate(body) if s is node)
    new_block = block.with_changes(body=[*body[:index], *inner, *body[index + 1 :]])
    yield Edit(block, new_block, node, what)


_TERMINAL = (cst.Return, cst.Raise, cst.Continue, cst.Break)


@_operator("break_loop_early", cst.For, cst.While, example="`for x in xs: f(x)` -> `...; break`")
def _break_loop_early(node: cst.CSTNode, parents: Parents) -> Iterator[Edit]:
    assert isinstance(node, cst.For | cst.While)
    body = node.body
    what = "insert `break` at the end of the loop body"
    if isinstance(body, cst.SimpleStatementSuite):
        if isinstance(body.body[-1], _TERMINAL):
            return
        last = body.body[-1].with_changes(semicolon=cst.Semicolon(_NO_SPACE, _SPACE))
        yield Edit(body, body.with_changes(body=[*body.body[:-1], last, cst.Break()]), node, what)
        return
    assert isinstance(body, cst.IndentedBlock)
    last_stmt = body.body[-1]
    if isinstance(last_stmt, cst.SimpleStatementLine) and isinstance(last_stmt.body[-1], _TERMINAL):
        return  # a break after return/raise/continue is dead code
    new = body.with_changes(body=[*body.body, cst.SimpleStatementLine([cst.Break()])])
    yield Edit(body, new, node, what)
