"""Leak checks: text a learner is given must not quote the answer it is asked to produce.

One rule, used wherever a writer (a model or a template) produces the text a task starts from:
the text may not contain a whole line of the answer (stripped, at least ``MIN_LEAK_CHARS`` long:
shorter lines such as ``return x`` or ``pass`` are too common to count). The describe stage
applies it to issue text against the gold patch's lines and the graded tests' names; the explore
stage to an instruction against its trajectory's code and the outputs its check holds.
"""

from __future__ import annotations

from collections.abc import Iterable

from trajforge.filters.task_scores import MIN_LEAK_CHARS, leaks_patch, leaks_test
from trajforge.schemas.diff import PatchStats


def quoted_line(text: str, lines: Iterable[str], min_chars: int = MIN_LEAK_CHARS) -> str | None:
    """The first of ``lines`` (stripped, ``min_chars`` or longer) that ``text`` contains."""
    for line in lines:
        stripped = line.strip()
        if len(stripped) >= min_chars and stripped in text:
            return stripped
    return None


def statement_leak(text: str, stats: PatchStats, fail_to_pass: tuple[str, ...]) -> str | None:
    """``leaks_patch`` (quotes a line the fix adds or removes), ``leaks_test`` (names a graded
    test) or None: the describe stage's checks of an issue text."""
    if leaks_patch(text, stats) or quoted_line(text, stats.removed) is not None:
        return "leaks_patch"
    if leaks_test(text, fail_to_pass):
        return "leaks_test"
    return None
