"""A doctest as a plain script that prints what the REPL would, so it runs with ``python x.py``.

Each example's source is parsed with ``ast``: a bare expression becomes ``_show(expr)`` (print its
repr unless it is None, as ``sys.displayhook`` does), other statements stay as they are, and an
example whose expected output is a traceback runs under ``try`` and prints ``Type: message``.
Examples marked ``+SKIP`` are left out; one that does not parse drops the whole doctest.
"""

from __future__ import annotations

import ast
import doctest
import textwrap

from trajforge.schemas import python_ast

SHOW = "def _show(value):\n    if value is not None:\n        print(repr(value))"
CATCH = "except Exception as error:\n    print(f'{type(error).__name__}: {error}')"


def doctest_script(text: str, preface: str = "") -> tuple[str, str, int] | None:
    """(script, expected output, line of the first example within ``text``) or None."""
    try:
        examples = doctest.DocTestParser().get_examples(text)
    except ValueError:  # inconsistent indentation or a prompt without its space
        return None
    examples = [e for e in examples if not e.options.get(doctest.SKIP)]
    if not examples:
        return None
    parts = []
    for example in examples:
        try:
            tree = python_ast.parse(example.source)
        except SyntaxError:
            return None
        body = "\n".join(_statement(node) for node in tree.body) or "pass"
        if example.exc_msg is not None:
            body = f"try:\n{textwrap.indent(body, '    ')}\n{CATCH}"
        parts.append(body)
    code = "\n".join(parts) + "\n"
    pieces = [p for p in (preface.strip(), SHOW if "_show(" in code else "") if p]
    head = "".join(f"{piece}\n\n\n" for piece in pieces)
    expected = "".join(e.want for e in examples)
    return head + code, expected, examples[0].lineno


def _statement(node: ast.stmt) -> str:
    if isinstance(node, ast.Expr):
        return f"_show({ast.unparse(node.value)})"
    return ast.unparse(node)
