"""Python's answers to the grader: pytest's test ids and files, the start-up and new-module
policy, graded doctests, and the sealed, supervised pytest run with its sentinels."""

from __future__ import annotations

import io
import tarfile
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import ClassVar

from trajforge.schemas.diff import parse_patch
from trajforge.schemas.task_instance import TaskInstance
from trajforge.schemas.test_ids import is_grading_path, is_module_doctest, test_file
from trajforge.verifiers.grader import rules, sentinels
from trajforge.verifiers.grader.supervised import UnsupportedTestCommand, add_grader, ship
from trajforge.verifiers.languages.base import GradedRun, Grading, TaskTree
from trajforge.verifiers.languages.python import doctests, patch_policy
from trajforge.verifiers.languages.python.pytest_run import (
    add_run_spec,
    image_facts,
    known_facts,
    programs,
    pytest_args,
    pytest_options,
    run_supervised,
)
from trajforge.verifiers.languages.python.suspicious import PYTHON_READER
from trajforge.verifiers.sandbox.base import Sandbox, SessionSpec


@dataclass(frozen=True)
class RunSpec:
    """What one graded pytest run runs (``pytest_run.add_run_spec``)."""

    args: list[str]
    graded: tuple[str, ...]  # the ids the seal checks before and after they run
    guard: tuple[str, ...]  # repository files the tests may not write
    stop_at: tuple[str, ...]  # a fail-fast run's stops


class PythonGrading(Grading):
    name: ClassVar[str] = "python"
    reader = PYTHON_READER

    def test_file(self, test_id: str) -> str:
        return test_file(test_id)

    def graded_test_files(self, graded: Iterable[str]) -> set[str]:
        # a graded doctest's file is the module under test, not a test file (its examples are
        # kept as the task's own: refuse_changes)
        return {test_file(t) for t in graded if not is_module_doctest(t)}

    def refuse_file(self, path: str) -> str | None:
        return patch_policy.startup_file(path)

    def is_grading_path(self, path: str) -> bool:
        return is_grading_path(path)

    def refuse_changes(
        self, task: TaskInstance, clean: TaskTree, changed: TaskTree, kept: list[str],
        new: set[str],
    ) -> list[str]:  # fmt: skip
        """A graded doctest rewritten by the patch, else a new top-level module the task's
        tree does not have (``patch_policy``)."""
        graded = (*task.FAIL_TO_PASS, *task.PASS_TO_PASS)
        if why := _changed_doctests(clean, changed, kept, graded):
            return why
        return _new_modules(clean, new, graded)

    def graded_run(
        self,
        sandbox: Sandbox,
        task: TaskInstance,
        tree: TaskTree,
        graded: tuple[str, ...],
        timeout_s: float,
        stop: bool = False,
    ) -> GradedRun:
        """``stop``: the sentinels run first, and the supervisor ends the run at the first
        graded test that fails."""
        selection = rules.selection(graded)
        tests = [t for t in graded if not is_module_doctest(t)]  # a doctest's module gets none
        failing_tests = {test_file(t) for t in task.FAIL_TO_PASS if t in tests}
        sentinel_files = failing_tests or {test_file(t) for t in tests}
        with sandbox.session(SessionSpec(task.image_name, grading=True)) as session:
            facts = known_facts(task.image_name)
            if facts is None:  # the image's first graded run in this process: ship, then probe
                ship(session, programs())
                facts = image_facts(session, task.image_name)
            originals = {p: tree.blob(p) for p in sorted(sentinel_files)}
            planted, planted_sentinels = sentinels.plant(
                {p: b for p, b in originals.items() if b is not None},
                tuple(t for t in task.FAIL_TO_PASS if t in graded),  # the ones a forger aims at
                graded,
            )
            planted_ids = tuple(s.test_id for s in planted_sentinels)
            run_selection = (
                ((*planted_ids, *selection) if stop else (*selection, *planted_ids))
                if selection
                else ()
            )
            spec = RunSpec(
                pytest_args(task.test_cmd, facts, run_selection),
                (*graded, *planted_ids),
                _guarded(task, graded, planted),
                graded if stop else (),
            )
            session.put_archive(_graded_archive(tree, planted, spec), "/")
            return GradedRun(run_supervised(session, timeout_s), planted_sentinels)

    def grading_gap(self, test_runner: str, test_cmd: str) -> str:
        try:
            pytest_options(test_cmd)
        except UnsupportedTestCommand as exc:
            return str(exc)
        return ""


def _changed_doctests(
    clean: TaskTree, changed: TaskTree, kept: list[str], graded: tuple[str, ...]
) -> list[str]:
    """Why the patch's change of a module whose doctests are graded rewrites one of them."""
    why = []
    for path, ids in doctests.graded_modules(graded).items():
        if path in kept:
            own, theirs = clean.blob(path) or b"", changed.blob(path) or b""
            why += doctests.changed_doctests(path, ids, own, theirs)
    return why


def _new_modules(clean: TaskTree, new: set[str], graded: tuple[str, ...]) -> list[str]:
    """Why each new file adds a top-level module the task's tree does not have (patch_policy)."""
    if not new:
        return []
    paths = clean.paths()
    graded_files = {test_file(t) for t in graded}
    names = patch_policy.top_level_names(paths, patch_policy.import_dirs(graded_files, paths))
    return [w for p in sorted(new) if (w := patch_policy.new_top_level_module(p, names))]


def _guarded(
    task: TaskInstance, graded: tuple[str, ...], planted: Mapping[str, bytes]
) -> tuple[str, ...]:
    """The files the graded run collects from, read-only to the tests whatever their names:
    the graded tests' files (a Django ``tests.py``, a doctest's module), the task's test patch
    and every file a sentinel sits in."""
    files = {test_file(t) for t in graded} | parse_patch(task.test_patch).files | set(planted)
    return tuple(sorted(files))


def _graded_archive(tree: TaskTree, planted: dict[str, bytes], spec: RunSpec) -> bytes:
    """The tree under repo/, the grader, what it runs and the graded files with their
    sentinels, as one copy (each copy is a round trip to the engine and an unpacking process in
    the container). A planted file comes after the tree's own, and an engine unpacks in order,
    the later entry replacing the earlier, as a second copy did."""
    buffer = io.BytesIO(tree.archive())
    with tarfile.open(fileobj=buffer, mode="a") as tar:
        add_grader(tar, programs())
        add_run_spec(tar, spec.args, spec.graded, spec.guard, spec.stop_at)
        for path, data in sorted(planted.items()):
            info = tarfile.TarInfo(f"repo/{path}")
            info.size, info.mode = len(data), 0o644
            tar.addfile(info, io.BytesIO(data))
    return buffer.getvalue()
