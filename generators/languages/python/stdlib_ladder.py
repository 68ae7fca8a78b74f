"""The first newer Python whose standard library has what a test could not import.

A suite written for 3.11 fails to collect on 3.10 with ``cannot import name 'Unpack' from
'typing'`` or ``No module named 'tomllib'``: no install fixes that, a newer interpreter does.
Which one is not kept in a table here: each interpreter of the ladder (``environment.pythons``
above the chosen one, oldest first) is asked, in its own base image with no network, whether
the name is in its standard library (``sys.stdlib_module_names``, then an import of that module
alone: nothing outside the standard library is ever imported). The first that answers yes is
the one the project moves to (``prepare.py``).
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from packaging.version import Version
from trajforge.generators.environments.base_image import base_image_tag
from trajforge.verifiers.collection import CollectError
from trajforge.verifiers.sandbox.base import Sandbox, SessionSpec

PROBE_TIMEOUT_S = 60
_CANNOT_IMPORT = re.compile(r"cannot import name '(\w+)' from '([\w.]+)'")
_NO_ATTRIBUTE = re.compile(r"module '([\w.]+)' has no attribute '(\w+)'")
# Prints each "module name" pair of argv this interpreter's standard library has: a module not
# in sys.stdlib_module_names (3.10 and later) is never imported, so no project code runs.
_PROBE = """\
import importlib, sys
names = getattr(sys, "stdlib_module_names", ())
for pair in sys.argv[1:]:
    module, _, name = pair.partition(":")
    if module.split(".")[0] not in names:
        continue
    try:
        found = importlib.import_module(module)
    except Exception:
        continue
    if not name or hasattr(found, name):
        print("HAS", pair)
"""


@dataclass(frozen=True)
class Missing:
    """A standard-library name a test needed: ``module`` alone, or ``symbol`` from it."""

    module: str
    symbol: str = ""

    @property
    def key(self) -> str:
        return f"{self.module}:{self.symbol}"

    def __str__(self) -> str:
        return f"{self.module}.{self.symbol}" if self.symbol else self.module


@dataclass(frozen=True)
class Move:
    python: str  # the first newer Python that has every name asked about
    why: str  # "typing.Unpack is not in 3.10's standard library; 3.11 has it"


def missing_names(errors: Iterable[CollectError]) -> list[Missing]:
    """What each collection error says it could not import, in order, once each. Whether it is
    the standard library's is for the interpreters to say (``newer_python``)."""
    found: dict[str, Missing] = {}
    for error in errors:
        if match := _CANNOT_IMPORT.search(error.error):
            missing = Missing(match.group(2), match.group(1))
        elif match := _NO_ATTRIBUTE.search(error.error):
            missing = Missing(match.group(1), match.group(2))
        elif error.missing:
            missing = Missing(error.missing)
        else:
            continue
        found.setdefault(missing.key, missing)
    return list(found.values())


def ladder(current: str, pythons: Sequence[str]) -> list[str]:
    """The supported Pythons newer than ``current``, oldest first."""
    return sorted((p for p in pythons if Version(p) > Version(current)), key=Version)


def newer_python(
    sandbox: Sandbox, current: str, pythons: Sequence[str], wanted: Sequence[Missing]
) -> Move | None:
    """The first Python of the ladder above ``current`` whose standard library has every name of
    ``wanted`` that some rung has; None when no rung has any (a third-party module, left to the
    repairs). Rungs whose base image is not here are not asked (building one costs minutes)."""
    if not wanted:
        return None
    answers: list[tuple[str, set[str]]] = []
    for python in ladder(current, pythons):
        image = base_image_tag(python)
        if not sandbox.has_image(image):
            continue
        answers.append((python, _has(sandbox, image, wanted)))
    named = set().union(*(has for _, has in answers)) if answers else set()
    if not named:
        return None
    for python, has in answers:
        if named <= has:
            shown = ", ".join(str(m) for m in wanted if m.key in named)
            return Move(python, f"{shown} not in {current}'s standard library; {python} has it")
    return None


def _has(sandbox: Sandbox, image: str, wanted: Sequence[Missing]) -> set[str]:
    """The keys of ``wanted`` the interpreter of ``image`` has (empty when it cannot say)."""
    pairs = " ".join(shlex.quote(m.key) for m in wanted)
    command = f"python3 -c {shlex.quote(_PROBE)} {pairs}"
    with sandbox.session(SessionSpec(image=image)) as session:
        result = session.exec(command, timeout_s=PROBE_TIMEOUT_S, workdir="/")
    if result.exit_code != 0:
        return set()
    return {line[4:].strip() for line in result.output.splitlines() if line.startswith("HAS ")}
