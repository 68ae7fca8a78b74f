"""The ``describe`` stage: tasks -> tasks with a problem_statement, as one composite PTransform.

Each task meets the validate stage's base-state runs of its candidate (a CoGroupByKey), which hold
the failure output its issue text is written from; no test runs again. Tasks are described in
batches, ``llm.concurrency`` at a time, so a slow endpoint is kept busy. Every try, kept or not,
is written to the ``statements`` table. A task is rejected, not passed on, when its repository
cannot be opened (no test source to describe it from) or when it ends with no usable statement:
every model try failed and even the template's text breaks a rule no statement may break (too
short for ``describe.min_chars``, quotes the fix, names a graded test).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor

import apache_beam as beam
from trajforge.generators.issues.context import build_context
from trajforge.generators.issues.writer import Attempt, check_statement, write_statement
from trajforge.generators.llm.client import LLMClient, endpoint_configured
from trajforge.generators.sources.specs import SourceOptions, open_source
from trajforge.pipelines.runtime import progress
from trajforge.pipelines.runtime.stage_fn import REJECTED, StageFn
from trajforge.schemas.errors import UserError
from trajforge.schemas.params import Params
from trajforge.schemas.rejection import Rejection
from trajforge.schemas.statement_attempt import StatementAttempt
from trajforge.schemas.task_instance import TaskInstance
from trajforge.schemas.test_run import TestRun

STAGE = "describe"
STATEMENTS = "statements"
FAILED = ("FAILED", "ERROR")
# check_statement's reasons that no statement may have, the template's included (a template
# statement may read as a report rather than prose, and name no function of the patch).
UNUSABLE = ("empty", "leaks_patch", "leaks_test")


def failing_base_run(run: TestRun) -> bool:
    return run.state == "base" and any(t.status in FAILED for t in run.tests)


class DescribeBatchFn(StageFn):
    """[(task, its base runs)] -> described tasks, every statement attempt as a side table, and
    the tasks that cannot be described as rejections."""

    STAGE = STAGE

    def setup(self) -> None:
        llm = self.params.llm
        wanted = endpoint_configured(llm)
        self.client = LLMClient(llm, self.params.results_cache) if wanted else None
        self.pool = ThreadPoolExecutor(max_workers=llm.concurrency)

    def teardown(self) -> None:
        self.pool.shutdown(wait=True)

    def process(self, batch: list[tuple[TaskInstance, list[TestRun]]]):
        before = (self.client.calls, self.client.cache_hits) if self.client else (0, 0)
        for task, attempts, rejection in self.pool.map(lambda pair: self._describe(*pair), batch):
            for attempt in attempts:
                yield beam.pvalue.TaggedOutput(STATEMENTS, attempt)
            if rejection is not None:
                yield self.rejection(rejection)
                continue
            writer = task.provenance.get("problem_statement", "kept").split(":")[0]
            self.count(f"written_by_{writer}")
            progress.tick(writer)
            yield task
        if self.client is not None:
            self.count("llm_calls", self.client.calls - before[0])
            self.count("llm_cache_hits", self.client.cache_hits - before[1])

    def _describe(
        self, task: TaskInstance, runs: list[TestRun]
    ) -> tuple[TaskInstance, list[StatementAttempt], Rejection | None]:
        """The task with its statement, every try, and the rejection when there is none."""
        describe = self.params.describe
        if task.problem_statement.strip() and not describe.overwrite:
            return task, [], None
        try:
            repo = open_source(task.source, SourceOptions.from_params(self.params))
        except UserError as exc:
            detail = f"{task.instance_id}: repository {task.source} cannot be opened ({exc})"
            return task, [], Rejection(task.instance_id, STAGE, exc.reason, detail)
        context = build_context(task, repo.path, runs)
        text, provenance, tried = write_statement(
            self.client,
            task,
            context,
            describe.attempts,
            describe.max_patch_chars,
            describe.min_chars,
        )
        rejection = None
        if provenance.get("problem_statement") == "template":
            why = check_statement(text, task, context, describe.min_chars)
            if why in UNUSABLE:  # the last writer failed too: nothing usable to pass on
                tried[-1] = dataclasses.replace(tried[-1], accepted=False, reason=why)
                rejection = Rejection(
                    task.instance_id, STAGE, "no_statement", _no_statement(task, tried)
                )
        described = dataclasses.replace(
            task, problem_statement=text, provenance={**task.provenance, **provenance}
        )
        attempts = [
            StatementAttempt(
                task.instance_id,
                number,
                a.writer,
                a.accepted,
                a.reason,
                a.text,
                a.prompt_tokens,
                a.completion_tokens,
            )
            for number, a in enumerate(tried)
        ]
        return described, attempts, rejection


def _no_statement(task: TaskInstance, tried: list[Attempt]) -> str:
    reasons = ", ".join(f"{a.writer.split(':')[0]} {a.reason}" for a in tried)
    return f"{task.instance_id}: no usable issue text (every writer failed: {reasons})"


def _pair(element: tuple[str, dict[str, Iterable]]):
    _, grouped = element
    runs = list(grouped["runs"])
    for task in grouped["tasks"]:
        yield task, runs


class DescribeTasks(beam.PTransform):
    """(tasks, runs) -> {"tasks", "statements", "rejections"}; runs may be an empty PCollection."""

    def __init__(self, params: Params) -> None:
        super().__init__()
        self.params = params

    def expand(self, inputs):
        tasks, runs = inputs
        size = self.params.llm.concurrency
        keyed_tasks = tasks | "KeyTasks" >> beam.Map(lambda t: (t.candidate_id, t))
        keyed_runs = (
            runs
            | "FailingBaseRuns" >> beam.Filter(failing_base_run)
            | "KeyRuns" >> beam.Map(lambda r: (r.candidate_id, r))
        )
        described = (
            {"tasks": keyed_tasks, "runs": keyed_runs}
            | "JoinRuns" >> beam.CoGroupByKey()
            | "Pair" >> beam.FlatMap(_pair)
            | "Batch" >> beam.BatchElements(min_batch_size=size, max_batch_size=size * 4)
            | "Describe"
            >> beam.ParDo(DescribeBatchFn(self.params)).with_outputs(
                STATEMENTS, REJECTED, main="tasks"
            )
        )
        return {
            "tasks": described.tasks,
            "statements": described[STATEMENTS],
            "rejections": described[REJECTED],
        }
