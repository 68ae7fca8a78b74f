"""Task + model patch -> SWE-bench's report, a reward and the test log: the one grader of
``evaluate``, the reward API and service, and ``TaskEnv`` episodes.

A patch is judged by ``verify_patch``, the rollout stage's own verifier: applied to the task's
starting tree in a throwaway index, test files reset to the task's, the FAIL_TO_PASS and
PASS_TO_PASS tests run in a fresh container of the task's image. Which image that is,
``generators/environments/task_image.py`` decides (as for the rollout stage): the one the task
names when it is the row's (its digest, or its recipe label equals the row's recipe), else
(``rebuild``) the row's own recipe (``env_recipe`` at ``environment_setup_commit``) built as
``trajforge-eval:<recipe hash>``, never under a name the row chooses, counted
(``images_rebuilt``) and named in the evaluation (``image``). A digest that does not match is an
error, never a silent substitute.

Whatever goes wrong is an ``Evaluation`` with a reason, never an exception: the patch's fault
(``empty_patch``, ``patch_does_not_apply``, ``tests_failed``, ``timed_out``...) is a completed,
unresolved evaluation; the harness's (``sandbox_error``, ``registry_error``, ``bad_source``...)
is marked ``error`` so callers count it apart and may retry.
"""

from __future__ import annotations

import dataclasses
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

from trajforge.generators.agents.task_env import TaskEnv
from trajforge.generators.environments.task_image import (
    REBUILT_COUNTER,
    UNTRUSTED_COUNTER,
    TaskImage,
    ensure_task_image,
)
from trajforge.generators.languages.registry import language_named
from trajforge.generators.sources.specs import SourceOptions, open_source
from trajforge.schemas.errors import UserError
from trajforge.schemas.params import Params
from trajforge.schemas.storage import ContentCache
from trajforge.schemas.task_instance import TaskInstance
from trajforge.verifiers.grader.suspicious import REASON as SUSPICIOUS
from trajforge.verifiers.grading import partial_credit, swebench_report, tests_status_of
from trajforge.verifiers.patch_verifier import PatchVerdict, verify_patch
from trajforge.verifiers.sandbox.base import ImageStore, Sandbox
from trajforge.verifiers.sandbox.factory import make_sandbox

# Verdict reasons after which the graded tests never ran (nothing to split into tests_status).
NOT_RUN = ("empty_patch", "patch_does_not_apply", "no_source_changes")
IMAGE_COUNTERS = ("images_pulled", UNTRUSTED_COUNTER, REBUILT_COUNTER)
__all__ = ["IMAGE_COUNTERS", "REBUILT_COUNTER", "Evaluation", "Evaluator"]


@dataclass(frozen=True)
class Evaluation:
    instance_id: str
    resolved: bool
    reason: str  # the verdict's reason, or the harness's when ``error``
    report: dict[str, object]  # one instance's entry of SWE-bench's report.json
    log: str = ""  # the test run's output
    reward: float = 0.0  # 1.0 resolved, else 0.0 (``partial``: the partial credit instead)
    partial_credit: float = 0.0  # share of FAIL_TO_PASS passing with no PASS_TO_PASS broken
    error: bool = False  # the harness failed, not the patch: no verdict, worth retrying
    seconds: float = 0.0
    dropped: tuple[str, ...] = ()  # paths of the patch set aside (test and grading files)
    image: str = ""  # the image it ran in: the one the task names, or trajforge-eval:<hash>
    # why the patch's added source looks like a hack no test run sees ("" when clean); strict
    # grading scores such a patch 0 (reason "suspicious_patch"), else it is only reported
    suspicious_patch: str = ""

    def as_dict(self) -> dict[str, object]:
        return {
            "instance_id": self.instance_id,
            "resolved": self.resolved,
            "reward": self.reward,
            "partial_credit": self.partial_credit,
            "reason": self.reason,
            "error": self.error,
            "seconds": round(self.seconds, 3),
            "dropped": list(self.dropped),
            "image": self.image,
            "suspicious_patch": self.suspicious_patch,
            "report": self.report,
        }


@dataclass
class Evaluator:
    """Grades patches for tasks; thread-safe (one image preparation per image at a time)."""

    params: Params
    sandbox: Sandbox | None = None  # default: made from params (Docker, podman or local)
    use_cache: bool = True  # reuse verdicts of exactly this tree (a rerun runs nothing)
    rebuild: bool = True  # build a missing image from the task's recipe
    timeout_s: float | None = None  # the test run's limit (default: validate.test_timeout_s)
    spares: int = 1  # never used containers per image started ahead (Docker; 0: none)
    # Rewards: FAIL_TO_PASS alone first, PASS_TO_PASS only when they all pass (verify_patch)
    fail_fast: bool = False
    # A suspicious patch (PatchVerdict.suspicious_patch) gets reward 0, never partial credit
    strict: bool = False
    say: Callable[[str], None] | None = None  # hears one line per row's recipe built here
    counts: Counter = field(default_factory=Counter)

    def __post_init__(self) -> None:
        if self.sandbox is None:
            self.sandbox = make_sandbox(self.params, quiet=True, spares=self.spares)
        self.cache = ContentCache(self.params.results_cache, "verify") if self.use_cache else None
        self._lock = threading.Lock()
        self._image_locks: dict[tuple[str, ...], threading.Lock] = {}
        # what a row asks for -> its image, or why there is none
        self._ready: dict[tuple[str, ...], TaskImage | UserError] = {}
        self.images: Counter = Counter()  # image tag -> evaluations that ran in it

    # -- grading -------------------------------------------------------------------------------

    def evaluate(
        self,
        task: TaskInstance,
        patch: str | None,
        partial: bool = False,
        fail_fast: bool | None = None,
        strict: bool | None = None,
    ) -> Evaluation:
        """``patch`` (None: the model gave none) judged for ``task``; never raises for what the
        patch, the image or the sandbox does. ``fail_fast`` (default: the evaluator's) does not
        apply to ``partial`` credit, which needs every PASS_TO_PASS test's outcome. ``strict``
        (default: the evaluator's): a suspicious patch is unresolved, reward 0."""
        quick = (self.fail_fast if fail_fast is None else fail_fast) and not partial
        strict = self.strict if strict is None else strict
        started = time.monotonic()
        if patch is None or not patch.strip():
            verdict = PatchVerdict(False, "empty_patch")
            return self.evaluation(task, patch, verdict, partial, time.monotonic() - started)
        tag: list[str] = []
        try:
            verdict = self.verdict(task, patch, tag, quick)
        except UserError as exc:  # SandboxBroken, RegistryError, SourceError...
            return self.failure(task, patch, exc.reason, str(exc), time.monotonic() - started)
        except Exception as exc:  # the engine's own errors: a broken sandbox, not a verdict
            why = f"sandbox error {type(exc).__name__}: {exc}".splitlines()[0]
            return self.failure(task, patch, "sandbox_error", why, time.monotonic() - started)
        seconds = time.monotonic() - started
        evaluation = self.evaluation(task, patch, verdict, partial, seconds, strict)
        with self._lock:
            self.images.update(tag)
        return dataclasses.replace(evaluation, image=tag[0] if tag else "")

    def verdict(
        self, task: TaskInstance, patch: str, tag: list[str] | None = None, fail_fast: bool = False
    ) -> PatchVerdict:
        """verify_patch in the task's image (prepared first); raises UserError when it cannot.
        ``tag`` (when given) gets the name of the image it runs in."""
        repo_path, running, name = self._prepared(task)
        timeout = self.timeout_s or self.params.validate.test_timeout_s
        assert self.sandbox is not None
        if tag is not None:
            tag.append(name)
        return verify_patch(self.sandbox, running, repo_path, patch, timeout, self.cache, fail_fast)

    def evaluation(
        self,
        task: TaskInstance,
        patch: str | None,
        verdict: PatchVerdict,
        partial: bool = False,
        seconds: float = 0.0,
        strict: bool = False,
    ) -> Evaluation:
        """A verdict as SWE-bench's report, with the reward (binary, or ``partial`` credit).
        ``strict``: a suspicious patch is not resolved (reason ``suspicious_patch``), reward and
        partial credit 0; the tests' statuses are still reported."""
        if strict and verdict.suspicious_patch:
            verdict = dataclasses.replace(verdict, resolved=False, reason=SUSPICIOUS, trusted=False)
        exists = bool(patch and patch.strip())
        applied = exists and verdict.reason not in ("empty_patch", "patch_does_not_apply")
        tests_status = None
        credit = 0.0
        if verdict.reason not in NOT_RUN:
            ran = {t: s for t, s in verdict.test_report.items() if s != "MISSING"}
            tests_status = tests_status_of(task.FAIL_TO_PASS, task.PASS_TO_PASS, ran)
            # Partial credit only from evidence nobody bent (no sentinel wrong, no forgery).
            credit = (
                1.0
                if verdict.resolved
                else (partial_credit(tests_status) if verdict.trusted else 0.0)
            )
        report = swebench_report(patch is None, exists, applied, verdict.resolved, tests_status)
        reward = credit if partial else (1.0 if verdict.resolved else 0.0)
        return Evaluation(
            task.instance_id, verdict.resolved, verdict.reason, report, verdict.log, reward,
            credit, False, seconds, verdict.dropped, "", verdict.suspicious_patch,
        )  # fmt: skip

    def failure(
        self, task: TaskInstance, patch: str | None, reason: str, why: str, seconds: float = 0.0
    ) -> Evaluation:
        """The harness could not judge ``patch``: an unresolved report that says why."""
        report = swebench_report(patch is None, bool(patch and patch.strip()), False)
        return Evaluation(task.instance_id, False, reason, report, why, error=True, seconds=seconds)

    def env(self, task: TaskInstance) -> TaskEnv:
        """The task as a multi-turn environment whose ``close()`` grades here."""
        repo_path, running = self.prepared(task)
        rollout = self.params.rollout
        assert self.sandbox is not None
        return TaskEnv(
            running, self.sandbox, repo_path, lambda patch: self.verdict(task, patch),
            rollout.command_timeout_s, rollout.max_observation_chars,
        )  # fmt: skip

    # -- the task's code and image -------------------------------------------------------------

    def prepare(self, task: TaskInstance) -> str:
        """The task's repository here (its path) and its image ready; UserError otherwise."""
        return self._prepared(task)[0]

    def prepared(self, task: TaskInstance) -> tuple[str, TaskInstance]:
        """The task's repository here (its path) and the task as it runs: ``image_name`` the id
        of the image ``ensure_task_image`` chose for it; UserError when there is none."""
        repo_path, running, _ = self._prepared(task)
        return repo_path, running

    def _prepared(self, task: TaskInstance) -> tuple[str, TaskInstance, str]:
        """``prepared``, and the name of the image the task runs in (what reports show)."""
        repo_path = open_source(task.source, SourceOptions.from_params(self.params)).path
        if not isinstance(self.sandbox, ImageStore):  # the local backend: no images to choose
            return repo_path, task, task.image_name
        image = self._image(self.sandbox, task, repo_path)
        return repo_path, dataclasses.replace(task, image_name=image.run), image.tag

    def _image(self, store: ImageStore, task: TaskInstance, repo_path: str) -> TaskImage:
        """The task's image, chosen once per distinct request (rows that name the same image
        with different recipes are different requests)."""
        commit = task.environment_setup_commit or task.base_commit
        asked = (task.image_name, task.image_digest, task.env_recipe, task.profile_id, commit,
                 repo_path)  # fmt: skip
        with self._lock:
            lock = self._image_locks.setdefault(asked, threading.Lock())
        with lock:
            if asked not in self._ready:
                try:
                    language = language_named(task.language)
                    self._ready[asked] = ensure_task_image(
                        store, task, repo_path, self.params.environment, self._count,
                        rebuild=self.rebuild, say=self.say,
                        ensure_base=lambda recipe: language.ensure_base_image(
                            store, recipe, self.say
                        ),
                    )  # fmt: skip
                except UserError as exc:
                    self._ready[asked] = exc
            found = self._ready[asked]
        if isinstance(found, UserError):
            raise found
        return found

    def _count(self, name: str) -> None:
        with self._lock:
            self.counts[name] += 1

    def close(self) -> None:
        close = getattr(self.sandbox, "close", None)
        if close is not None:
            close()
