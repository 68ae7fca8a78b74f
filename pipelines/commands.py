"""The stage commands: CLI arguments and params -> a stage run."""

from __future__ import annotations

import argparse
import dataclasses
import sys

import apache_beam as beam
import pyarrow.parquet as pq

from generators.bug_injector import check_operators
from generators.llm_client import endpoint_configured
from generators.sources import pypi_spec
from pipelines.curate import Curate
from pipelines.describe import DescribeTasks
from pipelines.explore import ExploreRepos
from pipelines.inject import InjectBugs
from pipelines.mine import MineRepos
from pipelines.rollout import RolloutTasks
from pipelines.stage_run import TableSpec, run_stage
from pipelines.validate import ValidateCandidates
from schemas.candidate import Candidate
from schemas.env_profile import EnvProfile
from schemas.errors import UserError
from schemas.explore_task import ExploreTask
from schemas.params import Params
from schemas.records import from_row
from schemas.rejection import Rejection
from schemas.statement_attempt import StatementAttempt
from schemas.storage import join, parquet_files
from schemas.task_instance import TaskInstance
from schemas.test_run import TestRun
from schemas.trajectory import Trajectory
from schemas.transition import Transition

REJECTIONS = TableSpec(Rejection.ARROW_SCHEMA, lambda r: f"{r.input}\0{r.reason}\0{r.detail}")
TASKS = TableSpec(TaskInstance.ARROW_SCHEMA, lambda t: t.instance_id)
TRAJECTORIES = TableSpec(Trajectory.ARROW_SCHEMA, lambda t: t.trajectory_id)
TRANSITIONS = TableSpec(Transition.ARROW_SCHEMA, lambda t: f"{t.trajectory_id}\0{t.step:06d}")
EXPLORE_TASKS = TableSpec(ExploreTask.ARROW_SCHEMA, lambda t: t.task_id)
CANDIDATES = TableSpec(Candidate.ARROW_SCHEMA, lambda c: c.candidate_id)


def _run(
    stage: str,
    args: argparse.Namespace,
    params: Params,
    beam_args: list[str],
    *,
    tables: dict[str, TableSpec],
    build,
    kept_table: str,
    unit: str,
    total: int | None = None,
) -> int:
    """Every stage's run: runner and shards from params, one summary on stderr.

    ``total`` is the number of inputs when it is known up front (it drives the progress bar);
    otherwise inputs are counted as kept + rejected at the end.
    """
    summary = run_stage(
        stage=stage,
        output=args.output,
        runner=params.pipeline.runner,
        beam_args=beam_args,
        shards=params.pipeline.shards,
        tables=tables,
        build=build,
        kept_table=kept_table,
        inputs=(lambda reasons, kept: kept + sum(reasons.values()))
        if total is None
        else (lambda reasons, kept: total),
        progress_total=total,
        progress_unit=unit,
    )
    print(summary.render(), file=sys.stderr)
    return 0


def run_mine(args: argparse.Namespace, params: Params, beam_args: list[str]) -> int:
    if args.repo or args.pypi:
        params.sources.repos, params.sources.pypi = list(args.repo), list(args.pypi)
    if args.commits:
        params.mine.commits = [c.strip() for c in args.commits.split(",") if c.strip()]
    if args.max_commits:
        params.mine.max_commits = args.max_commits
    params.mine.since = args.since or params.mine.since
    params.mine.until = args.until or params.mine.until
    specs = [*params.sources.repos, *(pypi_spec(name) for name in params.sources.pypi)]
    return _run_source_stage("mine", "sources", specs, MineRepos(params), params, args, beam_args)


def run_inject(args: argparse.Namespace, params: Params, beam_args: list[str]) -> int:
    inject = params.inject
    if args.repo or args.pypi:
        inject.repos, inject.pypi = list(args.repo), list(args.pypi)
    inject.commit = args.commit or inject.commit
    if args.max_candidates:
        inject.max_candidates = args.max_candidates
    if args.operators:
        inject.operators = [o.strip() for o in args.operators.split(",") if o.strip()]
    if args.seed is not None:
        inject.seed = args.seed
    check_operators(inject.operators)
    params.check()
    specs = [*inject.repos, *(pypi_spec(name) for name in inject.pypi)]
    return _run_source_stage("inject", "inject", specs, InjectBugs(params), params, args, beam_args)


def _run_source_stage(
    stage: str,
    section: str,
    specs: list[str],
    transform: beam.PTransform,
    params: Params,
    args: argparse.Namespace,
    beam_args: list[str],
    tables: dict[str, TableSpec] | None = None,
    kept_table: str = "candidates",
    unit: str = "candidate",
) -> int:
    """A stage that starts from source specs (mine, inject: candidates; explore)."""
    if not specs:
        _no_sources(stage, section)
    return _run(
        stage, args, params, beam_args,
        tables=tables or {"candidates": CANDIDATES, "rejections": REJECTIONS},
        build=lambda p: p | "Sources" >> beam.Create(specs) | stage.title() >> transform,
        kept_table=kept_table,
        unit=unit,
    )  # fmt: skip


def run_validate(args: argparse.Namespace, params: Params, beam_args: list[str]) -> int:
    if args.sandbox:
        params.sandbox.kind = args.sandbox
    if args.workers:
        params.validate.workers = args.workers
    if args.reruns is not None:
        params.validate.reruns = args.reruns
    params.check()
    tables = [_candidate_table(path) for path in args.input]
    total = _row_count(tables)
    if params.sandbox.kind == "local":
        from verifiers.local_sandbox import WARNING

        print(WARNING, file=sys.stderr)
    return _run(
        "validate", args, params, beam_args,
        tables={
            "tasks": TASKS,
            "rejections": REJECTIONS,
            "profiles": TableSpec(EnvProfile.ARROW_SCHEMA, lambda p: p.profile_id),
            "runs": TableSpec(TestRun.ARROW_SCHEMA, lambda r: f"{r.candidate_id}\0{r.run_id}"),
        },
        build=lambda p: (
            _read_records(p, "Candidates", tables, Candidate) | ValidateCandidates(params)
        ),
        kept_table="tasks",
        unit="candidate",
        total=total,
    )  # fmt: skip


def _candidate_table(path: str) -> str:
    """The candidates table of a mine/inject output (or a directory of Parquet files itself)."""
    table = join(path, "candidates")
    if not parquet_files(table):
        table = path
    if not parquet_files(table) or table.endswith(".parquet"):
        raise UserError(
            f"validate: no Parquet files in {path}; pass a `trajforge mine` or "
            "`trajforge inject` output"
        )
    return table


def _no_sources(stage: str, section: str) -> None:
    """Nothing configured is a valid choice in a pipeline (empty tables), and worth one line."""
    print(
        f"{stage}: no sources in params ({section}.repos / {section}.pypi) and none on the "
        "command line (--repo, --pypi); writing empty tables",
        file=sys.stderr,
    )


def run_curate(args: argparse.Namespace, params: Params, beam_args: list[str]) -> int:
    if args.benchmark:
        params.curate.benchmarks = list(args.benchmark)
    record_classes = {
        "tasks": TaskInstance,
        "explore_tasks": ExploreTask,
        "trajectories": Trajectory,
        "transitions": Transition,
    }
    tables = {
        name: _tables("curate", args.input, name, cls, required=name == "tasks")
        for name, cls in record_classes.items()
    }
    total = sum(_row_count(t) for t in tables.values())

    def build(p: beam.Pipeline) -> dict:
        records = {
            name: _read_records(p, name.title().replace("_", ""), tables[name], cls)
            for name, cls in record_classes.items()
        }
        return records | "Curate" >> Curate(params.curate)

    return _run(
        "curate", args, params, beam_args,
        tables={
            "tasks": TASKS,
            "explore_tasks": EXPLORE_TASKS,
            "trajectories": TRAJECTORIES,
            "transitions": TRANSITIONS,
            "rejections": REJECTIONS,
        },
        build=build,
        kept_table="tasks",
        unit="record",
        total=total,
    )  # fmt: skip


def _tables(
    stage: str, paths: list[str], name: str, cls: type, required: bool = False
) -> list[str]:
    """The ``name`` tables of the inputs; ``required`` means at least one input must have one."""
    tables = [t for path in paths if (t := _record_table(stage, path, name, cls))]
    if required and not tables:
        raise UserError(
            f"{stage}: no {name} Parquet files in {', '.join(paths)}; pass a `validate` output "
            "(or the output of a later stage)"
        )
    return tables


def _record_table(stage: str, path: str, name: str, cls: type) -> str | None:
    """``path/name`` when it holds Parquet files whose columns the record class can read."""
    table = join(path, name)
    files = parquet_files(table)
    if not files:
        return None
    wanted = {
        f.name
        for f in dataclasses.fields(cls)
        if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
    }
    missing = sorted(wanted - set(pq.read_schema(files[0]).names))
    if missing:
        raise UserError(
            f"{stage}: {table} lacks columns {', '.join(missing)} (an older or different schema); "
            "rerun the stage that wrote it with this trajforge"
        )
    return table


def _read_records(p: beam.Pipeline, label: str, tables: list[str], cls: type):
    if not tables:
        return p | f"No{label}" >> beam.Create([])
    reads = [
        p | f"Read{label}{i}" >> beam.io.ReadFromParquet(join(table, "*.parquet"))
        for i, table in enumerate(tables)
    ]
    return (
        reads
        | f"All{label}" >> beam.Flatten()
        | f"As{label}" >> beam.Map(lambda row, cls=cls: from_row(cls, row))
    )


def run_describe(args: argparse.Namespace, params: Params, beam_args: list[str]) -> int:
    _endpoint_overrides(args, params)
    params.describe.overwrite = args.overwrite or params.describe.overwrite
    task_tables = _tables("describe", args.input, "tasks", TaskInstance, required=True)
    run_tables = _tables("describe", args.input, "runs", TestRun)
    total = _row_count(task_tables)
    if not endpoint_configured(params.llm):
        _no_endpoint("describe", "issue text is written from the failing tests' output by the "
                     "template writer")  # fmt: skip

    def build(p: beam.Pipeline) -> dict:
        tasks = _read_records(p, "Tasks", task_tables, TaskInstance)
        runs = _read_records(p, "Runs", run_tables, TestRun)
        described = (tasks, runs) | "Describe" >> DescribeTasks(params)
        return {**described, "rejections": p | "NoRejections" >> beam.Create([])}

    return _run(
        "describe", args, params, beam_args,
        tables={
            "tasks": TASKS,
            "statements": TableSpec(
                StatementAttempt.ARROW_SCHEMA, lambda s: f"{s.instance_id}\0{s.attempt:04d}"
            ),
            "rejections": REJECTIONS,
        },
        build=build,
        kept_table="tasks",
        unit="task",
        total=total,
    )  # fmt: skip


def run_rollout(args: argparse.Namespace, params: Params, beam_args: list[str]) -> int:
    _endpoint_overrides(args, params)
    if args.attempts:
        params.rollout.attempts = args.attempts
    if args.sandbox:
        params.sandbox.kind = args.sandbox
    params.check()
    task_tables = _tables("rollout", args.input, "tasks", TaskInstance, required=True)
    tasks_total = _row_count(task_tables)
    configured = endpoint_configured(params.llm)
    if not configured:
        _no_endpoint("rollout", "tasks pass through with no trajectories")

    def build(p: beam.Pipeline) -> dict:
        tasks = _read_records(p, "Tasks", task_tables, TaskInstance)
        if not configured:
            return {
                "tasks": tasks,
                "trajectories": p | "NoTrajectories" >> beam.Create([]),
                "transitions": p | "NoTransitions" >> beam.Create([]),
                "rejections": p | "NoRejections" >> beam.Create([]),
            }
        return tasks | "Rollout" >> RolloutTasks(params)

    return _run(
        "rollout", args, params, beam_args,
        tables={
            "tasks": TASKS,
            "trajectories": TRAJECTORIES,
            "transitions": TRANSITIONS,
            "rejections": REJECTIONS,
        },
        build=build,
        kept_table="trajectories",
        unit="run",
        total=tasks_total * params.rollout.attempts if configured else 0,
    )  # fmt: skip


def _no_endpoint(stage: str, consequence: str) -> None:
    print(
        f"{stage}: no endpoint configured (llm.base_url, llm.model); {consequence}",
        file=sys.stderr,
    )


def _endpoint_overrides(args: argparse.Namespace, params: Params) -> None:
    if args.base_url:
        params.llm.base_url = args.base_url
    if args.model:
        params.llm.model = args.model
    params.check()


def _row_count(tables: list[str]) -> int:
    return sum(pq.ParquetFile(f).metadata.num_rows for t in tables for f in parquet_files(t))


def run_explore(args: argparse.Namespace, params: Params, beam_args: list[str]) -> int:
    _endpoint_overrides(args, params)
    explore = params.explore
    if args.repo or args.pypi:
        explore.repos, explore.pypi = list(args.repo), list(args.pypi)
    explore.commit = args.commit or explore.commit
    specs = [*explore.repos, *(pypi_spec(name) for name in explore.pypi)]
    if not endpoint_configured(params.llm):
        _no_endpoint("explore", "running the doc examples of each repository as written, "
                     "labeled from templates")  # fmt: skip
    tables = {
        "explore_tasks": EXPLORE_TASKS,
        "trajectories": TRAJECTORIES,
        "transitions": TRANSITIONS,
        "rejections": REJECTIONS,
    }
    return _run_source_stage(
        "explore", "explore", specs, ExploreRepos(params), params, args, beam_args,
        tables=tables, kept_table="explore_tasks", unit="run",
    )  # fmt: skip
