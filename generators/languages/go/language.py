"""Go as a ``Language``: go.mod projects (modules, go.work workspaces, monorepos of modules),
Debian's Go or the toolchain go.mod names, ``go test -json``.

Each answer is a module of this package: detection (``detection.py``), the Go chosen
(``toolchain.py``), the recipe and base image (``recipe.py``, ``base_image.py``), the test
command (``runners.py``), the site's profile, image and reading (``profile.py``); test files,
operators and their sampler, the issue text and prompts are the mining side's
(``test_files.py``, ``operators.py``, ``mutations.py``, ``issue_context.py``, ``prompts.py``);
another profile's image serves a commit when ``reuse_probe.py`` loads it there offline.
The stage-only and tree-sitter modules are imported when asked for: the registry is read by
every stage, most of which build nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, ClassVar

from trajforge.generators.languages.base import Detection, IssueText, ReportError
from trajforge.generators.languages.go import detection as project
from trajforge.generators.languages.go.base_image import GO_BASE, ensure_go_base_image
from trajforge.generators.languages.go.issue_context import GoIssueText
from trajforge.generators.languages.go.prompts import AGENT_SYSTEM, ISSUE_PROMPT
from trajforge.generators.languages.go.recipe import recipe
from trajforge.generators.languages.go.runners import REPORT_PATH, test_command
from trajforge.generators.languages.recipe_language import RecipeLanguage

if TYPE_CHECKING:
    from trajforge.generators.environments.recipe_site import RecipeSite
    from trajforge.generators.mutants.byte_edits import Mutator
    from trajforge.schemas.env_profile import EnvProfile
    from trajforge.schemas.params import Params
    from trajforge.verifiers.sandbox.base import ImageStore, Sandbox

__all__ = ["REPORT_PATH", "Go"]


class Go(RecipeLanguage):
    name: ClassVar[str] = project.NAME
    aliases: ClassVar[tuple[str, ...]] = ("golang",)
    issue_text: ClassVar[IssueText] = GoIssueText(ISSUE_PROMPT)
    nested_project_files: ClassVar[tuple[str, ...]] = ("go.mod",)  # a monorepo's modules

    def detect(self, repo_dir: str) -> Detection | None:
        return project.detect(repo_dir)

    def base_image(self, detection: Detection) -> str:
        return GO_BASE

    def ensure_base_image(
        self, store: ImageStore, recipe: str, say: Callable[[str], None] | None
    ) -> None:
        """``trajforge-base:go``, made on demand in Docker's store (``base_image.py``)."""
        if GO_BASE in recipe and getattr(store, "name", "") == "docker":
            ensure_go_base_image(getattr(store, "docker_host", None), say or (lambda line: None))

    def render_recipe(self, detection: Detection, install: Sequence[str] = ()) -> str:
        return recipe(detection, install)

    def test_command(
        self, detection: Detection, selection: Sequence[str] = (), per_test_timeout_s: int = 0
    ) -> str:
        """``go test -json`` in every module's folder, the selection's packages appended."""
        return test_command(detection, selection, per_test_timeout_s)

    def report_path(self, detection: Detection) -> str:
        return REPORT_PATH

    def parse_report(self, text: str, runner: str) -> dict[str, str]:
        """The events' statuses; without the recipe's modules, package ids are import paths
        (``test_events.py``: a package no module names keeps its path)."""
        from trajforge.verifiers.languages.go.test_events import parse_test_events

        parsed = parse_test_events(text, {})
        if parsed.collection_errors and not parsed.statuses:
            raise ReportError(parsed.collection_errors[0][:300])
        return parsed.statuses

    def is_test_file(self, path: str) -> bool:
        from trajforge.generators.languages.go.test_files import is_test_file

        return is_test_file(path)

    def bug_operators(self) -> Mapping[str, object]:
        from trajforge.generators.languages.go.operators import GO_OPERATORS

        return GO_OPERATORS

    def is_source_file(self, path: str) -> bool:
        from trajforge.generators.languages.go.test_files import is_source_file

        return is_source_file(path)

    def is_generated(self, path: str) -> bool:
        from trajforge.generators.languages.go.test_files import is_generated

        return is_generated(path)

    def is_library_source(self, path: str) -> bool:
        from trajforge.generators.languages.go.test_files import is_library_source

        return is_library_source(path)

    def is_suite_file(self, path: str) -> bool:
        from trajforge.generators.languages.go.test_files import is_suite_file

        return is_suite_file(path)

    def mutator(self) -> Mutator[Any]:
        """tree-sitter's Go operators (``mutations.py``)."""
        from trajforge.generators.languages.go.mutations import GO_MUTATOR

        return GO_MUTATOR

    def agent_system_prompt(self, test_cmd: str) -> str:
        return AGENT_SYSTEM.format(test_cmd=test_cmd)

    def site(self) -> RecipeSite:
        """Its profile, image and reading (``profile.py``)."""
        from trajforge.generators.languages.go.profile import GO_SITE

        return GO_SITE

    def toolchain_line(self, profile: EnvProfile) -> str:
        """The Go line (1.22): what reuse's line compares."""
        return f"go {'.'.join(profile.runtime.split('.')[:2])}"

    def probe_reuse(
        self,
        sandbox: Sandbox,
        donor: EnvProfile,
        site: EnvProfile,
        repo_path: str,
        commit: str,
        params: Params,
    ) -> tuple[EnvProfile | None, int, str]:
        """Every module of ``commit`` loaded offline in the donor's image (``reuse_probe.py``)."""
        from trajforge.generators.languages.go.reuse_probe import probe_reuse

        return probe_reuse(sandbox, donor, site, repo_path, commit, params)
