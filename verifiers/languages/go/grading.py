"""Go's answers to the grader: ids ``package dir::TestName[/sub]``, the vendor/workspace/new
test file/linkname policy (``policy.py``), and the graded run: test binaries built by root with
the grader's sentinels and twins, run as the tests' user, their streams checked against what
root saw (``runs.py``). docs/security.md's Go section says what each part closes."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import ClassVar

from trajforge.schemas.task_instance import TaskInstance
from trajforge.verifiers.grader import rules
from trajforge.verifiers.grader.supervised import UnsupportedTestCommand
from trajforge.verifiers.languages.base import GradedRun, Grading, TaskTree
from trajforge.verifiers.languages.go import policy, sentinels, test_events, time_limits
from trajforge.verifiers.languages.go.runs import (
    guard_paths,
    made_module,
    module_files,
    packages_of,
    run_go,
    supervised_run,
)
from trajforge.verifiers.languages.go.suspicious import GO_READER
from trajforge.verifiers.sandbox.base import Sandbox, SessionSpec

VERSION = "verify-go-v1"  # a Go task's verdicts: root-built test binaries, sentinels, twins
RUNNERS = ("go", "gotest", "go test")  # what the environment side may name Go's runner


class GoGrading(Grading):
    name: ClassVar[str] = "go"
    separator = test_events.SEPARATOR
    module_ends_with_a_crash = True  # a package's tests share one binary
    reader = GO_READER

    def test_file(self, test_id: str) -> str:
        """A Go test id names its package's folder: its tests live in every ``*_test.go``
        there."""
        return test_events.package_dir(test_id)

    def graded_test_files(self, graded: Iterable[str]) -> set[str]:
        """None by name: a Go id names a folder; ``grading_paths`` resets the folder's test
        files (every ``*_test.go`` and ``testdata/`` file of the task's tree)."""
        return set()

    def refuse_file(self, path: str) -> str | None:
        return policy.forbidden_file(path)

    def is_grading_path(self, path: str) -> bool:
        return policy.is_grading_path(path)

    def grading_paths(self, clean: TaskTree) -> Callable[[str], bool]:
        """By name, except a test file the task's tree lacks: it is the patch's, refused
        (``refuse_changes``), never quietly set aside."""
        present = set(clean.paths())
        return lambda path: (
            policy.is_grading_path(path)
            and (path in present or not path.endswith(policy.TEST_SUFFIX))
        )

    def refuse_changes(
        self, task: TaskInstance, clean: TaskTree, changed: TaskTree, kept: list[str],
        new: set[str],
    ) -> list[str]:  # fmt: skip
        return policy.refused_changes(clean, changed, kept, new)

    def verdict_variant(self, task: TaskInstance) -> tuple[str, ...]:
        return (VERSION,)

    def graded_run(
        self,
        sandbox: Sandbox,
        task: TaskInstance,
        tree: TaskTree,
        graded: tuple[str, ...],
        timeout_s: float,
        stop: bool = False,
    ) -> GradedRun:
        """The graded packages' test binaries, each run once (``stop`` is not honoured: a Go
        run always runs to its end), with sentinels in every graded package and twins of up
        to two FAIL_TO_PASS tests."""
        folders = sorted({test_events.package_dir(t) for t in graded})
        for folder in folders:  # a row's ids are hostile: root plants and builds in these
            if folder.startswith("/") or ".." in folder.split("/"):
                raise UnsupportedTestCommand(
                    f"grader: the test id folder {folder[:60]!r} leaves the repository; "
                    "the task's test ids were not written by trajforge's go reader"
                )
        paths = tree.paths()
        tests = {
            folder: {p: tree.blob(p) or b"" for p in policy.test_files_in(paths, folder)}
            for folder in folders
        }
        failing = tuple(t for t in task.FAIL_TO_PASS if t in graded)
        builds, planted = sentinels.draw(tests, failing)
        selected = bool(rules.selection(graded))
        declared = {
            folder: {n for data in files.values()
                     for n in sentinels.reported_names(data.decode("utf-8", "replace"))}
            for folder, files in tests.items()
        }  # fmt: skip
        with sandbox.session(SessionSpec(task.image_name, grading=True)) as session:
            made = {} if module_files(tree) else made_module(session)  # a pre-module tree's
            packages, modules = packages_of(tree, graded, selected, planted, builds, made)
            session.put_archive(tree.archive(), "/")
            limit = time_limits.per_test_s(task.test_cmd, timeout_s)
            said = run_go(session, packages, guard_paths(paths), timeout_s, limit)
        return GradedRun(supervised_run(said, modules, declared, planted), planted)

    def grading_gap(self, test_runner: str, test_cmd: str) -> str:
        if test_runner and test_runner not in RUNNERS:
            return f"grader: the Go runner {test_runner!r} is not graded; the grader runs go test"
        return ""
