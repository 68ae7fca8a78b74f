"""Prove injected bugs of one snapshot exactly, at the cost of their covering tests.

Per snapshot (a repo at a commit, in its profile's image) the clean suite runs once, under
per-test coverage (subprocesses included: ``coverage.py``). Each bug is then written over the
clean files in the same container and gets ONE pytest process (trajforge's plugin,
``pytest_plugin.py``) that runs the tests covering its lines first:

- none of them fails -> the run stops there: ``equivalent`` (the bug cost its covering tests);
- one fails, ``validate.mutant_mode: covering`` -> the covering tests decide: the run stops after
  them; each failure is rerun once in the same process (its call only; a failed setup is rerun
  in a new one); FAIL_TO_PASS = the covering tests that fail twice and passed at clean,
  PASS_TO_PASS = the clean-passing tests minus those that now fail. A test that never executes a
  changed line cannot change outcome on a deterministic suite; where that is wrong (code run from
  a string, a subprocess without coverage, a test reading the file's text) the AUDIT sees it:
  a seeded share ``validate.audit_share`` of kept bugs per profile, and always the first, run
  the rest of the suite too (in the same process, after the covering tests, so the covering
  answer is read from the same run). The answers differ exactly when a clean-passing test outside
  the covering ones fails in the full run (it changes FAIL_TO_PASS or PASS_TO_PASS); then the
  full answer is taken and the profile runs full for the rest of the run (``AuditBook``;
  counted, ``audit: N agreed, M disagreed``). Reruns stay in the same process only here: the
  clean confirmation and the audit back them; a full run keeps the new-process rerun, which also
  sees a failure that only state leaked by earlier tests of the run causes;
- one fails, ``mutant_mode: full`` (or the profile was switched) -> the same process goes on
  through the rest of the suite; the failures are rerun once in a new process;
- a row imported from a dataset is decided the same way: its run also starts with the FAIL_TO_PASS
  the dataset names, and the label check reads a test the bug's run left out as it ran at clean
  (the same inference as PASS_TO_PASS); one whose named tests coverage does not place at all
  (no covering test) runs the whole suite, as ``full``;
- a line that runs at import (module and class bodies, decorators, defaults, or a function a
  module body calls, measured at clean), or a bug that adds or deletes a file -> the whole suite
  runs before any verdict, and a kept bug is a full run;
- no passing test executes it -> ``not_covered`` without a run, but for the audit's seeded share,
  which runs the whole suite (a test failing there is a disagreement).

Confirmation at the clean state: instead of a second full clean run, the union of the snapshot's
FAIL_TO_PASS candidates is rerun at clean once every bug has run; one that does not pass again
is flaky and leaves every bug's FAIL_TO_PASS and PASS_TO_PASS. It sees every flaky test a verdict
rests on; it does not see a test that flakes at clean without failing on any bug (the second full
clean run saw it only when it happened to flip): it may stay in PASS_TO_PASS.

Also: the run hangs -> ``mutant_timeout`` (killed by ``timeout`` inside the container, which keeps
the container usable); collection breaks -> ``breaks_collection``. The baseline benchmarks and
tests compare with is SWE-smith's protocol (``benchmarks/full_suite.py``): the clean suite once,
then one full run per bug in a fresh container.
"""

from __future__ import annotations

import collections
import dataclasses
import functools
import io
import itertools
import json
import shlex
import tarfile
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import ExitStack, contextmanager, suppress
from dataclasses import dataclass
from typing import TypeVar

from trajforge.schemas.env_profile import EnvProfile
from trajforge.schemas.params import ValidateParams
from trajforge.schemas.records import content_id, from_row, to_row
from trajforge.schemas.storage import ContentCache
from trajforge.schemas.test_run import TestRun, TestStatus
from trajforge.verifiers.code_digest import verifier_digest
from trajforge.verifiers.languages.python.clean_exclusions import (
    failed_modules,
    without_modules,
)
from trajforge.verifiers.languages.python.coverage import (
    FIRST_ENV,
    FIRST_PATH,
    ONLY_FIRST_ENV,
    RERUN_OUT_ENV,
    RERUN_PATH,
    CoverageMap,
    install_support,
    measure,
    plugin_command,
    start_fork_server,
)
from trajforge.verifiers.languages.python.covered_sites import record_covered
from trajforge.verifiers.sandbox.base import (
    REPO_DIR,
    Sandbox,
    SandboxBroken,
    Session,
    SessionSpec,
)
from trajforge.verifiers.test_runner import RunContext, run_tests
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
    AUDIT,
    COVERING,
    FULL,
    SKIPPED,
    TIMEOUT_EXIT_CODES,
    AuditBook,
    BatchResult,
    Mutation,
    _broken_run,
    _rejected_by_clean,
    nothing_passes,
    reject_mutation,
    share_out,
)
from trajforge.verifiers.validation.rule import (
    FAILING,
    Verdict,
    failing_tests,
    judge,
    suite_failure,
)

# v2: one process per bug, confirmed full-run failures, files added/deleted; v3: covering tests
# decide (audited), one clean run and the union of FAIL_TO_PASS confirmed at clean; v4: lines run
# at import (measured) get the whole suite, bugs no test executes are left unrun
VERSION = "inject-v4"


T = TypeVar("T")


@dataclass(frozen=True)
class CleanBaseline:
    runs: tuple[TestRun, ...]  # the clean run under coverage
    passing: frozenset[str]  # PASSED at clean
    flaky: frozenset[str]  # (kept for older cached entries; the union confirmation finds them)
    coverage: CoverageMap | None
    failure: Verdict | None


class _Tally:
    """Audit outcomes counted from several lanes at once."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.counts: collections.Counter[str] = collections.Counter()

    def add(self, outcome: str) -> None:
        with self.lock:
            self.counts[outcome] += 1


@dataclass(frozen=True)
class _Pending:
    """A bug whose tests failed, its FAIL_TO_PASS candidates waiting for confirmation at clean."""

    mutation: Mutation
    plan: str  # COVERING, AUDIT or FULL
    first: tuple[str, ...]  # the tests run first (the covering answer reads only these)
    covering: tuple[str, ...]
    runs: tuple[TestRun, TestRun]  # the bug's run, and the rerun of its failures
    candidates: frozenset[str]  # failed twice on the bug, passed at clean
    audit: str = ""  # AUDIT: "agreed" or "disagreed"


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
    audit: AuditBook | None = None,
) -> BatchResult:
    """Every mutation of one clean snapshot, ``workers`` containers at a time; ``on_done`` hears
    of each result the moment it is known (a progress bar that counts bugs as they finish; a
    kept bug is known once the snapshot's clean confirmation ran). ``audit``: the run's book
    (a new one when None)."""
    profile = with_limits(profile, params)
    book = audit if audit is not None else AuditBook(params.audit_share, params.audit_seed)
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
    slots = [_Slot(sandbox, profile, clean, params.fork_server) for _ in range(max(workers, 1))]
    complete = set(pending)  # verdicts of complete runs: the only ones cached
    made: list[TestRun] = []  # the clean confirmation run, once made
    tally = _Tally()  # audits of bugs no test covers that agreed (the others are in `waiting`)
    excluded: tuple[str, ...] = ()  # modules the clean run could not import, left out
    earlier: tuple[TestRun, ...] = ()  # the clean run that named them, when made now
    try:
        try:
            baseline, known = _baseline(slots[0], clean, params, cache, _with_id(ctx, snapshot_id))
            dropped = failed_modules(baseline.runs[0]) if baseline.failure is not None else []
            if dropped:  # the rest of the suite decides (clean_exclusions.py)
                narrower = without_modules(profile, dropped)
                retry = _with_cmd(ctx, narrower.test_cmd)
                slots[0].discard()  # a fresh container: nothing of the failed run left in it
                slots[0].profile = narrower  # the key and the command of the narrower run
                retried, known_again = _baseline(
                    slots[0], clean, params, cache, _with_id(retry, snapshot_id)
                )
                if retried.failure is None:
                    earlier = () if known else baseline.runs
                    profile, ctx, baseline, known = narrower, retry, retried, known_again
                    excluded = narrower.excluded[len(narrower.excluded) - len(dropped) :]
                    for slot in slots:
                        slot.profile = narrower
                else:
                    slots[0].profile = profile
        except SandboxBroken as exc:
            for i in pending:
                results[i] = infra_failure(mutations[i].candidate, exc)
            return BatchResult(tuple(results[i] for i in range(len(mutations))), ())
        if baseline.failure is not None:
            for i in pending:
                results[i] = _rejected_by_clean(mutations[i], baseline.failure)
        else:
            waiting: dict[int, _Pending] = {}
            mode = params.mutant_mode

            def run_one(lane: int, i: int) -> None:
                slot = slots[lane]
                validate = functools.partial(
                    _validate_one, profile=profile, baseline=baseline, mutation=mutations[i],
                    ctx=ctx, mode=mode, book=book, tally=tally,
                )  # fmt: skip
                try:
                    outcome = slot.twice(validate)
                except SandboxBroken as exc:
                    outcome = infra_failure(mutations[i].candidate, exc)
                    complete.discard(i)
                if isinstance(outcome, _Pending):
                    waiting[i] = outcome  # each index is taken by one lane
                else:
                    results[i] = outcome

            share_out(len(slots), pending, run_one)
            confirm = _confirm_at_clean(slots[0], waiting.values(), _with_id(ctx, snapshot_id))
            if isinstance(confirm, TestRun):
                made.append(confirm)
            for i, held in sorted(waiting.items()):
                if isinstance(confirm, SandboxBroken):
                    results[i] = infra_failure(held.mutation.candidate, confirm)
                    complete.discard(i)
                else:
                    results[i] = _settle(held, profile, baseline, confirm)
            tally.counts.update(held.audit for held in waiting.values() if held.audit)
    finally:
        for slot in slots:
            slot.discard()
    for i in pending:
        if cache is not None and i in complete:
            cache.put(keys[i], to_cache(results[i]))
    clean_runs = earlier + (() if known else baseline.runs) + tuple(made)
    ordered = tuple(results[i] for i in range(len(mutations)))
    audits = tally.counts
    return BatchResult(
        ordered, clean_runs, baseline.runs + tuple(made), audits["agreed"], audits["disagreed"],
        excluded,
    )  # fmt: skip


def _with_cmd(ctx: RunContext, test_cmd: str) -> RunContext:
    return dataclasses.replace(ctx, test_cmd=test_cmd)


class _Settled(dict[int, ValidationResult]):
    """Results by mutation index, each reported to ``on_done`` as it is set."""

    def __init__(self, on_done: Callable[[ValidationResult], None] | None) -> None:
        super().__init__()
        self.on_done = on_done

    def __setitem__(self, index: int, result: ValidationResult) -> None:
        super().__setitem__(index, result)
        if self.on_done is not None:
            self.on_done(result)


class _Workspace:
    """A container holding the clean snapshot; mutants are written over it and undone.
    ``forked``: its pytest runs fork from the container's fork server.

    A bug's files are undone lazily, in the same archive that writes the next bug's files (one
    copy into the container per bug, not two); ``restore`` undoes them before a clean run."""

    def __init__(self, session: Session, forked: bool = False) -> None:
        self.session = session
        self.forked = forked
        self.undo: dict[str, str | None] = {}  # the clean text of what the last bug changed

    def write(self, files: dict[str, str | None], extra: dict[str, str] | None = None) -> None:
        """Each file's text, or its removal where the text is None (``extra``: absolute paths
        written in the same archive)."""
        gone = sorted(path for path, text in files.items() if text is None)
        if gone:
            paths = " ".join(shlex.quote(f"{REPO_DIR}/{path}") for path in gone)
            result = self.session.exec(f"rm -f {paths}", timeout_s=60)
            if result.exit_code != 0:
                raise SandboxBroken(f"could not remove {gone[:3]}: {result.output[-200:]}")
        written = {f"repo/{p}": text for p, text in files.items() if text is not None}
        written.update({path.lstrip("/"): text for path, text in (extra or {}).items()})
        if written:
            self.session.put_archive(_files_tar(written, prefix=""), dest="/")

    def apply(self, mutation: Mutation, first: tuple[str, ...]) -> None:
        """The clean files the last bug changed, this bug's files, and the node ids the plugin
        runs first (an empty file: the whole suite in its order), in one archive."""
        files = {**self.undo, **mutation.mutated}
        self.undo = dict(mutation.original)
        self.write(files, {FIRST_PATH: "".join(f"{test}\n" for test in first)})

    def restore(self) -> None:
        """The clean snapshot again (before a run at clean)."""
        if self.undo:
            undo, self.undo = self.undo, {}
            self.write(undo)


class _Slot:
    """A lane's clean workspace, opened when first needed and replaced when its sandbox breaks."""

    def __init__(
        self, sandbox: Sandbox, profile: EnvProfile, clean: TestTree, fork_server: bool = False
    ) -> None:
        self.sandbox, self.profile, self.clean = sandbox, profile, clean
        self.fork_server = fork_server
        self.stack = ExitStack()
        self.workspace: _Workspace | None = None

    def get(self) -> _Workspace:
        if self.workspace is None:
            opened = clean_workspace(self.sandbox, self.profile, self.clean, self.fork_server)
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
def clean_workspace(
    sandbox: Sandbox, profile: EnvProfile, clean: TestTree, fork_server: bool = False
) -> Iterator[_Workspace]:
    """A container with the clean snapshot and trajforge's support files; ``fork_server``: with
    a pytest fork server for the bug runs (only where the profile's command is pytest's)."""
    with sandbox.session(SessionSpec(image=profile.image)) as session:
        session.put_archive(clean.tar())
        install_support(session)
        forked = fork_server and plugin_command(profile.test_cmd) != profile.test_cmd
        yield _Workspace(session, forked and start_fork_server(session))


def measure_clean(
    sandbox: Sandbox,
    profile: EnvProfile,
    clean: TestTree,
    params: ValidateParams,
    junit_path: str,
    cache: ContentCache | None,
) -> CleanBaseline:
    """The snapshot's clean run under coverage, exactly as ``validate_mutations`` makes and
    caches it (so inject's first contact is validate's baseline, not a second run), with its
    covered lines remembered for inject. ``SandboxBroken`` when the sandbox fails twice."""
    profile = with_limits(profile, params)
    ctx = RunContext(
        f"snapshot-{clean.tree_id[:16]}", profile.profile_id, profile.test_cmd, junit_path,
        params.test_timeout_s,
    )  # fmt: skip
    slot = _Slot(sandbox, profile, clean, params.fork_server)
    try:
        return _baseline(slot, clean, params, cache, ctx)[0]
    finally:
        slot.discard()


def _baseline(
    slot: _Slot, clean: TestTree, params: ValidateParams, cache: ContentCache | None,
    ctx: RunContext,
) -> tuple[CleanBaseline, bool]:  # fmt: skip
    """The clean baseline from the cache, else run in ``slot`` and cached; whether it was
    cached. Either way its covered lines are remembered for inject (schemas/coverage_sites.py)."""
    decides = _decides(slot.profile, clean)
    key = content_id(VERSION, verifier_digest(), "clean", *decides, params.test_timeout_s)
    known = cache.get(key) if cache is not None else None
    if known is not None:
        baseline = _baseline_from_cache(known)
    else:
        baseline = slot.twice(lambda ws: _clean_baseline(ws, ctx))
        if cache is not None:
            cache.put(key, _baseline_to_cache(baseline))
    record_covered(cache, clean.tree_id, baseline.coverage, baseline.passing)
    return baseline, known is not None


def _clean_baseline(workspace: _Workspace, ctx: RunContext) -> CleanBaseline:
    """One clean run, under coverage; its flaky tests are found where they matter, by the
    confirmation of the FAIL_TO_PASS candidates at clean (``_confirm_at_clean``)."""
    covered, coverage = measure(workspace.session, ctx)
    failure = suite_failure(covered)
    passing = frozenset(t for t, s in covered.statuses().items() if s == "PASSED")
    if failure is None and not passing:
        failure = nothing_passes(covered)
    return CleanBaseline((covered,), passing, frozenset(), coverage, failure)


def _confirm_at_clean(
    slot: _Slot, waiting: Iterable[_Pending], ctx: RunContext
) -> TestRun | SandboxBroken | None:
    """The union of the snapshot's FAIL_TO_PASS candidates, rerun at clean in one process: each
    must pass again, or it is flaky (None: nothing to confirm)."""
    union = tuple(sorted(set().union(*(held.candidates for held in waiting))))
    if not union:
        return None
    try:

        def confirm(ws: _Workspace) -> TestRun:
            ws.restore()
            return run_tests(ws.session, _plugged(ctx, ws.forked), "clean", 1, selection=union)

        return slot.twice(confirm)
    except SandboxBroken as exc:
        return exc


def _validate_one(
    workspace: _Workspace,
    profile: EnvProfile,
    baseline: CleanBaseline,
    mutation: Mutation,
    ctx: RunContext,
    mode: str,
    book: AuditBook,
    tally: _Tally,
) -> ValidationResult | _Pending:
    """One process: covering tests first; then, if one fails, the rest of the suite (a full or
    audited bug) or nothing more (the covering tests decide); then the failures rerun."""
    covering = _covering_tests(baseline, mutation)
    first = _first_tests(baseline, mutation, covering)
    labels = mutation.candidate.labels
    measured = mode == COVERING and baseline.coverage is not None
    where = ", ".join(f"{p}:{sorted(ls)[:5]}" for p, ls in sorted(mutation.lines.items()))
    whole = _whole_suite(baseline, mutation)
    blind = measured and not covering and not whole
    if blind and labels is not None and labels.FAIL_TO_PASS:
        # The dataset says tests fail where coverage sees none run: the whole suite decides.
        plan = FULL
    elif blind:
        plan = book.plan_blind(profile.profile_id, mutation.candidate.candidate_id)
        if plan == SKIPPED:
            detail = (
                f"no passing test executes {where or 'its lines'}; not run (a seeded share of "
                "such bugs runs the whole suite: the audit)"
            )
            return reject_mutation(mutation, "not_covered", detail, ())
    elif measured and covering:
        plan = book.plan(profile.profile_id, mutation.candidate.candidate_id)
    else:
        plan = FULL
    timeout = _mutant_timeout(baseline, ctx.timeout_s)
    mctx = mutant_context(profile, mutation, ctx.junit_path, timeout, workspace.forked)
    env = f"{FIRST_ENV}={FIRST_PATH}"
    if plan == COVERING:
        env += f" {ONLY_FIRST_ENV}=1 {RERUN_OUT_ENV}={RERUN_PATH}"
    workspace.apply(mutation, first)
    first_ctx = dataclasses.replace(mctx, test_cmd=f"rm -f {RERUN_PATH}; {env} {mctx.test_cmd}")
    # Where the covering tests decide, pytest is given them by id: it collects only their
    # modules (most of a fast suite's run is its collection).
    only = first if plan == COVERING else ()
    run = run_tests(workspace.session, first_ctx, "base", attempt=0, selection=only)
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
        why = "it changes files or lines that run at import" if whole else (
            f"no passing test executes {where or 'its lines'}"
        )  # fmt: skip
        detail = f"{why}, and no test fails in a full run of the suite with it"
        if blind and plan == AUDIT:
            tally.add("agreed")  # coverage was right: nothing fails
        return reject_mutation(mutation, "not_covered", detail, (run,))
    if plan == COVERING:
        rerun = _rerun_in_process(workspace, mctx, run, broken)
    else:
        rerun = run_tests(workspace.session, mctx, "base", attempt=1, selection=broken)
    if problem := _broken_run(mutation, rerun, (run, rerun)):
        return problem
    again = rerun.statuses()
    candidates = frozenset(t for t in broken if again.get(t) in FAILING)
    audit = ""
    if plan == AUDIT:  # the covering answer differs from the full one iff this is not empty
        unseen = set(broken) - set(first)
        book.record(profile.profile_id, agreed=not unseen)
        audit = "disagreed" if unseen else "agreed"
    return _Pending(mutation, plan, first, covering, (run, rerun), candidates, audit)


def _rerun_in_process(
    workspace: _Workspace, ctx: RunContext, run: TestRun, broken: tuple[str, ...]
) -> TestRun:
    """The failures' second outcome: the plugin's in-process reruns (call failures), and one new
    process for the rest (setup or teardown failures). The plugin's file is written where the
    tests run, so only known tests and known outcomes are read from it."""
    raw = workspace.session.read_file(RERUN_PATH)
    outcomes: dict[str, str] = {}
    with suppress(ValueError, UnicodeDecodeError):
        loaded = json.loads(raw.decode("utf-8")) if raw else {}
        if isinstance(loaded, dict):
            outcomes = {
                t: s for t, s in loaded.items() if t in broken and s in ("PASSED", "FAILED")
            }
    rest = tuple(t for t in broken if t not in outcomes)
    tests = [TestStatus(t, s) for t, s in sorted(outcomes.items())]
    if not rest:
        note = f"[trajforge] {len(tests)} failure(s) rerun in the same process\n"
        return dataclasses.replace(
            run, run_id=f"{run.run_id}-rerun", attempt=1, selection=broken, tests=tuple(tests),
            duration_s=0.0, log=note, log_digest="",
        )  # fmt: skip
    fresh = run_tests(workspace.session, ctx, "base", attempt=1, selection=rest)
    tests += [t for t in fresh.tests if t.test_id in rest]
    return dataclasses.replace(fresh, selection=broken, tests=tuple(tests))


def _settle(
    held: _Pending,
    profile: EnvProfile,
    baseline: CleanBaseline,
    confirm: TestRun | None,
) -> ValidationResult:
    """The rule on the bug's runs against the clean run and its confirmation: on the covering
    tests where they decide, on the whole run otherwise (an audited bug: the full answer)."""
    clean_runs = [*baseline.runs, *([confirm] if confirm is not None else [])]
    verdict = _answer(held, baseline, clean_runs, held.first if held.plan == COVERING else None)
    mutation, runs = held.mutation, held.runs
    if not verdict.kept:
        return reject_mutation(mutation, verdict.reason, verdict.detail, runs)
    task = build_task(mutation.candidate, profile, verdict, list(runs), clean_runs, VERSION)
    outside = sum(t not in set(held.covering) for t in verdict.fail_to_pass)
    provenance = {
        **task.provenance,
        "covering_tests": str(len(held.covering)),
        # FAIL_TO_PASS tests coverage did not point at (a subprocess, import time): a full run
        # found them, a rerun confirmed them
        "fail_to_pass_outside_coverage": str(outside),
        "mutant_runs": held.plan,  # covering: its covering tests decided; audit, full: a full run
        **({"audit": held.audit} if held.audit else {}),
    }
    return ValidationResult(dataclasses.replace(task, provenance=provenance), None, runs)


def _answer(
    held: _Pending,
    baseline: CleanBaseline,
    clean_runs: list[TestRun],
    among: tuple[str, ...] | None,
) -> Verdict:
    """The rule on the bug's runs, read on ``among`` only (the covering answer) or on all of it.
    The covering answer's PASS_TO_PASS: the clean-passing tests minus those that now fail."""
    run, rerun = held.runs
    if among is not None:
        run, rerun = _only(run, among), _only(rerun, among)
    verdict = judge([run, rerun], clean_runs)
    if not verdict.kept or among is None:
        return verdict
    gone = set(failing_tests(run)) | set(verdict.flaky)
    return dataclasses.replace(verdict, pass_to_pass=tuple(sorted(baseline.passing - gone)))


def _only(run: TestRun, tests: tuple[str, ...]) -> TestRun:
    wanted = set(tests)
    return dataclasses.replace(
        run,
        tests=tuple(t for t in run.tests if t.test_id in wanted),
        selection=tuple(t for t in run.selection if t in wanted) or run.selection,
    )


def _covering_tests(baseline: CleanBaseline, mutation: Mutation) -> tuple[str, ...]:
    """The passing tests that execute the bug's lines; () means the whole suite must run."""
    if _whole_suite(baseline, mutation):
        return ()
    if baseline.coverage is None:  # no coverage data: every passing test may see the bug
        return tuple(sorted(baseline.passing))
    found = itertools.chain.from_iterable(
        baseline.coverage.tests_covering(path, lines) for path, lines in mutation.lines.items()
    )
    return tuple(sorted(set(found) & baseline.passing))


def _whole_suite(baseline: CleanBaseline, mutation: Mutation) -> bool:
    """No test selection can be trusted: the bug changes a line run at import, by where it
    stands (``mutation_of``) or as measured at clean (a function a module body calls)."""
    if mutation.whole_suite:
        return True
    coverage = baseline.coverage
    return coverage is not None and any(
        coverage.runs_at_import(path, lines) for path, lines in mutation.lines.items()
    )


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


def _plugged(ctx: RunContext, forked: bool) -> RunContext:
    """The run with trajforge's pytest plugin (the repository's pytest-cov and xdist kept out)."""
    return dataclasses.replace(ctx, test_cmd=plugin_command(ctx.test_cmd, forked))


def _mutant_timeout(baseline: CleanBaseline, limit: float) -> float:
    """A few times the clean suite: a mutant that runs much longer is hanging."""
    clean_s = max(run.duration_s for run in baseline.runs)
    return min(limit, 20 + 3 * clean_s)


def mutant_context(
    profile: EnvProfile, mutation: Mutation, junit_path: str, timeout_s: float, forked: bool = False
) -> RunContext:
    """The test command under coreutils `timeout`, so a hang kills the tests, not the container,
    with trajforge's pytest plugin (``install_support`` must have put it in the container);
    ``forked``: through the workspace's fork server (a kill of the caller kills the tests)."""
    command = f"timeout -k 5 {int(timeout_s)} {plugin_command(profile.test_cmd, forked)}"
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


def _decides(profile: EnvProfile, clean: TestTree) -> tuple[str, ...]:
    return (profile.profile_id, profile.image, profile.test_cmd, clean.tree_id)


def _cache_key(
    profile: EnvProfile, clean: TestTree, mutation: Mutation, params: ValidateParams
) -> str:
    decides = (*_decides(profile, clean), mutation.tree_id)
    how = (params.mutant_mode, params.audit_share, params.audit_seed)
    return content_id(VERSION, verifier_digest(), *decides, params.test_timeout_s, *how, length=32)


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
    failure = entry["failure"]
    coverage = entry["coverage"]
    return CleanBaseline(
        runs=tuple(from_row(TestRun, run) for run in entry["runs"]),
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
