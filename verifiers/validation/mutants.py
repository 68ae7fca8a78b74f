"""What every language's proof of injected bugs shares: a bug as whole files (``Mutation``,
``mutation_of``), a snapshot's answer (``BatchResult``), the audit's book, and the rejections a
bug's run can earn. Python's covering-tests protocol is ``verifiers/languages/python/mutants.py``,
the full-run protocol of the other languages ``full_runs.py``."""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from trajforge.schemas.candidate import Candidate
from trajforge.schemas.diff import touched_lines
from trajforge.schemas.errors import UserError
from trajforge.schemas.rejection import Rejection
from trajforge.schemas.test_run import TestRun
from trajforge.verifiers.outside_world import describe, outside_world_tests
from trajforge.verifiers.sandbox.git_tree import apply_patches, changed_files, read_file_at
from trajforge.verifiers.test_runner import run_problem
from trajforge.verifiers.validation.candidate import (
    ValidationResult,
    rejected,
)
from trajforge.verifiers.validation.patch_lines import outside_functions, with_statement_starts
from trajforge.verifiers.validation.rule import (
    Verdict,
    failing_tests,
)

TIMEOUT_EXIT_CODES = (124, 137)  # coreutils `timeout`: TERM sent, or KILL after the grace period


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
class BatchResult:
    results: tuple[ValidationResult, ...]  # one per mutation, in order
    clean_runs: tuple[TestRun, ...]  # the snapshot's clean runs made now (empty when cached)
    baseline: tuple[TestRun, ...] = ()  # the clean runs the verdicts rest on, cached or not
    audit_agreed: int = 0  # audited kept bugs whose covering tests gave the full run's answer
    audit_disagreed: int = 0
    # test modules the clean run could not import, left out so the rest decided: "path: error"
    excluded: tuple[str, ...] = ()


COVERING, AUDIT, FULL = "covering", "audit", "full"


SKIPPED = "skipped"  # a bug no passing test executes, left unrun (``AuditBook.plan_blind``)


class AuditBook:
    """Which kept bugs also get a full run, per profile, for one run of validate: the first one
    and a seeded share (``validate.audit_share``); a disagreement switches the profile to full
    runs from then on. One book is shared by every snapshot a worker validates."""

    def __init__(self, share: float, seed: int) -> None:
        self.share, self.seed = share, seed
        self.lock = threading.Lock()
        self.audited: dict[str, int] = {}
        self.full: set[str] = set()

    def plan(self, profile_id: str, candidate_id: str) -> str:
        with self.lock:
            if profile_id in self.full:
                return FULL
            if not self.audited.get(profile_id) or _draw(self.seed, candidate_id) < self.share:
                return AUDIT
            return COVERING

    def record(self, profile_id: str, agreed: bool) -> None:
        with self.lock:
            self.audited[profile_id] = self.audited.get(profile_id, 0) + 1
            if not agreed:
                self.full.add(profile_id)

    def plan_blind(self, profile_id: str, candidate_id: str) -> str:
        """A bug whose lines no passing test executes: most are rejected unrun (a full run
        would find nothing failing); the seeded share runs the whole suite, and one that fails
        a test there is a blind spot of coverage: it is recorded as a disagreement."""
        with self.lock:
            if profile_id in self.full:
                return FULL
            return AUDIT if _draw(self.seed, candidate_id) < self.share else SKIPPED


def share_out(lanes: int, items: Sequence[int], work: Callable[[int, int], None]) -> None:
    """``work(lane, item)`` for every item, ``lanes`` at a time, each lane taking the next item
    when it is free (work stealing): a bug that hangs costs its own lane, while the others go
    on through the rest. Each item is taken once, by one lane."""
    queue, take = iter(items), threading.Lock()

    def run(lane: int) -> None:
        while True:
            with take:
                item = next(queue, None)
            if item is None:
                return
            work(lane, item)

    count = max(1, min(lanes, len(items)))
    with ThreadPoolExecutor(max_workers=count) as pool:
        list(pool.map(run, range(count)))


def _draw(seed: int, candidate_id: str) -> float:
    """A number in [0, 1) fixed by the seed and the bug: the same bugs are audited every run."""
    digest = hashlib.sha256(f"{seed}:{candidate_id}".encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64


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


def reject_mutation(
    mutation: Mutation, reason: str, detail: str, runs: tuple[TestRun, ...]
) -> ValidationResult:
    return rejected(mutation.candidate, reason, detail, runs)


def _rejected_by_clean(mutation: Mutation, failure: Verdict) -> ValidationResult:
    reason = failure.reason.replace("_at_base", "_at_clean").replace("_at_gold", "_at_clean")
    return reject_mutation(mutation, reason, f"the clean snapshot: {failure.detail}", ())


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
