"""Prove injected bugs of one snapshot as exactly as a full run, at the cost of its covering tests.

Per snapshot (a repo at a commit, in its profile's image) the clean suite runs twice, the first
time under per-test coverage; tests whose status differs between the two runs are flaky. Each bug
is then written over the clean files in the same container and gets ONE pytest process
(trajforge's plugin, ``pytest_plugin.py``) that runs the tests covering its lines first:

- none of them fails -> the run stops there: ``equivalent`` (the bug cost its covering tests);
- one fails -> the same process goes on through the rest of the suite: a full run. Every test
  that fails in it and passed in both clean runs is rerun once (only those); the ones that fail
  again are FAIL_TO_PASS, the ones that pass are flaky. PASS_TO_PASS are the tests passing
  everywhere. So FAIL_TO_PASS is what a full run says, confirmed, wherever coverage is blind.
- no test covers it (dead code to the suite, or a line that runs at import: module and class
  bodies, decorators, defaults; or a bug that adds or deletes a file) -> the whole suite runs
  before any verdict, so ``not_covered`` means nothing fails.

Also: the run hangs -> ``mutant_timeout`` (killed by ``timeout`` inside the container, which keeps
the container usable); collection breaks -> ``breaks_collection``. The baseline benchmarks and
tests compare with is SWE-smith's protocol (``benchmarks/full_suite.py``): the clean suite once,
then one full run per bug in a fresh container.
"""

from __future__ import annotations

import dataclasses
import functools
import io
import itertools
import shlex
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
from trajforge.verifiers.outside_world import describe, outside_world_tests
from trajforge.verifiers.sandbox.base import (
    REPO_DIR,
    Sandbox,
    SandboxBroken,
    Session,
    SessionSpec,
)
from trajforge.verifiers.sandbox.git_tree import apply_patches, changed_files, read_file_at
from trajforge.verifiers.test_runner import RunContext, run_problem, run_tests
from trajforge.verifiers.validation.candidate import (
    TestTree,
    ValidationResult,
    build_task,
    from_cache,
    infra_failure,
    rejected,
    to_cache,
    with_limits,
)
from trajforge.verifiers.validation.coverage import (
    FIRST_ENV,
    FIRST_PATH,
    CoverageMap,
    install_support,
    measure,
    plugin_command,
)
from trajforge.verifiers.validation.covered_sites import record_covered
from trajforge.verifiers.validation.patch_lines import outside_functions, with_statement_starts
from trajforge.verifiers.validation.rule import (
    FAILING,
    Verdict,
    failing_tests,
    judge,
    suite_failure,
)

VERSION = "inject-v2"  # v2: one process per bug, confirmed full-run failures, files added/deleted
TIMEOUT_EXIT_CODES = (124, 137)  # coreutils `timeout`: TERM sent, or KILL after the grace period
T = TypeVar("T")


@dataclass(frozen=True)
class Mutation:
    """One injected bug: the files it changes, as whole texts, and the lines a test must run."""

    candidate: Candidate
    mutated: dict[str, str | None]  # path -> file text with the bug (None: the bug deletes it)
    original: dict[str, str | None]  # path -> clean file text (None: the bug adds it)
    lines: dict[str, set[int]]  # path -> lines of the clean file that the bug touches
    tree_id: str  # content id of the buggy snapshot
    # No test selection can be trusted: a changed line runs at import, or a file comes or goes.
    whole_suite: bool = False


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
    clean_runs: tuple[TestRun, ...]  # the snapshot's clean runs made now (empty when cached)
    baseline: tuple[TestRun, ...] = ()  # the clean runs the verdicts rest on, cached or not


def validate_mutations(
    sandbox: Sandbox,
    profile: EnvProfile,
    clean: TestTree,
    mutations: Sequence[Mutation],
    params: ValidateParams,
    junit_path: str,
    cache: ContentCache | None,
    workers: int = 1,
    on_done: Callable[[ValidationResult], None] | None = None,
) -> BatchResult:
    """Every mutation of one clean snapshot, ``workers`` containers at a time; ``on_done`` hears
    of each result the moment it is known (a progress bar that counts bugs as they finish)."""
    profile = with_limits(profile, params)
    keys = [_cache_key(profile, clean, m, params) for m in mutations]
    results = _Settled(on_done)
    for index, key in enumerate(keys):
        if cache is not None and (hit := cache.get(key)) is not None:
            results[index] = from_cache(hit, mutations[index].candidate)
    pending = [i for i in range(len(mutations)) if i not in results]
    if not pending:  # every verdict cached: the clean runs are not needed
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
        record_covered(cache, clean.tree_id, baseline.coverage, baseline.passing)  # for inject
        if baseline.failure is not None:
            for i in pending:
                results[i] = _rejected_by_clean(mutations[i], baseline.failure)
        else:
            lanes = [pending[k :: len(slots)] for k in range(len(slots))]
            lanes = [lane for lane in lanes if lane]

            def run_lane(lane_index: int) -> None:
                slot = slots[lane_index]
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
                    results[i] = result  # lanes own disjoint indices

            with ThreadPoolExecutor(max_workers=len(lanes)) as pool:
                list(pool.map(run_lane, range(len(lanes))))
    finally:
        for slot in slots:
            slot.discard()
    for i in pending:
        if cache is not None and i in complete:
            cache.put(keys[i], to_cache(results[i]))
    clean_runs = () if known is not None else baseline.runs
    ordered = tuple(results[i] for i in range(len(mutations)))
    return BatchResult(ordered, clean_runs, baseline.runs)


class _Settled(dict[int, ValidationResult]):
    """Results by mutation index, each reported to ``on_done`` as it is set."""

    def __init__(self, on_done: Callable[[ValidationResult], None] | None) -> None:
        super().__init__()
        self.on_done = on_done

    def __setitem__(self, index: int, result: ValidationResult) -> None:
        super().__setitem__(index, result)
        if self.on_done is not None:
            self.on_done(result)


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

    def write(self, files: dict[str, str | None]) -> None:
        """Each file's text, or its removal where the text is None."""
        gone = sorted(path for path, text in files.items() if text is None)
        if gone:
            paths = " ".join(shlex.quote(f"{REPO_DIR}/{path}") for path in gone)
            result = self.session.exec(f"rm -f {paths}", timeout_s=60)
            if result.exit_code != 0:
                raise SandboxBroken(f"could not remove {gone[:3]}: {result.output[-200:]}")
        written = {path: text for path, text in files.items() if text is not None}
        if written:
            self.session.put_archive(_files_tar(written), dest="/")

    def put_first(self, tests: tuple[str, ...]) -> None:
        """The node ids the plugin runs first (an empty file: the whole suite in its order)."""
        text = "".join(f"{test}\n" for test in tests)
        self.session.put_archive(_files_tar({FIRST_PATH: text}, prefix=""), dest="/")


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
        install_support(session)
        yield _Workspace(session)


def _clean_baseline(workspace: _Workspace, ctx: RunContext) -> CleanBaseline:
    covered, coverage = measure(workspace.session, ctx)
    plain = run_tests(workspace.session, _plugged(ctx), "clean", attempt=1)
    runs = (covered, plain)
    failure = suite_failure(covered) or suite_failure(plain)
    first, second = covered.statuses(), plain.statuses()
    flaky = frozenset(t for t in set(first) | set(second) if first.get(t) != second.get(t))
    passing = frozenset(t for t, s in first.items() if s == "PASSED" and t not in flaky)
    if failure is None and not passing:
        failure = nothing_passes(covered)
    return CleanBaseline(runs, passing, flaky, coverage, failure)


def nothing_passes(run: TestRun) -> Verdict:
    """Why a clean run with no passing test gives no task: ``needs_outside_world`` when every
    failing test failed for want of the network, a key or a service (``outside_world.py``)."""
    failing = set(failing_tests(run))
    outside = outside_world_tests(run)
    if failing and failing <= set(outside):
        example = min(outside)
        return Verdict(
            False,
            "needs_outside_world",
            f"every test fails for want of the outside world (the sandbox has no network and no "
            f"secrets): {describe(outside)}, e.g. {example} ({outside[example]})",
        )
    detail = "no test passes on the clean code"
    if outside:
        detail += f"; {describe(outside)} of them fail for want of the outside world"
    return Verdict(False, "no_passing_test_at_clean", detail)


def _validate_one(
    workspace: _Workspace,
    profile: EnvProfile,
    baseline: CleanBaseline,
    mutation: Mutation,
    ctx: RunContext,
) -> ValidationResult:
    """One process: covering tests first, the rest only if one fails; then the failures rerun."""
    covering = _covering_tests(baseline, mutation)
    first = _first_tests(baseline, mutation, covering)
    timeout = _mutant_timeout(baseline, ctx.timeout_s)
    mctx = mutant_context(profile, mutation, ctx.junit_path, timeout)
    workspace.write(mutation.mutated)
    try:
        workspace.put_first(first)
        first_ctx = dataclasses.replace(mctx, test_cmd=f"{FIRST_ENV}={FIRST_PATH} {mctx.test_cmd}")
        run = run_tests(workspace.session, first_ctx, "base", attempt=0)
        if problem := _broken_run(mutation, run, (run,)):
            return problem
        statuses = run.statuses()
        if first and not any(statuses.get(t) in FAILING for t in first):
            detail = f"none of the {len(covering)} covering test(s) fails on the bug"
            if len(first) > len(covering):
                detail += f", nor any of the {len(first) - len(covering)} the dataset names"
            return reject_mutation(mutation, "equivalent", detail, (run,))
        broken = tuple(t for t in sorted(baseline.passing) if statuses.get(t) in FAILING)
        if not broken:
            where = ", ".join(f"{p}:{sorted(ls)[:5]}" for p, ls in sorted(mutation.lines.items()))
            why = "it changes files or lines that run at import" if mutation.whole_suite else (
                f"no passing test executes {where or 'its lines'}"
            )  # fmt: skip
            detail = f"{why}, and no test fails in a full run of the suite with it"
            return reject_mutation(mutation, "not_covered", detail, (run,))
        rerun = run_tests(workspace.session, mctx, "base", attempt=1, selection=broken)
        if problem := _broken_run(mutation, rerun, (run, rerun)):
            return problem
    finally:
        workspace.write(mutation.original)
    return _verdict(mutation, profile, baseline, covering, run, rerun)


def _verdict(
    mutation: Mutation,
    profile: EnvProfile,
    baseline: CleanBaseline,
    covering: tuple[str, ...],
    full: TestRun,
    rerun: TestRun,
) -> ValidationResult:
    """The rule on the full run and its rerun against the clean runs: a failure that repeats is
    FAIL_TO_PASS wherever it is, one that does not is flaky."""
    runs = (full, rerun)  # the clean runs are the snapshot's, reported once per batch
    verdict = judge([full, rerun], list(baseline.runs))
    if not verdict.kept:
        return reject_mutation(mutation, verdict.reason, verdict.detail, runs)
    task = build_task(
        mutation.candidate, profile, verdict, [full, rerun], [*baseline.runs], VERSION
    )
    outside = sum(t not in set(covering) for t in verdict.fail_to_pass)
    provenance = {
        **task.provenance,
        "covering_tests": str(len(covering)),
        # FAIL_TO_PASS tests coverage did not point at (a subprocess, import time): a full run
        # found them, a rerun confirmed them
        "fail_to_pass_outside_coverage": str(outside),
    }
    return ValidationResult(dataclasses.replace(task, provenance=provenance), None, runs)


def _covering_tests(baseline: CleanBaseline, mutation: Mutation) -> tuple[str, ...]:
    """The passing tests that execute the bug's lines; () means the whole suite must run."""
    if mutation.whole_suite:
        return ()
    if baseline.coverage is None:  # no coverage data: every passing test may see the bug
        return tuple(sorted(baseline.passing))
    found = itertools.chain.from_iterable(
        baseline.coverage.tests_covering(path, lines) for path, lines in mutation.lines.items()
    )
    return tuple(sorted(set(found) & baseline.passing))


def _first_tests(
    baseline: CleanBaseline, mutation: Mutation, covering: tuple[str, ...]
) -> tuple[str, ...]:
    """What the bug's run starts with: the covering tests, and for a row imported from a dataset
    the FAIL_TO_PASS it names (so its label check rests on runs of those tests)."""
    labels = mutation.candidate.labels
    if not covering or labels is None:
        return covering
    named = set(labels.FAIL_TO_PASS) & baseline.passing
    return tuple(sorted(set(covering) | named))


def _plugged(ctx: RunContext) -> RunContext:
    """The run with trajforge's pytest plugin (the repository's pytest-cov and xdist kept out)."""
    return dataclasses.replace(ctx, test_cmd=plugin_command(ctx.test_cmd))


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
    """The test command under coreutils `timeout`, so a hang kills the tests, not the container,
    with trajforge's pytest plugin (``install_support`` must have put it in the container)."""
    command = f"timeout -k 5 {int(timeout_s)} {plugin_command(profile.test_cmd)}"
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


def _files_tar(files: dict[str, str], prefix: str = "repo/") -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        for path, text in sorted(files.items()):
            data = text.encode("utf-8", "surrogateescape")
            info = tarfile.TarInfo(f"{prefix}{path}".lstrip("/"))
            info.size = len(data)
            info.mode = 0o644
            tar.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


def mutation_of(repo_path: str, candidate: Candidate, clean_tree: str) -> Mutation:
    """The bug as whole files, checked: it applies, and its fix gives back the clean files.

    A bug may add, delete or rename files (a rename is a delete and an add); such a bug, like one
    that changes a line run at import, gets the whole suite (``whole_suite``).
    """
    buggy = apply_patches(repo_path, candidate.base_commit, [candidate.bug_patch])
    if apply_patches(repo_path, buggy, [candidate.patch]) != clean_tree:
        raise UserError(
            "the fix does not restore the original files byte for byte; regenerate the candidate",
            reason="fix_does_not_restore",
        )
    changed = changed_files(repo_path, clean_tree, buggy)
    original = {
        p: None if s == "A" else read_file_at(repo_path, clean_tree, p) for p, s in changed.items()
    }
    mutated = {
        p: None if s == "D" else read_file_at(repo_path, buggy, p) for p, s in changed.items()
    }
    touched = touched_lines(candidate.bug_patch)
    lines: dict[str, set[int]] = {}
    whole_suite = any(status != "M" for status in changed.values())
    for path, text in original.items():
        if text is None or changed[path] != "M":
            continue
        found = touched.get(path) or set(range(1, text.count("\n") + 2))
        lines[path] = with_statement_starts(text, found)
        whole_suite = whole_suite or (path.endswith(".py") and outside_functions(text, found))
    return Mutation(candidate, mutated, original, lines, buggy, whole_suite)
