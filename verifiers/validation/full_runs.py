"""Prove injected bugs of one snapshot by full runs, each in a fresh container.

``mutants.py`` selects tests by per-test coverage through a pytest plugin; a runner with
neither (JavaScript's, Go's) pays the protocol coverage only shortens (SWE-smith's, with
reruns):

- the clean snapshot's suite runs once in a fresh container (cached by content); a suite that
  does not run, or passes nothing, rejects every bug of the snapshot (``*_at_clean``,
  ``no_passing_test_at_clean``, ``needs_outside_world``);
- each bug gets a fresh container holding base_commit + bug_patch (no container ever held
  both) and one full run; no clean-passing test failing is ``not_covered``; the failures are
  rerun by their files in the same container, and those failing twice are the candidates;
- the union of every bug's candidates is rerun at clean, by file, in one fresh container:
  FAIL_TO_PASS = failing twice on the bug and passing twice at clean; PASS_TO_PASS = passing at
  both (``rule.judge`` on the bug's runs against the clean ones, so flaky tests stay out).

The runner's report is read through the ``Reading`` the stage passes (the language layer's
reader: verifiers never import generators). Verdicts of complete runs are cached by content
(``VERSION``, the profile's image and command, the clean and the buggy trees); a run the
sandbox broke is tried once more in a fresh container, then ``infra_failure``, never cached.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import TypeVar

from trajforge.schemas.env_profile import EnvProfile
from trajforge.schemas.params import ValidateParams
from trajforge.schemas.records import content_id, from_row, to_row
from trajforge.schemas.storage import ContentCache
from trajforge.schemas.test_run import TestRun
from trajforge.verifiers.code_digest import verifier_digest
from trajforge.verifiers.sandbox.base import Sandbox, SandboxBroken, SessionSpec
from trajforge.verifiers.sandbox.git_tree import archive
from trajforge.verifiers.test_runner import Reading, RunContext, run_tests
from trajforge.verifiers.validation.candidate import (
    TestTree,
    ValidationResult,
    build_task,
    from_cache,
    infra_failure,
    to_cache,
    with_limits,
)
from trajforge.verifiers.validation.mutants import (
    BatchResult,
    Mutation,
    _broken_run,
    _rejected_by_clean,
    nothing_passes,
    reject_mutation,
    share_out,
)
from trajforge.verifiers.validation.rule import FAILING, judge, suite_failure

VERSION = "inject-js-v1"  # the cache key's version (named when JavaScript alone used it)
T = TypeVar("T")


@dataclasses.dataclass(frozen=True)
class _Failed:
    """A bug whose clean-passing tests failed on it, waiting for the confirmation at clean."""

    mutation: Mutation
    runs: tuple[TestRun, TestRun]  # the bug's full run, and the rerun of its failures' files
    candidates: frozenset[str]  # failed twice on the bug, passed at clean


def validate_by_full_runs(
    sandbox: Sandbox,
    profile: EnvProfile,
    repo_path: str,
    clean: TestTree,
    mutations: Sequence[Mutation],
    params: ValidateParams,
    reading: Reading,
    cache: ContentCache | None,
    workers: int = 1,
    on_done: Callable[[ValidationResult], None] | None = None,
) -> BatchResult:
    """Every bug of one clean snapshot, ``workers`` fresh containers at a time (see the module
    doc); ``on_done`` hears of each result when it is known."""
    profile = with_limits(profile, params)
    done = on_done or (lambda result: None)
    keys = [_cache_key(profile, clean, m, params) for m in mutations]
    results: dict[int, ValidationResult] = {}
    for index, key in enumerate(keys):
        if cache is not None and (hit := cache.get(key)) is not None:
            results[index] = from_cache(hit, mutations[index].candidate)
            done(results[index])
    pending = [i for i in range(len(mutations)) if i not in results]
    if not pending:
        return BatchResult(tuple(results[i] for i in range(len(mutations))), ())

    def context(candidate_id: str, timeout_s: float) -> RunContext:
        return reading.context(candidate_id, profile.profile_id, profile.test_cmd, timeout_s)

    snapshot = f"snapshot-{clean.tree_id[:16]}"
    decides = _decides(profile, clean)
    clean_key = content_id(VERSION, verifier_digest(), "clean", *decides, params.test_timeout_s)
    known = cache.get(clean_key) if cache is not None else None
    made: list[TestRun] = []
    if known is not None:
        clean_run = from_row(TestRun, known["run"])
    else:
        ctx = context(snapshot, params.test_timeout_s)
        try:
            clean_run = _twice(lambda: _run_fresh(sandbox, profile, clean.tar, ctx, "clean"))
        except SandboxBroken as exc:
            for i in pending:
                results[i] = infra_failure(mutations[i].candidate, exc)
                done(results[i])
            return BatchResult(tuple(results[i] for i in range(len(mutations))), ())
        made.append(clean_run)
        if cache is not None:
            cache.put(clean_key, {"run": to_row(clean_run)})
    passing = frozenset(t for t, s in clean_run.statuses().items() if s == "PASSED")
    failure = suite_failure(clean_run) or (None if passing else nothing_passes(clean_run))
    complete = set(pending)
    if failure is not None:
        for i in pending:
            results[i] = _rejected_by_clean(mutations[i], failure)
            done(results[i])
    else:
        limit = min(params.test_timeout_s, 20 + 3 * clean_run.duration_s)  # longer: a hang
        waiting: dict[int, _Failed] = {}

        def one(i: int) -> None:
            mutation = mutations[i]
            ctx = context(mutation.candidate.candidate_id, limit)
            tar = _tree_tar(repo_path, mutation.tree_id)
            try:
                outcome = _twice(lambda: _bug_runs(sandbox, profile, mutation, tar, ctx, passing))
            except SandboxBroken as exc:
                outcome = infra_failure(mutation.candidate, exc)
                complete.discard(i)
            if isinstance(outcome, _Failed):
                waiting[i] = outcome
            else:
                results[i] = outcome
                done(outcome)

        share_out(workers, pending, lambda _lane, i: one(i))
        union = tuple(sorted(set().union(*(held.candidates for held in waiting.values()))))
        confirm: TestRun | SandboxBroken | None = None
        if union:
            ctx = context(snapshot, params.test_timeout_s)
            try:
                confirm = _twice(
                    lambda: _run_fresh(sandbox, profile, clean.tar, ctx, "clean", 1, union)
                )
                made.append(confirm)
            except SandboxBroken as exc:
                confirm = exc
        for i, held in sorted(waiting.items()):
            if isinstance(confirm, SandboxBroken):
                results[i] = infra_failure(held.mutation.candidate, confirm)
                complete.discard(i)
            else:
                results[i] = _settle(held, profile, clean_run, confirm)
            done(results[i])
    for i in pending:
        if cache is not None and i in complete:
            cache.put(keys[i], to_cache(results[i]))
    baseline = (clean_run, *made[1:]) if known is None else (clean_run, *made)
    ordered = tuple(results[i] for i in range(len(mutations)))
    return BatchResult(ordered, tuple(made), baseline)


def _bug_runs(
    sandbox: Sandbox,
    profile: EnvProfile,
    mutation: Mutation,
    tar: Callable[[], bytes],
    ctx: RunContext,
    passing: frozenset[str],
) -> ValidationResult | _Failed:
    """The bug's full run in a fresh container, then its failures' files rerun there."""
    with sandbox.session(SessionSpec(image=profile.image)) as session:
        session.put_archive(tar())
        run = run_tests(session, ctx, "base", attempt=0)
        if problem := _broken_run(mutation, run, (run,)):
            return problem
        statuses = run.statuses()
        broken = tuple(t for t in sorted(passing) if statuses.get(t) in FAILING)
        if not broken:
            detail = "no test that passes on the clean code fails in a full run with the bug"
            return reject_mutation(mutation, "not_covered", detail, (run,))
        rerun = run_tests(session, ctx, "base", attempt=1, selection=broken)
    if problem := _broken_run(mutation, rerun, (run, rerun)):
        return problem
    again = rerun.statuses()
    candidates = frozenset(t for t in broken if again.get(t) in FAILING)
    return _Failed(mutation, (run, rerun), candidates)


def _settle(
    held: _Failed, profile: EnvProfile, clean_run: TestRun, confirm: TestRun | None
) -> ValidationResult:
    """The rule on the bug's runs (as "base") against the clean runs (as "gold")."""
    clean_runs = [clean_run, *([confirm] if confirm is not None else [])]
    verdict = judge(list(held.runs), clean_runs)
    mutation, runs = held.mutation, held.runs
    if not verdict.kept:
        return reject_mutation(mutation, verdict.reason, verdict.detail, runs)
    task = build_task(mutation.candidate, profile, verdict, list(runs), clean_runs, VERSION)
    provenance = {**task.provenance, "mutant_runs": "full"}
    return ValidationResult(dataclasses.replace(task, provenance=provenance), None, runs)


def _run_fresh(
    sandbox: Sandbox,
    profile: EnvProfile,
    tar: Callable[[], bytes],
    ctx: RunContext,
    state: str,
    attempt: int = 0,
    selection: tuple[str, ...] = (),
) -> TestRun:
    with sandbox.session(SessionSpec(image=profile.image)) as session:
        session.put_archive(tar())
        return run_tests(session, ctx, state, attempt, selection)


def _twice(work: Callable[[], T]) -> T:
    """``work``, and once more (in the fresh container it opens) when the sandbox breaks."""
    try:
        return work()
    except SandboxBroken:
        return work()


def _tree_tar(repo_path: str, tree: str) -> Callable[[], bytes]:
    return lambda: archive(repo_path, tree, prefix="repo/")


def _decides(profile: EnvProfile, clean: TestTree) -> tuple[str, ...]:
    return (profile.profile_id, profile.image, profile.test_cmd, clean.tree_id)


def _cache_key(
    profile: EnvProfile, clean: TestTree, mutation: Mutation, params: ValidateParams
) -> str:
    decides = (*_decides(profile, clean), mutation.tree_id, params.reruns)
    return content_id(VERSION, verifier_digest(), *decides, params.test_timeout_s, length=32)
