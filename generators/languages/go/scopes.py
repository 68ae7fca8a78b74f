"""What Go refuses that a syntax check lets through: a local variable declared and never used, a
label never used, an import no longer referenced. A mutant that removes code can leave any of
them (``v, err := f(); if err != nil { return err }`` without its check leaves ``err`` unused),
and such a mutant does not compile, so it is not a bug a test can catch.

``unused_locals`` resolves a function's identifiers through Go's block scopes (function, block,
``if``/``for``/``switch``/``select`` and each case clause) the way the compiler does, by name
without types, and answers the variables and labels nothing reads. A bare identifier on the left
of ``=`` (or redeclared by ``:=`` in its own scope) is not a read, as for the compiler; ``x += 1``,
``x++``, ``x.f = 1`` and ``x[i] = 1`` are. ``qualifiers`` counts the ``pkg.Name`` references of a
file by qualifier, so an import whose last reference a mutant removes is seen.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

import tree_sitter

_SCOPED = frozenset(
    {
        "block",
        "if_statement",
        "for_statement",
        "expression_switch_statement",
        "type_switch_statement",
        "select_statement",
        "expression_case",
        "type_case",
        "default_case",
        "communication_case",
    }
)
_FUNCTIONS = frozenset({"function_declaration", "method_declaration", "func_literal"})


@dataclass
class _Decl:
    name: str
    must_use: bool  # a variable (not a parameter, constant or type)
    used: bool = False


@dataclass
class _Scope:
    parent: _Scope | None
    names: dict[str, _Decl] = field(default_factory=dict)

    def lookup(self, name: str) -> _Decl | None:
        scope: _Scope | None = self
        while scope is not None:
            if name in scope.names:
                return scope.names[name]
            scope = scope.parent
        return None


class _Resolver:
    def __init__(self, data: bytes) -> None:
        self.data = data
        self.decls: list[_Decl] = []
        self.labels: list[dict[str, _Decl]] = []
        self.unused_labels: list[str] = []

    def text(self, node: tree_sitter.Node) -> str:
        return self.data[node.start_byte : node.end_byte].decode("utf-8", "replace")

    def declare(self, scope: _Scope, node: tree_sitter.Node, must_use: bool) -> None:
        name = self.text(node)
        if name == "_":
            return
        decl = _Decl(name, must_use)
        scope.names[name] = decl
        self.decls.append(decl)

    def function(self, node: tree_sitter.Node, scope: _Scope) -> None:
        inner = _Scope(scope)
        self.labels.append({})
        for part in ("receiver", "type_parameters", "parameters", "result"):
            params = node.child_by_field_name(part)
            if params is None:
                continue
            for decl in params.named_children:
                for name in decl.children_by_field_name("name"):
                    self.declare(inner, name, must_use=False)
        body = node.child_by_field_name("body")
        if body is not None:
            self.walk(body, inner)
        labels = self.labels.pop()
        self.unused_labels.extend(f"label {d.name}" for d in labels.values() if not d.used)

    def walk(self, node: tree_sitter.Node, scope: _Scope) -> None:
        kind = node.type
        if kind in _FUNCTIONS:
            self.function(node, scope)
            return
        if kind in _SCOPED:
            scope = _Scope(scope)
        if kind == "identifier":
            decl = scope.lookup(self.text(node))
            if decl is not None:
                decl.used = True
        elif kind == "short_var_declaration":
            self.declaring(node, scope, "left", "right")
        elif kind == "range_clause" or (
            kind == "receive_statement" and node.child_by_field_name("left") is not None
        ):
            if any(c.type == ":=" for c in node.children):
                self.declaring(node, scope, "left", "right")
            else:
                self.assigning(node, scope)
        elif kind in ("var_spec", "const_spec"):
            for part in ("type", "value"):
                child = node.child_by_field_name(part)
                if child is not None:
                    self.walk(child, scope)
            for name in node.children_by_field_name("name"):
                self.declare(scope, name, must_use=kind == "var_spec")
        elif kind == "type_switch_statement":
            alias = node.child_by_field_name("alias")
            for child in node.named_children:
                if alias is None or child.id != alias.id:
                    if child.type == "type_case" or child.type == "default_case":
                        continue
                    self.walk(child, scope)
            if alias is not None:
                for name in alias.named_children:
                    self.declare(scope, name, must_use=True)
            for child in node.named_children:
                if child.type in ("type_case", "default_case"):
                    self.walk(child, scope)
        elif kind == "assignment_statement":
            op = node.child_by_field_name("operator")
            if op is not None and op.type == "=":
                self.assigning(node, scope)
            else:
                for child in node.named_children:
                    self.walk(child, scope)
        elif kind == "labeled_statement":
            label = node.child_by_field_name("label")
            if label is not None:
                self.labels[-1].setdefault(self.text(label), _Decl(self.text(label), True))
            for child in node.named_children:
                if label is None or child.id != label.id:
                    self.walk(child, scope)
        elif kind in ("break_statement", "continue_statement", "goto_statement"):
            for child in node.named_children:
                if child.type == "label_name":
                    label_text = self.text(child)
                    decl = self.labels[-1].setdefault(label_text, _Decl(label_text, True))
                    decl.used = True
        elif kind in ("type_declaration", "field_identifier", "type_identifier"):
            return
        else:
            for child in node.named_children:
                self.walk(child, scope)

    def declaring(self, node: tree_sitter.Node, scope: _Scope, left: str, right: str) -> None:
        """``a, b := f()``: the right side is read first, then each name new to this scope is
        declared (one declared here already is assigned)."""
        value = node.child_by_field_name(right)
        if value is not None:
            self.walk(value, scope)
        names = node.child_by_field_name(left)
        if names is None:
            return
        for name in names.named_children:
            if name.type == "identifier" and self.text(name) not in scope.names:
                self.declare(scope, name, must_use=True)

    def assigning(self, node: tree_sitter.Node, scope: _Scope) -> None:
        """``a, b.c = x, y``: a bare name on the left is written, not read."""
        for part in ("left", "right"):
            side = node.child_by_field_name(part)
            if side is None:
                continue
            targets = side.named_children if side.type == "expression_list" else [side]
            for target in targets:
                if part == "left" and target.type == "identifier":
                    continue
                self.walk(target, scope)


def unused_locals(data: bytes, function: tree_sitter.Node) -> Counter[str]:
    """The names of the function's variables nothing reads and its labels nothing names."""
    resolver = _Resolver(data)
    resolver.function(function, _Scope(None))
    unused = Counter(d.name for d in resolver.decls if d.must_use and not d.used)
    unused.update(resolver.unused_labels)
    return unused


def qualifiers(data: bytes, root: tree_sitter.Node) -> Counter[str]:
    """How often each ``X.`` qualifier (a package, or a value's selector) appears in the file."""
    found: Counter[str] = Counter()
    stack = [root]
    while stack:
        node = stack.pop()
        if node.type == "selector_expression":
            operand = node.child_by_field_name("operand")
            if operand is not None and operand.type == "identifier":
                found[data[operand.start_byte : operand.end_byte].decode("utf-8", "replace")] += 1
        elif node.type == "qualified_type":
            package = node.child_by_field_name("package")
            if package is not None:
                found[data[package.start_byte : package.end_byte].decode("utf-8", "replace")] += 1
        stack.extend(node.children)
    return found
