"""Validate one candidate: base, then gold in the same container, reruns, the rule, a cached result.

The base run comes first, in a fresh container that has seen nothing of the fix (no patch, no
history). Then that container is reset to what a fresh one holds (no process left by the run,
nothing in /repo or /tmp) and the gold tree goes in; a container that cannot be reset is replaced
by a fresh one. Reruns of the decisive tests need both states: gold reruns in the gold run's
container, base reruns in a fresh one, so no base run ever follows gold in a container. Most
candidates (no decisive test, or a base that fails on its own) cost one container.

Results are cached by the content hash of everything that decides them (image, the exact trees
tested, the command and the rerun policy), so rerunning the stage skips finished work and any
worker can reuse any result. The cache holds a verdict, not an identity: two rows with the same
trees (a dataset that lists one fix under two ids) share the verdict, and a hit is handed to
the asking candidate with its own ids, patches and provenance (``as_candidate``).

Only verdicts of complete runs are cached: when the sandbox breaks under a run (a container
killed or gone, the engine erring: ``SandboxBroken``), the candidate is validated once more in
fresh containers, and if that breaks too it is rejected as ``infra_failure``, uncached, so the
next run of the stage tries again.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import dataclass
from typing import ClassVar

from trajforge.schemas.candidate import Candidate
from trajforge.schemas.env_profile import EnvProfile
from trajforge.schemas.params import ValidateParams
from trajforge.schemas.records import content_id, from_row, to_row
from trajforge.schemas.rejection import Rejection
from trajforge.schemas.storage import ContentCache
from trajforge.schemas.task_instance import TaskInstance, Validation
from trajforge.schemas.test_run import TestRun
from trajforge.verifiers.code_digest import verifier_digest
from trajforge.verifiers.languages.registry import grading_for
from trajforge.verifiers.sandbox.base import Sandbox, SandboxBroken, Session, SessionSpec
from trajforge.verifiers.sandbox.git_tree import apply_patches, archive
from trajforge.verifiers.sandbox.lanes import NONE, Lanes
from trajforge.verifiers.sandbox.ready import SERVICES_ENTRYPOINT
from trajforge.verifiers.test_runner import Reading, RunContext, run_tests, with_test_limit
from trajforge.verifiers.validation.rule import (
    Verdict,
    decisive_tests,
    failing_tests,
    judge,
    suite_failure,
    unbuilt_modules,
    with_unbuilt_failing,
)

STAGE = "validate"
CACHE_VERSION = "validate-v2"
INFRA_FAILURE = "infra_failure"  # the sandbox broke twice: not a verdict, never cached
RESET_TIMEOUT_S = 120.0
# Backends whose session is a container with its own process namespace, so RESET's kills stay in
# it ("local" runs on the host: each state there gets a fresh session, as everywhere before).
RESETTABLE = ("docker", "podman")
# Back to what a fresh container of the image holds, where the base run left it: no process but
# init, its one first child (the container's main process) and this shell; /repo and /tmp empty
# (made writable first: dropped capabilities leave root to the permission bits), then the files
# the install generated put back in /repo, and the services the image's entrypoint starts
# started afresh (their state is the base run's otherwise). Exit 0 only when both were emptied.
# Without /proc/1/task/1/children no process is killed (the main one is unknown).
RESET = (
    # (the file ends without a newline, so read's status says nothing)
    "main=; read -r main _ < /proc/1/task/1/children 2>/dev/null; "
    'if [ -n "$main" ]; then '
    "for p in /proc/[0-9]*; do pid=${p#/proc/}; "
    'case "$pid" in 1|"$main"|"$$") ;; *) kill -9 "$pid" 2>/dev/null;; esac; done; fi; '
    "chmod -R u+rwX /repo /tmp 2>/dev/null; "
    "find /repo /tmp -mindepth 1 -delete 2>/dev/null; "
    'test -z "$(find /repo /tmp -mindepth 1 -print -quit 2>/dev/null)" && '
    # then what a fresh container's /repo holds: the files the install generated (recipe.py)
    "{ [ ! -d /venv/trajforge-generated ] || cp -a /venv/trajforge-generated/. /repo/; } && "
    f"{{ [ ! -x {SERVICES_ENTRYPOINT} ] || {SERVICES_ENTRYPOINT} true >/dev/null 2>&1; }}"
)


@dataclass(frozen=True)
class TestTree:
    """The exact files of one test run: a content id, and a tar of them under ``repo/``."""

    __test__: ClassVar[bool] = False  # a test module imports it: pytest must not collect it
    tree_id: str
    tar: Callable[[], bytes]  # called only when the verdict is not cached

    @classmethod
    def at(cls, repo_path: str, base_commit: str, patches: list[str]) -> TestTree:
        """The tree a test run sees, applied in a throwaway index; its tar is made if needed."""
        tree = apply_patches(repo_path, base_commit, patches)
        return cls(tree, lambda: archive(repo_path, tree, prefix="repo/"))


@dataclass(frozen=True)
class ValidationResult:
    task: TaskInstance | None
    rejection: Rejection | None
    runs: tuple[TestRun, ...]
    cached: bool = False


def verdict_difference(reused: ValidationResult, own: ValidationResult) -> str:
    """Why one candidate's verdicts in two environments differ, in one line; "" when they are
    the same: both kept with the same FAIL_TO_PASS and PASS_TO_PASS, or both rejected for the
    same reason. A run the sandbox broke compares with nothing (said, so the caller keeps the
    environment it can trust)."""
    verdicts = [_verdict(result) for result in (reused, own)]
    if f"rejected {INFRA_FAILURE}" in verdicts:
        return "the candidate's runs broke in the sandbox; nothing to compare"
    if verdicts[0] != verdicts[1]:
        return f"{verdicts[0]} in the reused image, {verdicts[1]} in its own"
    if reused.task is None or own.task is None:
        return ""
    for name in ("FAIL_TO_PASS", "PASS_TO_PASS"):
        ours, theirs = set(getattr(reused.task, name)), set(getattr(own.task, name))
        if ours != theirs:
            first = sorted(ours ^ theirs)[0]
            where = "the reused image" if first in ours else "its own"
            return f"{name} differs in {len(ours ^ theirs)} tests, first {first} (only in {where})"
    return ""


def _verdict(result: ValidationResult) -> str:
    return "kept" if result.task is not None else f"rejected {_reason(result)}"


def _reason(result: ValidationResult) -> str:
    return result.rejection.reason if result.rejection is not None else "without a reason"


def instance_id(candidate: Candidate) -> str:
    """An imported row keeps its dataset's id, so predictions made for the dataset still match."""
    if candidate.labels is not None and candidate.labels.instance_id:
        return candidate.labels.instance_id
    return f"{candidate.repo.replace('/', '__')}-{candidate.candidate_id[:12]}"


def with_limits(profile: EnvProfile, params: ValidateParams) -> EnvProfile:
    """The profile whose test command limits each test (``validate.per_test_timeout_s``): one
    hanging test fails alone. Every run, cache key and task of the profile uses this command, so
    a task's ``test_cmd`` is how its lists were made."""
    command = with_test_limit(profile.test_cmd, profile.install, params.per_test_timeout_s)
    return dataclasses.replace(profile, test_cmd=command)


def validate_candidate(
    sandbox: Sandbox,
    candidate: Candidate,
    profile: EnvProfile,
    base: TestTree,
    gold: TestTree,
    params: ValidateParams,
    junit_path: str | Reading,
    cache: ContentCache | None,
    lanes: Lanes = NONE,
) -> ValidationResult:
    """``base`` is base + test_patch, ``gold`` is base + test_patch + patch. ``junit_path``:
    where pytest writes its JUnit XML, or how another runner's runs read (``Reading``).
    ``lanes``: the stage's, whose free ones take runs that need not wait (``lanes.py``)."""
    profile = with_limits(profile, params)
    decides = (profile.profile_id, profile.image, profile.test_cmd, base.tree_id, gold.tree_id)
    policy = (params.reruns, params.rerun_scope, params.test_timeout_s, params.unbuilt_at_base)
    # a language whose modules end with a crash is judged by that rule too (rule.py): its
    # verdicts made before it are not replayed; the others' keys stay as they were
    crash_rule = (
        ("crashed-modules",) if grading_for(profile.language).module_ends_with_a_crash else ()
    )
    key = content_id(CACHE_VERSION, verifier_digest(), *decides, *policy, *crash_rule, length=32)
    if cache is not None and (hit := cache.get(key)) is not None:
        return from_cache(hit, candidate)
    ctx = Reading.of(junit_path).context(
        candidate.candidate_id, profile.profile_id, profile.test_cmd, params.test_timeout_s
    )
    try:
        base_runs, gold_runs, verdict = _run_and_judge(
            sandbox, profile, base, gold, ctx, params, lanes
        )
    except SandboxBroken:  # a container died or the engine erred: once more, in fresh ones
        try:
            base_runs, gold_runs, verdict = _run_and_judge(
                sandbox, profile, base, gold, ctx, params, lanes
            )
        except SandboxBroken as exc:  # not a verdict: never cached, a rerun of the stage retries
            return infra_failure(candidate, exc)
    runs = tuple(base_runs + gold_runs)
    if verdict.kept:
        task = build_task(candidate, profile, verdict, base_runs, gold_runs)
        result = ValidationResult(task, None, runs)
    else:
        result = rejected(candidate, verdict.reason, verdict.detail, runs)
    if cache is not None:
        cache.put(key, to_cache(result))
    return result


def _run_and_judge(
    sandbox: Sandbox,
    profile: EnvProfile,
    base: TestTree,
    gold: TestTree,
    ctx: RunContext,
    params: ValidateParams,
    lanes: Lanes = NONE,
) -> tuple[list[TestRun], list[TestRun], Verdict]:
    """The base run in a fresh container, gold in the same one once reset, then reruns.

    Reruns wait until the FAIL->PASS and PASS->FAIL candidates are known: a candidate without any
    costs no rerun at all, and each rerun is limited to the tests the verdict rests on
    (``rerun_scope: suite``: everything). Gold reruns run where gold ran; base reruns in a
    container that never held gold (on a backend that cannot reset: the first one).

    With a lane free (``lanes``), gold runs at once beside base, in a fresh container, and each
    base rerun beside its gold rerun; gold's run is used only where the order above runs it.
    """
    spec = SessionSpec(image=profile.image)
    base_tar = base.tar()
    grading = grading_for(profile.language)
    # The base run's container, emptied, takes gold; where it cannot be, a fresh one does.
    # A JS image's install lives in /repo itself (node_modules), which RESET would delete.
    emptied = sandbox.name in RESETTABLE and not grading.tree_holds_install
    with ExitStack() as containers:
        first = containers.enter_context(sandbox.session(spec))
        first.put_archive(base_tar)

        def base_run() -> TestRun:
            return run_tests(first, ctx, "base", attempt=0)

        def gold_run(alongside: bool) -> tuple[Session, TestRun, bool]:
            """Gold's session, its run, and whether ``first`` was emptied for it (tried: it
            may hold half a tree then)."""
            resets = emptied and not alongside
            if resets and _reset(first):
                session = first
            else:
                session = containers.enter_context(sandbox.session(spec))
            session.put_archive(gold.tar())
            return session, run_tests(session, ctx, "gold", attempt=0), resets

        at_base, golden = lanes.pair(base_run, gold_run, lambda r: not _ends_at_base(r, params))
        base_runs = [at_base]
        if golden is None:  # the base run decided (``_ends_at_base``): gold is not run
            ended = _ends_at_base(at_base, params)
            assert ended is not None
            return base_runs, [], ended
        gold_session, gold_runs, first_emptied = golden[0], [golden[1]], golden[2]
        unbuilt = unbuilt_modules(at_base) if params.unbuilt_at_base == "fail" else None
        crashes = params.unbuilt_at_base == "fail" and grading.module_ends_with_a_crash
        judged = grading.test_file if unbuilt or crashes else None  # rule.py
        seen_at_base = (
            with_unbuilt_failing(at_base, gold_runs[0], judged, crashes) if judged else None
        )
        decisive = decisive_tests(seen_at_base or at_base, gold_runs[0])
        if suite_failure(gold_runs[0]) or not decisive or params.reruns < 1:
            return base_runs, gold_runs, judge(base_runs, gold_runs, judged, crashes)
        if first_emptied:  # it holds gold (or half a tree): base reruns get a fresh one
            base_session = containers.enter_context(sandbox.session(spec))
            base_session.put_archive(base_tar)
        else:
            base_session = first
        selection = () if params.rerun_scope == "suite" else decisive
        for attempt in range(1, params.reruns + 1):
            again, gold_again = lanes.both(
                functools.partial(run_tests, base_session, ctx, "base", attempt, selection),
                functools.partial(run_tests, gold_session, ctx, "gold", attempt, selection),
            )
            base_runs.append(again)
            gold_runs.append(gold_again)
    return base_runs, gold_runs, judge(base_runs, gold_runs, judged, crashes)


def _ends_at_base(run: TestRun, params: ValidateParams) -> Verdict | None:
    """The verdict a base run alone gives (its suite did not run; nothing fails), if it does:
    then gold is not run."""
    unbuilt = unbuilt_modules(run) if params.unbuilt_at_base == "fail" else None
    if unbuilt:
        return None
    if failure := suite_failure(run):
        return failure
    if not failing_tests(run):
        reason = "every test passes before the fix; nothing to fix"
        return Verdict(False, "no_failing_test_at_base", reason)
    return None


def _reset(session: Session) -> bool:
    """Whether ``session`` is back to a fresh container's /repo and /tmp (see RESET)."""
    result = session.exec(RESET, timeout_s=RESET_TIMEOUT_S, workdir="/")
    return result.exit_code == 0 and not result.timed_out


def build_task(
    candidate: Candidate,
    profile: EnvProfile,
    verdict: Verdict,
    base_runs: list[TestRun],
    gold_runs: list[TestRun],
    validated_by: str = CACHE_VERSION,
) -> TaskInstance:
    """The proven task; index 0 of each run list is the main run, the rest are reruns."""
    return TaskInstance(
        **_identity(candidate),
        problem_statement="",
        hints_text="",
        FAIL_TO_PASS=verdict.fail_to_pass,
        PASS_TO_PASS=verdict.pass_to_pass,
        environment_setup_commit=profile.setup_commit,
        image_name=profile.image,
        image_digest=profile.image_digest,
        env_recipe=profile.recipe,
        test_cmd=profile.test_cmd,
        language=profile.language,
        test_runner=profile.runner,
        excluded_tests=profile.excluded,
        profile_id=profile.profile_id,
        flaky_tests=verdict.flaky,
        difficulty=None,
        scores={},
        provenance={
            "validated_by": validated_by,
            **_provenance(candidate),
            # the image is another profile's, whose probe passed with this tree (reuse.py)
            **({"reused_from": profile.reused_from} if profile.reused_from else {}),
        },
        validation=Validation(
            base_exit_code=base_runs[0].exit_code,
            gold_exit_code=gold_runs[0].exit_code,
            base_log_digest=base_runs[0].log_digest,
            gold_log_digest=gold_runs[0].log_digest,
            reruns=len(base_runs) + len(gold_runs) - 2,
            test_runs=len(base_runs) + len(gold_runs),
        ),
    )


def _identity(candidate: Candidate) -> dict:
    """What a task takes from its candidate, not from the verdict: its ids and its patches."""
    return {
        "instance_id": instance_id(candidate),
        "repo": candidate.repo,
        "base_commit": candidate.base_commit,
        "patch": candidate.patch,
        "test_patch": candidate.test_patch,
        "created_at": candidate.created_at,
        "origin": candidate.origin,
        "candidate_id": candidate.candidate_id,
        "source": candidate.source,
        "bug_patch": candidate.bug_patch,
    }


CANDIDATE_PROVENANCE = ("commit", "bug_intent", "dataset")  # from the candidate, not the verdict


def _provenance(candidate: Candidate) -> dict[str, str]:
    """The candidate's part of a task's provenance (CANDIDATE_PROVENANCE)."""
    return {
        "commit": candidate.meta.commit,
        # a model-written bug: who wrote it and what it meant to break (never the statement)
        **({"bug_intent": candidate.meta.message} if candidate.origin == "bug/llm" else {}),
        **({"dataset": candidate.labels.dataset} if candidate.labels is not None else {}),
    }


def as_candidate(result: ValidationResult, candidate: Candidate) -> ValidationResult:
    """A (cached) verdict handed to ``candidate``: the task, the rejection and the runs carry the
    candidate's own ids, patches and provenance, whichever candidate first earned the verdict
    (the cache is keyed by content, so rows with the same trees share it)."""
    task, rejection = result.task, result.rejection
    earned_by = task.candidate_id if task is not None else getattr(rejection, "input", "")
    if task is not None:
        kept = {k: v for k, v in task.provenance.items() if k not in CANDIDATE_PROVENANCE}
        validated_by = {"validated_by": kept.pop("validated_by")} if "validated_by" in kept else {}
        provenance = {**validated_by, **_provenance(candidate), **kept}
        task = dataclasses.replace(task, **_identity(candidate), provenance=provenance)
    if rejection is not None:
        rejection = Rejection(
            candidate.candidate_id, rejection.stage, rejection.reason,
            _retold(rejection.detail, earned_by, candidate),
        )  # fmt: skip
    runs = tuple(_run_of(run, earned_by, candidate.candidate_id) for run in result.runs)
    return ValidationResult(task, rejection, runs, result.cached)


def _retold(detail: str, earned_by: str, candidate: Candidate) -> str:
    """A rejection's line (``rejected``: "<repo>@<base> (<id>): why") told of ``candidate``."""
    _, said, why = detail.partition(f" ({earned_by}): ") if earned_by else ("", "", "")
    if not said:
        return detail
    return f"{candidate.repo}@{candidate.base_commit[:12]} ({candidate.candidate_id}): {why}"


def _run_of(run: TestRun, earned_by: str, candidate_id: str) -> TestRun:
    """``run`` as the asking candidate's (its id in the run and in the run's id, as
    ``run_tests`` makes it); a run of no candidate (a snapshot's clean run) stays as it is."""
    if run.candidate_id != earned_by or earned_by == candidate_id:
        return run
    run_id = content_id(candidate_id, run.state, run.attempt, run.selection, run.log_digest)
    return dataclasses.replace(run, run_id=run_id, candidate_id=candidate_id)


def infra_failure(candidate: Candidate, exc: SandboxBroken) -> ValidationResult:
    """The sandbox broke in two fresh containers in a row: rejected, and never cached."""
    detail = f"the sandbox broke twice, in fresh containers each time: {exc}"
    return rejected(candidate, INFRA_FAILURE, detail.splitlines()[0], ())


def rejected(
    candidate: Candidate, reason: str, detail: str, runs: tuple[TestRun, ...]
) -> ValidationResult:
    line = f"{candidate.repo}@{candidate.base_commit[:12]} ({candidate.candidate_id}): {detail}"
    if runs and not runs[-1].suite_ran:
        line += "\n--- log tail ---\n" + "\n".join(runs[-1].log.strip().splitlines()[-15:])
    return ValidationResult(None, Rejection(candidate.candidate_id, STAGE, reason, line), runs)


def to_cache(result: ValidationResult) -> dict:
    return {
        "task": to_row(result.task) if result.task else None,
        "rejection": to_row(result.rejection) if result.rejection else None,
        "runs": [to_row(run) for run in result.runs],
    }


def from_cache(entry: dict, candidate: Candidate) -> ValidationResult:
    """A cached verdict, handed to the candidate that asked for it (``as_candidate``)."""
    cached = ValidationResult(
        task=from_row(TaskInstance, entry["task"]) if entry["task"] else None,
        rejection=from_row(Rejection, entry["rejection"]) if entry["rejection"] else None,
        runs=tuple(from_row(TestRun, run) for run in entry["runs"]),
        cached=True,
    )
    return as_candidate(cached, candidate)
