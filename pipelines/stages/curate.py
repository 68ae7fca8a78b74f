"""The ``curate`` stage: proven tasks (and trajectories) -> scored, deduplicated, decontaminated.

Order matters for cost and for which record survives: score thresholds first (cheap, per record),
then exact dedup (one GroupByKey), then MinHash near-dedup (band GroupByKeys + connected
components), then decontamination against the user's benchmark files. Explore tasks take the
same steps except near-dedup: their check is exact, so only the same instruction with the same
actions is the same task. Trajectories are scored, thresholded and decontaminated, but not
deduplicated: several correct solutions of one task are worth keeping. Transitions follow their
trajectory: a step of a run curate did not keep goes with it.

Soft verification: with ``curate.near_miss_soft_reward`` set, an unresolved, submitted run whose
``soft_reward`` reaches it is marked ``near_miss`` (``filters.trajectory_scores.is_near_miss``),
which the export keeps for SFT beside the resolved runs; the summary counts them (``near_misses``).
The mark is decided again on every run of curate, so a threshold taken away unmarks them.

A run whose patch the grader flagged (``suspicious_patch``: its source inspects its caller,
reads the tests, reaches into the test runner...; ``verifiers/grader/suspicious/``) is dropped,
rejection ``suspicious_patch``, so no SFT row teaches the hack; ``curate.keep_suspicious`` keeps
it, flag and all.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from functools import partial
from operator import attrgetter
from typing import Any

import apache_beam as beam
from apache_beam.metrics import Metrics
from trajforge.filters.decontam import decontam_key
from trajforge.filters.exact_dedup import STAGE, dedup_key
from trajforge.filters.explore_scores import (
    check_curate_threshold_names,
    explore_dedup_key,
    explore_scores,
)
from trajforge.filters.minhash_dedup import MinHashConfig
from trajforge.filters.task_scores import task_scores
from trajforge.filters.thresholds import apply_thresholds
from trajforge.filters.trajectory_scores import is_near_miss, trajectory_scores
from trajforge.pipelines.runtime import progress
from trajforge.pipelines.runtime.stage_fn import REJECTED
from trajforge.pipelines.runtime.tally import SUMMARY
from trajforge.pipelines.stages.dedup import Decontaminate, ExactDedup, NearDedup
from trajforge.schemas.params import CurateParams
from trajforge.schemas.rejection import Rejection
from trajforge.schemas.task_instance import TaskInstance
from trajforge.schemas.trajectory import Trajectory
from trajforge.schemas.transition import Transition
from trajforge.verifiers.grader.suspicious import REASON as SUSPICIOUS

TRAJECTORY_TEXTS = ("model_patch", "messages")
EXPLORE_TEXTS = ("instruction",)
TABLES = ("tasks", "explore_tasks", "trajectories", "transitions")  # what Curate takes and returns


class _CurateStep(beam.PTransform):
    """A transform set by ``CurateParams``; a misspelt threshold name fails here, at build time."""

    def __init__(self, params: CurateParams) -> None:
        super().__init__()
        check_curate_threshold_names(params)
        self.params = params


class Curate(_CurateStep):
    """{name: records for name in ``TABLES``} -> the same tables curated, plus "rejections".

    A task (or explore task) curate drops takes its runs with it, and a run it drops takes its
    transitions."""

    def expand(self, tables: Mapping[str, Any]):
        params = self.params
        tasks = tables["tasks"] | "CurateTasks" >> CurateTasks(params)
        explore = tables["explore_tasks"] | "CurateExploreTasks" >> CurateExploreTasks(params)
        dropped_tasks = (tasks["rejections"], explore["rejections"]) | "DroppedTasks" >> (
            beam.Flatten()
        )
        runs = tables["trajectories"] | "CurateTrajectories" >> CurateTrajectories(
            params, dropped_tasks
        )
        steps = tables["transitions"] | "CurateTransitions" >> CurateTransitions(
            runs["trajectories"]
        )
        rejections = (dropped_tasks, runs["rejections"], steps["rejections"]) | (
            "AllRejections" >> beam.Flatten()
        )
        return {
            "tasks": tasks["tasks"],
            "explore_tasks": explore["explore_tasks"],
            "trajectories": runs["trajectories"],
            "transitions": steps["transitions"],
            "rejections": rejections,
        }


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


class ThresholdFn(beam.DoFn):
    """The record, unchanged, when its ``scores`` pass the curate thresholds; else a rejection.
    (Trajectory scores are not stored: the export computes them again.)"""

    def __init__(
        self,
        params: CurateParams,
        scores: Callable[[Any], dict[str, float]],
        record_id: Callable[[Any], str],
    ) -> None:
        self.params = params
        self.scores = scores
        self.record_id = record_id

    def process(self, record: Any):
        scores = self.scores(record)
        reason = apply_thresholds(scores, self.params)
        if reason is None:
            yield record
            return
        yield _rejection(self.record_id(record), reason, scores)


def _rejection(record_id: str, reason: str, scores: dict[str, float]):
    name = reason.split(":", 1)[1]
    Metrics.counter(STAGE, reason.replace(":", "_")).inc()
    progress.tick(reason)
    detail = f"{record_id}: score {name} = {scores[name]:g} is outside curate thresholds"
    return beam.pvalue.TaggedOutput(REJECTED, Rejection(record_id, STAGE, reason, detail))


class CurateTasks(_CurateStep):
    """Tasks -> {"tasks", "rejections"}."""

    def expand(self, tasks):
        params = self.params
        key = partial(dedup_key, fields=tuple(params.dedup_fields))
        scored = tasks | "ScoreTasks" >> beam.ParDo(ScoreTaskFn(params)).with_outputs(
            REJECTED, main="kept"
        )
        exact = scored.kept | "ExactDedup" >> ExactDedup(key)
        near = exact["kept"] | "NearDedup" >> NearDedup(key, MinHashConfig.from_params(params))
        rejections = [scored[REJECTED], exact["rejections"], near["rejections"]]
        kept = _decontaminate("DecontaminateTasks", near["kept"], decontam_key, params, rejections)
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
        runs = orphans.kept
        rejections = [orphans[REJECTED]]
        if not params.keep_suspicious:
            clean = runs | "DropSuspiciousRuns" >> beam.FlatMap(_unless_suspicious).with_outputs(
                REJECTED, main="kept"
            )
            runs = clean.kept
            rejections.append(clean[REJECTED])
        score = ThresholdFn(params, trajectory_scores, attrgetter("trajectory_id"))
        scored = runs | "ScoreTrajectories" >> beam.ParDo(score).with_outputs(REJECTED, main="kept")
        rejections.append(scored[REJECTED])
        key = partial(decontam_key, fields=TRAJECTORY_TEXTS, id_field="trajectory_id")
        kept = _decontaminate("DecontaminateTrajectories", scored.kept, key, params, rejections)
        kept = kept | "MarkNearMisses" >> beam.Map(_mark_near_miss, params.near_miss_soft_reward)
        return {
            "trajectories": kept,
            "rejections": rejections | "TrajectoryRejections" >> beam.Flatten(),
        }


def _unless_suspicious(trajectory: Trajectory):
    """The run, unless the grader flagged its patch (``suspicious_patch``): then a rejection."""
    if not trajectory.suspicious_patch:
        yield trajectory
        return
    Metrics.counter(STAGE, SUSPICIOUS).inc()
    progress.tick(SUSPICIOUS)
    detail = f"{trajectory.trajectory_id}: {trajectory.suspicious_patch}"
    rejection = Rejection(trajectory.trajectory_id, STAGE, SUSPICIOUS, detail)
    yield beam.pvalue.TaggedOutput(REJECTED, rejection)


def _mark_near_miss(trajectory: Trajectory, min_soft_reward: float | None) -> Trajectory:
    """``near_miss`` set by the curate rule (and cleared where it no longer holds)."""
    near = is_near_miss(trajectory, min_soft_reward)
    if near:
        Metrics.counter(SUMMARY, "near_misses").inc()
    if near == trajectory.near_miss:
        return trajectory
    return dataclasses.replace(trajectory, near_miss=near)


def _decontaminate(
    label: str, records, key: Callable[[Any], Any], params: CurateParams, rejections: list
):
    """``records`` without those a benchmark contains (when benchmarks are given); their
    rejections are appended to ``rejections``."""
    if not params.benchmarks:
        return records
    clean = records | label >> Decontaminate.from_params(key, params)
    rejections.append(clean["rejections"])
    return clean["kept"]


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


class CurateExploreTasks(_CurateStep):
    """Explore tasks -> {"explore_tasks", "rejections"}: score threshold, exact dedup on the
    normalized instruction and actions, decontamination of the instruction."""

    def expand(self, tasks):
        params = self.params
        score = ThresholdFn(params, explore_scores, attrgetter("task_id"))
        scored = tasks | "ScoreExploreTasks" >> beam.ParDo(score).with_outputs(
            REJECTED, main="kept"
        )
        exact = scored.kept | "ExactDedupExplore" >> ExactDedup(explore_dedup_key)
        rejections = [scored[REJECTED], exact["rejections"]]
        key = partial(decontam_key, fields=EXPLORE_TEXTS, id_field="task_id")
        kept = _decontaminate("DecontaminateExplore", exact["kept"], key, params, rejections)
        return {
            "explore_tasks": kept | "CountExploreTasks" >> beam.Map(_tick),
            "rejections": rejections | "ExploreRejections" >> beam.Flatten(),
        }


class CurateTransitions(beam.PTransform):
    """Transitions -> {"transitions", "rejections"}: only steps of the runs curate kept (one join
    on trajectory_id); each other step is a "trajectory_dropped" rejection."""

    def __init__(self, kept_trajectories) -> None:
        super().__init__()
        self.kept_trajectories = kept_trajectories

    def expand(self, transitions):
        joined = {
            "kept": self.kept_trajectories
            | "KeptRunIds" >> beam.Map(lambda t: (t.trajectory_id, True)),
            "step": transitions | "KeyByRun" >> beam.Map(lambda t: (t.trajectory_id, t)),
        } | "JoinKeptRuns" >> beam.CoGroupByKey()
        steps = joined | "DropStepsOfDroppedRuns" >> beam.FlatMapTuple(
            _steps_of_kept_run
        ).with_outputs(REJECTED, main="kept")
        return {"transitions": steps.kept, "rejections": steps[REJECTED]}


def _steps_of_kept_run(trajectory_id: str, joined: dict):
    if joined["kept"]:
        yield from joined["step"]
        return
    for step in joined["step"]:
        yield beam.pvalue.TaggedOutput(REJECTED, _dropped_step(step))


def _dropped_step(step: Transition) -> Rejection:
    Metrics.counter(STAGE, "trajectory_dropped").inc()
    detail = (
        f"{step.transition_id}: step {step.step} of trajectory {step.trajectory_id}, "
        "which curate did not keep"
    )
    return Rejection(step.transition_id, STAGE, "trajectory_dropped", detail)


def _tick(record: Any) -> Any:
    progress.tick("kept")
    return record
