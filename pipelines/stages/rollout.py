"""The ``rollout`` stage: tasks -> verified agent trajectories and per-task solve rates.

Each task is run ``rollout.attempts`` times; the (task, attempt) pairs are spread over workers and
run ``rollout.workers`` at a time, each in its own container, each patch verified in a fresh one.
Finished runs are cached by everything that decides them (the task, the model, the endpoint, the
limits), so a rerun after a crash redoes only the runs that had not finished; runs that ended
because the endpoint failed are not cached and are retried. Tasks leave the stage with
``scores["solve_rate"]`` set (from the unguided attempts only), so curate can keep tasks of the
wanted difficulty.

Guided retries (Agent-RLVR, ``rollout.guided_attempts``): a task none of whose attempts resolved
gets more attempts, one after another until one resolves, each told what the attempt before it
left (``generators.agents.guidance``: the failing tests' output, the files the gold patch
changes). The first is guided by the task's failed attempt with test output (else any failed
attempt; the lowest trajectory id decides, so reruns agree). Guidance without test output is
counted (``guidance_without_test_output``), never an error. The summary gives the solve rate
with and without guidance (``rollout_figures``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor

import apache_beam as beam
from trajforge.generators.agents.guidance import guidance_for
from trajforge.generators.agents.rollout import rollout_id, run_rollout
from trajforge.generators.environments.task_image import ensure_task_image
from trajforge.generators.llm.client import LLMClient
from trajforge.generators.sources.specs import SourceOptions, open_source
from trajforge.generators.trajectories.transitions import transitions_of
from trajforge.pipelines.report.data import guidance_figures
from trajforge.pipelines.runtime.outputs import read_frame, table_files
from trajforge.pipelines.runtime.stage_fn import REJECTED, SandboxFn, sandbox_error
from trajforge.schemas.errors import UserError
from trajforge.schemas.params import Params
from trajforge.schemas.records import content_id, from_row, to_row
from trajforge.schemas.rejection import Rejection
from trajforge.schemas.storage import ContentCache
from trajforge.schemas.task_instance import TaskInstance
from trajforge.schemas.trajectory import Trajectory
from trajforge.schemas.transition import Transition
from trajforge.verifiers.patch_verifier import verify_patch
from trajforge.verifiers.sandbox.base import ImageStore

STAGE = "rollout"
CACHE_VERSION = "rollout-v4"  # v4: soft verification, failing-test output, guidance
TRANSITIONS = "transitions"
Run = tuple[Trajectory, list[Transition]]


class _RolloutFn(SandboxFn):
    """What both rollout DoFns share: the client, the caches, the pool and one (cached) run."""

    STAGE = STAGE

    def setup(self) -> None:
        super().setup()
        self.client = LLMClient(self.params.llm, self.params.results_cache)
        self.runs = ContentCache(self.params.results_cache, "rollout")
        self.verdicts = ContentCache(self.params.results_cache, "verify")
        self.pool = ThreadPoolExecutor(max_workers=self.params.rollout.workers)

    def teardown(self) -> None:
        self.pool.shutdown(wait=True)
        super().teardown()

    def _one(self, task: TaskInstance, attempt: int, guidance: str = "") -> Run | Rejection:
        name = f"{task.instance_id}#{attempt}"
        if self.unavailable is not None:
            return Rejection(name, STAGE, self.unavailable.reason, str(self.unavailable))
        if not task.problem_statement.strip():
            return Rejection(
                name, STAGE, "no_problem_statement", f"{name}: run `trajforge describe` first"
            )
        key = self._key(task, attempt, guidance)
        if (hit := self.runs.get(key)) is not None:
            self.count("cache_hits")
            steps = [from_row(Transition, row) for row in hit["transitions"]]
            return from_row(Trajectory, hit["trajectory"]), steps
        try:
            trajectory, transitions = self._run(task, attempt, guidance)
        except UserError as exc:
            return Rejection(name, STAGE, exc.reason, f"{name}: {exc}")
        except Exception as exc:  # the sandbox broke (engine gone, API error): not cached
            return sandbox_error(name, STAGE, exc)
        if not trajectory.exit_status.startswith("error:llm"):
            rows = [to_row(t) for t in transitions]
            self.runs.put(key, {"trajectory": to_row(trajectory), "transitions": rows})
        return trajectory, transitions

    def _run(self, task: TaskInstance, attempt: int, guidance: str) -> Run:
        repo_path = open_source(task.source, SourceOptions.from_params(self.params)).path
        assert self.sandbox is not None
        if isinstance(self.sandbox, ImageStore):  # the image the task was proven in, or none
            env = self.params.environment
            image = ensure_task_image(self.sandbox, task, repo_path, env, self.count, rebuild=False)
            task = dataclasses.replace(task, image_name=image.run)  # run by id, not by name
        timeout = self.params.validate.test_timeout_s

        def verify(patch: str):
            assert self.sandbox is not None
            return verify_patch(self.sandbox, task, repo_path, patch, timeout, self.verdicts)

        result = run_rollout(
            self.client,
            self.sandbox,
            task,
            repo_path,
            self.params.rollout,
            attempt,
            verify,
            guidance,
        )
        trajectory = result.trajectory
        steps = transitions_of(
            trajectory.trajectory_id, task.instance_id, "rollout", result.run.steps
        )
        return trajectory, steps

    def _key(self, task: TaskInstance, attempt: int, guidance: str) -> str:
        llm = self.params.llm
        decides = (
            rollout_id(task, self.client.model, attempt, guidance),
            task.image_name,
            task.base_commit,
            task.bug_patch,
            task.test_patch,
            task.problem_statement,
            task.FAIL_TO_PASS,
            task.PASS_TO_PASS,
        )
        limits = dataclasses.asdict(self.params.rollout)
        limits.pop("guided_attempts")  # how many retries run, not how one runs
        settings = (llm.base_url, llm.temperature, limits)
        return content_id(CACHE_VERSION, *decides, *settings, length=32)

    def _emit(self, result: Run | Rejection, outcome_prefix: str = ""):
        """A run's trajectory and its transitions (tagged), or its rejection; one tick."""
        if isinstance(result, Rejection):
            yield self.rejection(result)
            return
        trajectory, transitions = result
        self.tick(outcome_prefix + ("resolved" if trajectory.resolved else "unresolved"))
        yield trajectory
        for transition in transitions:
            yield beam.pvalue.TaggedOutput(TRANSITIONS, transition)


class RolloutBatchFn(_RolloutFn):
    """[(task, attempt)] -> trajectories (verified) or rejections, ``rollout.workers`` at once."""

    def process(self, batch: list[tuple[TaskInstance, int]]):
        before = self.client.calls
        for result in self.pool.map(lambda pair: self._one(*pair), batch):
            yield from self._emit(result)
        self.count("llm_calls", self.client.calls - before)


class GuidedRolloutFn(_RolloutFn):
    """[(task, its failed attempt)] -> guided retries, each task's one after another until one
    resolves (``rollout.guided_attempts`` at most), tasks ``rollout.workers`` at once."""

    def process(self, batch: list[tuple[TaskInstance, Trajectory]]):
        before = self.client.calls
        for results, without_output in self.pool.map(lambda pair: self._retries(*pair), batch):
            if without_output:  # counted here: Beam's metrics do not reach the pool's threads
                self.summary_count("guidance_without_test_output", without_output)
            for result in results:
                yield from self._emit(result, outcome_prefix="guided_")
        self.count("llm_calls", self.client.calls - before)

    def _retries(self, task: TaskInstance, failed: Trajectory) -> tuple[list[Run | Rejection], int]:
        """The task's guided retries, and how many were guided without failing-test output."""
        rollout = self.params.rollout
        results: list[Run | Rejection] = []
        without_output = 0
        for retry in range(rollout.guided_attempts):
            guidance = guidance_for(task, failed)
            without_output += not guidance.has_test_output
            result = self._one(task, rollout.attempts + retry, guidance.text)
            results.append(result)
            if isinstance(result, Rejection) or result[0].resolved:
                break
            failed = result[0]
        return results, without_output


def _to_guide(element: tuple[str, dict[str, Iterable]]):
    """(task, the failed attempt to guide from) for a task none of whose attempts resolved."""
    _, grouped = element
    runs = list(grouped["runs"])
    if not runs or any(run.resolved for run in runs):
        return
    failed = min(runs, key=lambda run: (not run.test_output, run.trajectory_id))
    for task in grouped["tasks"]:
        yield task, failed


def rollout_figures(output: str) -> dict[str, object]:
    """The summary's solve rates with and without guidance, read from the written runs."""
    files = table_files(output, "trajectories")
    return guidance_figures(read_frame(files, ["instance_id", "resolved", "guidance"]))


def _with_solve_rate(element: tuple[str, dict[str, Iterable]]):
    _, grouped = element
    outcomes = list(grouped["outcomes"])
    for task in grouped["tasks"]:
        if not outcomes:
            yield task
            continue
        rate = round(sum(outcomes) / len(outcomes), 6)
        yield dataclasses.replace(task, scores={**task.scores, "solve_rate": rate})


class RolloutTasks(beam.PTransform):
    """Tasks -> {"tasks" (with solve_rate), "trajectories", "transitions", "rejections"}."""

    def __init__(self, params: Params) -> None:
        super().__init__()
        self.params = params

    def expand(self, tasks):
        rollout = self.params.rollout
        attempts, workers = rollout.attempts, rollout.workers
        runs = (
            tasks
            | "Attempts" >> beam.FlatMap(lambda t: [(t, k) for k in range(attempts)])
            | "Spread" >> beam.Reshuffle()
            | "Batch" >> beam.BatchElements(min_batch_size=workers, max_batch_size=workers * 2)
            | "Rollout"
            >> beam.ParDo(RolloutBatchFn(self.params)).with_outputs(
                REJECTED, TRANSITIONS, main="trajectories"
            )
        )
        outcomes = runs.trajectories | "Outcomes" >> beam.Map(
            lambda t: (t.instance_id, float(bool(t.resolved)))
        )
        keyed = tasks | "KeyTasks" >> beam.Map(lambda t: (t.instance_id, t))
        trajectories, transitions, rejections = (
            runs.trajectories,
            runs[TRANSITIONS],
            runs[REJECTED],
        )
        if rollout.guided_attempts:
            guided = (
                {
                    "tasks": keyed,
                    "runs": runs.trajectories | "KeyRuns" >> beam.Map(lambda t: (t.instance_id, t)),
                }
                | "JoinRuns" >> beam.CoGroupByKey()
                | "ToGuide" >> beam.FlatMap(_to_guide)
                | "SpreadGuided" >> beam.Reshuffle()
                | "BatchGuided" >> beam.BatchElements(min_batch_size=1, max_batch_size=workers)
                | "GuidedRollout"
                >> beam.ParDo(GuidedRolloutFn(self.params)).with_outputs(
                    REJECTED, TRANSITIONS, main="trajectories"
                )
            )
            trajectories = (trajectories, guided.trajectories) | "AllRuns" >> beam.Flatten()
            transitions = (transitions, guided[TRANSITIONS]) | "AllSteps" >> beam.Flatten()
            rejections = (rejections, guided[REJECTED]) | "AllRejections" >> beam.Flatten()
        rated = (
            {"tasks": keyed, "outcomes": outcomes}
            | "JoinOutcomes" >> beam.CoGroupByKey()
            | "SolveRate" >> beam.FlatMap(_with_solve_rate)
        )
        return {
            "tasks": rated,
            "trajectories": trajectories,
            "transitions": transitions,
            "rejections": rejections,
        }
