"""The validation rule (what makes a task true) and the runs that feed it.

A task is kept only when, in its environment: the suite ran at base + test_patch, at least one
test goes FAIL->PASS with the fix, no test goes PASS->FAIL, and the verdict repeats on reruns.
Tests whose status changes between identical runs are flaky and never enter FAIL_TO_PASS or
PASS_TO_PASS.

A module that did not build or import at base (a Go package whose new test calls the function
the fix adds; a JS test file importing a new export) while the rest of the suite ran holds tests
that are absent there, not passing: with ``validate.unbuilt_at_base: fail`` (the default) they
count as failing at base, so those passing with the fix are FAIL_TO_PASS (what SWE-bench and
Multi-SWE-bench's ``n2p_tests`` count). A runner that stops at the first such module (pytest
without ``--continue-on-collection-errors``) ran no suite: still a rejection. Injected bugs never
use it: a bug that breaks a build is a compiler's task, not a test's. The same holds where one
process runs a module's tests (``Grading.module_ends_with_a_crash``: a Go package's binary): a
test that panics at base ends the module's later tests, which are absent there, not passing; a
module with a failing test at base and tests absent there that the fix runs has crashed, and
those tests count as failing at base too (grpc-go-2996: the panic the fix removes ended
``credentials/alts``' binary before three of Multi-SWE-bench's n2p tests ran).

Reruns cost little: by default (``rerun_scope: changed``) only the tests the verdict rests on (the
FAIL->PASS and PASS->FAIL candidates) are rerun, at base and at gold (gold in the gold run's
container, base in one that never held gold: ``candidate.py``). ``rerun_scope: suite`` reruns
everything.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass

from trajforge.schemas.test_run import TestRun, TestStatus
from trajforge.verifiers.test_runner import run_problem

FAILING = ("FAILED", "ERROR")
UNBUILT = "ERROR"  # a test whose module did not build or import at base


@dataclass(frozen=True)
class Verdict:
    kept: bool
    reason: str  # "" when kept
    detail: str
    fail_to_pass: tuple[str, ...] = ()
    pass_to_pass: tuple[str, ...] = ()
    flaky: tuple[str, ...] = ()


def flaky_tests(runs: list[TestRun]) -> set[str]:
    """Tests whose status in a rerun differs from the main run (or that a rerun lost)."""
    main = runs[0].statuses()
    flaky = set()
    for rerun in runs[1:]:
        statuses = rerun.statuses()
        for test_id in rerun.selection or tuple(main):
            if test_id in main and statuses.get(test_id) != main[test_id]:
                flaky.add(test_id)
    return flaky


def suite_failure(run: TestRun) -> Verdict | None:
    """Why a main run does not count as the suite having run, if it does not."""
    if run.suite_ran:
        return None
    where = run.state
    if (problem := run_problem(run)) is not None:  # e.g. junit_too_large, junit_not_a_file
        reason, why = problem
        return Verdict(False, reason, f"at {where}: {why}")
    if run.timed_out:
        return Verdict(False, f"timeout_at_{where}", f"the test run at {where} hit the time limit")
    if run.collection_errors:
        modules = ", ".join(run.collection_errors[:5])
        return Verdict(
            False,
            f"collection_error_at_{where}",
            f"tests failed to import/collect at {where} ({modules}); not a FAIL_TO_PASS signal",
        )
    tail = run.log.strip().splitlines()[-1:] or [""]
    return Verdict(
        False, f"suite_did_not_run_at_{where}", f"exit {run.exit_code} at {where}: {tail[0][:200]}"
    )


def unbuilt_modules(run: TestRun) -> frozenset[str]:
    """The modules (a test file, a Go package) a run could not build or import; empty for a run
    that timed out or whose report was refused (nothing it says is evidence)."""
    if run.suite_ran or run.timed_out or run_problem(run) is not None:
        return frozenset()
    return frozenset(run.collection_errors)


def with_unbuilt_failing(
    run: TestRun, gold: TestRun, test_file: Callable[[str], str], crashes: bool = False
) -> TestRun:
    """``run`` (at base) with each test ``gold`` reports whose module ``run`` could not build
    (or, with ``crashes``, whose module crashed: ``crashed_modules``) marked failing, and
    counted as a suite that ran; ``run`` itself when it has no such module.

    Only when the runner went on past those modules: every other test ``gold`` reports (of the
    run's selection, for a rerun) has a status here. pytest stops at the first module that does
    not import (exit 2, nothing else ran): that is no suite, and the candidate stays rejected.
    The exit code cannot tell (go test exits 2 for a package that did not build, as for a usage
    error); which tests ran can."""
    unbuilt = unbuilt_modules(run)
    stopped = unbuilt | (crashed_modules(run, gold, test_file) if crashes else frozenset())
    if not stopped:
        return run
    present = run.statuses()
    asked = [t for t in gold.statuses() if not run.selection or t in run.selection]
    absent = sorted(t for t in asked if t not in present and test_file(t) in stopped)
    lost = [t for t in asked if t not in present and test_file(t) not in stopped]
    if not absent or lost:
        return run
    tests = (*run.tests, *(TestStatus(t, UNBUILT) for t in absent))
    tests = tuple(sorted(tests, key=lambda test: test.test_id))
    return dataclasses.replace(run, tests=tests, suite_ran=run.suite_ran or bool(unbuilt))


def crashed_modules(run: TestRun, gold: TestRun, test_file: Callable[[str], str]) -> frozenset[str]:
    """Modules that ran at base with a failing test and lack tests ``gold`` reports: where one
    process runs a module's tests, the failing one ended it (a panic, an exit, a hang the
    per-test limit killed). Nothing for a run whose report is no evidence."""
    if not run.suite_ran or run.timed_out or run_problem(run) is not None:
        return frozenset()
    present = run.statuses()
    failing = {test_file(t) for t, status in present.items() if status in FAILING}
    asked = [t for t in gold.statuses() if not run.selection or t in run.selection]
    return frozenset(test_file(t) for t in asked if t not in present) & failing


def judge(
    base_runs: list[TestRun],
    gold_runs: list[TestRun],
    test_file: Callable[[str], str] | None = None,
    crashes: bool = False,
) -> Verdict:
    """Apply the rule to the main run and reruns of each state (index 0 is the main run).
    ``test_file`` (the language's: a test id's module) turns on the unbuilt-at-base rule, and
    ``crashes`` its crashed modules (``with_unbuilt_failing``)."""
    if test_file is not None and gold_runs:
        base_runs = [with_unbuilt_failing(r, gold_runs[0], test_file, crashes) for r in base_runs]
    for runs in (base_runs, gold_runs):
        failure = suite_failure(runs[0])
        if failure:
            return failure
    flaky = flaky_tests(base_runs) | flaky_tests(gold_runs)
    base, gold = base_runs[0].statuses(), gold_runs[0].statuses()
    shared = sorted(set(base) & set(gold))
    f2p = [t for t in shared if base[t] in FAILING and gold[t] == "PASSED"]
    p2f = [t for t in shared if base[t] == "PASSED" and gold[t] in FAILING]
    p2p = [t for t in shared if base[t] == "PASSED" and gold[t] == "PASSED"]
    flaky_sorted = tuple(sorted(flaky))
    p2f_stable = [t for t in p2f if t not in flaky]
    if p2f_stable:
        return Verdict(
            False, "pass_to_fail", f"the fix breaks {len(p2f_stable)} test(s): {p2f_stable[:5]}"
        )
    f2p_stable = tuple(t for t in f2p if t not in flaky)
    if not f2p_stable:
        if f2p:
            return Verdict(False, "only_flaky_tests", f"every FAIL->PASS test is flaky: {f2p[:5]}")
        return Verdict(False, "no_fail_to_pass", "no test fails before the fix and passes after")
    return Verdict(
        True,
        "",
        "",
        fail_to_pass=f2p_stable,
        pass_to_pass=tuple(t for t in p2p if t not in flaky),
        flaky=flaky_sorted,
    )


def failing_tests(run: TestRun) -> tuple[str, ...]:
    return tuple(t for t, s in sorted(run.statuses().items()) if s in FAILING)


def decisive_tests(base: TestRun, gold: TestRun) -> tuple[str, ...]:
    """The FAIL->PASS and PASS->FAIL candidates: the tests the verdict rests on."""
    before, after = base.statuses(), gold.statuses()
    return tuple(
        t
        for t in sorted(set(before) & set(after))
        if (before[t] in FAILING and after[t] == "PASSED")
        or (before[t] == "PASSED" and after[t] in FAILING)
    )
