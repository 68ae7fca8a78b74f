"""Does a model patch resolve a task? Decided from evidence the code under test cannot forge.

The one verifier of rollouts, ``evaluate``, the reward API, ``serve-rewards`` and ``TaskEnv``.
Each class of forgery is closed by what the code under test cannot reach, not by a list:

1. **Only source changes count.** The patch is applied to the task's starting tree in a throwaway
   index (its objects in a scratch object store: the source repository never grows). Start-up and
   metadata files (``*.dist-info``, ``*.egg-info``, ``*.pth``, ``sitecustomize``...) and a new
   top-level module whose name the task's image can already import refuse the patch
   (``forbidden_file``, the file named: ``verifiers/grader/patch_policy.py``). Test files,
   conftests and test configuration are reset to the task's own (``schemas.test_ids
   .is_grading_path``, the ``test_patch``'s files, the graded tests' files), so a fix plus a test
   hack is judged on the fix alone; a patch of such files only is ``no_source_changes``. A graded
   doctest's file is the module under test, not a test file; its graded examples must be the
   task's own (``verifiers/grader/doctests.py``).
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

A JavaScript task (``language == "javascript"``) is judged by the same steps with its own
answers: ``verifiers/grader/js_policy.py`` refuses ``node_modules`` and the package managers'
files and resets test files, the runner's configuration and the files it names; the supervisor
runs node's jest or mocha (never the row's ``test_cmd`` text) with the grader's keyed reporter
(``supervised.run_supervised_js``), the tree's tests, configuration and ``node_modules``
read-only to the tests' user; the grader's guard fixes the runner's globals and ``node:assert``
before the tests load and plants the run's sentinels (jest, vitest, mocha, node --test).

What in-process code can still do: tell a sentinel from a graded test by reading the test files
and bend only the graded tests' reports; for jest, bend reports wholesale when it runs in band;
for mocha, always (its tests run in the reporter's process; docs/security.md). Verdicts are
cached by the exact tree tested, so a rerun runs nothing.
"""

from __future__ import annotations

import dataclasses
import io
import os
import tarfile
import tempfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from trajforge.schemas.diff import added_lines, parse_patch
from trajforge.schemas.errors import UserError
from trajforge.schemas.js_commands import package_dir
from trajforge.schemas.records import content_id
from trajforge.schemas.storage import ContentCache
from trajforge.schemas.task_instance import TaskInstance
from trajforge.schemas.test_ids import is_grading_path, is_module_doctest, test_file
from trajforge.verifiers.grader import (
    doctests,
    js_policy,
    js_sentinels,
    patch_policy,
    rules,
    sentinels,
    suspicious,
)
from trajforge.verifiers.grader.sentinels import Sentinel
from trajforge.verifiers.grader.supervised import (
    SupervisedRun,
    add_grader,
    add_run_spec,
    image_facts,
    known_facts,
    pytest_args,
    run_supervised,
    run_supervised_js,
    ship,
)
from trajforge.verifiers.reports.ids import test_file as js_test_file
from trajforge.verifiers.sandbox.base import Sandbox, SessionSpec
from trajforge.verifiers.sandbox.git_tree import apply_patches, archive, git, scratch_objects

VERSION = "verify-v4"  # v4: supervised runs, sentinels, the start-up file and shadowing refusals
PASSED = "PASSED"
NOT_RUN = "NOT_RUN"  # a graded test a fail-fast verdict did not run (counts as not passed)
FAIL_FAST = "fail-fast"
STOPPED = "trajforge: fail-fast stopped the run at the first failing FAIL_TO_PASS test: "
JAVASCRIPT = "javascript"
JS_VERSION = "verify-js-v1"  # a JS task's verdicts: supervised jest with the grader's reporter
MAX_SELECTED = 400  # beyond this many graded tests, run the whole suite and read them from it


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


def verify_patch(
    sandbox: Sandbox,
    task: TaskInstance,
    repo_path: str,
    model_patch: str,
    junit_path: str,  # kept for callers; the grader reads the reporter's records instead
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
    except UserError:
        return ""
    tests = js_policy.is_grading_path if _is_js(task) else is_grading_path
    added = {
        path: lines
        for path, lines in added_lines(diff.decode("utf-8", "surrogateescape")).items()
        if path not in dropped and not tests(path)  # test files are reset to the task's
    }
    files = {p: _blob(repo, changed, p, objects) for p in added}
    return suspicious.suspicious_reason(task.language, files, added)


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
    graded = (*task.FAIL_TO_PASS, *task.PASS_TO_PASS)
    try:
        start = apply_patches(repo, task.base_commit, [task.bug_patch], env=objects)
        changed = apply_patches(repo, task.base_commit, [task.bug_patch, model_patch], env=objects)
    except UserError:
        return PatchVerdict(False, "patch_does_not_apply")
    paths = _changed_paths(repo, start, changed, objects)
    refused = js_policy.forbidden_file if _is_js(task) else patch_policy.startup_file
    startup = [why for p in paths if (why := refused(p))]
    if startup:
        return PatchVerdict(False, "forbidden_file", log="; ".join(startup[:5]))
    # a graded doctest's file is the module under test, not a test file (its examples are kept)
    task_tests = parse_patch(task.test_patch).files | {
        _test_file(task, t) for t in graded if not is_module_doctest(t)
    }
    try:
        clean = apply_patches(repo, task.base_commit, [task.bug_patch, task.test_patch], objects)
    except UserError:
        return PatchVerdict(False, "patch_does_not_apply")
    grading = _grading_path(task, repo, clean, objects)
    dropped = tuple(p for p in paths if p in task_tests or grading(p))
    kept = [p for p in paths if p not in dropped]
    if not kept:
        return PatchVerdict(False, "no_source_changes", dropped=dropped)
    if changed_tests := _changed_doctests(repo, clean, changed, kept, graded, objects):
        return PatchVerdict(
            False, "forbidden_file", dropped=dropped, log="; ".join(changed_tests[:5])
        )
    new = set(_changed_paths(repo, start, changed, objects, added_only=True)) & set(kept)
    if not _is_js(task) and (new_modules := _new_modules(task, repo, clean, new, objects)):
        log = "; ".join(new_modules[:5])
        return PatchVerdict(False, "forbidden_file", dropped=dropped, log=log)
    try:
        tree = _overlay(repo, clean, changed, kept, objects)
    except UserError:  # git's own errors (GitError) are UserErrors too
        return PatchVerdict(False, "patch_does_not_apply", dropped=dropped)
    key = content_id(
        VERSION, task.image_name, task.test_cmd, tree, _selection(graded), timeout_s,
        *_variant(task),
    )  # fmt: skip
    if (verdict := _cached(cache, key, dropped)) is not None:
        return verdict
    if fail_fast and task.FAIL_TO_PASS:
        failing = tuple(task.FAIL_TO_PASS)
        first_key = content_id(
            VERSION, FAIL_FAST, task.image_name, task.test_cmd, tree, failing, timeout_s,
            *_variant(task),
        )  # fmt: skip
        first = _cached(cache, first_key, dropped)
        if first is None:
            first = _graded_run(
                sandbox, task, repo, tree, objects, dropped, failing, timeout_s, stop=True
            )
            _store(cache, first_key, first)
        if not first.resolved:
            not_run = dict.fromkeys(task.PASS_TO_PASS, NOT_RUN)
            return dataclasses.replace(first, test_report={**first.test_report, **not_run})
        if not task.PASS_TO_PASS:  # it ran every graded test to the end: the full run's verdict
            _store(cache, key, first)
            return first
    verdict = _graded_run(sandbox, task, repo, tree, objects, dropped, graded, timeout_s)
    _store(cache, key, verdict)
    return verdict


def _changed_doctests(
    repo: str, clean: str, changed: str, kept: list[str], graded: tuple[str, ...],
    objects: Mapping[str, str],
) -> list[str]:  # fmt: skip
    """Why the patch's change of a module whose doctests are graded rewrites one of them."""
    why = []
    for path, ids in doctests.graded_modules(graded).items():
        if path in kept:
            own = _blob(repo, clean, path, objects) or b""
            theirs = _blob(repo, changed, path, objects) or b""
            why += doctests.changed_doctests(path, ids, own, theirs)
    return why


def _is_js(task: TaskInstance) -> bool:
    return task.language == JAVASCRIPT


def _variant(task: TaskInstance) -> tuple[str, ...]:
    """What else decides a verdict's key: nothing for pytest (its keys stay as they were), the
    JS grading's version and runner for a JS task."""
    return (JS_VERSION, task.test_runner) if _is_js(task) else ()


def _test_file(task: TaskInstance, test_id: str) -> str:
    return js_test_file(test_id) if _is_js(task) else test_file(test_id)


def _grading_path(
    task: TaskInstance, repo: str, clean: str, objects: Mapping[str, str]
) -> Callable[[str], bool]:
    """Whether a path decides how the tests run (reset to the task's own): pytest's rule by
    name; for JS, by name or named by a configuration of the task's own tree."""
    if not _is_js(task):
        return is_grading_path
    named = _js_grading_files(repo, clean, objects)
    return lambda path: path in named or js_policy.is_grading_path(path)


def _js_grading_files(repo: str, tree: str, objects: Mapping[str, str]) -> set[str]:
    return js_policy.grading_files(
        _tree_paths(repo, tree, objects), lambda p: _blob(repo, tree, p, objects)
    )


def _new_modules(
    task: TaskInstance, repo: str, clean: str, new: set[str], objects: Mapping[str, str]
) -> list[str]:
    """Why each new file adds a top-level module the task's tree does not have (patch_policy)."""
    if not new:
        return []
    paths = _tree_paths(repo, clean, objects)
    graded_files = {test_file(t) for t in (*task.FAIL_TO_PASS, *task.PASS_TO_PASS)}
    names = patch_policy.top_level_names(paths, patch_policy.import_dirs(graded_files, paths))
    return [w for p in sorted(new) if (w := patch_policy.new_top_level_module(p, names))]


def _selection(graded: tuple[str, ...]) -> tuple[str, ...]:
    """The tests named to pytest: the graded ones, or none (the whole suite) when too many."""
    return graded if len(graded) <= MAX_SELECTED else ()


def _graded_run(
    sandbox: Sandbox,
    task: TaskInstance,
    repo: str,
    tree: str,
    objects: Mapping[str, str],
    dropped: tuple[str, ...],
    graded: tuple[str, ...],
    timeout_s: float,
    stop: bool = False,
) -> PatchVerdict:
    """``graded`` (with sentinels in their files) run once in a fresh grading container.
    ``stop`` (fail-fast's first run, pytest only): the sentinels run first, and the supervisor
    ends the run at the first graded test that fails."""
    if _is_js(task):
        return _graded_js_run(sandbox, task, repo, tree, objects, dropped, graded, timeout_s)
    selection = _selection(graded)
    tests = [t for t in graded if not is_module_doctest(t)]  # a doctest's module gets none
    failing_tests = {test_file(t) for t in task.FAIL_TO_PASS if t in tests}
    sentinel_files = failing_tests or {test_file(t) for t in tests}
    with sandbox.session(SessionSpec(task.image_name, grading=True)) as session:
        facts = known_facts(task.image_name)
        if facts is None:  # the image's first graded run in this process: ship, then probe
            ship(session)
            facts = image_facts(session, task.image_name)
        originals = {p: _blob(repo, tree, p, objects) for p in sorted(sentinel_files)}
        planted, planted_sentinels = sentinels.plant(
            {p: b for p, b in originals.items() if b is not None},
            tuple(t for t in task.FAIL_TO_PASS if t in graded),  # the ones a forger aims at
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
        session.put_archive(_graded_archive(repo, tree, objects, planted, spec), "/")
        run = run_supervised(session, timeout_s)
        return judge(run, graded, planted_sentinels, dropped)


def _guarded(
    task: TaskInstance, graded: tuple[str, ...], planted: Mapping[str, bytes]
) -> tuple[str, ...]:
    """The files the graded run collects from, read-only to the tests whatever their names:
    the graded tests' files (a Django ``tests.py``, a doctest's module), the task's test patch
    and every file a sentinel sits in."""
    files = {test_file(t) for t in graded} | parse_patch(task.test_patch).files | set(planted)
    return tuple(sorted(files))


def _graded_js_run(
    sandbox: Sandbox,
    task: TaskInstance,
    repo: str,
    tree: str,
    objects: Mapping[str, str],
    dropped: tuple[str, ...],
    graded: tuple[str, ...],
    timeout_s: float,
) -> PatchVerdict:
    """A JS task's graded files, run by its runner under the supervisor with the grader's
    reporter and guard; the tree's tests and configuration read-only to the tests' user.
    Sentinels where the runner lets the guard plant them (``js_sentinels``)."""
    # Always named (a JS runner selects by file, and files are few even where tests are not),
    # so every runner runs the graded files only, as validate's reruns did.
    files = tuple(sorted({js_test_file(t) for t in graded}))
    failing = {js_test_file(t) for t in task.FAIL_TO_PASS if t in graded}
    spec, planted = b"{}", tuple[Sentinel, ...]()
    if task.test_runner in js_sentinels.SENTINEL_RUNNERS:
        texts = {p: _blob(repo, tree, p, objects) for p in sorted(failing or set(files))}
        spec, planted = js_sentinels.draw({p: b for p, b in texts.items() if b is not None})
    guard = sorted(_js_grading_files(repo, tree, objects))
    with sandbox.session(SessionSpec(task.image_name, grading=True)) as session:
        ship(session)
        session.put_archive(archive(repo, tree, prefix="repo/", env=objects), "/")
        folder = package_dir(task.test_cmd)  # a monorepo's tested package, as validate ran it
        manifest = f"{folder}/package.json" if folder else "package.json"
        package = _blob(repo, tree, manifest, objects)  # the task's own (reset)
        run = run_supervised_js(
            session, task.test_runner, files, guard, timeout_s, package, folder, spec
        )
        planted = js_sentinels.heard(planted, run.evidence.statuses)
        return judge(run, graded, planted, dropped, js_sentinels.SEPARATOR)


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
    return PatchVerdict(resolved, reason, report, dropped, log, trusted)


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


def _tree_paths(repo: str, tree: str, env: Mapping[str, str]) -> list[str]:
    out = git(repo, "ls-tree", "-r", "-z", "--name-only", "--full-tree", tree, env=env)
    return [p for p in out.decode("utf-8", "surrogateescape").split("\0") if p]


def _blob(repo: str, tree: str, path: str, env: Mapping[str, str]) -> bytes | None:
    try:
        return git(repo, "cat-file", "blob", f"{tree}:{path}", env=env)
    except UserError:
        return None


@dataclass(frozen=True)
class RunSpec:
    """What one graded pytest run runs (``supervised.add_run_spec``)."""

    args: list[str]
    graded: tuple[str, ...]  # the ids the seal checks before and after they run
    guard: tuple[str, ...]  # repository files the tests may not write
    stop_at: tuple[str, ...]  # a fail-fast run's stops


def _graded_archive(
    repo: str, tree: str, objects: Mapping[str, str], planted: dict[str, bytes], spec: RunSpec
) -> bytes:
    """The tree under repo/, the grader, what it runs and the graded files with their
    sentinels, as one copy (each copy is a round trip to the engine and an unpacking process in
    the container). A planted file comes after the tree's own, and an engine unpacks in order,
    the later entry replacing the earlier, as a second copy did."""
    buffer = io.BytesIO(archive(repo, tree, prefix="repo/", env=objects))
    with tarfile.open(fileobj=buffer, mode="a") as tar:
        add_grader(tar)
        add_run_spec(tar, spec.args, spec.graded, spec.guard, spec.stop_at)
        for path, data in sorted(planted.items()):
            info = tarfile.TarInfo(f"repo/{path}")
            info.size, info.mode = len(data), 0o644
            tar.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


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
