"""The ``inject`` stage: source specs -> bug candidates (+ rejections), as one composite PTransform.

Each source is one snapshot; its mutants are sampled in one place so the seed alone decides them.
The candidates go to ``validate`` like mined ones, which groups them by snapshot again.
"""

from __future__ import annotations

import apache_beam as beam
from apache_beam.metrics import Metrics

from generators.bug_injector import STAGE, inject_snapshot
from generators.sources import open_source
from pipelines import progress
from pipelines.mine import REJECTED, source_options
from schemas.errors import UserError
from schemas.params import Params
from schemas.rejection import Rejection


class InjectSnapshotFn(beam.DoFn):
    def __init__(self, params: Params) -> None:
        self.params = params
        self.kept = Metrics.counter(STAGE, "candidates")

    def process(self, spec: str):
        try:
            repo = open_source(spec, source_options(self.params))
            result = inject_snapshot(repo, self.params.inject, self.params.mine.skip_globs)
        except UserError as exc:
            Metrics.counter(STAGE, f"rejected_{exc.reason}").inc()
            progress.tick(exc.reason)
            yield beam.pvalue.TaggedOutput(REJECTED, Rejection(spec, STAGE, exc.reason, str(exc)))
            return
        for rejection in result.rejections:
            Metrics.counter(STAGE, f"rejected_{rejection.reason}").inc()
            progress.tick(rejection.reason)
            yield beam.pvalue.TaggedOutput(REJECTED, rejection)
        for candidate in result.candidates:
            self.kept.inc()
            progress.tick("candidate")
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
