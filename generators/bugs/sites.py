"""Where to inject: functions the snapshot's passing tests execute, when validate has measured it.

A bug in a line no passing test runs can never fail a test: validate calls it ``not_covered``
after paying for its run. When the clean snapshot's covered lines are known
(schemas/coverage_sites.py), mutation sites and model rewrites are drawn only from functions with
a covered line in their body; the ``def`` line itself does not count, since importing a module
runs it without calling the function. With nothing known, or nothing covered to mutate, sampling
is exactly as without guidance, and the result says so (``guided`` False: ``sites_unguided``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

from trajforge.generators.bugs.mutations import FunctionTarget
from trajforge.schemas.coverage_sites import CoveredLines
from trajforge.verifiers.sandbox.git_tree import git

T = TypeVar("T")
R = TypeVar("R")
Include = Callable[[FunctionTarget], bool]


@dataclass
class Guide:
    covered: CoveredLines | None
    guided: bool | None  # None: guidance off; False: sampled unguided; True: from covered lines

    def runs(self, target: FunctionTarget) -> bool:
        """A passing test executed a line of the function's body."""
        assert self.covered is not None
        first = target.start_line + 1 if target.end_line > target.start_line else target.start_line
        return self.covered.runs_any(target.path, first, target.end_line)

    def sample(self, draw: Callable[[Include | None], tuple[list[T], R]]) -> tuple[list[T], R]:
        """``draw`` restricted to covered functions; unrestricted when that finds nothing."""
        if self.covered is not None:
            found = draw(self.runs)
            if found[0]:
                self.guided = self.guided is not False
                return found
            self.guided = False
        return draw(None)


def guide_for(
    repo_path: str, commit: str, covered_at: Callable[[str], CoveredLines | None] | None
) -> Guide:
    """The guide for one snapshot: ``covered_at`` looks its git tree up (None: guidance off)."""
    if covered_at is None:
        return Guide(None, None)
    tree = git(repo_path, "rev-parse", f"{commit}^{{tree}}").decode().strip()
    covered = covered_at(tree)
    return Guide(covered, None if covered is not None else False)
