"""Go as a ``Language``: go.mod projects (modules, go.work workspaces, monorepos of modules),
Debian's Go or the toolchain go.mod names, ``go test -json``.

Each answer is a module of this package: detection (``detection.py``), the Go chosen
(``toolchain.py``), the recipe and base image (``recipe.py``, ``base_image.py``), the test
command (``runners.py``), the site's profile, image and reading (``profile.py``); test files,
operators and their sampler, the issue text and prompts are the mining side's
(``test_files.py``, ``operators.py``, ``mutations.py``, ``issue_context.py``, ``prompts.py``).
The stage-only and tree-sitter modules are imported when asked for: the registry is read by
every stage, most of which build nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, ClassVar

from trajforge.generators.languages.base import (
    Detection,
    IssueText,
    Language,
    ReportError,
    SiteGuide,
    Unparsable,
)
from trajforge.generators.languages.go import detection as project
from trajforge.generators.languages.go.base_image import GO_BASE, ensure_go_base_image
from trajforge.generators.languages.go.issue_context import GoIssueText
from trajforge.generators.languages.go.prompts import AGENT_SYSTEM, ISSUE_PROMPT
from trajforge.generators.languages.go.recipe import recipe
from trajforge.generators.languages.go.runners import REPORT_PATH, test_command
from trajforge.generators.mutants.mutant import Mutant

if TYPE_CHECKING:
    from trajforge.generators.environments.prepare import Count, Prepared
    from trajforge.schemas.env_profile import EnvProfile
    from trajforge.schemas.params import Params, ValidateParams
    from trajforge.schemas.storage import ContentCache
    from trajforge.verifiers.sandbox.base import ImageStore, Sandbox
    from trajforge.verifiers.test_runner import Reading
    from trajforge.verifiers.validation.candidate import TestTree, ValidationResult
    from trajforge.verifiers.validation.mutants import AuditBook, BatchResult, Mutation

__all__ = ["REPORT_PATH", "Go"]


class Go(Language):
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
        """tree-sitter's Go operators (``mutations.py``)."""
        from trajforge.generators.languages.go.mutations import sample_go_mutants

        return sample_go_mutants(
            files,
            seed=seed,
            max_mutants=max_mutants,
            operators=operators,
            min_complexity=min_complexity,
            guide=guide,
        )

    def agent_system_prompt(self, test_cmd: str) -> str:
        return AGENT_SYSTEM.format(test_cmd=test_cmd)

    def site_profile(
        self, repo_path: str, commit: str, repo: str, identity: str, params: Params
    ) -> EnvProfile:
        """Detected at the commit's go.mods, with its Go and ``go test -json`` over its modules."""
        from trajforge.generators.languages.go.profile import go_profile

        return go_profile(repo_path, commit, repo, identity, params)

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
        """Built from its recipe at ``commit`` (the tests compiled once in the build); no
        collection probe (each item's run decides), no registry (``fetch`` unused)."""
        from trajforge.generators.languages.go.profile import build_go_profile

        return build_go_profile(sandbox, profile, repo_path, commit, params, say)

    def toolchain_line(self, profile: EnvProfile) -> str:
        """The Go line (1.22): what reuse's line compares."""
        return f"go {'.'.join(profile.runtime.split('.')[:2])}"

    def reading(self, profile: EnvProfile) -> str | Reading:
        from trajforge.generators.languages.go.profile import go_reading

        return go_reading(profile)

    def validate_mutations(
        self,
        sandbox: Sandbox,
        profile: EnvProfile,
        repo_path: str,
        clean: TestTree,
        mutations: Sequence[Mutation],
        params: ValidateParams,
        cache: ContentCache | None,
        workers: int,
        *,
        on_done: Callable[[ValidationResult], None],
        audit: AuditBook | None,
    ) -> BatchResult:
        """No per-test coverage yet: a full run per bug, failures rerun by package, confirmed at
        clean (``verifiers/validation/full_runs.py``, which reads through the ``Reading``)."""
        from trajforge.generators.languages.go.profile import go_reading
        from trajforge.verifiers.validation.full_runs import validate_by_full_runs

        return validate_by_full_runs(
            sandbox, profile, repo_path, clean, mutations, params, go_reading(profile),
            cache, workers, on_done=on_done,
        )  # fmt: skip
