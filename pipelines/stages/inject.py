"""The ``inject`` stage: source specs -> bug candidates (+ rejections), as one composite PTransform.

Each snapshot is mutated by the operators of its language at its commit (Python or
JavaScript/TypeScript; ``snapshots_<language>`` counts them).

Each source is one snapshot; its mutants are sampled in one place so the seed alone decides them.
With ``inject.coverage_guided``, sites come from the lines the clean suite's passing tests run: the
results cache's, else measured here by validate's clean run (``inject_coverage.py``); the summary
says per repository how many sites were on executed lines and how many bugs were drawn.
With ``inject.mode`` llm or both, a model rewrites functions of the snapshot too
(``llm.concurrency`` requests at a time, answers cached by request), and each answer it cannot use
is a counted rejection. The candidates go to ``validate`` like mined ones, which groups them by
snapshot again.
"""

from __future__ import annotations

import apache_beam as beam
from trajforge.generators.bugs.injector import STAGE, InjectionResult, inject_snapshot, uses_llm
from trajforge.generators.bugs.sites import CoverageSource
from trajforge.generators.llm.client import LLMClient, endpoint_configured
from trajforge.generators.sources.specs import RepoRef, SourceOptions, open_source
from trajforge.pipelines.runtime.stage_fn import REJECTED, StageFn
from trajforge.pipelines.stages.inject_coverage import MEASURED, OFF, RECALLED, FirstCoverage
from trajforge.schemas.coverage_sites import CoveredLines
from trajforge.schemas.errors import UserError
from trajforge.schemas.params import Params


class InjectSnapshotFn(StageFn):
    """A source spec -> its snapshot's sampled mutants and model rewrites as candidates."""

    STAGE = STAGE

    def setup(self) -> None:
        llm = self.params.llm
        wanted = uses_llm(self.params.inject) and endpoint_configured(llm)
        self.client = LLMClient(llm, self.params.results_cache) if wanted else None
        # each snapshot's covered lines: validate's, else measured here on first contact
        self.coverage = FirstCoverage(self.params, STAGE, self.count)

    def teardown(self) -> None:
        self.coverage.close()

    def covered_at(self, repo: RepoRef) -> CoverageSource:
        """The snapshot's covered lines (cached or measured), its source counted."""

        def look_up(commit: str, tree_id: str) -> CoveredLines | None:
            found = self.coverage.find(repo, commit, tree_id)
            if found.how in (MEASURED, RECALLED):
                self.summary_count(f"coverage_{found.how}")
            elif found.how != OFF:  # one line per snapshot: why it is sampled unguided
                self.summary_count(f"coverage_unmeasured_{found.how}")
                why = found.detail.removeprefix(f"{repo.name}: ")
                self.summary_text("coverage_unmeasured", f"{repo.name}: {found.how}: {why}")
            return found.covered

        return look_up

    def process(self, spec: str):
        before = (self.client.calls, self.client.cache_hits) if self.client else (0, 0)
        try:
            repo = open_source(spec, SourceOptions.from_params(self.params))
            result = inject_snapshot(
                repo,
                self.params.inject,
                self.params.mine.skip_globs,
                self.client,
                workers=self.params.llm.concurrency,
                covered_at=self.covered_at(repo),
            )
        except UserError as exc:
            yield self.reject_error(spec, exc)
            return
        finally:
            if self.client is not None:
                self.count("llm_calls", self.client.calls - before[0])
                self.count("llm_cache_hits", self.client.cache_hits - before[1])
        self.count(f"snapshots_{result.language}")  # how many snapshots of each language
        if result.moved:  # the summary's line: which older commit was taken, and why
            self.count("older_commits")
            self.summary_text("older_commit_taken", result.moved)
        if result.guided is not None:  # sites from the covered lines, or not (nothing known)
            self.summary_count("sites_guided" if result.guided else "sites_unguided")
        self._report_sites(repo, result)
        if result.rewrites:  # the summary's "functions a model rewrote" line
            self.summary_count("llm_rewrites", result.rewrites)
        for rejection in result.rejections:
            yield self.rejection(rejection)
        for candidate in result.candidates:
            self.tick("candidate")
            yield candidate

    def _report_sites(self, repo: RepoRef, result: InjectionResult) -> None:
        """Per repository: operator sites on executed lines of all looked at, bugs drawn."""
        drawn = len(result.candidates)
        if result.sites is None:
            self.summary_text("sites", f"{repo.name}: coverage unknown, {drawn} bugs drawn")
            return
        executed, total = result.sites
        self.summary_count("sites_executed", executed)
        self.summary_count("sites_total", total)
        line = f"{repo.name}: {executed}/{total} sites executed, {drawn} bugs drawn"
        self.summary_text("sites", line)


class InjectBugs(beam.PTransform):
    """Source specs -> {"candidates", "rejections"}."""

    def __init__(self, params: Params) -> None:
        super().__init__()
        self.params = params

    def expand(self, specs):
        injected = specs | "InjectSnapshot" >> beam.ParDo(
            InjectSnapshotFn(self.params)
        ).with_outputs(REJECTED, main="candidates")
        return {"candidates": injected.candidates, "rejections": injected[REJECTED]}
