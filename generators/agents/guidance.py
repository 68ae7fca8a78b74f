"""Guided retries (Agent-RLVR): what a later attempt is told after an attempt failed.

Guidance holds two things and never more: the output of the tests that failed when the failed
attempt's patch was verified (pytest's failure sections, cut to a size), and the files the gold
patch changes (their names only, never the patch). The failing-test output is kept on the failed
trajectory (``Trajectory.test_output``) when it is verified, so guidance is built from records
alone. An attempt that left no test output (an empty patch, one that did not apply or changed no
source file, a suite that never ran) still gives guidance of the files, and says so:
``Guidance.has_test_output`` is False and the stage counts it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from trajforge.generators.issues.context import MAX_FAILURE_LINES, failure_excerpt
from trajforge.generators.languages.base import Language
from trajforge.generators.languages.registry import DEFAULT
from trajforge.schemas.diff import parse_patch
from trajforge.schemas.task_instance import TaskInstance
from trajforge.schemas.trajectory import Trajectory

PASSED = "PASSED"


@dataclass(frozen=True)
class Guidance:
    text: str
    has_test_output: bool


def failing_output(
    log: str, test_report: Mapping[str, str], limit: int, language: Language = DEFAULT
) -> str:
    """The failure sections of the tests ``test_report`` does not pass, as ``language``'s
    runner prints them, in test id order, cut to ``limit`` characters (head and tail); the
    log's last lines when no section is found; "" when every graded test passed or nothing
    ran."""
    failing = sorted(t for t, status in test_report.items() if status != PASSED)
    if not failing or not log.strip():
        return ""
    sections = []
    for test_id in failing:
        if excerpt := failure_excerpt(log, test_id, language):
            sections.append(f"{test_id} ({test_report[test_id]})\n{excerpt}")
    text = "\n\n".join(sections) or "\n".join(log.strip().splitlines()[-MAX_FAILURE_LINES:])
    return cut(text, limit)


def cut(text: str, limit: int) -> str:
    """``text`` whole when it fits, else its head and tail around a line saying what was cut."""
    if len(text) <= limit:
        return text
    half = max(limit // 2, 1)
    return f"{text[:half]}\n[... {len(text) - 2 * half} characters cut ...]\n{text[-half:]}"


def guidance_for(task: TaskInstance, failed: Trajectory) -> Guidance:
    """Guidance for a retry of ``task`` after the attempt ``failed``."""
    files = sorted(parse_patch(task.patch).files)
    failing = sorted(t for t, status in failed.test_report.items() if status != PASSED)
    lines = ["An earlier attempt at this issue was checked and did not fix it."]
    if files:
        lines += ["", "The fix belongs in these files (their fixed content is not shown):"]
        lines += [f"- {path}" for path in files]
    if failing:
        lines += ["", "After that attempt these tests failed:"]
        lines += [f"- {test_id} ({failed.test_report[test_id]})" for test_id in failing]
    output = failed.test_output.strip()
    if output:
        lines += ["", "Their output:", output]
    else:
        lines += ["", "That attempt left no failing-test output to show."]
    return Guidance("\n".join(lines), bool(output))
