"""Sentinel tests: planted beside the graded tests, with outcomes only the grader knows.

Each run gets new ones, drawn with the system's randomness: names made of the words of the file's
own test names, bodies from a few ordinary shapes, some written to pass and some to fail. A test
process that bends outcomes wholesale (every report "passed", every failure skipped, a summary
rewritten) bends a sentinel too, and any sentinel with the wrong outcome marks the run forged.
They are appended to the graded test files, so they share their module, imports and fixtures.

**Twins** are sentinels shaped like the graded tests themselves: a copy of a graded test function
(its decorators too, so a parametrized test keeps its parameters) under a new name drawn the same
way. Nobody knows a twin's outcome in advance, but it must be the original's: in-process code that
bends a graded test by its id, or makes the code right only for that id, leaves its twin failing
(``SAME``: the verdict rule compares the two). Only a test whose arguments are all its own
parameters is twinned; one that asks for a fixture may depend on its own name (snapshots).

Standard library only, Python 3.9 and up: Harbor's ``tests/test.sh`` plants them inside the task's
container (``languages/python/in_container/harbor_grade.py``).
"""

from __future__ import annotations

import ast
import re
import secrets
from dataclasses import dataclass

try:  # on the host: one parse at a time (schemas/python_ast.py, gh-106905)
    from trajforge.schemas.python_ast import parse as _parse
except ImportError:  # shipped alone into a Harbor task folder (harbor.VERDICT_MODULES): stdlib only
    _parse = ast.parse  # type: ignore[assignment]

PASS, FAIL = "PASSED", "FAILED"
SAME = "SAME AS "  # a twin's expected status: that of the graded test it copies
MAX_TWINS = 2
_RANDOM = secrets.SystemRandom()
_WORDS = ("value", "result", "items", "empty", "order", "basic", "round", "simple", "check", "case")


@dataclass(frozen=True)
class Sentinel:
    test_id: str  # <file>::<name>
    expected: str  # PASSED | FAILED
    source: str  # the function, as appended


def _shapes(ok: bool) -> str:
    """One test body; ``ok`` False makes its assertion wrong by a small, ordinary mistake."""
    r = _RANDOM
    a, b, c = r.randint(2, 97), r.randint(2, 97), r.randint(2, 97)
    shape = r.randrange(5)
    if shape == 0:
        items = [a, b, c]
        ordered = sorted(items) if ok else [*sorted(items, reverse=True), a]
        return f"    items = {items!r}\n    assert sorted(items) == {ordered!r}\n"
    if shape == 1:
        word = r.choice(_WORDS)
        upper = word.upper() if ok else word.upper()[:-1]
        return f"    text = {word!r}\n    assert text.upper() == {upper!r}\n"
    if shape == 2:
        expected = a * (a - 1) // 2 + (0 if ok else b)
        return f"    total = sum(range({a}))\n    assert total == {expected}\n"
    if shape == 3:
        key = r.choice(_WORDS)
        expected = b if ok else b + c
        return f"    mapping = {{{key!r}: {b}}}\n    assert mapping.get({key!r}) == {expected}\n"
    expected = a * b if ok else a * b + 1
    return f"    value = {a} * {b}\n    assert value == {expected}\n"


def _names(source: str, count: int, held: frozenset[str] = frozenset()) -> list[str]:
    """``count`` new test names from the words of the module's own test names, none of them a
    name the module's tests hold: in its text, or ``held`` (a test method a class of the module
    inherits from another file: a sentinel of that name would read, to the seal, as the file's
    code that test does not run)."""
    taken = set(re.findall(r"def (test\w*)", source)) | held
    words = {w for name in taken for w in name.split("_")[1:] if w.isalpha()}
    return draw_names(words, taken, count, "test_", "_")


def _held_names(ids: tuple[str, ...]) -> dict[str, frozenset[str]]:
    """path -> the names of its graded tests (the last part of each id, without parameters)."""
    held: dict[str, set[str]] = {}
    for test_id in ids:
        path, _, rest = test_id.partition("::")
        if rest:
            held.setdefault(path, set()).add(rest.rsplit("::", 1)[-1].split("[", 1)[0])
    return {path: frozenset(names) for path, names in held.items()}


def draw_names(words: set[str], taken: set[str], count: int, prefix: str, join: str) -> list[str]:
    """``count`` new names (``prefix`` and one to three of ``words`` or ordinary ones, joined by
    ``join``), none in ``taken``; shared with the JS sentinels (``js_sentinels``)."""
    pool = sorted(words) or list(_WORDS)
    names: list[str] = []
    while len(names) < count:
        parts = _RANDOM.sample(pool, min(len(pool), _RANDOM.choice((1, 2, 2, 3))))
        if _RANDOM.random() < 0.5 or len(parts) < 2:
            parts.append(_RANDOM.choice(_WORDS))
        name = prefix + join.join(parts)
        if name not in taken:
            taken.add(name)
            names.append(name)
    return names


def draw_outcomes(paths: list[str]) -> dict[str, list[bool]]:
    """path -> the outcomes of its sentinels (True: must pass): two to five in all, at least one
    of each, each in a file drawn from ``paths``; shared with the JS sentinels."""
    outcomes = [True, False] + [_RANDOM.random() < 0.5 for _ in range(_RANDOM.randint(1, 3))]
    _RANDOM.shuffle(outcomes)
    by_file: dict[str, list[bool]] = {}
    for ok in outcomes:
        by_file.setdefault(_RANDOM.choice(paths), []).append(ok)
    return by_file


def plant(
    files: dict[str, bytes], graded: tuple[str, ...] = (), every: tuple[str, ...] = ()
) -> tuple[dict[str, bytes], tuple[Sentinel, ...]]:
    """The graded test files with sentinels appended (at least one that must pass and one that
    must fail in all, and up to ``MAX_TWINS`` twins of the ``graded`` tests of these files),
    and the sentinels. ``every``: all the run's graded ids, whose names no sentinel takes."""
    held = _held_names((*graded, *every))
    planted, made = _plant(files, held)
    twins: list[Sentinel] = []
    for test_id in _RANDOM.sample(list(graded), len(graded)):
        path = test_id.split("::")[0]
        if len(twins) == MAX_TWINS or path not in files:
            continue
        twin = _twin(planted.get(path, files[path]), test_id, held.get(path, frozenset()))
        if twin is not None:
            twins.append(twin)
            planted[path] = planted.get(path, files[path]) + ("\n\n" + twin.source).encode()
    return planted, (*made, *twins)


def _twin(text: bytes, test_id: str, held: frozenset[str]) -> Sentinel | None:
    """A copy of the module-level test ``test_id`` under a new name, or None where it cannot be
    copied safely (a class's method, a fixture argument, source that does not parse)."""
    parts = test_id.split("::")
    if len(parts) != 2:
        return None
    name, bracket, params = parts[1].partition("[")
    source = text.decode("utf-8", "replace")
    try:
        tree = _parse(source)
    except SyntaxError:
        return None
    found = [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == name]
    if len(found) != 1 or not _own_arguments(found[0]):
        return None
    node = found[0]
    lines = source.splitlines()
    first = min([d.lineno for d in node.decorator_list] + [node.lineno]) - 1
    copy = "\n".join(lines[first : node.end_lineno])
    new = _names(source, 1, held)[0]
    copy = re.sub(rf"\bdef {re.escape(name)}\(", f"def {new}(", copy, count=1)
    twin_id = f"{parts[0]}::{new}{bracket}{params}"
    return Sentinel(twin_id, SAME + test_id, copy + "\n")


def _own_arguments(node: ast.FunctionDef) -> bool:
    """Every argument of the test is a parameter its own ``parametrize`` marks give."""
    given: set[str] = set()
    for decorator in node.decorator_list:
        if not isinstance(decorator, ast.Call) or not _parametrize(decorator.func):
            return False
        first = decorator.args[0] if decorator.args else None
        if not isinstance(first, ast.Constant) or not isinstance(first.value, str):
            return False
        given |= {n.strip() for n in first.value.split(",") if n.strip()}
    wanted = [a.arg for a in (*node.args.posonlyargs, *node.args.args, *node.args.kwonlyargs)]
    return not node.args.vararg and not node.args.kwarg and set(wanted) <= given


def _parametrize(func: ast.expr) -> bool:
    """``func`` is ``<anything>.mark.parametrize``."""
    if not isinstance(func, ast.Attribute) or func.attr != "parametrize":
        return False
    return isinstance(func.value, ast.Attribute) and func.value.attr == "mark"


def _plant(
    files: dict[str, bytes], held: dict[str, frozenset[str]]
) -> tuple[dict[str, bytes], tuple[Sentinel, ...]]:
    paths = sorted(files)
    if not paths:
        return {}, ()
    by_file = draw_outcomes(paths)
    planted: dict[str, bytes] = {}
    sentinels: list[Sentinel] = []
    for path, oks in sorted(by_file.items()):
        text = files[path].decode("utf-8", "replace")
        added = []
        names = _names(
            text, len(oks), held.get(path, frozenset())
        )  # as many as oks (no zip(strict=): runs on 3.9)
        for index, ok in enumerate(oks):
            name = names[index]
            source = f"def {name}():\n{_shapes(ok)}"
            added.append(source)
            sentinels.append(Sentinel(f"{path}::{name}", PASS if ok else FAIL, source))
        tail = "" if files[path].endswith(b"\n") else "\n"
        planted[path] = files[path] + (tail + "\n\n" + "\n\n".join(added)).encode()
    return planted, tuple(sentinels)
