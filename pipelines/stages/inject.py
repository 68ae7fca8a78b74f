"""The ``inject`` stage: source specs -> bug candidates (+ rejections), as one composite PTransform.

Each snapshot is mutated by the operators of its language at its commit (Python or
JavaScript/TypeScript; ``snapshots_<language>`` counts them).

Each source is one snapshot; its mutants are sampled in one place so the seed alone decides them.
With ``inject.mode`` llm or both, a model rewrites functions of the snapshot too
(``llm.concurrency`` requests at a time, answers cached by request), and each answer it cannot use
is a counted rejection. The candidates go to ``validate`` like mined ones, which groups them by
snapshot again.
"""

from __future__ import annotations

import apache_beam as beam
from trajforge.generators.bugs.injector import STAGE, inject_snapshot, uses_llm
from trajforge.generators.llm.client import LLMClient, endpoint_configured
from trajforge.generators.sources.specs import SourceOptions, open_source
from trajforge.pipelines.runtime.stage_fn import REJECTED, StageFn
from trajforge.schemas.coverage_sites import NAMESPACE, CoveredLines, recall
from trajforge.schemas.errors import UserError
from trajforge.schemas.params import Params
from trajforge.schemas.storage import ContentCache


class InjectSnapshotFn(StageFn):
    """A source spec -> its snapshot's sampled mutants and model rewrites as candidates."""

    STAGE = STAGE

    def setup(self) -> None:
        llm = self.params.llm
        wanted = uses_llm(self.params.inject) and endpoint_configured(llm)
        self.client = LLMClient(llm, self.params.results_cache) if wanted else None
        # where validate left each measured snapshot's covered lines (schemas/coverage_sites.py)
        self.coverage = ContentCache(self.params.results_cache, NAMESPACE)

    def covered_at(self, tree_id: str) -> CoveredLines | None:
        return recall(self.coverage, tree_id)

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
                covered_at=self.covered_at,
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
        if result.rewrites:  # the summary's "functions a model rewrote" line
            self.summary_count("llm_rewrites", result.rewrites)
        for rejection in result.rejections:
            yield self.rejection(rejection)
        for candidate in result.candidates:
            self.tick("candidate")
            yield candidate


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
