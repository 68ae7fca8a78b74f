"""The ``validate`` stage: candidates -> proven tasks, as one composite PTransform.

Candidates are keyed by their environment profile, so each profile's image is built once (a
GroupByKey) and shared by all its commits. Mined candidates are then validated one by one in fresh
containers, ``workers`` at a time per Beam worker; injected bugs (``bug/*``) are grouped by the
snapshot they mutate and validated together, with coverage-guided test selection.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor

import apache_beam as beam
from apache_beam.metrics import Metrics

from generators.bug_combiner import combine_bugs
from generators.env_image import ALREADY_BUILT, BUILD_RECIPE, build_env_image
from generators.env_profile import JUNIT_PATH, detect_profile
from generators.git import apply_patches, archive, read_file_at
from generators.sources import open_source
from pipelines import progress
from pipelines.mine import source_options
from schemas.candidate import Candidate
from schemas.env_profile import EnvProfile
from schemas.errors import UserError
from schemas.params import Params
from schemas.records import content_id, from_row, to_row
from schemas.rejection import Rejection
from schemas.storage import ContentCache
from schemas.task_instance import TaskInstance
from verifiers.candidate_validator import (
    Snapshot,
    ValidationResult,
    rejected,
    validate_candidate,
)
from verifiers.mutant_validator import Mutation, check_combination, validate_mutations
from verifiers.patch_lines import touched_lines, with_statement_starts
from verifiers.sandbox import Sandbox
from verifiers.sandboxes import make_sandbox

REJECTED = "rejected"
PROFILES = "profiles"
RUNS = "runs"
STAGE = "validate"


def snapshot(repo_path: str, base_commit: str, patches: list[str]) -> Snapshot:
    """The tree a test run sees, applied in a throwaway index; its tar is made only if needed."""
    tree = apply_patches(repo_path, base_commit, patches)
    return Snapshot(tree, lambda: archive(repo_path, tree, prefix="repo/"))


def _reject(candidate: Candidate, reason: str, detail: str):
    Metrics.counter(STAGE, f"rejected_{reason}").inc()
    progress.tick(reason)
    return beam.pvalue.TaggedOutput(
        REJECTED, Rejection(candidate.candidate_id, STAGE, reason, detail)
    )


class DetectProfileFn(beam.DoFn):
    """Candidate -> (profile_id, (profile, candidate)), detected from the repo at base_commit."""

    def __init__(self, params: Params) -> None:
        self.params = params

    def process(self, candidate: Candidate):
        try:
            repo = open_source(candidate.source, source_options(self.params))
            profile = detect_profile(
                repo.path,
                candidate.base_commit,
                candidate.repo,
                default_python=self.params.environment.default_python,
                pythons=tuple(self.params.environment.pythons),
            )
        except UserError as exc:
            yield _reject(candidate, exc.reason, str(exc))
            return
        yield profile.profile_id, (profile, candidate)


class SandboxFn(beam.DoFn):
    """A DoFn holding one sandbox per worker; an unreachable engine becomes rejections."""

    def __init__(self, params: Params) -> None:
        self.params = params

    def setup(self) -> None:
        self.sandbox: Sandbox | None = None
        self.unavailable: UserError | None = None
        try:
            self.sandbox = make_sandbox(self.params, quiet=True)
        except UserError as exc:
            self.unavailable = exc

    def teardown(self) -> None:
        if self.sandbox is not None:
            self.sandbox.close()


class BuildEnvironmentFn(SandboxFn):
    """One image per profile, built at the profile's oldest commit, shared by all its candidates."""

    def setup(self) -> None:
        super().setup()
        self.failures = ContentCache(self.params.cache_dir, "build-failures")

    def process(self, element: tuple[str, Iterable[tuple[EnvProfile, Candidate]]]):
        profile_id, members = element
        pairs = sorted(members, key=lambda pc: (pc[1].created_at, pc[1].base_commit))
        profile, first = pairs[0]
        candidates = [candidate for _, candidate in pairs]
        if self.unavailable is not None:
            for candidate in candidates:
                yield _reject(candidate, self.unavailable.reason, str(self.unavailable))
            return
        try:
            built = self._build(profile, first)
        except UserError as exc:
            for candidate in candidates:
                yield _reject(candidate, exc.reason, str(exc))
            return
        yield beam.pvalue.TaggedOutput(PROFILES, built)
        if built.status != "built":
            tail = "\n".join(built.log.strip().splitlines()[-15:])
            for candidate in candidates:
                detail = f"{candidate.repo}: installing profile {profile_id} failed\n{tail}"
                yield _reject(candidate, "install_failed", detail)
            return
        for candidate in candidates:
            yield built, candidate

    def _build(self, profile: EnvProfile, first: Candidate) -> EnvProfile:
        failure_key = content_id(profile.profile_id, BUILD_RECIPE)
        known = self.failures.get(failure_key)
        if known is not None:
            return from_row(EnvProfile, known)
        repo = open_source(first.source, source_options(self.params))
        logs = os.path.join(self.params.cache_dir, "build-logs")
        assert self.sandbox is not None
        built = build_env_image(self.sandbox, profile, repo.path, self.params.environment, logs)
        if built.log != ALREADY_BUILT:
            Metrics.counter(STAGE, "images_built").inc()
        if built.status == "failed":
            self.failures.put(failure_key, to_row(built))
        return built


class ValidateBatchFn(SandboxFn):
    """A batch of (profile, candidate) -> tasks / rejections / test runs, ``workers`` at once."""

    def setup(self) -> None:
        super().setup()
        self.cache = ContentCache(self.params.cache_dir, "validate")
        self.pool = ThreadPoolExecutor(max_workers=self.params.validate.workers)
        self.cached = Metrics.counter(STAGE, "cache_hits")

    def teardown(self) -> None:
        self.pool.shutdown(wait=True)
        super().teardown()

    def process(self, batch: list[tuple[EnvProfile, Candidate]]):
        if self.unavailable is not None:
            for _, candidate in batch:
                yield _reject(candidate, self.unavailable.reason, str(self.unavailable))
            return
        futures = [(c, self.pool.submit(self._validate, p, c)) for p, c in batch]
        for candidate, future in futures:
            try:
                result = future.result()
            except Exception as exc:  # the sandbox broke (engine gone, API error): not cached
                yield _sandbox_error(candidate, exc)
                continue
            yield from _emit(candidate, result, self.cached)

    def _validate(self, profile: EnvProfile, candidate: Candidate) -> ValidationResult:
        repo = open_source(candidate.source, source_options(self.params))
        assert self.sandbox is not None
        try:
            base = snapshot(repo.path, candidate.base_commit, [candidate.test_patch])
            gold = snapshot(
                repo.path, candidate.base_commit, [candidate.test_patch, candidate.patch]
            )
        except UserError as exc:
            return rejected(candidate, exc.reason, str(exc), ())
        return validate_candidate(
            self.sandbox,
            candidate,
            profile,
            base,
            gold,
            self.params.validate,
            JUNIT_PATH,
            self.cache,
        )


class ValidateMutantsFn(SandboxFn):
    """All injected bugs of one snapshot -> tasks / rejections / test runs (coverage-guided)."""

    def setup(self) -> None:
        super().setup()
        self.cache = ContentCache(self.params.cache_dir, "validate")
        self.cached = Metrics.counter(STAGE, "cache_hits")

    def process(self, element: tuple[tuple[str, str, str], Iterable[tuple[EnvProfile, Candidate]]]):
        _, members = element
        pairs = sorted(members, key=lambda pc: pc[1].candidate_id)
        profile, first = pairs[0]
        if self.unavailable is not None:
            for _, candidate in pairs:
                yield _reject(candidate, self.unavailable.reason, str(self.unavailable))
            return
        repo = open_source(first.source, source_options(self.params))
        clean = snapshot(repo.path, first.base_commit, [])
        mutations = []
        for _, candidate in pairs:
            try:
                mutations.append(mutation_of(repo.path, candidate, clean.tree_id))
            except UserError as exc:
                yield _reject(candidate, exc.reason, f"{candidate.candidate_id}: {exc}")
        if not mutations:
            return
        try:
            batch = self._validate(profile, clean, mutations)
        except Exception as exc:  # the sandbox broke (engine gone, API error): not cached
            for mutation in mutations:
                yield _sandbox_error(mutation.candidate, exc)
            return
        for run in batch.clean_runs:
            yield beam.pvalue.TaggedOutput(RUNS, run)
        for mutation, result in zip(mutations, batch.results, strict=True):
            yield from _emit(mutation.candidate, result, self.cached)
        kept = [result.task for result in batch.results if result.task is not None]
        yield from self._combinations(repo.path, profile, clean, kept)

    def _validate(self, profile: EnvProfile, clean: Snapshot, mutations: list[Mutation]):
        assert self.sandbox is not None
        workers = self.params.validate.workers
        return validate_mutations(
            self.sandbox, profile, clean, mutations, self.params.validate, JUNIT_PATH, self.cache,
            workers,
        )  # fmt: skip

    def _combinations(
        self, repo_path: str, profile: EnvProfile, clean: Snapshot, kept: list[TaskInstance]
    ):
        """Harder tasks from the bugs just proven; validated the same way, cleanly cached."""
        inject = self.params.inject
        combos = combine_bugs(repo_path, kept, count=inject.combos, seed=inject.seed)
        if not combos:
            return
        try:
            mutations = [mutation_of(repo_path, c.candidate, clean.tree_id) for c in combos]
            batch = self._validate(profile, clean, mutations)
        except Exception as exc:  # the sandbox broke (engine gone, API error): not cached
            for combo in combos:
                yield _sandbox_error(combo.candidate, exc)
            return
        for combo, result in zip(combos, batch.results, strict=True):
            progress.tick("combination")
            yield from _emit(
                combo.candidate, check_combination(result, combo.signatures), self.cached
            )


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


def _emit(candidate: Candidate, result: ValidationResult, cached):
    """A validation result as the stage's outputs: runs, then the task or its rejection."""
    if result.cached:
        cached.inc()
    for run in result.runs:
        yield beam.pvalue.TaggedOutput(RUNS, run)
    if result.task is not None:
        Metrics.counter(STAGE, "kept").inc()
        progress.tick("kept")
        yield result.task
    elif result.rejection is not None:
        yield _reject(candidate, result.rejection.reason, result.rejection.detail)


def _injected(candidate: Candidate) -> bool:
    return candidate.origin.startswith("bug/")


def _sandbox_error(candidate: Candidate, exc: Exception):
    detail = f"{candidate.candidate_id}: sandbox error {exc.__class__.__name__}: {exc}"
    return _reject(candidate, "sandbox_error", detail.splitlines()[0])


class ValidateCandidates(beam.PTransform):
    """Candidates -> {"tasks", "rejections", "profiles", "runs"}."""

    def __init__(self, params: Params) -> None:
        super().__init__()
        self.params = params

    def expand(self, candidates):
        params = self.params
        workers = params.validate.workers
        profiled = candidates | "DetectProfile" >> beam.ParDo(DetectProfileFn(params)).with_outputs(
            REJECTED, main="profiled"
        )
        envs = (
            profiled.profiled
            | "GroupByProfile" >> beam.GroupByKey()
            | "BuildEnvironment"
            >> beam.ParDo(BuildEnvironmentFn(params)).with_outputs(REJECTED, PROFILES, main="ready")
        )
        mined = envs.ready | "Mined" >> beam.Filter(lambda pc: not _injected(pc[1]))
        injected = envs.ready | "Injected" >> beam.Filter(lambda pc: _injected(pc[1]))
        mutants = (
            injected
            | "KeyBySnapshot"
            >> beam.Map(lambda pc: ((pc[0].profile_id, pc[1].source, pc[1].base_commit), pc))
            | "GroupBySnapshot" >> beam.GroupByKey()
            | "ValidateMutants"
            >> beam.ParDo(ValidateMutantsFn(params)).with_outputs(REJECTED, RUNS, main="tasks")
        )
        validated = (
            mined
            | "SpreadCandidates" >> beam.Reshuffle()
            | "Batch" >> beam.BatchElements(min_batch_size=workers, max_batch_size=workers * 4)
            | "Validate"
            >> beam.ParDo(ValidateBatchFn(params)).with_outputs(REJECTED, RUNS, main="tasks")
        )
        rejections = (
            profiled[REJECTED],
            envs[REJECTED],
            validated[REJECTED],
            mutants[REJECTED],
        ) | "AllRejections" >> beam.Flatten()
        return {
            "tasks": (validated.tasks, mutants.tasks) | "AllTasks" >> beam.Flatten(),
            "rejections": rejections,
            "profiles": envs[PROFILES],
            "runs": (validated[RUNS], mutants[RUNS]) | "AllRuns" >> beam.Flatten(),
        }
