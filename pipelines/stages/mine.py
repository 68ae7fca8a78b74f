"""The ``mine`` stage: sources -> candidates (+ rejections), as one composite PTransform."""

from __future__ import annotations

import apache_beam as beam
from trajforge.generators.mining.commits import has_tests, list_commits, mine_commit
from trajforge.generators.sources.specs import SourceOptions, open_source
from trajforge.pipelines.runtime.stage_fn import REJECTED, StageFn
from trajforge.schemas.candidate import Candidate
from trajforge.schemas.errors import UserError
from trajforge.schemas.params import Params


class ListCommitsFn(StageFn):
    """A source spec -> (spec, sha) for every commit to mine; a bad source is one rejection."""

    STAGE = "mine"

    def process(self, spec: str):
        try:
            repo = open_source(spec, SourceOptions.from_params(self.params))
            tested = has_tests(repo)
        except UserError as exc:
            yield self.reject_error(spec, exc)
            return
        if not tested:
            detail = (
                f"{repo.name}: no test files (Python: test_*.py, *_test.py, tests/; JS/TS: "
                "*.test.*, *.spec.*, __tests__/, test/); nothing to verify"
            )
            yield self.reject(spec, "no_tests", detail)
            return
        shas, rejections = list_commits(repo, self.params.mine)
        for rejection in rejections:
            yield self.rejection(rejection)
        for sha in shas:
            yield spec, sha


class MineCommitFn(StageFn):
    """(spec, sha) -> the commit as a candidate, or why it is not one."""

    STAGE = "mine"

    def process(self, element: tuple[str, str]):
        spec, sha = element
        try:
            repo = open_source(spec, SourceOptions.from_params(self.params))
            result = mine_commit(repo, sha, self.params.mine)
        except UserError as exc:
            yield self.reject_error(f"{spec}@{sha[:12]}", exc)
            return
        if isinstance(result, Candidate):
            self.tick("candidate")
            yield result
        else:
            yield self.rejection(result)


class MineRepos(beam.PTransform):
    """Source specs -> {"candidates", "rejections"}."""

    def __init__(self, params: Params) -> None:
        super().__init__()
        self.params = params

    def expand(self, specs):
        listed = specs | "ListCommits" >> beam.ParDo(ListCommitsFn(self.params)).with_outputs(
            REJECTED, main="commits"
        )
        mined = (
            listed.commits
            | "SpreadCommits" >> beam.Reshuffle()
            | "MineCommit"
            >> beam.ParDo(MineCommitFn(self.params)).with_outputs(REJECTED, main="candidates")
        )
        rejections = (listed[REJECTED], mined[REJECTED]) | "AllRejections" >> beam.Flatten()
        return {"candidates": mined.candidates, "rejections": rejections}
