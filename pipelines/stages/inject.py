"""The ``inject`` stage: source specs -> bug candidates (+ rejections), as one composite PTransform.

Each source is one snapshot; its mutants are sampled in one place so the seed alone decides them.
The candidates go to ``validate`` like mined ones, which groups them by snapshot again.
"""

from __future__ import annotations

import apache_beam as beam
from trajforge.generators.bugs.injector import STAGE, inject_snapshot
from trajforge.generators.sources.specs import SourceOptions, open_source
from trajforge.pipelines.runtime.stage_fn import REJECTED, StageFn
from trajforge.schemas.errors import UserError
from trajforge.schemas.params import Params


class InjectSnapshotFn(StageFn):
    """A source spec -> its snapshot's sampled mutants as candidates."""

    STAGE = STAGE

    def process(self, spec: str):
        try:
            repo = open_source(spec, SourceOptions.from_params(self.params))
            result = inject_snapshot(repo, self.params.inject, self.params.mine.skip_globs)
        except UserError as exc:
            yield self.reject_error(spec, exc)
            return
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
