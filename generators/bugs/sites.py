"""Where to inject: where the snapshot's passing tests look, once their lines are measured.

A bug in a line no passing test runs can never fail a test: validate calls it ``not_covered``
after paying for its run. When the clean snapshot's covered lines are known
(schemas/coverage_sites.py), an operator's edit is drawn only where a passing test executes its
lines, and a model rewrites only functions with such a line in their body (the ``def`` line alone
does not count: importing a module runs it without calling the function). With nothing known, or
nothing covered to mutate, sampling is exactly as without guidance, and the result says so
(``guided`` False: ``sites_unguided``). The lines come from validate's clean run, whether validate
or inject's first contact (pipelines/stages/inject_coverage.py) made it: ``CoverageSource``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

from trajforge.generators.mutants.targets import FunctionTarget
from trajforge.schemas.coverage_sites import CoveredLines
from trajforge.verifiers.sandbox.git_tree import git

T = TypeVar("T")
R = TypeVar("R")

# (commit, its git tree) -> the lines the snapshot's passing tests execute, or None (unknown)
CoverageSource = Callable[[str, str], CoveredLines | None]


@dataclass
class Guide:
    covered: CoveredLines | None
    guided: bool | None  # None: guidance off; False: sampled unguided; True: from covered lines
    sites: int = 0  # operator sites (edits) the guided draw looked at
    executed: int = 0  # of them, those on a line a passing test executes

    def executes(self, path: str, first: int, last: int) -> bool:
        """A passing test executed a line in ``first..last`` (an edit's lines)."""
        assert self.covered is not None
        hit = self.covered.runs_any(path, first, last)
        self.sites += 1
        self.executed += hit
        return hit

    def runs(self, target: FunctionTarget) -> bool:
        """A passing test executed a line of the function's body."""
        assert self.covered is not None
        first = target.start_line + 1 if target.end_line > target.start_line else target.start_line
        return self.covered.runs_any(target.path, first, target.end_line)

    def sample(self, draw: Callable[[Guide | None], tuple[list[T], R]]) -> tuple[list[T], R]:
        """``draw`` restricted by this guide; unrestricted (None) when that finds nothing."""
        if self.covered is not None:
            found = draw(self)
            if found[0]:
                self.guided = self.guided is not False
                return found
            self.guided = False
        return draw(None)


def guide_for(repo_path: str, commit: str, covered_at: CoverageSource | None) -> Guide:
    """The guide for one snapshot: ``covered_at`` looks it up (None: guidance off)."""
    if covered_at is None:
        return Guide(None, None)
    tree = git(repo_path, "rev-parse", f"{commit}^{{tree}}").decode().strip()
    covered = covered_at(commit, tree)
    return Guide(covered, None if covered is not None else False)
