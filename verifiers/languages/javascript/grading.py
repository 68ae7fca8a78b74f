"""JavaScript's and TypeScript's answers to the grader: ids ``file > describe > title``, the
package-manager and configuration policy (``policy.py``), and the runner's supervised run with
the grader's reporter and guard, sentinels where the guard can plant them (``sentinels.py``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import ClassVar

from trajforge.schemas.js_commands import package_dir
from trajforge.schemas.task_instance import TaskInstance
from trajforge.verifiers.grader.sentinels import Sentinel
from trajforge.verifiers.grader.supervised import UnsupportedTestCommand, ship
from trajforge.verifiers.languages.base import GradedRun, Grading, TaskTree
from trajforge.verifiers.languages.javascript import policy, sentinels
from trajforge.verifiers.languages.javascript.runs import check_js_runner, run_supervised_js
from trajforge.verifiers.languages.javascript.suspicious import JAVASCRIPT_READER
from trajforge.verifiers.reports.ids import test_file
from trajforge.verifiers.sandbox.base import Sandbox, SessionSpec

VERSION = "verify-js-v1"  # a JS task's verdicts: supervised runs with the grader's reporter


class JavaScriptGrading(Grading):
    name: ClassVar[str] = "javascript"
    separator = sentinels.SEPARATOR
    reader = JAVASCRIPT_READER
    tree_holds_install = True

    def test_file(self, test_id: str) -> str:
        return test_file(test_id)

    def refuse_file(self, path: str) -> str | None:
        return policy.forbidden_file(path)

    def is_grading_path(self, path: str) -> bool:
        return policy.is_grading_path(path)

    def grading_paths(self, clean: TaskTree) -> Callable[[str], bool]:
        """By name, or named by a configuration of the task's own tree."""
        named = _grading_files(clean)
        return lambda path: path in named or policy.is_grading_path(path)

    def verdict_variant(self, task: TaskInstance) -> tuple[str, ...]:
        return (VERSION, task.test_runner)

    def graded_run(
        self,
        sandbox: Sandbox,
        task: TaskInstance,
        tree: TaskTree,
        graded: tuple[str, ...],
        timeout_s: float,
        stop: bool = False,
    ) -> GradedRun:
        """The graded files run by the task's runner under the supervisor with the grader's
        reporter and guard; the tree's tests and configuration read-only to the tests' user.
        ``stop`` is not honoured: a JS run always runs to its end."""
        # Always named (a JS runner selects by file, and files are few even where tests are
        # not), so every runner runs the graded files only, as validate's reruns did.
        files = tuple(sorted({test_file(t) for t in graded}))
        failing = {test_file(t) for t in task.FAIL_TO_PASS if t in graded}
        spec, planted = b"{}", tuple[Sentinel, ...]()
        if task.test_runner in sentinels.SENTINEL_RUNNERS:
            texts = {p: tree.blob(p) for p in sorted(failing or set(files))}
            drawn_in = {p: b for p, b in texts.items() if b is not None}
            spec, planted = sentinels.draw(drawn_in, graded)
        guard = sorted(_grading_files(tree))
        with sandbox.session(SessionSpec(task.image_name, grading=True)) as session:
            ship(session, {})
            session.put_archive(tree.archive(), "/")
            folder = package_dir(task.test_cmd)  # a monorepo's tested package, as validate ran it
            manifest = f"{folder}/package.json" if folder else "package.json"
            package = tree.blob(manifest)  # the task's own (reset)
            run = run_supervised_js(
                session, task.test_runner, files, guard, timeout_s, package, folder, spec
            )
            return GradedRun(run, sentinels.heard(planted, run.evidence.statuses))

    def grading_gap(self, test_runner: str, test_cmd: str) -> str:
        try:
            check_js_runner(test_runner, package_dir(test_cmd))
        except UnsupportedTestCommand as exc:
            return str(exc)
        return ""


def _grading_files(tree: TaskTree) -> set[str]:
    return policy.grading_files(tree.paths(), tree.blob)
