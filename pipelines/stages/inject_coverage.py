"""Inject's first contact with a snapshot: its covered lines measured when nothing is known yet.

Guided injection (generators/bugs/sites.py) draws sites from the lines the clean suite's passing
tests execute. validate leaves them in the results cache (schemas/coverage_sites.py) after its
clean run, so without this the first inject on a repository is blind and most of its bugs in an
application repository land where no test looks (``not_covered``). Here, with
``inject.measure_coverage`` on and nothing cached for the snapshot's tree, inject makes validate's
clean run itself: the profile validate would detect, its environment prepared as validate prepares
it (``environment.prepare_profile``, cached by the profile's id) and the clean run under
coverage as validate runs and caches it (``Language.covered_lines``). validate then finds both
the environment and the clean run cached, and later injects find the lines.

An environment that does not build, a clean run that fails, a language with no per-test coverage
run or no sandbox: the snapshot is sampled unguided, and the reason is one counted line.
"""

from __future__ import annotations

from dataclasses import dataclass

from trajforge.generators.environments.prepare import Count
from trajforge.generators.languages.at_commit import language_at
from trajforge.generators.sources.specs import RepoRef
from trajforge.pipelines.stages.environment import prepare_profile
from trajforge.schemas.coverage_sites import NAMESPACE, CoveredLines, recall
from trajforge.schemas.errors import UserError
from trajforge.schemas.params import Params
from trajforge.schemas.storage import ContentCache
from trajforge.verifiers.sandbox.base import Sandbox
from trajforge.verifiers.sandbox.factory import make_sandbox
from trajforge.verifiers.validation.candidate import TestTree

RECALLED = "recalled"  # the cache had the lines (validate's, or an earlier inject's)
MEASURED = "measured"  # this inject ran the clean suite for them
OFF = "off"  # inject.measure_coverage false and nothing cached


@dataclass(frozen=True)
class Found:
    """A snapshot's covered lines and where they came from, or why there are none."""

    covered: CoveredLines | None
    how: str  # RECALLED, MEASURED, OFF, or the reason nothing was measured
    detail: str = ""  # one line: why nothing was measured


class FirstCoverage:
    """One worker's lookups: the cache first, else one clean run; the sandbox made on first
    need, so an inject whose snapshots are all known (or that measures nothing) starts none."""

    def __init__(self, params: Params, stage: str, count: Count) -> None:
        self.params, self.stage, self.count = params, stage, count
        self.cache = ContentCache(params.results_cache, NAMESPACE)
        self.sandbox: Sandbox | None = None
        self.unavailable: UserError | None = None

    def close(self) -> None:
        if self.sandbox is not None:
            self.sandbox.close()
            self.sandbox = None

    def find(self, repo: RepoRef, commit: str, tree_id: str) -> Found:
        known = recall(self.cache, tree_id)
        if known is not None:
            return Found(known, RECALLED)
        if not self.params.inject.measure_coverage:
            return Found(None, OFF)
        try:
            return Found(self._measure(repo, commit), MEASURED)
        except UserError as exc:
            return Found(None, exc.reason, _one_line(str(exc)))
        except Exception as exc:  # the engine's own errors: inject goes on, unguided
            return Found(None, "sandbox_error", _one_line(f"{type(exc).__name__}: {exc}"))

    def _measure(self, repo: RepoRef, commit: str) -> CoveredLines:
        language = language_at(repo.path, commit)
        if not language.measures_coverage:  # nothing to build an environment for
            raise UserError(
                f"{repo.name}: {language.name} has no per-test coverage run",
                reason="no_coverage_run",
            )
        profile = language.site_profile(repo.path, commit, repo.name, repo.identity, self.params)
        sandbox = self._sandbox()
        prepared = prepare_profile(
            sandbox, profile, repo.path, commit, self.params, self.stage, self.count
        )
        if prepared.reason:  # install_failed, collection_failed, no_tests...
            raise UserError(prepared.detail or prepared.reason, reason=prepared.reason)
        clean = TestTree.at(repo.path, commit, [])
        covered = language.covered_lines(
            sandbox, prepared.profile, clean, self.params.validate, self.cache
        )
        if covered is None:
            raise UserError(f"{repo.name}: the clean run measured nothing", reason="no_coverage")
        return covered

    def _sandbox(self) -> Sandbox:
        if self.unavailable is not None:
            raise self.unavailable
        if self.sandbox is None:
            try:
                self.sandbox = make_sandbox(self.params, quiet=True, spares=0)
            except UserError as exc:
                self.unavailable = exc
                raise
        return self.sandbox


def _one_line(text: str) -> str:
    lines = text.strip().splitlines()
    return lines[0][:300] if lines else ""
