"""Does a model patch resolve a task? SWE-bench's rule, in a fresh container, hardened.

Only the model's changes to source count. The patch is applied to the task's starting tree
(``base_commit`` + ``bug_patch``) in a throwaway index, and git lists the paths it changes; a path
that decides how the tests run or what they report is dropped (``schemas.test_ids
.is_grading_path``: test files and directories, every ``conftest.py``, pytest/tox config,
``pyproject.toml``/``setup.cfg``/``tox.ini`` whole, ``.coveragerc``, ``sitecustomize.py``,
``usercustomize.py``, ``*.pth``), as is every file the ``test_patch`` touches or a graded test id
names, and a new module that would shadow pytest or the standard library (a new ``pytest.py`` at
the root would be the runner). The tree tested is the starting tree, the kept changes, then the
``test_patch``, built fresh: each dropped path is exactly the task's own, and a grading file the
model added does not exist. A patch of grading files only is ``no_source_changes`` (a validated
bug needs a source change to go). A fix bundled with a test hack is judged on the fix alone, as
SWE-bench resets test files; ``PatchVerdict.dropped`` lists what was set aside.

The FAIL_TO_PASS and PASS_TO_PASS tests then run in a fresh container of the task's image.
Resolved means every one of them passed (one missing from the report failed) and the process
agrees with its report: not timed out (``timed_out``: a hang the patch caused), exit 0 when the
report holds no failure and 1 when it does
(``suite_failed`` otherwise: a crash or ``os._exit`` after the JUnit XML was written, or an XML
rewritten behind pytest's back), and the ``-rA`` summary in the log fails no graded test the XML
passed (``report_mismatch``). Code under test runs inside pytest's process, so a patch that
tampers with pytest from within the package can still forge both; these checks catch what leaves
a trace. Verdicts are cached by the exact tree tested, so a rerun runs nothing.
"""

from __future__ import annotations

import os
import posixpath
import sys
import tempfile
from dataclasses import dataclass, field

from trajforge.schemas.diff import parse_patch
from trajforge.schemas.errors import UserError
from trajforge.schemas.records import content_id
from trajforge.schemas.storage import ContentCache
from trajforge.schemas.task_instance import TaskInstance
from trajforge.schemas.test_ids import is_grading_path, test_file
from trajforge.schemas.test_run import TestRun
from trajforge.verifiers.log_parsers import get_parser
from trajforge.verifiers.sandbox.base import Sandbox, SessionSpec
from trajforge.verifiers.sandbox.git_tree import apply_patches, archive, git
from trajforge.verifiers.test_runner import RunContext, run_tests

VERSION = "verify-v3"  # v3: the log is kept; a run past its time limit is timed_out
PASSED = "PASSED"
FAILING = ("FAILED", "ERROR")
MAX_SELECTED = 400  # beyond this many graded tests, run the whole suite and read them from it
# Modules a new file must not shadow: ``python -m pytest`` puts the working directory (and pytest
# the folders of test files) ahead of the standard library and site-packages on sys.path, so a new
# /repo/pytest.py would be the test runner itself.
SHADOWED = frozenset(sys.stdlib_module_names) | {"pytest", "_pytest", "pluggy", "py", "iniconfig"}


@dataclass(frozen=True)
class PatchVerdict:
    resolved: bool
    # resolved | tests_failed | empty_patch | patch_does_not_apply | no_source_changes
    # | suite_did_not_run | suite_failed | report_mismatch | timed_out
    reason: str
    test_report: dict[str, str] = field(default_factory=dict)  # graded test id -> status
    dropped: tuple[str, ...] = ()  # paths whose model changes were set aside, sorted
    log: str = ""  # the test run's output ("" when nothing ran)


def verify_patch(
    sandbox: Sandbox,
    task: TaskInstance,
    repo_path: str,
    model_patch: str,
    junit_path: str,
    timeout_s: float,
    cache: ContentCache | None,
) -> PatchVerdict:
    if not model_patch.strip():
        return PatchVerdict(False, "empty_patch")
    graded = (*task.FAIL_TO_PASS, *task.PASS_TO_PASS)
    try:
        start = apply_patches(repo_path, task.base_commit, [task.bug_patch])
        changed = apply_patches(repo_path, task.base_commit, [task.bug_patch, model_patch])
    except UserError:
        return PatchVerdict(False, "patch_does_not_apply")
    task_tests = parse_patch(task.test_patch).files | {test_file(t) for t in graded}
    paths = _changed_paths(repo_path, start, changed)
    new = set(_changed_paths(repo_path, start, changed, added_only=True))
    import_dirs = {""} | {posixpath.dirname(test_file(t)) for t in graded}
    dropped = tuple(
        p
        for p in paths
        if p in task_tests or is_grading_path(p) or (p in new and _shadows(p, import_dirs))
    )
    kept = [p for p in paths if p not in dropped]
    if not kept:
        return PatchVerdict(False, "no_source_changes", dropped=dropped)
    try:
        clean = apply_patches(repo_path, task.base_commit, [task.bug_patch, task.test_patch])
        tree = _overlay(repo_path, clean, changed, kept)
    except UserError:  # git's own errors (GitError) are UserErrors too
        return PatchVerdict(False, "patch_does_not_apply", dropped=dropped)
    selection = graded if len(graded) <= MAX_SELECTED else ()
    key = content_id(VERSION, task.image_name, task.test_cmd, tree, selection, timeout_s)
    if cache is not None and (hit := cache.get(key)) is not None:
        return PatchVerdict(
            hit["resolved"], hit["reason"], hit["test_report"], dropped, hit.get("log", "")
        )
    ctx = RunContext(task.candidate_id, task.profile_id, task.test_cmd, junit_path, timeout_s)
    with sandbox.session(SessionSpec(task.image_name)) as session:
        session.put_archive(archive(repo_path, tree, prefix="repo/"), "/")
        run = run_tests(session, ctx, "model", attempt=0, selection=selection)
    resolved, reason, report = judge(run, graded)
    if cache is not None:
        entry = {"resolved": resolved, "reason": reason, "test_report": report, "log": run.log}
        cache.put(key, entry)
    return PatchVerdict(resolved, reason, report, dropped, run.log)


def judge(run: TestRun, graded: tuple[str, ...]) -> tuple[bool, str, dict[str, str]]:
    """(resolved, reason, graded test id -> status) of one run of the graded tests."""
    statuses = run.statuses()
    report = {test_id: statuses.get(test_id, "MISSING") for test_id in graded}
    if run.timed_out:
        return False, "timed_out", report
    if not run.suite_ran and not statuses:
        return False, "suite_did_not_run", report
    if not all(status == PASSED for status in report.values()):
        return False, "tests_failed", report
    expected_exit = 1 if any(s in FAILING for s in statuses.values()) else 0
    if run.exit_code != expected_exit:
        return False, "suite_failed", report
    logged = get_parser("pytest_log")(run.log.encode("utf-8", "replace")).statuses
    if any(logged.get(test_id, PASSED) != PASSED for test_id in graded):
        return False, "report_mismatch", report
    return True, "resolved", report


def _shadows(path: str, import_dirs: set[str]) -> bool:
    """Whether ``path`` is, or is inside, a module named like one in SHADOWED, as seen from a
    folder on sys.path during the run (the repository root, the folders of the graded tests)."""
    for folder in import_dirs:
        prefix = folder + "/" if folder else ""
        if path.startswith(prefix):
            head = path[len(prefix) :].split("/", 1)[0]
            if head.split(".", 1)[0] in SHADOWED:
                return True
    return False


def _changed_paths(repo: str, old_tree: str, new_tree: str, added_only: bool = False) -> list[str]:
    """Paths that differ between two trees, as git sees them (renames as delete + add)."""
    only = ["--diff-filter=A"] if added_only else []
    out = git(
        repo, "diff-tree", "-r", "-z", "--no-renames", "--name-only", *only, old_tree, new_tree
    )
    return sorted(p for p in out.decode("utf-8", "surrogateescape").split("\0") if p)


def _overlay(repo: str, base_tree: str, from_tree: str, paths: list[str]) -> str:
    """``base_tree`` with ``paths`` as they are in ``from_tree`` (absent there: removed).

    Blob ids move from tree to tree in a throwaway index, so content, modes and symlinks are kept
    byte for byte and nothing is checked out. Removals go first, so a file may replace a folder.
    """
    with tempfile.TemporaryDirectory(prefix="trajforge-verify-") as tmp:
        env = {"GIT_INDEX_FILE": os.path.join(tmp, "index"), "GIT_LITERAL_PATHSPECS": "1"}
        git(repo, "read-tree", base_tree, env=env)
        listed = git(repo, "ls-tree", "-r", "-z", "--full-tree", from_tree, "--", *paths, env=env)
        added = []
        for entry in filter(None, listed.split(b"\0")):
            meta, path = entry.split(b"\t", 1)
            mode, _kind, blob = meta.split(b" ")
            added.append((path, b"%s %s\t%s" % (mode, blob, path)))
        present = {path for path, _ in added}
        null = b"0" * len(base_tree)  # SHA-1 or SHA-256, as the repository hashes
        removed = [
            b"0 %s\t%s" % (null, path)
            for path in (p.encode("utf-8", "surrogateescape") for p in paths)
            if path not in present
        ]
        lines = [*removed, *(line for _, line in added)]
        git(repo, "update-index", "-z", "--index-info", input=b"\0".join(lines) + b"\0", env=env)
        return git(repo, "write-tree", env=env).decode().strip()
