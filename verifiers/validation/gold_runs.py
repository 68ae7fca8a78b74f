"""A kept task's own fix, graded by the grader RL uses, before the task ships.

Validate proves a task with its own runs (``candidate.py``, ``mutants.py``); a trainer's reward
comes from another door, ``verify_patch`` (the supervised grader: test files reset, sentinels,
``python -I``). A task the grader cannot grade (its gold patch reset away as a "test file", a test
that needs what the grader withholds) would ship with reward 0 for every correct fix. So each
kept task's ``patch`` goes through ``verify_patch`` ``validate.gold_runs`` times, each a fresh
grading container (never the grader's verdict cache: ``gold_runs: 3`` is three runs), and then a
patch that changes nothing the tests read (one new, inert file: the task's starting tree, graded)
once, which must not resolve: a task whose FAIL_TO_PASS pass under the grader without a fix would
reward doing nothing. Any other outcome is ``gold_not_gradable`` with the grader's reason.

The grader runs the graded tests alone, not the whole suite validate ran. A PASS_TO_PASS test
that passed in validate's runs only because a test outside the graded ones ran before it
(Django suites whose ungraded tests leave rows behind: django-autocomplete-light's
``test_no_data`` finds 0 of 4) fails there with every patch, the fix included. When the first
gold run fails on such tests alone (every FAIL_TO_PASS passed, no tampering, one test or at most a
quarter of PASS_TO_PASS), they are set aside (``set_aside``: the task ships without them, in its
``flaky_tests``) and the gold patch is graded again on the rest; anything else still rejects.

The outcome is cached by everything that decides it (the task's trees, tests, command, image,
the grader's version and the number of runs), so a rerun of validate grades nothing again.
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass

from trajforge.schemas.records import content_id
from trajforge.schemas.storage import ContentCache
from trajforge.schemas.task_instance import TaskInstance
from trajforge.verifiers import patch_verifier
from trajforge.verifiers.code_digest import verifier_digest
from trajforge.verifiers.patch_verifier import PASSED, PatchVerdict, verify_patch
from trajforge.verifiers.sandbox.base import Sandbox
from trajforge.verifiers.sandbox.lanes import NONE, Lanes

VERSION = "gold-runs-v1"
REASON = "gold_not_gradable"
# The grader runs the tests as another user inside a container: the local backend cannot.
GRADING_BACKENDS = ("docker", "podman")
INERT_FILE = ".trajforge-gold-check"  # nothing reads it: the starting tree, as the grader sees it
INERT_PATCH = (
    f"diff --git a/{INERT_FILE} b/{INERT_FILE}\n"
    "new file mode 100644\n"
    f"--- /dev/null\n+++ b/{INERT_FILE}\n"
    "@@ -0,0 +1 @@\n+no change\n"
)


@dataclass(frozen=True)
class GoldRuns:
    """``resolved`` of ``total`` gold runs resolved; ``reason`` "" when the task is gradable,
    else ``detail`` says which run the grader did not resolve and why."""

    resolved: int
    total: int
    reason: str = ""
    detail: str = ""
    seconds: float = 0.0  # the grading's time (0 for a cached outcome)
    cached: bool = False
    # PASS_TO_PASS tests the grader's own run fails with the gold patch (see the module doc)
    set_aside: tuple[str, ...] = ()

    @property
    def column(self) -> str:
        """The task's ``gold_runs`` column: ``"3/3"``."""
        return f"{self.resolved}/{self.total}"


def grades(sandbox: Sandbox) -> bool:
    """Whether this sandbox can run the grader (not the local backend)."""
    return sandbox.name in GRADING_BACKENDS


def grade_gold(
    sandbox: Sandbox,
    task: TaskInstance,
    repo_path: str,
    runs: int,
    timeout_s: float,
    cache: ContentCache | None,
    lanes: Lanes = NONE,
) -> GoldRuns:
    """The task's gold patch graded ``runs`` times (stopping at the first that does not resolve),
    then the inert patch once: its grading beside the last gold run's when a lane is free
    (``lanes``). Raises what the sandbox raises (no verdict: never cached)."""
    key = content_id(
        VERSION, patch_verifier.VERSION, verifier_digest(), task.image_name, task.test_cmd,
        task.language, task.test_runner, task.base_commit, task.bug_patch, task.test_patch,
        task.patch, task.FAIL_TO_PASS, task.PASS_TO_PASS, timeout_s, runs, length=32,
    )  # fmt: skip
    fields = ("resolved", "total", "reason", "detail")
    if cache is not None and (hit := cache.get(key)) is not None:
        aside = tuple(hit.get("set_aside", ()))
        said = (hit["resolved"], hit["total"], hit["reason"], hit["detail"])
        return GoldRuns(*said, cached=True, set_aside=aside)
    started = time.monotonic()
    outcome = _grade(sandbox, task, repo_path, runs, timeout_s, lanes)
    if outcome.reason and outcome.set_aside:  # failed on tests its selection leaves alone
        aside = outcome.set_aside
        narrowed = dataclasses.replace(
            task, PASS_TO_PASS=tuple(t for t in task.PASS_TO_PASS if t not in aside)
        )
        outcome = _grade(sandbox, narrowed, repo_path, runs, timeout_s, lanes)
        outcome = dataclasses.replace(outcome, set_aside=() if outcome.reason else aside)
    if cache is not None:
        cache.put(key, {**{k: getattr(outcome, k) for k in fields}, "set_aside": outcome.set_aside})
    return dataclasses.replace(outcome, seconds=time.monotonic() - started)


def _grade(
    sandbox: Sandbox, task: TaskInstance, repo: str, runs: int, timeout_s: float, lanes: Lanes
) -> GoldRuns:
    def gold() -> PatchVerdict:
        # cache=None: each run is a fresh grading container, never an earlier run's verdict
        return verify_patch(sandbox, task, repo, task.patch, timeout_s, None)

    def inert(_alongside: bool) -> PatchVerdict:
        # fail-fast: the first FAIL_TO_PASS that fails ends the run, all this needs to know
        return verify_patch(sandbox, task, repo, INERT_PATCH, timeout_s, None, fail_fast=True)

    nothing: PatchVerdict | None = None
    for run in range(1, runs + 1):
        if run < runs:
            verdict, nothing = gold(), None
        else:
            verdict, nothing = lanes.pair(gold, inert, lambda v: v.resolved)
        if not verdict.resolved:
            why = f"gold patch run {run} of {runs}: {_said(verdict)}"
            aside = _outside_its_selection(task, verdict) if run == 1 else ()
            return GoldRuns(run - 1, runs, REASON, why, set_aside=aside)
    assert nothing is not None  # the last gold run resolved: the inert one was needed
    if nothing.resolved:
        why = "a patch that changes nothing resolves it: FAIL_TO_PASS pass under the grader as is"
        return GoldRuns(runs, runs, REASON, why)
    return GoldRuns(runs, runs)


def _outside_its_selection(task: TaskInstance, verdict: PatchVerdict) -> tuple[str, ...]:
    """The PASS_TO_PASS tests a gold run failed, when they are all it failed, nothing was
    tampered with and they are one test or at most a quarter of PASS_TO_PASS (see the module
    doc); else none: a broader failure is the grader's or the task's, and rejects."""
    if verdict.reason != "tests_failed" or verdict.tampering:
        return ()
    failed = sorted(t for t, status in verdict.test_report.items() if status != PASSED)
    kept = set(task.PASS_TO_PASS)
    if not failed or any(t not in kept for t in failed) or len(failed) > max(1, len(kept) // 4):
        return ()
    return tuple(failed)


def _said(verdict: PatchVerdict) -> str:
    """The grader's reason and first words: why it saw tampering, the tests that did not pass,
    or its one-line why."""
    if verdict.tampering:
        return f"{verdict.reason}: {verdict.tampering[0][:300]}"
    failed = [t for t, s in verdict.test_report.items() if s != PASSED]
    if failed:
        shown = ", ".join(f"{t} {verdict.test_report[t]}" for t in failed[:3])
        more = f" (+{len(failed) - 3} more)" if len(failed) > 3 else ""
        return f"{verdict.reason}: {shown}{more}"
    aside = f" (set aside as tests: {', '.join(verdict.dropped[:3])})" if verdict.dropped else ""
    first = verdict.log.strip().splitlines()[:1]
    return f"{verdict.reason}: {first[0][:300]}{aside}" if first else f"{verdict.reason}{aside}"
