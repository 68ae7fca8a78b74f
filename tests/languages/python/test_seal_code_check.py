"""The seal's code check: a test function must run the code its own file compiles to.

The check first compiles only the functions of the test's name (inside copies of their classes,
after the file's ``__future__`` imports) and pays for the whole file only on a miss. These tests
hold the short way to the long one: every function of a file full of the shapes that change a
code object (private names, ``super()``, decorators, nested classes, closures, lambdas, postponed
annotations, asserts with messages), rewritten as pytest's import rewrites it, is found among
its name's short compile; and a function compiled from other source is not.
"""

from __future__ import annotations

import ast
import textwrap
import types
from pathlib import Path

from _pytest.assertion.rewrite import rewrite_asserts
from trajforge.verifiers.languages.python.in_container import seal

SHAPES = textwrap.dedent(
    '''\
    """A test module of every shape."""
    from __future__ import annotations

    import functools

    import pytest


    def helper(x: int) -> int:
        return x + 1


    def test_plain():
        assert helper(1) == 2, "helper adds one"


    @pytest.mark.parametrize("n", [1, 2])
    def test_decorated(n: int) -> None:
        values = [helper(i) for i in range(n)]
        assert all(v > 0 for v in values)


    def _keep(f):
        @functools.wraps(f)
        def inner(*a, **k):
            return f(*a, **k)
        return inner


    @_keep
    def test_wrapped():
        assert (lambda y: y * 2)(3) == 6


    class TestBase:
        def check(self):
            return True


    class TestThings(TestBase):
        __secret = 3

        def test_private(self):
            assert self.__secret == 3

        def test_super(self):
            assert super().check()

        class TestInner:
            def test_plain(self):
                def closure():
                    return helper(0)
                assert closure() == 1

        if True:
            def test_in_an_if(self):
                assert 1 < 2 < 3


    try:
        def test_in_a_try():
            x = {"a": 1}
            assert x["a"] == 1 and not x.get("b")
    except Exception:
        pass


    async def test_async():
        assert True
    '''
)


def _functions(code: types.CodeType) -> list[types.CodeType]:
    found = []
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            if const.co_name.startswith("test_") or const.co_name in ("check", "helper"):
                found.append(const)
            found.extend(_functions(const))
    return found


def test_each_function_is_found_by_compiling_its_name_alone(tmp_path: Path) -> None:
    path = tmp_path / "test_shapes.py"
    source = SHAPES.encode()
    path.write_bytes(source)
    tree = ast.parse(source, filename=str(path))
    rewrite_asserts(tree, source, str(path), None)  # what pytest's import does
    whole = compile(tree, str(path), "exec", dont_inherit=True)
    functions = _functions(whole)
    assert len(functions) == 11
    pristine, _, _ = seal._read(str(path))
    for code in functions:
        short = seal._rewritten_defs(pristine, code.co_name, source, str(path), None)
        assert code in short, (code.co_name, code.co_firstlineno)


def test_a_function_from_other_source_is_not(tmp_path: Path) -> None:
    """The same test with its assert turned into ``pass`` (a module loaded through another
    finder) is in neither the short nor the whole compile."""
    path = tmp_path / "test_shapes.py"
    source = SHAPES.encode()
    path.write_bytes(source)
    stripped = SHAPES.replace('assert helper(1) == 2, "helper adds one"', "pass")
    forged = [
        c
        for c in _functions(compile(stripped, str(path), "exec", dont_inherit=True))
        if c.co_name == "test_plain" and c.co_firstlineno == 13
    ]
    assert len(forged) == 1
    tree, _, _ = seal._read(str(path))
    assert forged[0] not in seal._rewritten_defs(tree, "test_plain", source, str(path), None)
    assert forged[0] not in seal._compiled(str(path), source, None)
    assert forged[0] not in seal._plain(str(path), source)
