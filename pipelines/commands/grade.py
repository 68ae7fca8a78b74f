"""``trajforge grade``: grade a test log that already exists against a task's labels.

Reads the task as published (a JSON row with ``instance_id``, ``FAIL_TO_PASS`` and
``PASS_TO_PASS``, lists or JSON-encoded strings) and writes SWE-bench's ``report.json`` for it.
"""

from __future__ import annotations

import argparse
import json
import os

from trajforge.schemas.errors import UserError

NAME = "grade"
HELP = "grade a test log against a task's FAIL_TO_PASS / PASS_TO_PASS (SWE-bench's rules)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from trajforge.verifiers.log_parsers import LOG_PARSERS

    parser.add_argument("--task", required=True, help="a task row as JSON (tasks or rl config)")
    parser.add_argument("--log", required=True, help="the test log (text or JUnit XML)")
    parser.add_argument("--output", required=True, help="where report.json goes")
    parser.add_argument(
        "--log-format", default="auto", choices=("auto", *sorted(LOG_PARSERS)),
        help="how to read the log (default: recognised from its content)",
    )  # fmt: skip


def run(args: argparse.Namespace, beam_args: list[str]) -> int:
    from trajforge.schemas.storage import write_bytes_atomic
    from trajforge.verifiers.grading import grade_log

    task = _task(args.task)
    try:
        with open(args.log, "rb") as handle:
            log = handle.read()
    except OSError as exc:
        raise UserError(f"grade: cannot read --log {args.log} ({exc.strerror})") from None
    f2p, p2p = task["FAIL_TO_PASS"], task["PASS_TO_PASS"]
    graded = grade_log(f2p, p2p, log, args.log_format)
    report = {task["instance_id"]: graded.report}
    write_bytes_atomic(args.output, (json.dumps(report, indent=2) + "\n").encode())
    status = graded.tests_status or {}
    counts = ", ".join(
        f"{group} {len(status[group]['success'])}/{len(task[group])}"
        for group in ("FAIL_TO_PASS", "PASS_TO_PASS")
        if group in status
    )
    verdict = "resolved" if graded.report["resolved"] else "not resolved"
    print(f"grade: {task['instance_id']}: {verdict} ({counts or 'no test result'}; "
          f"{graded.log_format} log) -> {os.path.abspath(args.output)}")  # fmt: skip
    return 0


def _task(path: str) -> dict:
    """The task row, its test lists decoded (SWE-bench publishes them as JSON strings)."""
    try:
        with open(path, encoding="utf-8") as handle:
            task = json.load(handle)
    except OSError as exc:
        raise UserError(f"grade: cannot read --task {path} ({exc.strerror})") from None
    except ValueError as exc:
        raise UserError(f"grade: --task {path} is not JSON ({exc}); pass one task row") from None
    if not isinstance(task, dict) or not isinstance(task.get("instance_id"), str):
        raise UserError(f"grade: --task {path} has no instance_id; pass one task row as JSON")
    for key in ("FAIL_TO_PASS", "PASS_TO_PASS"):
        value = task.get(key)
        if isinstance(value, str):
            try:
                value = json.loads(value)
            except ValueError:
                value = None
        if not isinstance(value, list) or not all(isinstance(t, str) for t in value):
            raise UserError(f"grade: --task {path}: {key} must be a list of test ids")
        task[key] = value
    return task
