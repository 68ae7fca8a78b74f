"""Does a model patch resolve a task? SWE-bench's rule, in a fresh container.

The task's starting tree (``base_commit`` + ``bug_patch``) gets the model patch, then the task's
``test_patch``; the model's changes to files the test patch touches are dropped first, as SWE-bench
resets test files, so an agent cannot pass by editing the grading tests. The FAIL_TO_PASS and
PASS_TO_PASS tests then run in a fresh container of the task's image: resolved means every one of
them passed. Verdicts are cached by the exact tree tested, so a rerun runs nothing.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from trajforge.schemas.diff import parse_patch, without_files
from trajforge.schemas.errors import UserError
from trajforge.schemas.records import content_id
from trajforge.schemas.storage import ContentCache
from trajforge.schemas.task_instance import TaskInstance
from trajforge.verifiers.sandbox.base import Sandbox, SessionSpec
from trajforge.verifiers.sandbox.git_tree import apply_patches, archive
from trajforge.verifiers.test_runner import RunContext, run_tests

VERSION = "verify-v1"
PASSED = "PASSED"
MAX_SELECTED = 400  # beyond this many graded tests, run the whole suite and read them from it


@dataclass(frozen=True)
class PatchVerdict:
    resolved: bool
    reason: str  # resolved | tests_failed | empty_patch | patch_does_not_apply | suite_did_not_run
    test_report: dict[str, str] = field(default_factory=dict)  # graded test id -> status


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
    model_only = without_files(model_patch, parse_patch(task.test_patch).files)
    try:
        tree = apply_patches(
            repo_path, task.base_commit, [task.bug_patch, model_only, task.test_patch]
        )
    except UserError:
        return PatchVerdict(False, "patch_does_not_apply")
    selection = graded if len(graded) <= MAX_SELECTED else ()
    key = content_id(VERSION, task.image_name, task.test_cmd, tree, selection, timeout_s)
    if cache is not None and (hit := cache.get(key)) is not None:
        return PatchVerdict(hit["resolved"], hit["reason"], hit["test_report"])
    ctx = RunContext(task.candidate_id, task.profile_id, task.test_cmd, junit_path, timeout_s)
    with sandbox.session(SessionSpec(task.image_name)) as session:
        session.put_archive(archive(repo_path, tree, prefix="repo/"), "/")
        run = run_tests(session, ctx, "model", attempt=0, selection=selection)
    statuses = {t.test_id: t.status for t in run.tests}
    report = {test_id: statuses.get(test_id, "MISSING") for test_id in graded}
    if not run.suite_ran and not statuses:
        verdict = PatchVerdict(False, "suite_did_not_run", report)
    else:
        resolved = all(status == PASSED for status in report.values())
        verdict = PatchVerdict(resolved, "resolved" if resolved else "tests_failed", report)
    if cache is not None:
        cache.put(
            key,
            {"resolved": verdict.resolved, "reason": verdict.reason, "test_report": report},
        )
    return verdict
