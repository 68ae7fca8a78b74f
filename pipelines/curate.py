"""The ``curate`` stage: proven tasks (and trajectories) -> scored, deduplicated, decontaminated.

Order matters for cost and for which record survives: score thresholds first (cheap, per record),
then exact dedup (one GroupByKey), then MinHash near-dedup (band GroupByKeys + connected
components), then decontamination against the user's benchmark files. Trajectories are scored,
thresholded and decontaminated, but not deduplicated: several correct solutions of one task are
worth keeping.
"""

from __future__ import annotations

import dataclasses
from functools import partial

import apache_beam as beam
from apache_beam.metrics import Metrics

from filters.decontam import decontam_key
from filters.exact_dedup import STAGE, dedup_key
from filters.minhash_dedup import MinHashConfig
from filters.task_scores import task_scores
from filters.thresholds import apply_thresholds, check_threshold_names
from filters.trajectory_scores import trajectory_scores
from pipelines import progress
from pipelines.dedup import Decontaminate, ExactDedup, NearDedup
from schemas.params import CurateParams
from schemas.rejection import Rejection
from schemas.task_instance import TaskInstance
from schemas.trajectory import Trajectory

REJECTED = "rejected"
TRAJECTORY_TEXTS = ("model_patch", "messages")


class ScoreTaskFn(beam.DoFn):
    """Scores into ``scores`` and ``difficulty``; a task outside a threshold is a rejection."""

    def __init__(self, params: CurateParams) -> None:
        self.params = params

    def process(self, task: TaskInstance):
        scores = task_scores(task, solve_rate=task.scores.get("solve_rate"))  # from rollout
        scored = dataclasses.replace(
            task, scores={**task.scores, **scores}, difficulty=scores["difficulty"]
        )
        reason = apply_thresholds(scores, self.params)
        if reason is None:
            yield scored
            return
        yield _rejection(task.instance_id, reason, scores)


class ScoreTrajectoryFn(beam.DoFn):
    def __init__(self, params: CurateParams) -> None:
        self.params = params

    def process(self, trajectory: Trajectory):
        scores = trajectory_scores(trajectory)
        reason = apply_thresholds(scores, self.params)
        if reason is None:
            yield trajectory
            return
        yield _rejection(trajectory.trajectory_id, reason, scores)


def _rejection(record_id: str, reason: str, scores: dict[str, float]):
    name = reason.split(":", 1)[1]
    Metrics.counter(STAGE, reason.replace(":", "_")).inc()
    progress.tick(reason)
    detail = f"{record_id}: score {name} = {scores[name]:g} is outside curate thresholds"
    return beam.pvalue.TaggedOutput(REJECTED, Rejection(record_id, STAGE, reason, detail))


class CurateTasks(beam.PTransform):
    """Tasks -> {"tasks", "rejections"}."""

    def __init__(self, params: CurateParams) -> None:
        super().__init__()
        check_threshold_names(params)
        self.params = params

    def expand(self, tasks):
        params = self.params
        key = partial(dedup_key, fields=tuple(params.dedup_fields))
        scored = tasks | "ScoreTasks" >> beam.ParDo(ScoreTaskFn(params)).with_outputs(
            REJECTED, main="kept"
        )
        exact = scored.kept | "ExactDedup" >> ExactDedup(key)
        near = exact["kept"] | "NearDedup" >> NearDedup(key, MinHashConfig.from_params(params))
        rejections = [scored[REJECTED], exact["rejections"], near["rejections"]]
        kept = near["kept"]
        if params.benchmarks:
            clean = kept | "DecontaminateTasks" >> Decontaminate.from_params(decontam_key, params)
            kept = clean["kept"]
            rejections.append(clean["rejections"])
        kept = kept | "CountTasks" >> beam.Map(_tick)
        return {"tasks": kept, "rejections": rejections | "TaskRejections" >> beam.Flatten()}


class CurateTrajectories(beam.PTransform):
    """Trajectories -> {"trajectories", "rejections"}; runs of a task curate dropped go too."""

    def __init__(self, params: CurateParams, task_rejections) -> None:
        super().__init__()
        self.params = params
        self.task_rejections = task_rejections

    def expand(self, trajectories):
        params = self.params
        orphans = (
            {
                "run": trajectories | "KeyByTask" >> beam.Map(lambda t: (t.instance_id, t)),
                "dropped": self.task_rejections
                | "DroppedTasks" >> beam.Map(lambda r: (r.input, r.reason)),
            }
            | "JoinDroppedTasks" >> beam.CoGroupByKey()
            | "DropRunsOfDroppedTasks"
            >> beam.FlatMapTuple(_without_dropped_task).with_outputs(REJECTED, main="kept")
        )
        scored = orphans.kept | "ScoreTrajectories" >> beam.ParDo(
            ScoreTrajectoryFn(params)
        ).with_outputs(REJECTED, main="kept")
        kept, rejections = scored.kept, [orphans[REJECTED], scored[REJECTED]]
        if params.benchmarks:
            key = partial(decontam_key, fields=TRAJECTORY_TEXTS, id_field="trajectory_id")
            clean = kept | "DecontaminateTrajectories" >> Decontaminate.from_params(key, params)
            kept = clean["kept"]
            rejections.append(clean["rejections"])
        return {
            "trajectories": kept,
            "rejections": rejections | "TrajectoryRejections" >> beam.Flatten(),
        }


def _without_dropped_task(instance_id: str, joined: dict):
    """The task's runs when curate kept (or never saw) the task; else one rejection per run."""
    if not joined["dropped"]:
        yield from joined["run"]
        return
    why = sorted(joined["dropped"])[0]
    for run in joined["run"]:
        Metrics.counter(STAGE, "task_dropped").inc()
        detail = f"{run.trajectory_id}: its task {instance_id} was dropped ({why})"
        rejection = Rejection(run.trajectory_id, STAGE, "task_dropped", detail)
        yield beam.pvalue.TaggedOutput(REJECTED, rejection)


def _tick(task: TaskInstance) -> TaskInstance:
    progress.tick("kept")
    return task
