"""Run a test command in a sandbox session and turn its output into a TestRun.

The exit code and the raw log are kept next to the parsed statuses, so every verdict can be
checked against the evidence. A run the sandbox broke is no evidence: when the container dies
under it, or the command is killed from outside before it writes its JUnit XML, ``run_tests``
raises (``SandboxBroken``) instead of returning a TestRun that a verdict could rest on.
"""

from __future__ import annotations

import dataclasses
import hashlib
import shlex
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from trajforge.schemas.records import content_id
from trajforge.schemas.test_run import TestRun, TestStatus
from trajforge.verifiers.log_parsers import ParsedLog, get_parser
from trajforge.verifiers.sandbox.base import NOT_A_FILE, TOO_LARGE, SandboxBroken, Session

# pytest's exit codes: 0 all passed, 1 some failed; anything else means the suite did not run
# (2 interrupted by collection errors, 3 internal error, 4 usage error, 5 no tests collected).
SUITE_RAN_EXIT_CODES = (0, 1)
# Killed from outside (SIGKILL: the OOM killer, `docker kill`; SIGTERM: `docker stop`), as a shell
# (128 + N) or Python's subprocess (-N) reports it. A crash (SIGSEGV...) is the suite's own doing.
KILLED_EXIT_CODES = (137, 143, -9, -15)
# What the runner says about a run whose suite did not run for a reason of its own, as the last
# line of the run's log: the rejection reason, then why.
NOTE = "[trajforge] "
JUNIT_TOO_LARGE = "junit_too_large"
JUNIT_NOT_A_FILE = "junit_not_a_file"
RUN_PROBLEMS = (JUNIT_TOO_LARGE, JUNIT_NOT_A_FILE)


# pytest-timeout (installed with the runner, generators/languages/python/install_sets.py): a
# test over its limit is failed by SIGALRM in pytest's own process, and the run goes on to the
# next test.
TIMEOUT_PLUGIN = "pytest-timeout"
PYTEST = "python -m pytest"


class IncompleteRun(SandboxBroken):
    """The test command was killed from outside before it finished: no verdict rests on it."""


@dataclass(frozen=True)
class RunContext:
    candidate_id: str
    profile_id: str
    test_cmd: str
    junit_path: str
    timeout_s: float
    # Exit codes by which the command reports killing its own tests (coreutils `timeout`: 124,
    # 137): a hang the command caught, not a run killed from outside.
    own_kills: tuple[int, ...] = ()
    # How the run's report (``junit_path``'s bytes, or None) and log read: pytest's JUnit XML and
    # log when None; another language's reader otherwise (generators/languages/).
    parse: Callable[[bytes | None, str], ParsedLog] | None = None
    # How a selection of test ids becomes the command's trailing arguments: pytest takes the ids
    # (None); a runner that selects by FILE (JavaScript's) is given the files, and the run's
    # statuses are then limited to the selected ids, as a pytest run of those ids reports them.
    select: Callable[[Sequence[str]], Sequence[str]] | None = None


@dataclass(frozen=True)
class Reading:
    """How a profile's runs are read: where its command writes the report, how the report
    reads and how a selection is passed (``RunContext``'s fields; the defaults are pytest's)."""

    report_path: str
    parse: Callable[[bytes | None, str], ParsedLog] | None = None
    select: Callable[[Sequence[str]], Sequence[str]] | None = None

    @classmethod
    def of(cls, where: str | Reading) -> Reading:
        """A report path alone is pytest's JUnit XML at that path."""
        return where if isinstance(where, Reading) else cls(where)

    def context(
        self, candidate_id: str, profile_id: str, test_cmd: str, timeout_s: float
    ) -> RunContext:
        return RunContext(
            candidate_id, profile_id, test_cmd, self.report_path, timeout_s,
            parse=self.parse, select=self.select,
        )  # fmt: skip


def with_test_limit(test_cmd: str, install: Sequence[str], seconds: int) -> str:
    """The test command with each test limited to ``seconds``, so one hanging test fails alone
    and the rest of the suite decides. Unchanged when ``seconds`` is 0, when the command is not
    pytest's, or when the image's install has no pytest-timeout (an image built before it)."""
    has_plugin = any(TIMEOUT_PLUGIN in step for step in install)
    if seconds <= 0 or not test_cmd.startswith(PYTEST) or not has_plugin:
        return test_cmd
    if "--timeout=" in test_cmd:  # already limited (a task's own command)
        return test_cmd
    return f"{test_cmd} --timeout={int(seconds)} --timeout-method=signal"


def run_tests(
    session: Session, ctx: RunContext, state: str, attempt: int, selection: tuple[str, ...] = ()
) -> TestRun:
    """One execution of the test command (limited to ``selection`` when given)."""
    trailing = ctx.select(selection) if ctx.select is not None and selection else selection
    args = " ".join(shlex.quote(arg) for arg in trailing)
    command = f"rm -f {shlex.quote(ctx.junit_path)}; {ctx.test_cmd} {args}".strip()
    result = session.exec(command, timeout_s=ctx.timeout_s)
    junit = session.read_file_checked(ctx.junit_path)
    log = result.output
    problem = ""
    if junit.problem == TOO_LARGE:
        problem = JUNIT_TOO_LARGE
        why = f"{ctx.junit_path} is {junit.size} bytes, over the {_cap(session)} read cap; not read"
    elif junit.problem == NOT_A_FILE:
        problem = JUNIT_NOT_A_FILE
        why = f"{ctx.junit_path} is not a regular file (a link, a directory...); not followed"
    elif (
        junit.data is None
        and not result.timed_out
        and result.exit_code in KILLED_EXIT_CODES
        and result.exit_code not in ctx.own_kills
    ):
        raise IncompleteRun(
            f"the test command was killed from outside (exit {result.exit_code}) before it wrote "
            f"{ctx.junit_path}; last output: {_last_line(result.output)}"
        )
    if problem:  # the suite's own doing: a run whose suite did not run, saying why
        log += f"\n{NOTE}{problem}: {why}\n"
        parsed = ParsedLog({}, ())
    else:
        parsed = (ctx.parse or _parse)(junit.data, result.output)
        if ctx.select is not None and selection:  # the selected files' other tests: not asked
            wanted = set(selection)
            statuses = {t: s for t, s in parsed.statuses.items() if t in wanted}
            parsed = dataclasses.replace(parsed, statuses=statuses)
    suite_ran = (
        not problem
        and not result.timed_out
        and result.exit_code in SUITE_RAN_EXIT_CODES
        and bool(parsed.statuses)
        and not parsed.collection_errors
    )
    digest = hashlib.sha256(log.encode("utf-8", "replace")).hexdigest()
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
        log=log,
    )


def run_problem(run: TestRun) -> tuple[str, str] | None:
    """(reason, why) when the runner refused the run's evidence (see NOTE), else None.

    Read only from runs whose suite did not run, so a suite printing the note can at most
    rename its own rejection.
    """
    if run.suite_ran:
        return None
    last = (run.log.strip().splitlines() or [""])[-1]
    if not last.startswith(NOTE):
        return None
    reason, _, why = last[len(NOTE) :].partition(": ")
    return (reason, why) if reason in RUN_PROBLEMS else None


def _cap(session: Session) -> str:
    limits = getattr(session, "limits", None)
    cap = getattr(limits, "max_read_bytes", None)
    return f"{cap} bytes" if cap else "configured"


def _last_line(output: str) -> str:
    return (output.strip().splitlines() or [""])[-1][:200]


def _parse(junit: bytes | None, log: str) -> ParsedLog:
    """JUnit XML when the run wrote it; the pytest log otherwise (e.g. killed mid-run)."""
    if junit:
        parsed = get_parser("junit_xml")(junit)
        if parsed.statuses or parsed.collection_errors:
            return parsed
    return get_parser("pytest_log")(log.encode("utf-8", "replace"))
