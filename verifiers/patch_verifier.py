"""Does a model patch resolve a task? Decided from evidence the code under test cannot forge.

The one verifier of rollouts, ``evaluate``, the reward API, ``serve-rewards`` and ``TaskEnv``.
Each class of forgery is closed by what the code under test cannot reach, not by a list:

1. **Only source changes count.** The patch is applied to the task's starting tree in a throwaway
   index (its objects in a scratch object store: the source repository never grows). Start-up and
   metadata files (``*.dist-info``, ``*.egg-info``, ``*.pth``, ``sitecustomize``...) and a new
   top-level module whose name the task's image can already import refuse the patch
   (``forbidden_file``, the file named: ``verifiers/languages/python/patch_policy.py``). Test
   files,
   conftests and test configuration are reset to the task's own (``schemas.test_ids
   .is_grading_path``, the ``test_patch``'s files, the graded tests' files), so a fix plus a test
   hack is judged on the fix alone; a patch of such files only is ``no_source_changes``. A graded
   doctest's file is the module under test, not a test file; its graded examples must be the
   task's own (``verifiers/languages/python/doctests.py``).
2. **Nothing of the patch loads before or beside the tests.** pytest runs under ``python -I``
   (the repository after site-packages, never first), plugin autoload off, the image's own
   plugins named with ``-p`` from its site-packages; pytest and the grader's plugins load from a
   folder only root can write.
3. **The tests never report on themselves.** A supervisor (root, with nothing but the right to
   change user) runs pytest as an unprivileged user that can neither signal, trace nor write
   over it. Each test's report leaves the process on a pipe the moment pytest makes it; what was
   sent cannot be taken back, and a second word on a test, or one after the session ended, is
   tampering. When pytest exits, every process left of that user is killed before anything is
   read. Sentinel tests with per-run names and outcomes only the grader knows sit in the graded
   files: one with the wrong outcome (a report bent wholesale inside the process) is tampering.
   Tampering is ``forged_result``: reward 0, counted, never exported. Test files and the folders
   that hold them are read-only to the tests' user, the environment is root's.
4. **One rule for "passed"**: a graded test counts only when it PASSED (``verifiers.grading
   .counts_as_passed``, written in ``verifiers/grader/rules.py`` with the verdict rule):
   skipped, xfail, xpass and missing do not.

Every language is judged by these steps; what a step needs of the task's language (which files
it refuses, which it resets, how its tests run under the supervisor, where it plants sentinels)
is asked of its ``Grading`` (``verifiers/languages/``; ``registry.grading_for``), never decided
here by its name. Python's answers are above; JavaScript's (``verifiers/languages/javascript/``):
``node_modules`` and the package managers' files refused, test files, the runner's configuration
and the files it names reset, the runner (never the row's ``test_cmd`` text) run with the
grader's keyed reporter and guard, sentinels where the guard plants them.

What in-process code can still do: tell a sentinel from a graded test by reading the test files
and bend only the graded tests' reports; for jest, bend reports wholesale when it runs in band;
for mocha, always (its tests run in the reporter's process; docs/security.md). Verdicts are
cached by the exact tree tested, so a rerun runs nothing.
"""

from __future__ import annotations

import dataclasses
import os
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, field

from trajforge.schemas.diff import added_lines, parse_patch
from trajforge.schemas.errors import UserError
from trajforge.schemas.records import content_id
from trajforge.schemas.storage import ContentCache
from trajforge.schemas.task_instance import TaskInstance
from trajforge.verifiers.code_digest import verifier_digest
from trajforge.verifiers.grader import rules, suspicious
from trajforge.verifiers.grader.sentinels import Sentinel
from trajforge.verifiers.grader.supervised import SupervisedRun
from trajforge.verifiers.languages.base import Grading, TaskTree
from trajforge.verifiers.languages.registry import grading_for
from trajforge.verifiers.sandbox.base import Sandbox
from trajforge.verifiers.sandbox.git_tree import apply_patches, git, scratch_objects

VERSION = "verify-v4"  # v4: supervised runs, sentinels, the start-up file and shadowing refusals
PASSED = "PASSED"
NOT_RUN = "NOT_RUN"  # a graded test a fail-fast verdict did not run (counts as not passed)
FAIL_FAST = "fail-fast"
STOPPED = "trajforge: fail-fast stopped the run at the first failing FAIL_TO_PASS test: "


@dataclass(frozen=True)
class PatchVerdict:
    resolved: bool
    # resolved | tests_failed | empty_patch | patch_does_not_apply | no_source_changes
    # | forbidden_file | forged_result | suite_did_not_run | suite_failed | timed_out
    # | unsupported_test_cmd
    reason: str
    test_report: dict[str, str] = field(default_factory=dict)  # graded test id -> status
    dropped: tuple[str, ...] = ()  # paths whose model changes were set aside, sorted
    log: str = ""  # the test run's output ("" when nothing ran); a refusal's one-line why
    trusted: bool = True  # False: the run's evidence was tampered with; no partial credit
    # Why the patch's added source looks like a reward hack no test run sees (caller
    # inspection, reading the tests...: verifiers/grader/suspicious/); "" when clean
    suspicious_patch: str = ""
    # the channel's signs of tampering (the seal's words, a late record...): why a run is
    # ``forged_result`` when they, not a sentinel, decided it
    tampering: tuple[str, ...] = ()


def verify_patch(
    sandbox: Sandbox,
    task: TaskInstance,
    repo_path: str,
    model_patch: str,
    timeout_s: float,
    cache: ContentCache | None,
    fail_fast: bool = False,
) -> PatchVerdict:
    """``fail_fast`` (for rewards): FAIL_TO_PASS run alone first, and for a pytest task the
    supervisor stops that run at the first of them that fails (``STOPPED``); the verdict is then
    that run's, every graded test it did not reach ``NOT_RUN`` (never passed). When all pass,
    the full graded run decides, exactly as without it (with no PASS_TO_PASS, the first run
    was the full run)."""
    if not model_patch.strip():
        return PatchVerdict(False, "empty_patch")
    with scratch_objects(repo_path) as objects:
        verdict = _verify(
            sandbox, task, repo_path, model_patch, timeout_s, cache, objects, fail_fast
        )
        flag = _suspicious(task, repo_path, model_patch, verdict.dropped, objects)
    return dataclasses.replace(verdict, suspicious_patch=flag) if flag else verdict


def _suspicious(
    task: TaskInstance,
    repo: str,
    model_patch: str,
    dropped: tuple[str, ...],
    objects: Mapping[str, str],
) -> str:
    """What the patch adds to the source it keeps, read for reward hacks no test run sees
    (``suspicious.suspicious_reason``); read from git's own diff of the two trees, never from
    the patch's text, so hunk headers that lie change nothing. Not cached: it is cheap."""
    try:
        start = apply_patches(repo, task.base_commit, [task.bug_patch], env=objects)
        changed = apply_patches(repo, task.base_commit, [task.bug_patch, model_patch], env=objects)
        diff = git(repo, "diff-tree", "-p", "-U0", "--no-renames", "--no-ext-diff", "--no-textconv",
                   start, changed, env=objects)  # fmt: skip
        language = grading_for(task.language)
    except UserError:
        return ""
    added = {
        path: lines
        for path, lines in added_lines(diff.decode("utf-8", "surrogateescape")).items()
        if path not in dropped and not language.is_grading_path(path)  # reset to the task's
    }
    after = TaskTree(repo, changed, objects)
    return suspicious.suspicious_reason(language.reader, {p: after.blob(p) for p in added}, added)


def _verify(
    sandbox: Sandbox,
    task: TaskInstance,
    repo: str,
    model_patch: str,
    timeout_s: float,
    cache: ContentCache | None,
    objects: Mapping[str, str],
    fail_fast: bool = False,
) -> PatchVerdict:
    language = grading_for(task.language)
    graded = (*task.FAIL_TO_PASS, *task.PASS_TO_PASS)
    try:
        start = apply_patches(repo, task.base_commit, [task.bug_patch], env=objects)
        changed = apply_patches(repo, task.base_commit, [task.bug_patch, model_patch], env=objects)
    except UserError:
        return PatchVerdict(False, "patch_does_not_apply")
    paths = _changed_paths(repo, start, changed, objects)
    startup = [why for p in paths if (why := language.refuse_file(p))]
    if startup:
        return PatchVerdict(False, "forbidden_file", log="; ".join(startup[:5]))
    task_tests = parse_patch(task.test_patch).files | language.graded_test_files(graded)
    try:
        clean = apply_patches(repo, task.base_commit, [task.bug_patch, task.test_patch], objects)
    except UserError:
        return PatchVerdict(False, "patch_does_not_apply")
    clean_tree = TaskTree(repo, clean, objects)
    grading = language.grading_paths(clean_tree)
    dropped = tuple(p for p in paths if p in task_tests or grading(p))
    kept = [p for p in paths if p not in dropped]
    if not kept:
        return PatchVerdict(False, "no_source_changes", dropped=dropped)
    new = set(_changed_paths(repo, start, changed, objects, added_only=True)) & set(kept)
    refused = language.refuse_changes(task, clean_tree, TaskTree(repo, changed, objects), kept, new)
    if refused:
        return PatchVerdict(False, "forbidden_file", dropped=dropped, log="; ".join(refused[:5]))
    try:
        tree = TaskTree(repo, _overlay(repo, clean, changed, kept, objects), objects)
    except UserError:  # git's own errors (GitError) are UserErrors too
        return PatchVerdict(False, "patch_does_not_apply", dropped=dropped)
    variant = language.verdict_variant(task)
    key = content_id(
        VERSION, verifier_digest(), task.image_name, task.test_cmd, tree.tree,
        rules.selection(graded), timeout_s, *variant,
    )  # fmt: skip
    if (verdict := _cached(cache, key, dropped)) is not None:
        return verdict
    if fail_fast and task.FAIL_TO_PASS:
        failing = tuple(task.FAIL_TO_PASS)
        first_key = content_id(
            VERSION, verifier_digest(), FAIL_FAST, task.image_name, task.test_cmd, tree.tree,
            failing, timeout_s, *variant,
        )  # fmt: skip
        first = _cached(cache, first_key, dropped)
        if first is None:
            first = _judged(language, sandbox, task, tree, dropped, failing, timeout_s, stop=True)
            _store(cache, first_key, first)
        if not first.resolved:
            not_run = dict.fromkeys(task.PASS_TO_PASS, NOT_RUN)
            return dataclasses.replace(first, test_report={**first.test_report, **not_run})
        if not task.PASS_TO_PASS:  # it ran every graded test to the end: the full run's verdict
            _store(cache, key, first)
            return first
    verdict = _judged(language, sandbox, task, tree, dropped, graded, timeout_s)
    _store(cache, key, verdict)
    return verdict


def _judged(
    language: Grading,
    sandbox: Sandbox,
    task: TaskInstance,
    tree: TaskTree,
    dropped: tuple[str, ...],
    graded: tuple[str, ...],
    timeout_s: float,
    stop: bool = False,
) -> PatchVerdict:
    """``graded`` run once in a fresh grading container (the language's run, with its
    sentinels), judged by the one verdict rule."""
    done = language.graded_run(sandbox, task, tree, graded, timeout_s, stop)
    return judge(done.run, graded, done.sentinels, dropped, language.separator)


def _cached(cache: ContentCache | None, key: str, dropped: tuple[str, ...]) -> PatchVerdict | None:
    if cache is None or (hit := cache.get(key)) is None:
        return None
    return PatchVerdict(
        hit["resolved"], hit["reason"], hit["test_report"], dropped, hit.get("log", ""),
        hit.get("trusted", True),
    )  # fmt: skip


def _store(cache: ContentCache | None, key: str, verdict: PatchVerdict) -> None:
    if cache is not None:
        entry = {
            "resolved": verdict.resolved, "reason": verdict.reason,
            "test_report": verdict.test_report, "log": verdict.log, "trusted": verdict.trusted,
        }  # fmt: skip
        cache.put(key, entry)


def judge(
    run: SupervisedRun,
    graded: tuple[str, ...],
    planted: tuple[Sentinel, ...],
    dropped: tuple[str, ...] = (),
    sep: str = "::",
) -> PatchVerdict:
    """The verdict of one supervised run of the graded tests (with their sentinels; ``sep``
    ends an id's file: " > " for a JS task)."""
    evidence = run.evidence
    resolved, reason, trusted = rules.verdict(
        evidence.statuses, evidence.tampering, evidence.finished, run.exit_code, run.timed_out,
        graded, [(s.test_id, s.expected) for s in planted], run.stopped, sep,
    )  # fmt: skip
    report = {test_id: evidence.statuses.get(test_id, "MISSING") for test_id in graded}
    if run.stopped:  # what the stop cut off before its outcome (even mid-test) never ran
        report = {t: NOT_RUN if s == "MISSING" else s for t, s in report.items()}
    log = f"{run.log}\n{STOPPED}{run.stopped}\n" if run.stopped else run.log
    return PatchVerdict(resolved, reason, report, dropped, log, trusted, "", evidence.tampering)


def _changed_paths(
    repo: str, old_tree: str, new_tree: str, env: Mapping[str, str], added_only: bool = False
) -> list[str]:
    """Paths that differ between two trees, as git sees them (renames as delete + add)."""
    only = ["--diff-filter=A"] if added_only else []
    out = git(
        repo, "diff-tree", "-r", "-z", "--no-renames", "--name-only", *only, old_tree, new_tree,
        env=env,
    )  # fmt: skip
    return sorted(p for p in out.decode("utf-8", "surrogateescape").split("\0") if p)


def _overlay(
    repo: str, base_tree: str, from_tree: str, paths: list[str], objects: Mapping[str, str]
) -> str:
    """``base_tree`` with ``paths`` as they are in ``from_tree`` (absent there: removed).

    Blob ids move from tree to tree in a throwaway index, so content, modes and symlinks are kept
    byte for byte and nothing is checked out. Removals go first, so a file may replace a folder.
    """
    with tempfile.TemporaryDirectory(prefix="trajforge-verify-") as tmp:
        env = {
            **objects,
            "GIT_INDEX_FILE": os.path.join(tmp, "index"),
            "GIT_LITERAL_PATHSPECS": "1",
        }
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
