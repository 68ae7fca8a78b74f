"""The deterministic issue writer: a bug report built from the failing tests' own evidence.

Used when no endpoint is configured or every model statement was rejected. It shows the failing
statement pytest points at (``>`` lines) and the assertion output (``E`` lines) of up to three
FAIL_TO_PASS tests, never their names, and never a line that the leak check would flag, so the
same rules hold for template text as for model text. A JavaScript task's evidence is jest's
failure section (the matcher's message, Expected/Received, the ``>`` line of its code frame), else
the ``expect``/``assert`` lines of the test's source.
"""

from __future__ import annotations

from trajforge.filters.task_scores import leaks_test
from trajforge.generators.issues.context import IssueContext
from trajforge.generators.languages.registry import language_named
from trajforge.schemas.diff import parse_patch
from trajforge.schemas.task_instance import TaskInstance
from trajforge.schemas.test_ids import short_test_name

MAX_TESTS = 3
MAX_EVIDENCE_LINES = 12


def template_statement(task: TaskInstance, context: IssueContext) -> str:
    """Deterministic text: the same task always gets the same statement."""
    stats = parse_patch(task.patch)
    blocked = {line.strip() for line in [*stats.added, *stats.removed] if len(line.strip()) >= 10}
    names = {short_test_name(t) for t in task.FAIL_TO_PASS}
    blocks: list[str] = []
    for test_id in task.FAIL_TO_PASS:
        clean = [
            line
            for line in _evidence(context, test_id)
            if not any(b in line for b in blocked)
            and not leaks_test(line, task.FAIL_TO_PASS)
            and not any(name in line for name in names)
        ]
        block = "\n".join(clean[:MAX_EVIDENCE_LINES])
        if block and block not in blocks:  # parametrised cases often fail the same way
            blocks.append(block)
        if len(blocks) == MAX_TESTS:
            break
    sections = [f"```\n{block}\n```" for block in blocks]
    where = _package(task)
    if not sections:
        return (
            f"Some behaviour of {where} does not work as documented: a check of it fails on the "
            "current code. It should pass."
        )
    count = "A check" if len(sections) == 1 else f"{len(sections)} checks"
    return (
        f"{count} of {where} fail{'s' if len(sections) == 1 else ''} on the current code.\n\n"
        + "\n\nAlso:\n\n".join(sections)
        + "\n\nExpected: these checks pass."
    )


def _evidence(context: IssueContext, test_id: str) -> list[str]:
    """What went wrong, in the language's words: its runner's failure lines, else the test's
    own checks (``IssueText.evidence``)."""
    return language_named(context.language).issue_text.evidence(
        context.failures.get(test_id, ""), context.test_sources.get(test_id, "")
    )


def _package(task: TaskInstance) -> str:
    """The project name as users know it (``pypi/toolz`` -> toolz, ``local/calc`` -> calc)."""
    return f"`{task.repo.rsplit('/', 1)[-1]}`"
