"""The proving floor of a language: what the grader asks of a task's language, in one interface.

``patch_verifier`` judges every language by the same steps (apply the patch in a throwaway index,
refuse start-up files, reset the tests to the task's own, run the graded tests under the
supervisor, one verdict rule); each step's language-dependent answer comes from the task's
``Grading`` (``registry.grading_for(task.language)``), never from comparing its name. The shared
parts stay shared: the sandbox, the supervisor and its channel (``verifiers/grader/``), the
verdict (``grader/rules.py``, ``patch_verifier.judge``).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import ClassVar

from trajforge.schemas.errors import UserError
from trajforge.schemas.task_instance import TaskInstance
from trajforge.verifiers.grader.sentinels import Sentinel
from trajforge.verifiers.grader.supervised import SupervisedRun
from trajforge.verifiers.grader.suspicious.common import Reader
from trajforge.verifiers.sandbox.base import Sandbox
from trajforge.verifiers.sandbox.git_tree import archive, git


@dataclass(frozen=True)
class TaskTree:
    """One git tree of the task's repository, read through the verifier's scratch objects (the
    source repository never grows)."""

    repo: str
    tree: str
    objects: Mapping[str, str]

    def paths(self) -> list[str]:
        out = git(self.repo, "ls-tree", "-r", "-z", "--name-only", "--full-tree", self.tree,
                  env=self.objects)  # fmt: skip
        return [p for p in out.decode("utf-8", "surrogateescape").split("\0") if p]

    def blob(self, path: str) -> bytes | None:
        """The file's bytes; None when the tree has no such file."""
        try:
            return git(self.repo, "cat-file", "blob", f"{self.tree}:{path}", env=self.objects)
        except UserError:
            return None

    def archive(self, prefix: str = "repo/") -> bytes:
        return archive(self.repo, self.tree, prefix=prefix, env=self.objects)


@dataclass(frozen=True)
class GradedRun:
    """One supervised run of the graded tests and the sentinels it was judged with."""

    run: SupervisedRun
    sentinels: tuple[Sentinel, ...]


class Grading(ABC):
    """One language's answers to the grader; stateless, one instance each in the registry."""

    name: ClassVar[str]
    separator: ClassVar[str] = "::"  # where a test id's file part ends ("file::test")
    reader: ClassVar[Reader | None] = None  # what reads a patch's added source for reward hacks
    # The image's install lives in /repo itself (node_modules): a session's tree cannot be
    # emptied and refilled (validation's gold run takes a fresh container instead).
    tree_holds_install: ClassVar[bool] = False
    # One process runs a module's tests (Go: a package's test binary), so a test that panics or
    # exits ends the module's later tests: absent at base, they did not run (``rule.py``).
    module_ends_with_a_crash: ClassVar[bool] = False

    @abstractmethod
    def test_file(self, test_id: str) -> str:
        """The repository file a test id names."""

    def graded_test_files(self, graded: Iterable[str]) -> set[str]:
        """The test files the graded ids sit in (reset to the task's own before a run)."""
        return {self.test_file(t) for t in graded}

    @abstractmethod
    def refuse_file(self, path: str) -> str | None:
        """Why a patch may not touch ``path`` at all (a start-up or package-manager file: it
        would run before or beside the tests), decided by its name; None when it may."""

    @abstractmethod
    def is_grading_path(self, path: str) -> bool:
        """Whether ``path`` decides how the tests run, by its name alone (test files, their
        configuration): a patch's change there is set aside."""

    def grading_paths(self, clean: TaskTree) -> Callable[[str], bool]:
        """``is_grading_path`` widened by what the task's own tree says (a configuration that
        names its setup files)."""
        return self.is_grading_path

    def refuse_changes(
        self, task: TaskInstance, clean: TaskTree, changed: TaskTree, kept: list[str],
        new: set[str],
    ) -> list[str]:  # fmt: skip
        """Why the source changes the patch keeps (``new``: the files it adds) are refused
        before anything runs; empty when they are not."""
        return []

    def verdict_variant(self, task: TaskInstance) -> tuple[str, ...]:
        """What else a cached verdict's key holds for this language (its grading's version)."""
        return ()

    @abstractmethod
    def graded_run(
        self,
        sandbox: Sandbox,
        task: TaskInstance,
        tree: TaskTree,
        graded: tuple[str, ...],
        timeout_s: float,
        stop: bool = False,
    ) -> GradedRun:
        """``graded`` run once in a fresh grading container of ``tree``, with sentinels where
        the language plants them. ``stop`` (fail-fast's first run): end at the first graded
        test that fails, where the runner allows it."""

    @abstractmethod
    def grading_gap(self, test_runner: str, test_cmd: str) -> str:
        """Why the grader would refuse a task of this runner and command ("" if it grades):
        read from the task alone, before any image or run."""
