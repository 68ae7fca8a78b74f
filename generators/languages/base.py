"""The language layer: one interface per language, so a third language is a new module here.

A ``Language`` answers, for one repository, every question the stages ask that depends on the
language: is this project mine (``detect``: its files, package manager and test runner), which
base image and recipe install it, which command runs its tests and where that command writes
its machine-readable report, how that report reads as ``{test_id: status}`` (statuses of
``schemas/test_run.py``), which paths are tests, and which bug operators apply. Python's
implementation delegates to the code that already decides these (``python/language.py``);
nothing here decides anything for Python on its own.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import ClassVar

from trajforge.verifiers.reports import ReportError

__all__ = ["Detection", "Language", "ReportError"]


@dataclass(frozen=True)
class Detection:
    """What a language's ``detect`` found in a repository, with the files that decided it."""

    language: str  # "python", "javascript"
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


class Language(ABC):
    """One language's answers; subclasses are stateless, one instance each in the registry."""

    name: ClassVar[str]

    @abstractmethod
    def detect(self, repo_dir: str) -> Detection | None:
        """The project in the working tree ``repo_dir``, or None when it is not this language's."""

    @abstractmethod
    def base_image(self, detection: Detection) -> str:
        """The tag of the base image its environments build FROM."""

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
