"""A language whose environment is its recipe's image and whose bugs are byte edits on a
tree-sitter tree (Go, JavaScript): the answers such languages share, written once.

A subclass names its two parts, each imported when asked for (the registry is read by every
stage, most of which build nothing, and tree-sitter is for injecting): ``site()``, how a commit
becomes a profile, an image and the reading of its runs (``environments/recipe_site.py``), and
``mutator()``, its operators and their sampler (``mutants/byte_edits.py``). Its injected bugs are
proven by ``Language``'s default, a full run per bug read through ``reading``.
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from trajforge.generators.languages.base import Language, SiteGuide, Unparsable
from trajforge.generators.mutants.mutant import Mutant

if TYPE_CHECKING:
    from trajforge.generators.environments.prepare import Count, Prepared
    from trajforge.generators.environments.recipe_site import RecipeSite
    from trajforge.generators.mutants.byte_edits import Mutator
    from trajforge.schemas.env_profile import EnvProfile
    from trajforge.schemas.params import Params
    from trajforge.verifiers.sandbox.base import Sandbox
    from trajforge.verifiers.test_runner import Reading


class RecipeLanguage(Language):
    """Profile, image and reading from ``site()``; procedural bugs from ``mutator()``."""

    @abstractmethod
    def site(self) -> RecipeSite:
        """The language's profile, build and reading (its ``profile.py``)."""

    @abstractmethod
    def mutator(self) -> Mutator[Any]:
        """The language's tree-sitter operators and their sampler (its ``mutations.py``)."""

    def sample_mutants(
        self,
        files: Mapping[str, str],
        *,
        seed: int,
        max_mutants: int,
        operators: Sequence[str],
        min_complexity: int,
        guide: SiteGuide | None,
    ) -> tuple[list[Mutant], Unparsable]:
        """The mutator's draw, only at edits whose lines a passing test runs (with a guide)."""
        return self.mutator().sample(
            files, seed=seed, max_mutants=max_mutants, operators=operators,
            min_complexity=min_complexity, guide=guide,
        )  # fmt: skip

    def site_profile(
        self, repo_path: str, commit: str, repo: str, identity: str, params: Params
    ) -> EnvProfile:
        """Detected at the commit's tree, with its runtime and its runner's command."""
        return self.site().profile(repo_path, commit, repo, identity, params)

    def prepare(
        self,
        sandbox: Sandbox,
        profile: EnvProfile,
        repo_path: str,
        commit: str,
        params: Params,
        *,
        count: Count,
        fetch: Callable[[str], None] | None,
        say: Callable[[str], None],
    ) -> Prepared:
        """Built from its recipe at ``commit``; no collection probe (each item's run decides),
        no registry (``fetch`` unused)."""
        return self.site().build(sandbox, profile, repo_path, commit, params, say)

    def reading(self, profile: EnvProfile) -> Reading:
        return self.site().reading(profile)
