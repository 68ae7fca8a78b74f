"""The ``rollout`` stage: tasks -> verified agent trajectories and per-task solve rates.

Each task is run ``rollout.attempts`` times; the (task, attempt) pairs are spread over workers and
run ``rollout.workers`` at a time, each in its own container, each patch verified in a fresh one.
Finished runs are cached by everything that decides them (the task, the model, the endpoint, the
limits), so a rerun after a crash redoes only the runs that had not finished; runs that ended
because the endpoint failed are not cached and are retried. Tasks leave the stage with
``scores["solve_rate"]`` set, so curate can keep tasks of the wanted difficulty.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor

import apache_beam as beam
from trajforge.generators.agents.rollout import rollout_id, run_rollout
from trajforge.generators.environments.profile import JUNIT_PATH
from trajforge.generators.environments.registry import require_image
from trajforge.generators.llm.client import LLMClient
from trajforge.generators.sources.specs import SourceOptions, open_source
from trajforge.generators.trajectories.transitions import transitions_of
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
CACHE_VERSION = "rollout-v3"  # v3: verification ignores test files and checks the exit code
TRANSITIONS = "transitions"
Run = tuple[Trajectory, list[Transition]]


class RolloutBatchFn(SandboxFn):
    """[(task, attempt)] -> trajectories (verified) or rejections, ``rollout.workers`` at once."""

    STAGE = STAGE

    def setup(self) -> None:
        super().setup()
        self.client = LLMClient(self.params.llm, self.params.cache_dir)
        self.runs = ContentCache(self.params.cache_dir, "rollout")
        self.verdicts = ContentCache(self.params.cache_dir, "verify")
        self.pool = ThreadPoolExecutor(max_workers=self.params.rollout.workers)

    def teardown(self) -> None:
        self.pool.shutdown(wait=True)
        super().teardown()

    def process(self, batch: list[tuple[TaskInstance, int]]):
        before = self.client.calls
        for result in self.pool.map(lambda pair: self._one(*pair), batch):
            if isinstance(result, Rejection):
                yield self.rejection(result)
                continue
            trajectory, transitions = result
            self.tick("resolved" if trajectory.resolved else "unresolved")
            yield trajectory
            for transition in transitions:
                yield beam.pvalue.TaggedOutput(TRANSITIONS, transition)
        self.count("llm_calls", self.client.calls - before)

    def _one(self, task: TaskInstance, attempt: int) -> Run | Rejection:
        name = f"{task.instance_id}#{attempt}"
        if self.unavailable is not None:
            return Rejection(name, STAGE, self.unavailable.reason, str(self.unavailable))
        if not task.problem_statement.strip():
            return Rejection(
                name, STAGE, "no_problem_statement", f"{name}: run `trajforge describe` first"
            )
        key = self._key(task, attempt)
        if (hit := self.runs.get(key)) is not None:
            self.count("cache_hits")
            steps = [from_row(Transition, row) for row in hit["transitions"]]
            return from_row(Trajectory, hit["trajectory"]), steps
        try:
            trajectory, transitions = self._run(task, attempt)
        except UserError as exc:
            return Rejection(name, STAGE, exc.reason, f"{name}: {exc}")
        except Exception as exc:  # the sandbox broke (engine gone, API error): not cached
            return sandbox_error(name, STAGE, exc)
        if not trajectory.exit_status.startswith("error:llm"):
            rows = [to_row(t) for t in transitions]
            self.runs.put(key, {"trajectory": to_row(trajectory), "transitions": rows})
        return trajectory, transitions

    def _run(self, task: TaskInstance, attempt: int) -> Run:
        repo_path = open_source(task.source, SourceOptions.from_params(self.params)).path
        assert self.sandbox is not None
        if isinstance(self.sandbox, ImageStore):  # the image the task was proven in, or none
            env = self.params.environment
            require_image(self.sandbox, task.image_name, task.image_digest, env, self.count)
        timeout = self.params.validate.test_timeout_s

        def verify(patch: str):
            assert self.sandbox is not None
            return verify_patch(
                self.sandbox, task, repo_path, patch, JUNIT_PATH, timeout, self.verdicts
            )

        result = run_rollout(
            self.client, self.sandbox, task, repo_path, self.params.rollout, attempt, verify
        )
        trajectory = result.trajectory
        steps = transitions_of(
            trajectory.trajectory_id, task.instance_id, "rollout", result.run.steps
        )
        return trajectory, steps

    def _key(self, task: TaskInstance, attempt: int) -> str:
        llm = self.params.llm
        decides = (
            rollout_id(task, self.client.model, attempt),
            task.image_name,
            task.base_commit,
            task.bug_patch,
            task.test_patch,
            task.problem_statement,
            task.FAIL_TO_PASS,
            task.PASS_TO_PASS,
        )
        settings = (llm.base_url, llm.temperature, dataclasses.asdict(self.params.rollout))
        return content_id(CACHE_VERSION, *decides, *settings, length=32)


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
        attempts, workers = self.params.rollout.attempts, self.params.rollout.workers
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
        rated = (
            {"tasks": keyed, "outcomes": outcomes}
            | "JoinOutcomes" >> beam.CoGroupByKey()
            | "SolveRate" >> beam.FlatMap(_with_solve_rate)
        )
        return {
            "tasks": rated,
            "trajectories": runs.trajectories,
            "transitions": runs[TRANSITIONS],
            "rejections": runs[REJECTED],
        }
