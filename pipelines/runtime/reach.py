"""Reach in levels (issue 30): how far each repository of a validate run got.

installed (its environment built) -> collected (the suite collects, or there are no tests) ->
clean (a clean run with at least one passing test) -> task (at least one task kept). Each level
is a summary string set of repository names (``reach.<level>``), so it is counted once per
repository on any runner; ``fold`` turns the sets into the summary's ``reach`` line and the names
of the repositories that stopped short, with the level they stopped at.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Protocol

from trajforge.schemas.test_run import TestRun

LEVELS = ("seen", "installed", "collected", "clean", "task")
PREFIX = "reach."


class Marks(Protocol):
    def summary_text(self, name: str, value: str) -> None: ...


def mark(fn: Marks, level: str, repo: str) -> None:
    """``repo`` reached ``level`` (each level below it is marked where it happened)."""
    fn.summary_text(PREFIX + level, repo)


def passed_any(runs: Iterable[TestRun]) -> bool:
    """Whether a clean (base) run of these passed at least one test."""
    return any(
        run.state in ("base", "clean") and any(t.status == "PASSED" for t in run.tests)
        for run in runs
    )


def fold(extra: dict[str, object]) -> None:
    """Replace the ``reach.*`` sets in a summary's counters by one ``reach`` line and, where a
    repository stopped short of a task, ``reach_short``: ``repo: stopped after <level>``."""
    sets: dict[str, set[str]] = {}
    for level in LEVELS:
        value = extra.pop(PREFIX + level, None)
        if value is None:
            continue
        sets[level] = {value} if isinstance(value, str) else {str(v) for v in value}  # type: ignore[attr-defined]
    if not sets:
        return
    seen: set[str] = set().union(*sets.values())
    counts = ", ".join(f"{level} {len(sets.get(level, ()))}" for level in LEVELS[1:])
    extra["reach"] = f"{len(seen)} repositories: {counts}"
    short = []
    for repo in sorted(seen - sets.get("task", set())):
        reached = [level for level in LEVELS[1:] if repo in sets.get(level, ())]
        short.append(f"{repo}: stopped after {reached[-1] if reached else 'detection'}")
    if short:
        extra["reach_short"] = short
