"""``trajforge export``: curated tables -> a Hugging Face dataset directory, gated and versioned.

Input: one or more curated run directories, each with ``tasks/*.parquet`` and optionally
``explore_tasks/``, ``trajectories/`` and ``transitions/`` (the layout ``pipelines.runtime.sinks``
writes). Output::

    OUTPUT/README.md                                   dataset card (YAML configs + docs)
    OUTPUT/version.json                                content hash of the data files, counts
    OUTPUT/<config>/<split>-XXXXX-of-YYYYY.parquet     configs tasks, sft, sft_xml, rl,
                                                       explore, transitions
    OUTPUT/data_docs/index.html                        great-expectations Data Docs

``ExportDataset`` is the stage as one composite PTransform, read top to bottom: a first pass
(``pipelines.release.scan``) reads only ids, repos and verdicts and fixes the split of every
repository and the row count of every config's split; then each config, as its own unit of work,
streams the table it is made of in batches, renders its rows and writes its shards (the streaming
shard writer runs inside that DoFn, so a config's rows keep their input order and its shards their
bytes); the quality gates run on the shards' profiles; last the card and version.json are written.
Everything goes to a staging directory beside OUTPUT, and only a passing export replaces OUTPUT;
a failing one leaves OUTPUT as it was and its Data Docs at ``OUTPUT.failed-data_docs/``.

A config with no rows is left out and the card says why. ``explore`` and ``transitions`` come from
tables that curate outputs older than the explore stage lack: inputs without the table at all make
those configs *unavailable* rather than empty (nothing is missing from such a release).
"""

from __future__ import annotations

import hashlib
import json
import os
import pickle
import shutil
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from importlib import metadata

import apache_beam as beam
import pandas as pd
from trajforge.filters.quality_gates import GateResult, enforce, run_quality_gates
from trajforge.generators.trajectories.rl_prompt import DEFAULT_SYSTEM_PROMPT
from trajforge.pipelines.release.card import CardFacts, render_card
from trajforge.pipelines.release.environments import write_environments
from trajforge.pipelines.release.rows import Plan, plan_export, write_config
from trajforge.pipelines.release.scan import check_inputs
from trajforge.pipelines.release.shards import WrittenSplit
from trajforge.pipelines.runtime import progress
from trajforge.pipelines.runtime.runner import LOCAL, make_pipeline
from trajforge.pipelines.runtime.sinks import check_output, publish, staging_dir
from trajforge.pipelines.runtime.stage_fn import StageFn
from trajforge.schemas.errors import UserError
from trajforge.schemas.params import ExportParams
from trajforge.schemas.storage import is_local, write_bytes_atomic

STAGE = "export"
CONFIGS = ("tasks", "sft", "sft_xml", "rl", "explore", "transitions")
DATA_DOCS = "data_docs"


@dataclass
class ExportResult:
    output: str
    version: str
    counts: dict[str, dict[str, int]]  # config -> split -> rows (non-empty configs only)
    omitted: dict[str, str]  # config -> why it has no rows
    dropped: Counter  # reason -> input rows left out
    summary: progress.Summary
    unavailable: dict[str, str] = field(default_factory=dict)  # config -> the table it lacks


@dataclass(frozen=True)
class ExportReport:
    """What ``ExportDataset`` did: its one output element."""

    version: str  # "" when a quality gate failed: no card, nothing to publish
    counts: dict[str, dict[str, int]]
    omitted: dict[str, str]
    unavailable: dict[str, str]
    dropped: Counter
    read: int  # input rows read by the scan
    gates: tuple[GateResult, ...]

    @property
    def passed(self) -> bool:
        return all(g.success for g in self.gates)


class ExportDataset(beam.PTransform):
    """[the input directories, in order] -> one ``ExportReport``; the dataset is written to
    ``root`` (a staging directory: publishing it, or not when a gate failed, is the caller's)."""

    def __init__(
        self,
        root: str,
        params: ExportParams,
        configs: Sequence[str] = CONFIGS,
        system_prompt: str = DEFAULT_SYSTEM_PROMPT,
        batch_rows: int = 512,
    ) -> None:
        super().__init__()
        self.root = root
        self.params = params
        self.configs = tuple(configs)
        self.system_prompt = system_prompt
        self.batch_rows = batch_rows

    def expand(self, inputs):
        plan = inputs | "Scan" >> beam.Map(plan_export, self.configs, self.params)
        written = (
            plan
            | "Configs" >> beam.FlatMap(lambda plan: list(plan.counts))
            | "SpreadConfigs" >> beam.Reshuffle()
            | "RowsPerConfig"
            >> beam.ParDo(
                WriteConfigFn(self.root, self.params, self.system_prompt, self.batch_rows),
                beam.pvalue.AsSingleton(plan),
            )
        )
        gates = plan | "Gate" >> beam.Map(gate, beam.pvalue.AsList(written), self.root)
        environments = plan | "Environments" >> beam.Map(
            lambda plan, root: write_environments(plan.found.files, root), self.root
        )
        return plan | "WriteCard" >> beam.Map(
            write_card,
            beam.pvalue.AsList(written),
            beam.pvalue.AsSingleton(gates),
            self.root,
            self.params,
            beam.pvalue.AsSingleton(environments),
        )


class WriteConfigFn(StageFn):
    """A config's name -> its rows rendered and written as shards, one ``WrittenSplit`` a split."""

    STAGE = STAGE

    def __init__(
        self, root: str, params: ExportParams, system_prompt: str, batch_rows: int
    ) -> None:
        self.root = root
        self.export = params
        self.system_prompt = system_prompt
        self.batch_rows = batch_rows

    def process(self, config: str, plan: Plan):
        written = write_config(
            plan, config, self.root, self.export.shard_rows, self.system_prompt, self.batch_rows
        )
        for split in written:
            self.count(f"{config}_rows", split.facts.num_examples)
            yield split


def gate(plan: Plan, written: list[WrittenSplit], root: str) -> list[GateResult]:
    """Each config's suite on its shards' profiles; Data Docs go to ``root/data_docs``."""
    by_split = {(w.config, w.split): w for w in written}
    frames = {
        config: pd.concat([p for split in splits for p in by_split[(config, split)].profiles])
        for config, splits in plan.counts.items()
    }
    return run_quality_gates(frames, os.path.join(root, DATA_DOCS))


def write_card(
    plan: Plan,
    written: list[WrittenSplit],
    gates: list[GateResult],
    root: str,
    params: ExportParams,
    environments: Sequence[str] = (),
) -> ExportReport:
    """The card and version.json of a passing export; a failing one gets neither."""
    found = plan.found
    report = ExportReport(
        "",
        plan.counts,
        plan.omitted,
        plan.unavailable,
        found.dropped,
        sum(found.read.values()),
        tuple(gates),
    )
    if not report.passed:
        return report
    by_split = {(w.config, w.split): w for w in written}
    version, digests = _content_version(root, written, environments)
    facts = CardFacts(
        name=params.name,
        license=params.license,
        version=version,
        trajforge_version=_trajforge_version(),
        splits={c: {s: by_split[(c, s)].facts for s in n} for c, n in plan.counts.items()},
        schemas={c: _schema(by_split, c) for c in plan.counts},
        omitted={**plan.omitted, **plan.unavailable},
        repo_splits=plan.split_of,
        repo_tasks=found.repos("tasks") + found.repos("explore"),
        task_origins=found.task_origins,
        trajectory_origins=found.trajectory_origins,
        models=found.models,
        dropped=found.dropped,
        gates={g.suite: g.expectations for g in gates},
        inputs=[os.path.basename(os.path.normpath(i)) for i in plan.inputs],
        environments=sum(1 for path in environments if path.endswith("/Dockerfile")),
        near_misses=found.near_misses,
        near_miss_low=found.near_miss_low,
        guided_runs=found.guided_runs,
        task_languages=found.task_languages,
    )
    write_bytes_atomic(os.path.join(root, "README.md"), render_card(facts).encode())
    manifest = {
        "version": version,
        "trajforge": facts.trajforge_version,
        "counts": plan.counts,
        "omitted": facts.omitted,
        "files": digests,
    }
    data = json.dumps(manifest, indent=2, sort_keys=True).encode()
    write_bytes_atomic(os.path.join(root, "version.json"), data)
    return replace(report, version=version)


def export_dataset(
    inputs: Sequence[str],
    output: str,
    params: ExportParams,
    *,
    configs: Sequence[str] = CONFIGS,
    system_prompt: str = DEFAULT_SYSTEM_PROMPT,
    batch_rows: int = 512,
    beam_args: Sequence[str] = (),
) -> ExportResult:
    """Export curated runs ``inputs`` to the dataset directory ``output`` (see module doc).

    Raises ``UserError`` for bad inputs or params and ``QualityGateError`` (a UserError) when a
    suite fails; in both cases ``output`` is left as it was. The pipeline runs in this process:
    the dataset directory is local (``publish`` pushes it)."""
    timer = progress.Timer()
    _check_arguments(inputs, output, params, configs)
    check_output(STAGE, output, inputs)
    set_aside = check_inputs(inputs, configs)
    staging = staging_dir(output)
    kept = f"{staging}.report"  # the pipeline's one result, read back here
    try:
        pipeline = make_pipeline(LOCAL, list(beam_args))
        (
            pipeline
            | "Inputs" >> beam.Create([tuple(inputs)])
            | "Export" >> ExportDataset(staging, params, configs, system_prompt, batch_rows)
            | "KeepReport" >> beam.Map(_keep, kept)
        )
        progress.start(STAGE, None, "row")
        try:
            pipeline.run().wait_until_finish()
        finally:
            progress.stop()
        with open(kept, "rb") as handle:
            report: ExportReport = pickle.load(handle)
        _settle_docs(staging, output, report)
        publish(staging, output)
    finally:
        shutil.rmtree(staging, ignore_errors=True)  # gone already when published
        if os.path.exists(kept):
            os.remove(kept)
    summary = progress.Summary(
        STAGE,
        report.read,
        report.read - sum(report.dropped.values()),
        report.dropped,
        timer.elapsed(),
    )
    summary.extra.update({f"{c} rows": sum(s.values()) for c, s in report.counts.items()})
    if set_aside:
        summary.extra["bad input files"] = len(set_aside)
    summary.extra["version"] = report.version
    return ExportResult(
        os.path.abspath(output),
        report.version,
        report.counts,
        report.omitted,
        report.dropped,
        summary,
        report.unavailable,
    )


def _keep(report: ExportReport, path: str) -> None:
    write_bytes_atomic(path, pickle.dumps(report))


def _settle_docs(staging: str, output: str, report: ExportReport) -> None:
    """A failed gate's Data Docs move beside OUTPUT and the failure is raised; a pass clears
    the Data Docs an earlier failure left."""
    failed_docs = f"{os.path.abspath(output)}.failed-data_docs"
    shutil.rmtree(failed_docs, ignore_errors=True)
    if not report.passed:
        os.replace(os.path.join(staging, DATA_DOCS), failed_docs)
        enforce(report.gates, os.path.join(failed_docs, "index.html"))


def _schema(by_split: dict[tuple[str, str], WrittenSplit], config: str):
    return next(w.schema for (c, _), w in by_split.items() if c == config and w.schema is not None)


def _check_arguments(
    inputs: Sequence[str], output: str, params: ExportParams, configs: Sequence[str]
) -> None:
    if not inputs:
        raise UserError("export: no inputs; pass --input with a curated run directory")
    if not is_local(output):
        raise UserError(f"export: {output} must be a local directory (publish pushes it)")
    unknown = [c for c in configs if c not in CONFIGS]
    if unknown or not configs:
        raise UserError(f"export: unknown configs {unknown}; choose from {', '.join(CONFIGS)}")
    if params.shard_rows < 1:
        raise UserError(f"params: export.shard_rows must be at least 1, got {params.shard_rows}")
    if not 0.0 <= params.validation_fraction < 1.0:
        raise UserError(
            "params: export.validation_fraction must be in [0, 1), "
            f"got {params.validation_fraction}"
        )


def _content_version(
    root: str, written: list[WrittenSplit], environments: Sequence[str] = ()
) -> tuple[str, dict[str, str]]:
    """sha256 over every data file's path and bytes (environment recipes included): the same
    data gives the same version."""
    digests = {}
    for path in [p for split in written for p in split.paths] + list(environments):
        with open(path, "rb") as handle:
            digests[os.path.relpath(path, root)] = hashlib.sha256(handle.read()).hexdigest()
    lines = "".join(f"{p}\t{d}\n" for p, d in sorted(digests.items()))
    return hashlib.sha256(lines.encode()).hexdigest()[:16], dict(sorted(digests.items()))


def _trajforge_version() -> str:
    try:
        return metadata.version("trajforge")
    except metadata.PackageNotFoundError:
        return "unknown"
