"""Python as a ``Language``: every answer delegates to the code that decides it today.

Nothing here decides anything new: the install and the interpreter are ``detect_profile``'s
(``generators/languages/python/profile.py``), the environment ``prepare.py``'s, the recipe
``recipe.py``'s, the report pytest's JUnit XML read by ``verifiers/log_parsers.py``, test files
``schemas/test_ids.py``'s rule, the operators and their sampler ``operators.py``'s and
``mutations.py``'s, injected bugs proven by ``verifiers/languages/python/mutants.py``. The
stage-only modules are imported when asked for: the registry is read by every stage, most of
which build nothing, and libcst is for injecting.
"""

from __future__ import annotations

import os
import posixpath
import shlex
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, ClassVar

from trajforge.generators.environments.base_image import base_image_tag
from trajforge.generators.environments.recipe import render_dockerfile
from trajforge.generators.languages.base import (
    Detection,
    IssueText,
    Language,
    ReportError,
    SiteGuide,
    Unparsable,
)
from trajforge.generators.languages.python.issue_context import PythonIssueText
from trajforge.generators.languages.python.profile import JUNIT_PATH, TEST_CMD, detect_profile
from trajforge.generators.languages.python.prompts import AGENT_SYSTEM
from trajforge.generators.mutants.mutant import Mutant
from trajforge.schemas.test_ids import is_test_path
from trajforge.verifiers.log_parsers import parse_junit_xml

if TYPE_CHECKING:
    from trajforge.generators.environments.prepare import Count, Prepared
    from trajforge.schemas.coverage_sites import CoveredLines
    from trajforge.schemas.env_profile import EnvProfile
    from trajforge.schemas.params import Params, ValidateParams
    from trajforge.schemas.storage import ContentCache
    from trajforge.verifiers.sandbox.base import ImageStore, Sandbox
    from trajforge.verifiers.test_runner import Reading
    from trajforge.verifiers.validation.candidate import TestTree, ValidationResult
    from trajforge.verifiers.validation.mutants import AuditBook, BatchResult, Mutation

# Files that make a directory a Python project (the ones detect_profile reads installs from).
PROJECT_FILES = ("pyproject.toml", "setup.py", "setup.cfg", "requirements.txt", "tox.ini")
# A changed file worth a task: Python, and the extension code a Python project builds
CODE_SUFFIXES = {".py", ".pyx", ".pxd", ".pyi", ".c", ".h", ".cc", ".cpp", ".rs", ".js", ".ts"}
# Packaging and test plumbing: a bug there breaks the install or collection, never a test.
NOT_LIBRARY = ("setup.py", "noxfile.py", "conftest.py", "__main__.py")
TEST_PLUMBING = ("conftest.py", "__init__.py")  # in a test folder, yet no test


class Python(Language):
    name: ClassVar[str] = "python"
    aliases: ClassVar[tuple[str, ...]] = ("py",)
    writes_model_bugs: ClassVar[bool] = True
    probes_collection: ClassVar[bool] = True
    measures_coverage: ClassVar[bool] = True
    issue_text: ClassVar[IssueText] = PythonIssueText()

    def detect(self, repo_dir: str) -> Detection | None:
        """A project with Python packaging files; its interpreter is ``detect_profile``'s at
        HEAD (a git repository), else empty (the caller detects at its commit)."""
        found = [f for f in PROJECT_FILES if os.path.isfile(os.path.join(repo_dir, f))]
        if not found:
            return None
        runtime, why = "", "no commit to read"
        if os.path.isdir(os.path.join(repo_dir, ".git")):
            profile = detect_profile(repo_dir, "HEAD", os.path.basename(repo_dir))
            runtime, why = profile.python, profile.log
        return Detection(
            language=self.name, package_manager="pip", runner="pytest", runtime=runtime,
            evidence=tuple(found), why=why,
        )  # fmt: skip

    def base_image(self, detection: Detection) -> str:
        return base_image_tag(detection.runtime)

    def ensure_base_image(
        self, store: ImageStore, recipe: str, say: Callable[[str], None] | None
    ) -> None:
        """Nothing: the recipe's builder pulls or builds Python's base (``ensure_for_sandbox``)."""

    def render_recipe(self, detection: Detection, install: Sequence[str] = ()) -> str:
        return render_dockerfile(detection.runtime, install)

    def test_command(
        self, detection: Detection, selection: Sequence[str] = (), per_test_timeout_s: int = 0
    ) -> str:
        limit = (
            f" --timeout={int(per_test_timeout_s)} --timeout-method=signal"
            if per_test_timeout_s
            else ""
        )
        args = " ".join(shlex.quote(test_id) for test_id in selection)
        return f"{TEST_CMD}{limit} {args}".strip()

    def report_path(self, detection: Detection) -> str:
        return JUNIT_PATH

    def parse_report(self, text: str, runner: str) -> dict[str, str]:
        parsed = parse_junit_xml(text.encode("utf-8", "replace"))
        if parsed.problem:
            raise ReportError(parsed.problem)
        return parsed.statuses

    def is_test_file(self, path: str) -> bool:
        return is_test_path(path)

    def bug_operators(self) -> Mapping[str, object]:
        # here, not at the top: libcst is for injecting, and every stage asks the registry
        from trajforge.generators.languages.python.operators import OPERATORS

        return OPERATORS

    def is_source_file(self, path: str) -> bool:
        return posixpath.splitext(path)[1] in CODE_SUFFIXES

    def is_library_source(self, path: str) -> bool:
        name = posixpath.basename(path)
        return path.endswith(".py") and not is_test_path(path) and name not in NOT_LIBRARY

    def is_suite_file(self, path: str) -> bool:
        """pytest's test modules (test_*.py, *_test.py, a .py under a tests/ folder), not a
        conftest.py or a package's __init__.py."""
        return (
            is_test_path(path)
            and path.endswith(".py")
            and posixpath.basename(path) not in TEST_PLUMBING
        )

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
        """libcst's operators, drawn only at edits whose lines a passing test runs."""
        from trajforge.generators.languages.python.mutations import sample_mutants

        return sample_mutants(
            files,
            seed=seed,
            max_mutants=max_mutants,
            operators=operators,
            min_complexity=min_complexity,
            covers=guide.executes if guide else None,
        )

    def agent_system_prompt(self, test_cmd: str) -> str:
        return AGENT_SYSTEM

    def site_profile(
        self, repo_path: str, commit: str, repo: str, identity: str, params: Params
    ) -> EnvProfile:
        """``detect_profile`` at the commit, with the environment's Pythons and registry."""
        env = params.environment
        return detect_profile(
            repo_path, commit, repo,
            default_python=env.default_python, pythons=tuple(env.pythons),
            source=identity, registry=env.registry,
        )  # fmt: skip

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
        """Built (or pulled), collected, repaired and trimmed to what collects
        (``prepare_environment``) at the profile's own setup commit."""
        from trajforge.generators.languages.python.prepare import prepare_environment

        return prepare_environment(
            sandbox, profile, repo_path, params, count=count, fetch=fetch, say=say
        )

    def toolchain_line(self, profile: EnvProfile) -> str:
        """The Python minor: a venv serves one interpreter."""
        return f"python {profile.python}"

    def probe_reuse(
        self,
        sandbox: Sandbox,
        donor: EnvProfile,
        site: EnvProfile,
        repo_path: str,
        commit: str,
        params: Params,
    ) -> tuple[EnvProfile | None, int, str]:
        """The collection probe of ``commit``'s tree in the donor's image, run as the site's
        layout says, with no error allowed (``reuse_probe.py``)."""
        from trajforge.generators.languages.python.reuse_probe import probe_reuse

        return probe_reuse(sandbox, donor, site, repo_path, commit, params)

    def reading(self, profile: EnvProfile) -> str | Reading:
        return JUNIT_PATH

    def covered_lines(
        self,
        sandbox: Sandbox,
        profile: EnvProfile,
        clean: TestTree,
        params: ValidateParams,
        cache: ContentCache | None,
    ) -> CoveredLines | None:
        """validate's clean run under per-test coverage (``mutants.measure_clean``)."""
        from trajforge.schemas.coverage_sites import covered_lines
        from trajforge.schemas.errors import UserError
        from trajforge.verifiers.languages.python.mutants import measure_clean

        baseline = measure_clean(sandbox, profile, clean, params, JUNIT_PATH, cache)
        if baseline.failure is not None:
            reason, detail = baseline.failure.reason, baseline.failure.detail
            raise UserError(f"{profile.repo}: the clean run: {detail}", reason=reason)
        if baseline.coverage is None:
            raise UserError(
                f"{profile.repo}: the clean run wrote no coverage", reason="no_coverage_data"
            )
        coverage = baseline.coverage
        return covered_lines(clean.tree_id, coverage.files, coverage.tests, baseline.passing)

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
        """Coverage-selected pytest runs, forked from one import per container."""
        from trajforge.verifiers.languages.python.mutants import validate_mutations

        return validate_mutations(
            sandbox, profile, clean, mutations, params, JUNIT_PATH, cache, workers,
            on_done=on_done, audit=audit,
        )  # fmt: skip
