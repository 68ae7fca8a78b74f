"""The language layer: one interface per language, so a third language is a new package here.

A ``Language`` answers every question the generators and the stages ask that depends on the
language, shaped around what each caller does: is this project mine (``detect``), which profile
a site gets and how its environment is prepared (the environment stage), how its runs read and
its injected bugs are proven (validate), which paths mining and inject take (tests, sources,
generated files, library code), the bug operators and their sampler (inject), the issue text's
prompt and reading (describe), the agent's system message (rollout), and the names a dataset
gives it (import-tasks). No caller compares a language's name: it asks the registry
(``registry.py``) for the ``Language`` and calls it. Python's implementation delegates to the
code that already decides these (``python/``); Go's and JavaScript's share ``RecipeLanguage``'s
(``recipe_language.py``). What is written here is a default, the same for every language that
does not answer otherwise: no coverage, no reuse probe, a full run per injected bug.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar, Protocol

from trajforge.generators.mutants.mutant import Mutant
from trajforge.generators.mutants.targets import Unparsable
from trajforge.verifiers.reports import ReportError

if TYPE_CHECKING:  # the stages' records: imported for the signatures only
    from trajforge.generators.environments.prepare import Count, Prepared
    from trajforge.schemas.coverage_sites import CoveredLines
    from trajforge.schemas.env_profile import EnvProfile
    from trajforge.schemas.params import Params, ValidateParams
    from trajforge.schemas.storage import ContentCache
    from trajforge.verifiers.sandbox.base import ImageStore, Sandbox
    from trajforge.verifiers.test_runner import Reading
    from trajforge.verifiers.validation.candidate import TestTree, ValidationResult
    from trajforge.verifiers.validation.mutants import AuditBook, BatchResult, Mutation

__all__ = [
    "Detection",
    "IssuePrompt",
    "IssueText",
    "Language",
    "ReportError",
    "SiteGuide",
    "Unparsable",
]


@dataclass(frozen=True)
class Detection:
    """What a language's ``detect`` found in a repository, with the files that decided it."""

    language: str  # the Language's name (``registry.py``)
    package_manager: str  # pip | npm | yarn | yarn-berry | pnpm
    runner: str  # pytest | jest | vitest | mocha | node | ava | tap | "" (none found)
    runtime: str  # the interpreter's version chosen: "3.11", "18"
    evidence: tuple[str, ...]  # repository paths (and fields) the choice rests on
    lockfile: str = ""  # the lock file the install follows, "" when none
    typescript: bool = False
    manager_spec: str = ""  # a pinned package manager (package.json's packageManager: yarn@4.1.0)
    runner_args: tuple[str, ...] = ()  # the project's own arguments to its runner (spec files...)
    why: str = ""  # one line: why this runtime and runner
    package_dir: str = ""  # a workspace package whose suite runs (monorepo), "" for the root


class SiteGuide(Protocol):
    """Where passing tests run (``bugs/sites.py:Guide``): a sampler draws only there."""

    def executes(self, path: str, first: int, last: int) -> bool:
        """A passing test executed a line in ``first..last`` (an edit's lines)."""
        ...


@dataclass(frozen=True)
class IssuePrompt:
    """A language's part of the issue writer's prompt (the shared text: ``issues/writer.py``)."""

    version: str  # the cache key of statements written with it
    projects: str  # the system line's "GitHub issues for <projects> projects"
    example_request: str
    example_answer: str
    fence: str  # the code fence of the tests shown


class IssueText(ABC):
    """How the issue writer reads a task of one language (``generators/issues/``)."""

    prompt: IssuePrompt
    ignored_names: frozenset[str] = frozenset()  # the language's own words, never an anchor

    @abstractmethod
    def test_sources(
        self, repo_path: str, tree: str, test_ids: Sequence[str], max_lines: int
    ) -> dict[str, str]:
        """Each test's source (at most ``max_lines``) from git tree ``tree``; a test not found
        is left out."""

    @abstractmethod
    def failure_excerpt(self, log: str, test_id: str, max_lines: int) -> str:
        """The test's failure section in a run's log (its last ``max_lines``), "" when the
        runner printed none."""

    @abstractmethod
    def patch_names(self, patch: str) -> set[str]:
        """The function, class and module names a patch changes (a statement's anchors)."""

    @abstractmethod
    def test_name(self, test_id: str) -> str:
        """The short name of a test, which a statement must not mention."""

    def code_words(self, source: str) -> str:
        """The part of a test's source whose identifiers count as anchors."""
        return source

    @abstractmethod
    def evidence(self, failure: str, test_source: str) -> list[str]:
        """The lines of a failure report (else of the test's source) a template statement
        quotes as what went wrong."""


class Language(ABC):
    """One language's answers; subclasses are stateless, one instance each in the registry."""

    name: ClassVar[str]
    aliases: ClassVar[tuple[str, ...]] = ()  # how datasets spell it ("py", "ts"): import-tasks
    writes_model_bugs: ClassVar[bool] = False  # inject.mode llm: a model's rewrite can be spliced
    probes_collection: ClassVar[bool] = False  # the environment stage collects the suite once
    # validate's clean run records per-test coverage: ``covered_lines`` answers (inject's guide)
    measures_coverage: ClassVar[bool] = False
    issue_text: ClassVar[IssueText]  # describe: its prompt and how a task's tests read
    # File names ``detect`` also reads below the root (a Go monorepo's modules' go.mod): the
    # language of a commit is read from its top-level files and these (``at_commit.py``).
    nested_project_files: ClassVar[tuple[str, ...]] = ()

    @abstractmethod
    def detect(self, repo_dir: str) -> Detection | None:
        """The project in the working tree ``repo_dir``, or None when it is not this language's."""

    @abstractmethod
    def base_image(self, detection: Detection) -> str:
        """The tag of the base image its environments build FROM."""

    @abstractmethod
    def ensure_base_image(
        self, store: ImageStore, recipe: str, say: Callable[[str], None] | None
    ) -> None:
        """Make the base image ``recipe`` builds FROM before a task's recipe is rebuilt, where
        the store makes it on demand rather than the recipe's builder."""

    @abstractmethod
    def render_recipe(self, detection: Detection, install: Sequence[str] = ()) -> str:
        """The Dockerfile that installs the project (install in a build stage with the network;
        the final image has no network-dependent step left)."""

    @abstractmethod
    def test_command(
        self, detection: Detection, selection: Sequence[str] = (), per_test_timeout_s: int = 0
    ) -> str:
        """The shell command that runs the suite (or ``selection``) and writes ``report_path``."""

    @abstractmethod
    def report_path(self, detection: Detection) -> str:
        """Where, inside the container, the test command writes its machine-readable report."""

    @abstractmethod
    def parse_report(self, text: str, runner: str) -> dict[str, str]:
        """``{test_id: status}`` from ``runner``'s report. Hostile input: a report that does not
        parse raises ``ReportError`` with one line, never another exception."""

    @abstractmethod
    def is_test_file(self, path: str) -> bool:
        """Whether a repository path belongs to the tests (mining's test_patch split)."""

    @abstractmethod
    def bug_operators(self) -> Mapping[str, object]:
        """The procedural bug operators by name (``inject``)."""

    @abstractmethod
    def is_source_file(self, path: str) -> bool:
        """Whether a changed path is code worth a task (mining; not only docs or config)."""

    def is_generated(self, path: str) -> bool:
        """Whether tools, not people, write the path (lock files, bundles): mining skips it."""
        return False

    @abstractmethod
    def is_library_source(self, path: str) -> bool:
        """Whether inject may put a bug in the path (not a test, not build or tool config);
        the shared rules (skip globs, docs and examples folders) are the caller's."""

    @abstractmethod
    def is_suite_file(self, path: str) -> bool:
        """Whether the path is a test module, so a snapshot holding one has a suite to break."""

    @abstractmethod
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
        """Inject's procedural bugs: up to ``max_mutants`` from ``seed``, where ``guide`` says
        passing tests run (None: anywhere), and the files that did not parse."""

    @abstractmethod
    def agent_system_prompt(self, test_cmd: str) -> str:
        """The rollout agent's system message for a task whose tests run with ``test_cmd``."""

    @abstractmethod
    def site_profile(
        self, repo_path: str, commit: str, repo: str, identity: str, params: Params
    ) -> EnvProfile:
        """The environment stage's profile of a site at ``commit`` (the key its image is
        built under); a project that cannot be read raises a one-line ``UserError``."""

    @abstractmethod
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
        """The profile's environment built (``fetch`` pulls a published image instead, where the
        language's images are published), with the reason when it is not."""

    def toolchain_line(self, profile: EnvProfile) -> str:
        """The toolchain era a profile's image serves ("python 3.11", "node 18", "go 1.22"):
        an image is reused only for a profile on the same line (``environments/reuse.py``);
        "" never reuses."""
        return ""

    def probe_reuse(
        self,
        sandbox: Sandbox,
        donor: EnvProfile,
        site: EnvProfile,
        repo_path: str,
        commit: str,
        params: Params,
    ) -> tuple[EnvProfile | None, int, str]:
        """The probe the environment stage runs at a setup commit, run instead with ``commit``'s
        tree in ``donor``'s image, as ``site`` (the detected profile the image would serve) says
        its tests run: (the profile to test ``commit`` with in that image, tests
        collected, "") when it collects and runs as a profile of its own would be required to,
        else (None, 0, why not in one line). A language without a probe refuses every reuse."""
        return None, 0, "its language has no collection probe to decide a reuse"

    @abstractmethod
    def reading(self, profile: EnvProfile) -> str | Reading:
        """How validate reads the profile's runs: a report path, or the runner's reading."""

    def covered_lines(
        self,
        sandbox: Sandbox,
        profile: EnvProfile,
        clean: TestTree,
        params: ValidateParams,
        cache: ContentCache | None,
    ) -> CoveredLines | None:
        """The lines the clean suite's passing tests execute, measured by the clean run validate
        makes (and cached where validate reads it), for inject's first contact with a snapshot;
        None where the language has no per-test coverage run. A run that cannot say raises a
        one-line ``UserError`` (its reason: why inject goes on unguided). Only a language that
        ``measures_coverage`` is asked."""
        return None

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
        """Validate's proof of a snapshot's injected bugs against its clean run, ``workers``
        containers at a time; ``on_done`` hears of each result when it is known."""
        # A language without per-test coverage: a full run per bug, failures rerun by file or
        # package, confirmed at clean, read through its ``reading``.
        from trajforge.verifiers import test_runner
        from trajforge.verifiers.validation.full_runs import validate_by_full_runs

        return validate_by_full_runs(
            sandbox, profile, repo_path, clean, mutations, params,
            test_runner.Reading.of(self.reading(profile)), cache, workers, on_done=on_done,
        )  # fmt: skip
