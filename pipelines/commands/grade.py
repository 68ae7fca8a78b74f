"""``trajforge grade``: grade a test log that already exists against a task's labels.

Reads the task as published (a JSON row with ``instance_id``, ``FAIL_TO_PASS`` and
``PASS_TO_PASS``, lists or JSON-encoded strings) and writes SWE-bench's ``report.json`` for it.
trajforge's rules by default (a graded test counts only when PASSED), SWE-bench's own with
``--rules swebench``; the line printed names the rules and, when not resolved, why (a log that
contradicts itself is refused: ``ambiguous_log``). A log or task file past
``grading.MAX_LOG_BYTES`` is refused in one line, unread.
"""

from __future__ import annotations

import argparse
import json
import os

from trajforge.schemas.errors import UserError

NAME = "grade"
HELP = "grade a test log against a task's FAIL_TO_PASS / PASS_TO_PASS (SWE-bench's report)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from trajforge.verifiers.grading import RULES, TRAJFORGE
    from trajforge.verifiers.log_parsers import LOG_PARSERS
    from trajforge.verifiers.reports import FORMATS

    parser.add_argument("--task", required=True, help="a task row as JSON (tasks or rl config)")
    parser.add_argument(
        "--log", required=True,
        help="the test log (text or JUnit XML; a JS task's: its runner's report, e.g. jest --json)",
    )  # fmt: skip
    parser.add_argument("--output", required=True, help="where report.json goes")
    parser.add_argument(
        "--log-format", default="auto", choices=("auto", *sorted(LOG_PARSERS), *sorted(FORMATS)),
        help="how to read the log (default: recognised from its content; a JavaScript runner's "
        "report: jest-json, vitest-json, mocha-json, tap, ava-tap, junit)",
    )  # fmt: skip
    parser.add_argument(
        "--rules", default=TRAJFORGE, choices=RULES,
        help="trajforge: a graded test counts only when PASSED (default); swebench: SWE-bench's "
        "own (XFAIL passes, a skipped PASS_TO_PASS test is kept), for reports that must equal "
        "its harness's",
    )  # fmt: skip


def run(args: argparse.Namespace, beam_args: list[str]) -> int:
    from trajforge.schemas.storage import write_bytes_atomic
    from trajforge.verifiers.grading import RULES_LABEL, grade_log

    task = _task(args.task)
    log = _read_capped(args.log, "--log")
    f2p, p2p = task["FAIL_TO_PASS"], task["PASS_TO_PASS"]
    graded = grade_log(f2p, p2p, log, args.log_format, rules=args.rules)
    report = {task["instance_id"]: graded.report}
    write_bytes_atomic(args.output, (json.dumps(report, indent=2) + "\n").encode())
    status = graded.tests_status or {}
    counts = ", ".join(
        f"{group} {len(status[group]['success'])}/{len(task[group])}"
        for group in ("FAIL_TO_PASS", "PASS_TO_PASS")
        if group in status
    )
    if graded.report["resolved"]:
        verdict = "resolved"
    else:
        refused = "refused: " if graded.tests_status is None else ""
        verdict = f"not resolved, {refused}{graded.reason}: {_shown(graded.detail, 300)}"
    where = f"{counts or 'no test result'}; {graded.log_format} log; {RULES_LABEL[graded.rules]}"
    print(f"grade: {_shown(task['instance_id'], 200)}: {verdict} ({where}) "
          f"-> {_shown(os.path.abspath(args.output), 1000)}")  # fmt: skip
    return 0


def _read_capped(path: str, flag: str) -> bytes:
    """The file's bytes; one line, unread past the cap, when it is larger than MAX_LOG_BYTES."""
    from trajforge.verifiers.grading import MAX_LOG_BYTES

    try:
        with open(path, "rb") as handle:
            data = handle.read(MAX_LOG_BYTES + 1)
    except OSError as exc:
        raise UserError(f"grade: cannot read {flag} {_shown(path, 300)} ({exc.strerror})") from None
    if len(data) > MAX_LOG_BYTES:
        raise UserError(
            f"grade: {flag} {_shown(path, 300)} is over {MAX_LOG_BYTES // 2**20} MiB; "
            "refused unread (log_too_large)",
            "log_too_large",
        )
    return data


def _shown(text: str, limit: int) -> str:
    """``text`` safe for one line of a terminal: control and unpaired characters escaped, cut."""
    cut = text[:limit] + ("..." if len(text) > limit else "")
    return "".join(c if c.isprintable() else ascii(c)[1:-1] for c in cut)


def _task(path: str) -> dict:
    """The task row, its test lists decoded (SWE-bench publishes them as JSON strings)."""
    raw = _read_capped(path, "--task")
    try:
        task = json.loads(raw.decode("utf-8"))
    except (ValueError, RecursionError) as exc:
        why = str(exc) if isinstance(exc, ValueError) else "nested too deeply"
        raise UserError(
            f"grade: --task {_shown(path, 300)} is not JSON ({_shown(why, 200)}); pass one task row"
        ) from None
    if not isinstance(task, dict) or not isinstance(task.get("instance_id"), str):
        raise UserError(
            f"grade: --task {_shown(path, 300)} has no instance_id; pass one task row as JSON"
        )
    for key in ("FAIL_TO_PASS", "PASS_TO_PASS"):
        value = task.get(key)
        if isinstance(value, str):
            try:
                value = json.loads(value)
            except (ValueError, RecursionError):
                value = None
        if not isinstance(value, list) or not all(isinstance(t, str) for t in value):
            raise UserError(f"grade: --task {_shown(path, 300)}: {key} must be a list of test ids")
        task[key] = value
    return task
