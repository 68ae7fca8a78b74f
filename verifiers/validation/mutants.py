"""Prove injected bugs of one snapshot with coverage-guided test selection.

Per snapshot (a repo at a commit, in its profile's image) the clean suite runs twice, the first
time under per-test coverage; tests whose status differs between the two runs are flaky and never
used. Each mutant is then written over the clean files in the same container and runs only the
tests that cover its lines. No covering test -> ``not_covered``; the run hangs -> ``mutant_timeout``
(killed by ``timeout`` inside the container, which keeps the container usable); collection breaks
-> ``breaks_collection``; no covering test fails -> ``equivalent``. A mutant that breaks a test
gets one full-suite confirmation run: FAIL_TO_PASS are the covering tests that fail in both mutant
runs and pass in both clean runs, PASS_TO_PASS the tests that pass everywhere.

That is about one targeted run plus one full run per kept mutant and a few per snapshot, against
two full runs per mutant for validating each mutant on its own (SWE-smith's way; the baseline
that benchmarks and tests compare with is ``benchmarks/full_suite.py``).
"""

from __future__ import annotations

import dataclasses
import functools
import io
import itertools
import tarfile
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack, contextmanager, suppress
from dataclasses import dataclass
from typing import TypeVar

from trajforge.schemas.candidate import Candidate
from trajforge.schemas.diff import touched_lines
from trajforge.schemas.env_profile import EnvProfile
from trajforge.schemas.errors import UserError
from trajforge.schemas.params import ValidateParams
from trajforge.schemas.records import content_id, from_row, to_row
from trajforge.schemas.rejection import Rejection
from trajforge.schemas.storage import ContentCache
from trajforge.schemas.test_run import TestRun
from trajforge.verifiers.sandbox.base import Sandbox, SandboxBroken, Session, SessionSpec
from trajforge.verifiers.sandbox.git_tree import apply_patches, read_file_at
from trajforge.verifiers.test_runner import RunContext, run_problem, run_tests
from trajforge.verifiers.validation.candidate import (
    TestTree,
    ValidationResult,
    build_task,
    from_cache,
    infra_failure,
    rejected,
    to_cache,
)
from trajforge.verifiers.validation.coverage import CoverageMap, measure
from trajforge.verifiers.validation.patch_lines import with_statement_starts
from trajforge.verifiers.validation.rule import FAILING, Verdict, judge, suite_failure

VERSION = "inject-v1"
TIMEOUT_EXIT_CODES = (124, 137)  # coreutils `timeout`: TERM sent, or KILL after the grace period
T = TypeVar("T")


@dataclass(frozen=True)
class Mutation:
    """One injected bug: the files it changes, as whole texts, and the lines a test must run."""

    candidate: Candidate
    mutated: dict[str, str]  # path -> file text with the bug
    original: dict[str, str]  # path -> clean file text
    lines: dict[str, set[int]]  # path -> lines of the clean file that the bug touches
    tree_id: str  # content id of the buggy snapshot


@dataclass(frozen=True)
class CleanBaseline:
    runs: tuple[TestRun, TestRun]  # under coverage, then plain
    passing: frozenset[str]  # PASSED in both clean runs
    flaky: frozenset[str]
    coverage: CoverageMap | None
    failure: Verdict | None


@dataclass(frozen=True)
class BatchResult:
    results: tuple[ValidationResult, ...]  # one per mutation, in order
    clean_runs: tuple[TestRun, ...]  # the snapshot's clean runs (empty when all were cached)


def validate_mutations(
    sandbox: Sandbox,
    profile: EnvProfile,
    clean: TestTree,
    mutations: Sequence[Mutation],
    params: ValidateParams,
    junit_path: str,
    cache: ContentCache | None,
    workers: int = 1,
) -> BatchResult:
    """Every mutation of one clean snapshot, ``workers`` containers at a time."""
    keys = [_cache_key(profile, clean, m, params) for m in mutations]
    results: dict[int, ValidationResult] = {}
    for index, key in enumerate(keys):
        if cache is not None and (hit := cache.get(key)) is not None:
            results[index] = from_cache(hit)
    pending = [i for i in range(len(mutations)) if i not in results]
    if not pending:
        return BatchResult(tuple(results[i] for i in range(len(mutations))), ())
    ctx = RunContext("", profile.profile_id, profile.test_cmd, junit_path, params.test_timeout_s)
    snapshot_id = f"snapshot-{clean.tree_id[:16]}"
    baseline_key = content_id(VERSION, "clean", *_decides(profile, clean), params.test_timeout_s)
    slots = [_Slot(sandbox, profile, clean) for _ in range(max(workers, 1))]
    complete = set(pending)  # verdicts of complete runs: the only ones cached
    try:
        known = cache.get(baseline_key) if cache is not None else None
        if known is not None:
            baseline = _baseline_from_cache(known)
        else:
            try:
                baseline = slots[0].twice(
                    lambda ws: _clean_baseline(ws, _with_id(ctx, snapshot_id))
                )
            except SandboxBroken as exc:
                for i in pending:
                    results[i] = infra_failure(mutations[i].candidate, exc)
                return BatchResult(tuple(results[i] for i in range(len(mutations))), ())
            if cache is not None:
                cache.put(baseline_key, _baseline_to_cache(baseline))
        if baseline.failure is not None:
            for i in pending:
                results[i] = _rejected_by_clean(mutations[i], baseline.failure)
        else:
            lanes = [pending[k :: len(slots)] for k in range(len(slots))]
            lanes = [lane for lane in lanes if lane]

            def run_lane(lane_index: int) -> list[tuple[int, ValidationResult]]:
                slot = slots[lane_index]
                done = []
                for i in lanes[lane_index]:
                    validate = functools.partial(
                        _validate_one, profile=profile, baseline=baseline, mutation=mutations[i],
                        ctx=ctx,
                    )  # fmt: skip
                    try:
                        result = slot.twice(validate)
                    except SandboxBroken as exc:
                        result = infra_failure(mutations[i].candidate, exc)
                        complete.discard(i)
                    done.append((i, result))
                return done

            with ThreadPoolExecutor(max_workers=len(lanes)) as pool:
                for done in pool.map(run_lane, range(len(lanes))):
                    results.update(done)
    finally:
        for slot in slots:
            slot.discard()
    for i in pending:
        if cache is not None and i in complete:
            cache.put(keys[i], to_cache(results[i]))
    clean_runs = () if known is not None else baseline.runs
    return BatchResult(tuple(results[i] for i in range(len(mutations))), clean_runs)


def check_combination(result: ValidationResult, signatures: dict[str, str]) -> ValidationResult:
    """A combined bug is kept only if each member's own test still fails with all bugs in."""
    if result.task is None:
        return result
    missing = {m: t for m, t in signatures.items() if t not in result.task.FAIL_TO_PASS}
    if not missing:
        return result
    candidate_id = result.task.candidate_id
    masked = ", ".join(f"{member} ({test})" for member, test in sorted(missing.items()))
    detail = f"{candidate_id}: the other bugs mask {masked}"
    rejection = Rejection(candidate_id, "validate", "combo_masks_bug", detail)
    return ValidationResult(None, rejection, result.runs, result.cached)


# --- one container with the clean snapshot -----------------------------------------------------


class _Workspace:
    """A container holding the clean snapshot; mutants are written over it and undone."""

    def __init__(self, session: Session) -> None:
        self.session = session

    def write(self, files: dict[str, str]) -> None:
        self.session.put_archive(_files_tar(files), dest="/")


class _Slot:
    """A lane's clean workspace, opened when first needed and replaced when its sandbox breaks."""

    def __init__(self, sandbox: Sandbox, profile: EnvProfile, clean: TestTree) -> None:
        self.sandbox, self.profile, self.clean = sandbox, profile, clean
        self.stack = ExitStack()
        self.workspace: _Workspace | None = None

    def get(self) -> _Workspace:
        if self.workspace is None:
            opened = clean_workspace(self.sandbox, self.profile, self.clean)
            self.workspace = self.stack.enter_context(opened)
        return self.workspace

    def discard(self) -> None:
        """Give the container back (removed in the background); the next ``get`` starts anew."""
        self.workspace = None
        stack, self.stack = self.stack, ExitStack()
        with suppress(Exception):
            stack.close()

    def twice(self, work: Callable[[_Workspace], T]) -> T:
        """``work`` in this workspace, and once more in a fresh one if the sandbox breaks."""
        try:
            return work(self.get())
        except SandboxBroken:
            self.discard()
        try:
            return work(self.get())
        except SandboxBroken:
            self.discard()
            raise


@contextmanager
def clean_workspace(sandbox: Sandbox, profile: EnvProfile, clean: TestTree) -> Iterator[_Workspace]:
    with sandbox.session(SessionSpec(image=profile.image)) as session:
        session.put_archive(clean.tar())
        yield _Workspace(session)


def _clean_baseline(workspace: _Workspace, ctx: RunContext) -> CleanBaseline:
    covered, coverage = measure(workspace.session, ctx)
    plain = run_tests(workspace.session, ctx, "clean", attempt=1)
    runs = (covered, plain)
    failure = suite_failure(covered) or suite_failure(plain)
    first, second = covered.statuses(), plain.statuses()
    flaky = frozenset(t for t in set(first) | set(second) if first.get(t) != second.get(t))
    passing = frozenset(t for t, s in first.items() if s == "PASSED" and t not in flaky)
    if failure is None and not passing:
        failure = Verdict(False, "no_passing_test_at_clean", "no test passes on the clean code")
    return CleanBaseline(runs, passing, flaky, coverage, failure)


def _validate_one(
    workspace: _Workspace,
    profile: EnvProfile,
    baseline: CleanBaseline,
    mutation: Mutation,
    ctx: RunContext,
) -> ValidationResult:
    covering = _covering_tests(baseline, mutation)
    if not covering:
        where = ", ".join(f"{p}:{sorted(ls)[:5]}" for p, ls in sorted(mutation.lines.items()))
        return reject_mutation(mutation, "not_covered", f"no passing test executes {where}", ())
    timeout = _mutant_timeout(baseline, ctx.timeout_s)
    mctx = mutant_context(profile, mutation, ctx.junit_path, timeout)
    workspace.write(mutation.mutated)
    try:
        targeted = run_tests(workspace.session, mctx, "base", attempt=1, selection=covering)
        if problem := _broken_run(mutation, targeted, (targeted,)):
            return problem
        statuses = targeted.statuses()
        broken = [t for t in covering if statuses.get(t) in FAILING]
        if not broken:
            detail = f"none of the {len(covering)} covering test(s) fails on the bug"
            return reject_mutation(mutation, "equivalent", detail, (targeted,))
        full = run_tests(workspace.session, mctx, "base", attempt=0)
        if problem := _broken_run(mutation, full, (full, targeted)):
            return problem
    finally:
        workspace.write(mutation.original)
    return _verdict(mutation, profile, baseline, covering, full, targeted)


def _verdict(
    mutation: Mutation,
    profile: EnvProfile,
    baseline: CleanBaseline,
    covering: tuple[str, ...],
    full: TestRun,
    targeted: TestRun,
) -> ValidationResult:
    runs = (full, targeted)  # the clean runs are the snapshot's, reported once per batch
    verdict = judge([full, targeted], list(baseline.runs))
    if not verdict.kept:
        return reject_mutation(mutation, verdict.reason, verdict.detail, runs)
    # Only covering tests can be FAIL_TO_PASS: a failure elsewhere was seen once and can only be
    # a coverage blind spot (a subprocess) or flakiness, so it is set aside like a flaky test.
    covered = set(covering)
    f2p = tuple(t for t in verdict.fail_to_pass if t in covered)
    unconfirmed = tuple(t for t in verdict.fail_to_pass if t not in covered)
    if not f2p:
        detail = f"the only failures are outside the covering tests: {list(unconfirmed)[:5]}"
        return reject_mutation(mutation, "unconfirmed_failures", detail, runs)
    verdict = Verdict(
        True,
        "",
        "",
        fail_to_pass=f2p,
        pass_to_pass=verdict.pass_to_pass,
        flaky=tuple(sorted({*verdict.flaky, *baseline.flaky, *unconfirmed})),
    )
    task = build_task(
        mutation.candidate, profile, verdict, [full, targeted], [*baseline.runs], VERSION
    )
    provenance = {**task.provenance, "covering_tests": str(len(covering))}
    return ValidationResult(dataclasses.replace(task, provenance=provenance), None, runs)


def _covering_tests(baseline: CleanBaseline, mutation: Mutation) -> tuple[str, ...]:
    if baseline.coverage is None:  # no coverage data: every passing test may see the bug
        return tuple(sorted(baseline.passing))
    found = itertools.chain.from_iterable(
        baseline.coverage.tests_covering(path, lines) for path, lines in mutation.lines.items()
    )
    return tuple(sorted(set(found) & baseline.passing))


def _broken_run(
    mutation: Mutation, run: TestRun, runs: tuple[TestRun, ...]
) -> ValidationResult | None:
    if (problem := run_problem(run)) is not None:  # e.g. the JUnit XML replaced by a link
        return reject_mutation(mutation, problem[0], problem[1], runs)
    if run.timed_out or run.exit_code in TIMEOUT_EXIT_CODES:
        return reject_mutation(
            mutation, "mutant_timeout", "the tests hang on the bug (killed)", runs
        )
    if not run.suite_ran:
        errors = ", ".join(run.collection_errors[:3]) or f"exit {run.exit_code}"
        return reject_mutation(
            mutation, "breaks_collection", f"the tests no longer run: {errors}", runs
        )
    return None


def _mutant_timeout(baseline: CleanBaseline, limit: float) -> float:
    """A few times the clean suite: a mutant that runs much longer is hanging."""
    clean_s = max(run.duration_s for run in baseline.runs)
    return min(limit, 20 + 3 * clean_s)


def mutant_context(
    profile: EnvProfile, mutation: Mutation, junit_path: str, timeout_s: float
) -> RunContext:
    """The test command under coreutils `timeout`, so a hang kills the tests, not the container."""
    command = f"timeout -k 5 {int(timeout_s)} {profile.test_cmd}"
    return RunContext(
        mutation.candidate.candidate_id,
        profile.profile_id,
        command,
        junit_path,
        timeout_s + 60,
        own_kills=TIMEOUT_EXIT_CODES,
    )


def _with_id(ctx: RunContext, candidate_id: str) -> RunContext:
    return RunContext(candidate_id, ctx.profile_id, ctx.test_cmd, ctx.junit_path, ctx.timeout_s)


def reject_mutation(
    mutation: Mutation, reason: str, detail: str, runs: tuple[TestRun, ...]
) -> ValidationResult:
    return rejected(mutation.candidate, reason, detail, runs)


def _rejected_by_clean(mutation: Mutation, failure: Verdict) -> ValidationResult:
    reason = failure.reason.replace("_at_base", "_at_clean").replace("_at_gold", "_at_clean")
    return reject_mutation(mutation, reason, f"the clean snapshot: {failure.detail}", ())


def _decides(profile: EnvProfile, clean: TestTree) -> tuple[str, ...]:
    return (profile.profile_id, profile.image, profile.test_cmd, clean.tree_id)


def _cache_key(
    profile: EnvProfile, clean: TestTree, mutation: Mutation, params: ValidateParams
) -> str:
    decides = (*_decides(profile, clean), mutation.tree_id)
    return content_id(VERSION, *decides, params.test_timeout_s, length=32)


def _baseline_to_cache(baseline: CleanBaseline) -> dict:
    failure = baseline.failure
    return {
        "runs": [to_row(run) for run in baseline.runs],
        "passing": sorted(baseline.passing),
        "flaky": sorted(baseline.flaky),
        "coverage": baseline.coverage.to_json() if baseline.coverage else None,
        "failure": [failure.reason, failure.detail] if failure else None,
    }


def _baseline_from_cache(entry: dict) -> CleanBaseline:
    first, second = (from_row(TestRun, run) for run in entry["runs"])
    failure = entry["failure"]
    coverage = entry["coverage"]
    return CleanBaseline(
        runs=(first, second),
        passing=frozenset(entry["passing"]),
        flaky=frozenset(entry["flaky"]),
        coverage=CoverageMap.from_json(coverage) if coverage else None,
        failure=Verdict(False, failure[0], failure[1]) if failure else None,
    )


def _files_tar(files: dict[str, str]) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        for path, text in sorted(files.items()):
            data = text.encode("utf-8", "surrogateescape")
            info = tarfile.TarInfo(f"repo/{path}")
            info.size = len(data)
            info.mode = 0o644
            tar.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


def mutation_of(repo_path: str, candidate: Candidate, clean_tree: str) -> Mutation:
    """The bug as whole files, checked: it applies, and its fix gives back the clean files."""
    buggy = apply_patches(repo_path, candidate.base_commit, [candidate.bug_patch])
    if apply_patches(repo_path, buggy, [candidate.patch]) != clean_tree:
        raise UserError(
            "the fix does not restore the original files byte for byte; regenerate the candidate",
            reason="fix_does_not_restore",
        )
    touched = touched_lines(candidate.bug_patch)
    original = {p: read_file_at(repo_path, candidate.base_commit, p) for p in touched}
    return Mutation(
        candidate=candidate,
        mutated={p: read_file_at(repo_path, buggy, p) for p in touched},
        original=original,
        lines={p: with_statement_starts(original[p], lines) for p, lines in touched.items()},
        tree_id=buggy,
    )
