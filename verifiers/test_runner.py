"""Run a test command in a sandbox session and turn its output into a TestRun.

The exit code and the raw log are kept next to the parsed statuses, so every verdict can be
checked against the evidence.
"""

from __future__ import annotations

import hashlib
import shlex
from dataclasses import dataclass

from trajforge.schemas.records import content_id
from trajforge.schemas.test_run import TestRun, TestStatus
from trajforge.verifiers.log_parsers import ParsedLog, get_parser
from trajforge.verifiers.sandbox.base import Session

# pytest's exit codes: 0 all passed, 1 some failed; anything else means the suite did not run
# (2 interrupted by collection errors, 3 internal error, 4 usage error, 5 no tests collected).
SUITE_RAN_EXIT_CODES = (0, 1)


@dataclass(frozen=True)
class RunContext:
    candidate_id: str
    profile_id: str
    test_cmd: str
    junit_path: str
    timeout_s: float


def run_tests(
    session: Session, ctx: RunContext, state: str, attempt: int, selection: tuple[str, ...] = ()
) -> TestRun:
    """One execution of the test command (limited to ``selection`` when given)."""
    args = " ".join(shlex.quote(test_id) for test_id in selection)
    command = f"rm -f {shlex.quote(ctx.junit_path)}; {ctx.test_cmd} {args}".strip()
    result = session.exec(command, timeout_s=ctx.timeout_s)
    parsed = _parse(session.read_file(ctx.junit_path), result.output)
    suite_ran = (
        not result.timed_out
        and result.exit_code in SUITE_RAN_EXIT_CODES
        and bool(parsed.statuses)
        and not parsed.collection_errors
    )
    digest = hashlib.sha256(result.output.encode("utf-8", "replace")).hexdigest()
    return TestRun(
        run_id=content_id(ctx.candidate_id, state, attempt, selection, digest),
        candidate_id=ctx.candidate_id,
        profile_id=ctx.profile_id,
        state=state,
        attempt=attempt,
        selection=selection,
        exit_code=result.exit_code,
        suite_ran=suite_ran,
        timed_out=result.timed_out,
        duration_s=round(result.duration_s, 3),
        tests=tuple(TestStatus(t, s) for t, s in sorted(parsed.statuses.items())),
        collection_errors=parsed.collection_errors,
        log_digest=digest,
        log=result.output,
    )


def _parse(junit: bytes | None, log: str) -> ParsedLog:
    """JUnit XML when the run wrote it; the pytest log otherwise (e.g. killed mid-run)."""
    if junit:
        parsed = get_parser("junit_xml")(junit)
        if parsed.statuses or parsed.collection_errors:
            return parsed
    return get_parser("pytest_log")(log.encode("utf-8", "replace"))
