"""The ``validate`` stage: candidates -> proven tasks, as one composite PTransform.

Candidates are keyed by their environment profile, so each profile's image is built once (a
GroupByKey) and shared by all its commits. Mined candidates are then validated one by one in fresh
containers, ``workers`` at a time per Beam worker; injected bugs (``bug/*``) are grouped by the
snapshot they mutate and validated together as the profile's language proves them
(``Language.validate_mutations``: Python's with coverage-guided test selection, a JavaScript
profile's a full run each; its runs read as ``Language.reading`` says). A candidate
imported from a published dataset (``labels``) also gets a ``label_check`` row: their
FAIL_TO_PASS / PASS_TO_PASS against ours, test by test (``verifiers/validation/labels.py``).
Every kept task's gold patch is then graded by the grader RL uses (``gold_runs``), in the same
worker and lanes as its validation; a task the grader cannot solve with its own fix is
``gold_not_gradable`` (``verifiers/validation/gold_runs.py``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor, as_completed

import apache_beam as beam
from trajforge.generators.bugs.combiner import combine_bugs
from trajforge.generators.languages.registry import language_named
from trajforge.generators.sources.specs import SourceOptions, open_source
from trajforge.pipelines.report.data import LABEL_CHECK_COLUMNS, label_figures_of
from trajforge.pipelines.runtime import reach
from trajforge.pipelines.runtime.outputs import read_frame, table_files
from trajforge.pipelines.runtime.stage_fn import REJECTED, SandboxFn
from trajforge.pipelines.stages.environment import BATCH, BuildEnvironments, Site
from trajforge.schemas.candidate import Candidate
from trajforge.schemas.env_profile import EnvProfile
from trajforge.schemas.errors import UserError
from trajforge.schemas.params import Params
from trajforge.schemas.storage import ContentCache
from trajforge.schemas.task_instance import TaskInstance
from trajforge.schemas.test_run import TestRun
from trajforge.verifiers.outside_world import describe, outside_world_tests
from trajforge.verifiers.sandbox.base import Sandbox
from trajforge.verifiers.sandbox.lanes import Lanes
from trajforge.verifiers.test_runner import Reading
from trajforge.verifiers.validation.candidate import (
    TestTree,
    ValidationResult,
    rejected,
    validate_candidate,
    verdict_difference,
)
from trajforge.verifiers.validation.gold_runs import GoldRuns, grade_gold, grades
from trajforge.verifiers.validation.labels import check_labels, class_counts
from trajforge.verifiers.validation.mutants import (
    AuditBook,
    Mutation,
    check_combination,
    mutation_of,
)

RUNS = "runs"
LABEL_CHECK = "label_check"  # imported rows only: their labels against ours
STAGE = "validate"


def _site(candidate: Candidate) -> Site:
    """Candidates of one profile share the image built at the oldest of them."""
    return Site(
        candidate.candidate_id,
        candidate.source,
        candidate.base_commit,
        candidate.repo,
        order=(candidate.created_at, candidate.base_commit),
    )


@dataclasses.dataclass(frozen=True)
class ReuseLabelAudit:
    """An audited reuse's verdict on the site's first mined candidate, in the reused image and in
    the site's own: kept or not, the reason, FAIL_TO_PASS and PASS_TO_PASS must be the same
    (``verdict_difference``), or the repository goes back to its own profiles. Both verdicts
    are cached as validate caches them, so the candidate's own validation later replays the
    reused one. Injected bugs are audited by their clean runs only (validate proves them by
    covering tests, not one candidate at a time)."""

    params: Params

    def __call__(
        self, sandbox: Sandbox, reused: EnvProfile, own: EnvProfile, items: list, repo_path: str
    ) -> str:
        mined = [item for item in items if isinstance(item, Candidate) and not _injected(item)]
        if not mined:
            return ""
        candidate = mined[0]
        try:
            base = TestTree.at(repo_path, candidate.base_commit, [candidate.test_patch])
            gold = TestTree.at(
                repo_path, candidate.base_commit, [candidate.test_patch, candidate.patch]
            )
        except UserError:  # its own validation rejects it, whichever image: nothing to compare
            return ""
        cache = ContentCache(self.params.results_cache, "validate")
        validate = self.params.validate
        results = [
            validate_candidate(sandbox, candidate, p, base, gold, validate, _reading(p), cache)
            for p in (reused, own)
        ]
        differs = verdict_difference(*results)
        return f"{candidate.candidate_id[:12]}: {differs}" if differs else ""


class ValidateFn(SandboxFn):
    """What both validators share: results become runs, then the task or its rejection."""

    STAGE = STAGE

    def setup(self) -> None:
        super().setup()
        self.cache = ContentCache(self.params.results_cache, "validate")
        self.gold_cache = ContentCache(self.params.results_cache, "gold")
        self.lanes = Lanes(self.params.validate.workers)  # no lane idles while a run can start

    def _graded(
        self, candidate: Candidate, result: ValidationResult, repo_path: str
    ) -> tuple[ValidationResult, GoldRuns | None]:
        """A kept task's gold patch through the grader (any thread): the task with its
        ``gold_runs``, or its ``gold_not_gradable`` rejection; others as they are."""
        task, validate = result.task, self.params.validate
        if task is None or not validate.gold_runs or self.sandbox is None:
            return result, None  # gold_runs 0: not graded, the column stays empty
        if not grades(self.sandbox):
            return result, None
        gold = grade_gold(
            self.sandbox, task, repo_path, validate.gold_runs, validate.test_timeout_s,
            self.gold_cache, self.lanes,
        )  # fmt: skip
        if gold.reason:
            refused = rejected(candidate, gold.reason, gold.detail, result.runs)
            return dataclasses.replace(refused, cached=result.cached), gold
        shipped = dataclasses.replace(task, gold_runs=gold.column)
        if gold.set_aside:  # PASS_TO_PASS the grader's own run fails with the fix (gold_runs.py)
            shipped = dataclasses.replace(
                shipped,
                PASS_TO_PASS=tuple(t for t in task.PASS_TO_PASS if t not in gold.set_aside),
                flaky_tests=tuple(sorted({*task.flaky_tests, *gold.set_aside})),
            )
        return dataclasses.replace(result, task=shipped), gold

    def _count_gold(self, gold: GoldRuns | None) -> None:
        """What grading gold patches cost: the summary's ``gold_runs_ms`` (benchmarks read it)."""
        if gold is None:
            return
        self.summary_count("gold_graded")
        if gold.set_aside:
            self.summary_count("gold_set_aside_tests", len(gold.set_aside))
        if gold.cached:
            self.summary_count("gold_cache_hits")
        self.summary_count("gold_runs_ms", round(gold.seconds * 1000))

    def _emit(
        self,
        candidate: Candidate,
        result: ValidationResult,
        clean: tuple[TestRun, ...] = (),
        moved: bool = False,
        gold: GoldRuns | None = None,
    ):
        """``moved``: the bar already moved for it (``_outcome``, as the bug finished);
        ``gold``: its gold patch's grading (``_graded``), counted here, in the bundle's thread."""
        self._count_gold(gold)
        self.summary_count("runs_beside", self.lanes.take_borrowed())  # lanes.py
        if result.cached:
            self.count("cache_hits")
        if any(run.suite_ran for run in clean or result.runs):  # a suite that ran collected
            reach.mark(self, "collected", candidate.repo)
        if reach.passed_any(clean or result.runs):
            reach.mark(self, "clean", candidate.repo)
        if result.task is not None:
            reach.mark(self, "task", candidate.repo)
        for run in result.runs:
            yield beam.pvalue.TaggedOutput(RUNS, run)
        if (check := check_labels(candidate, result, clean)) is not None:
            self.count(f"labels_{check.verdict}")
            for name, tests in class_counts(check).items():
                if tests:
                    self.count(f"label_tests_{name}", tests)
            yield beam.pvalue.TaggedOutput(LABEL_CHECK, check)
        if result.task is not None:
            self.tick("kept", moved)
            yield result.task
        elif result.rejection is not None:
            rejection = result.rejection
            yield self.reject(candidate.candidate_id, rejection.reason, rejection.detail, moved)


class ValidateBatchFn(ValidateFn):
    """A batch of (profile, candidate) -> tasks / rejections / test runs, ``workers`` at once.

    A bundle's candidates come as one batch and each result is taken as it is ready: with
    small batches every lane waited for the batch's slowest candidate (a hanging one idled the
    other lane for its whole limit)."""

    def setup(self) -> None:
        super().setup()
        self.pool = ThreadPoolExecutor(max_workers=self.params.validate.workers)

    def teardown(self) -> None:
        self.pool.shutdown(wait=True)
        super().teardown()

    def process(self, batch: list[tuple[EnvProfile, Candidate]]):
        if self.unavailable is not None:
            for _, candidate in batch:
                yield self.reject_unavailable(candidate.candidate_id)
            return
        futures = {self.pool.submit(self._validate, p, c): c for p, c in batch}
        for future in as_completed(futures):
            candidate = futures[future]
            try:
                result, graded = future.result()
            except Exception as exc:  # the sandbox broke (engine gone, API error): not cached
                yield self.reject_sandbox_error(candidate.candidate_id, exc)
                continue
            yield from self._emit(candidate, result, gold=graded)

    def _validate(
        self, profile: EnvProfile, candidate: Candidate
    ) -> tuple[ValidationResult, GoldRuns | None]:
        """Validated, and when kept, graded in the same lane."""
        with self.lanes.held():
            return self._validated(profile, candidate)

    def _validated(
        self, profile: EnvProfile, candidate: Candidate
    ) -> tuple[ValidationResult, GoldRuns | None]:
        repo = open_source(candidate.source, SourceOptions.from_params(self.params))
        assert self.sandbox is not None
        try:
            base = TestTree.at(repo.path, candidate.base_commit, [candidate.test_patch])
            gold = TestTree.at(
                repo.path, candidate.base_commit, [candidate.test_patch, candidate.patch]
            )
        except UserError as exc:
            return rejected(candidate, exc.reason, str(exc), ()), None
        result = validate_candidate(
            self.sandbox,
            candidate,
            profile,
            base,
            gold,
            self.params.validate,
            _reading(profile),
            self.cache,
            self.lanes,
        )
        return self._graded(candidate, result, repo.path)


class ValidateMutantsFn(ValidateFn):
    """All injected bugs of one snapshot -> tasks / rejections / test runs (coverage-guided)."""

    def setup(self) -> None:
        super().setup()
        validate = self.params.validate
        self.audit = AuditBook(validate.audit_share, validate.audit_seed)  # the run's, per worker

    def process(self, element: tuple[tuple[str, str, str], Iterable[tuple[EnvProfile, Candidate]]]):
        _, members = element
        pairs = sorted(members, key=lambda pc: pc[1].candidate_id)
        profile, first = pairs[0]
        if self.unavailable is not None:
            for _, candidate in pairs:
                yield self.reject_unavailable(candidate.candidate_id)
            return
        repo = open_source(first.source, SourceOptions.from_params(self.params))
        clean = TestTree.at(repo.path, first.base_commit, [])
        mutations = []
        for _, candidate in pairs:
            try:
                mutations.append(mutation_of(repo.path, candidate, clean.tree_id))
            except UserError as exc:
                yield self.reject(
                    candidate.candidate_id, exc.reason, f"{candidate.candidate_id}: {exc}"
                )
        if not mutations:
            return
        try:
            batch = self._validate(repo.path, profile, clean, mutations)
        except Exception as exc:  # the sandbox broke (engine gone, API error): not cached
            for mutation in mutations:
                yield self.reject_sandbox_error(mutation.candidate.candidate_id, exc)
            return
        for run in batch.clean_runs:
            yield beam.pvalue.TaggedOutput(RUNS, run)
        self._count_outside_world(profile, batch.baseline)
        self._count_excluded(profile, batch.excluded)
        self.summary_count("audit_agreed", batch.audit_agreed)  # folded into `audit: ...`
        self.summary_count("audit_disagreed", batch.audit_disagreed)
        candidates = [mutation.candidate for mutation in mutations]
        kept = []
        tasks = 0
        for candidate, result, gold in self._graded_all(repo.path, candidates, batch.results):
            if isinstance(gold, Exception):  # the sandbox broke under its grading: not cached
                yield self.reject_sandbox_error(candidate.candidate_id, gold)
                continue
            yield from self._emit(candidate, result, batch.baseline, moved=True, gold=gold)
            tasks += result.task is not None
            # Rows imported from a dataset are checked, not grown: no combinations of them.
            if result.task is not None and "dataset" not in result.task.provenance:
                kept.append(result.task)
        # bugs no passing test runs: each paid a full run for nothing (inject.coverage_guided)
        wasted = sum(getattr(r.rejection, "reason", "") == "not_covered" for r in batch.results)
        self.summary_text("wasted", f"{first.repo} {wasted} of {len(mutations)} not_covered")
        self.summary_text("injected_kept", f"{first.repo} {tasks} of {len(mutations)} kept")
        yield from self._combinations(repo.path, profile, clean, kept)

    def _graded_all(
        self, repo_path: str, candidates: list[Candidate], results: Iterable[ValidationResult]
    ) -> list[tuple[Candidate, ValidationResult, GoldRuns | Exception | None]]:
        """Each kept bug's gold patch graded, ``workers`` at a time (the batch's own lanes,
        free again once its bugs are proven); in the bugs' order."""
        pairs = list(zip(candidates, results, strict=True))
        with ThreadPoolExecutor(max_workers=self.params.validate.workers) as pool:
            futures = [pool.submit(self._graded_in_lane, c, r, repo_path) for c, r in pairs]
            out: list[tuple[Candidate, ValidationResult, GoldRuns | Exception | None]] = []
            for (candidate, result), future in zip(pairs, futures, strict=True):
                try:
                    graded, gold = future.result()
                except Exception as exc:  # the sandbox's errors, reported per bug
                    out.append((candidate, result, exc))
                    continue
                out.append((candidate, graded, gold))
        return out

    def _graded_in_lane(
        self, candidate: Candidate, result: ValidationResult, repo_path: str
    ) -> tuple[ValidationResult, GoldRuns | None]:
        with self.lanes.held():
            return self._graded(candidate, result, repo_path)

    def _validate(
        self, repo_path: str, profile: EnvProfile, clean: TestTree, mutations: list[Mutation]
    ):
        assert self.sandbox is not None
        workers = self.params.validate.workers
        return language_named(profile.language).validate_mutations(
            self.sandbox, profile, repo_path, clean, mutations, self.params.validate, self.cache,
            workers, on_done=self._outcome, audit=self.audit,
        )  # fmt: skip

    def _count_outside_world(self, profile: EnvProfile, baseline: tuple[TestRun, ...]) -> None:
        """Tests that fail at the clean run for want of the network, a key or a service: not
        PASS_TO_PASS (they fail), counted, and named per profile in the summary."""
        found = outside_world_tests(baseline[0]) if baseline else {}
        if found:
            self.count("outside_world_tests", len(found))
            where = f"{profile.repo}@{profile.setup_commit[:12]} ({profile.profile_id[:12]})"
            self.summary_text("outside_world_tests", f"{where}: {describe(found)}")

    def _count_excluded(self, profile: EnvProfile, excluded: tuple[str, ...]) -> None:
        """Test modules the clean run could not import, left out so the rest decided: counted,
        and named with pytest's error per profile in the summary."""
        if excluded:
            self.count("excluded_at_clean", len(excluded))
            where = f"{profile.repo}@{profile.setup_commit[:12]} ({profile.profile_id[:12]})"
            said = "; ".join(excluded)
            self.summary_text("excluded_at_clean", f"{where}: {len(excluded)} ({said})")

    def _outcome(self, result: ValidationResult) -> None:
        """Each bug moves the bar as it finishes, not when its snapshot's batch does."""
        self.move("kept" if result.task is not None else getattr(result.rejection, "reason", ""))

    def _combinations(
        self, repo_path: str, profile: EnvProfile, clean: TestTree, kept: list[TaskInstance]
    ):
        """Harder tasks from the bugs just proven; validated the same way, cleanly cached."""
        inject = self.params.inject
        combos = combine_bugs(repo_path, kept, count=inject.combos, seed=inject.seed)
        if not combos:
            return
        self.more_units(len(combos))
        try:
            mutations = [mutation_of(repo_path, c.candidate, clean.tree_id) for c in combos]
            batch = self._validate(repo_path, profile, clean, mutations)
        except Exception as exc:  # the sandbox broke (engine gone, API error): not cached
            for combo in combos:
                yield self.reject_sandbox_error(combo.candidate.candidate_id, exc)
            return
        checked = [
            check_combination(result, combo.signatures)
            for combo, result in zip(combos, batch.results, strict=True)
        ]
        graded = self._graded_all(repo_path, [c.candidate for c in combos], checked)
        for candidate, result, gold in graded:
            self.count("combinations")  # the bar moved once, as it finished
            if isinstance(gold, Exception):
                yield self.reject_sandbox_error(candidate.candidate_id, gold)
                continue
            yield from self._emit(candidate, result, moved=True, gold=gold)


def label_figures(output: str) -> dict[str, object]:
    """The summary's "labels confirmed X of N" and tests per class, read from the written
    ``label_check`` table (so runners without metrics give them too); none without imports."""
    return label_figures_of(read_frame(table_files(output, LABEL_CHECK), LABEL_CHECK_COLUMNS))


def _reading(profile: EnvProfile) -> str | Reading:
    """How the profile's runs read: its language's report (``Language.reading``)."""
    return language_named(profile.language).reading(profile)


def _injected(candidate: Candidate) -> bool:
    return candidate.origin.startswith("bug/")


class ValidateCandidates(beam.PTransform):
    """Candidates -> {"tasks", "rejections", "profiles", "runs", "label_check"}."""

    def __init__(self, params: Params) -> None:
        super().__init__()
        self.params = params

    def expand(self, candidates):
        params = self.params
        audit = ReuseLabelAudit(params)
        envs = candidates | "Environments" >> BuildEnvironments(params, STAGE, _site, audit)
        mined = envs["ready"] | "Mined" >> beam.Filter(lambda pc: not _injected(pc[1]))
        injected = envs["ready"] | "Injected" >> beam.Filter(lambda pc: _injected(pc[1]))
        mutants = (
            injected
            | "KeyBySnapshot"
            >> beam.Map(lambda pc: ((pc[0].profile_id, pc[1].source, pc[1].base_commit), pc))
            | "GroupBySnapshot" >> beam.GroupByKey()
            | "ValidateMutants"
            >> beam.ParDo(ValidateMutantsFn(params)).with_outputs(
                REJECTED, RUNS, LABEL_CHECK, main="tasks"
            )
        )
        validated = (
            mined
            | "SpreadCandidates" >> beam.Reshuffle()
            | "Batch" >> beam.BatchElements(min_batch_size=BATCH, max_batch_size=BATCH)
            | "Validate"
            >> beam.ParDo(ValidateBatchFn(params)).with_outputs(
                REJECTED, RUNS, LABEL_CHECK, main="tasks"
            )
        )
        rejections = (
            envs["rejections"],
            validated[REJECTED],
            mutants[REJECTED],
        ) | "AllRejections" >> beam.Flatten()
        return {
            "tasks": (validated.tasks, mutants.tasks) | "AllTasks" >> beam.Flatten(),
            "rejections": rejections,
            "profiles": envs["profiles"],
            "runs": (validated[RUNS], mutants[RUNS]) | "AllRuns" >> beam.Flatten(),
            LABEL_CHECK: (validated[LABEL_CHECK], mutants[LABEL_CHECK])
            | "AllLabelChecks" >> beam.Flatten(),
        }
