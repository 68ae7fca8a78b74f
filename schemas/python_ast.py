"""Python source parsed into an AST, one parse at a time in the process.

CPython 3.11 keeps the AST constructor's recursion depth in the interpreter's state, not the
call's: two threads turning parse trees into ``ast`` objects at once (a garbage collection in
one lets the other run) leave it unbalanced, and a parse raises ``SystemError: AST constructor
recursion depth mismatch`` (gh-106905; seen on 3.11.7, where it failed CI once in the pool that
asks a model for bugs). The stages parse on thread pools (environment builds read setup.py,
describe and the grader read patches), so every parse of ours goes through here, under one lock;
``scripts/check_layers.py`` refuses an ``ast.parse`` anywhere else. The code that runs inside the
sandbox (``in_container/``) has its own interpreter and one thread.
"""

from __future__ import annotations

import ast
import threading
from typing import Any

_ONE_AT_A_TIME = threading.RLock()  # re-entrant: a finalizer run mid-parse may parse too


def parse(
    source: str | bytes, filename: str = "<unknown>", mode: str = "exec", **kwargs: Any
) -> Any:
    """``ast.parse``, serialized."""
    with _ONE_AT_A_TIME:
        return ast.parse(source, filename, mode, **kwargs)


def literal_eval(text: str | ast.AST) -> Any:
    """``ast.literal_eval`` (of source text it parses first), serialized."""
    with _ONE_AT_A_TIME:
        return ast.literal_eval(text)
