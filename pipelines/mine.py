"""The ``mine`` stage: sources -> candidates (+ rejections), as one composite PTransform."""

from __future__ import annotations

import apache_beam as beam
from apache_beam.metrics import Metrics

from generators.commit_miner import has_tests, list_commits, mine_commit
from generators.sources import SourceOptions, open_source
from pipelines import progress
from schemas.candidate import Candidate
from schemas.errors import UserError
from schemas.params import Params
from schemas.rejection import Rejection

REJECTED = "rejected"


def source_options(params: Params) -> SourceOptions:
    return SourceOptions(
        cache_dir=params.cache_dir,
        max_releases=params.sources.max_releases,
        pypi_url=params.sources.pypi_url,
    )


class ListCommitsFn(beam.DoFn):
    """A source spec -> (spec, sha) for every commit to mine; a bad source is one rejection."""

    def __init__(self, params: Params) -> None:
        self.params = params

    def process(self, spec: str):
        try:
            repo = open_source(spec, source_options(self.params))
        except UserError as exc:
            yield beam.pvalue.TaggedOutput(REJECTED, Rejection(spec, "mine", exc.reason, str(exc)))
            return
        if not has_tests(repo):
            detail = f"{repo.name}: no test files (test_*.py, *_test.py, tests/); nothing to verify"
            yield beam.pvalue.TaggedOutput(REJECTED, Rejection(spec, "mine", "no_tests", detail))
            return
        shas, rejections = list_commits(repo, self.params.mine)
        for rejection in rejections:
            yield beam.pvalue.TaggedOutput(REJECTED, rejection)
        for sha in shas:
            yield spec, sha


class MineCommitFn(beam.DoFn):
    def __init__(self, params: Params) -> None:
        self.params = params
        self.kept = Metrics.counter("mine", "candidates")

    def process(self, element: tuple[str, str]):
        spec, sha = element
        try:
            repo = open_source(spec, source_options(self.params))
            result = mine_commit(repo, sha, self.params.mine)
        except UserError as exc:
            result = Rejection(f"{spec}@{sha[:12]}", "mine", exc.reason, str(exc))
        if isinstance(result, Candidate):
            self.kept.inc()
            progress.tick("candidate")
            yield result
        else:
            Metrics.counter("mine", f"rejected_{result.reason}").inc()
            progress.tick(result.reason)
            yield beam.pvalue.TaggedOutput(REJECTED, result)


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
