"""What the run report shows, gathered from stage outputs with polars.

Stage outputs are read through ``pipelines.runtime.outputs`` (the one reader that knows their
layout and which table a stage keeps). Anything may be missing: a stage that has
not run, a table with no rows, a summary from an older version. Loaders then return ``None`` or an
empty frame, so the report can say "no data" instead of failing. A file that is not readable
Parquet is left out and named (``RunData.unreadable``, and the stage's note), never a failure.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

import polars as pl
from trajforge.pipelines.runtime import cost, outputs
from trajforge.pipelines.runtime.outputs import read_frame, table_files
from trajforge.pipelines.runtime.tables import RECORDS
from trajforge.schemas.label_check import (
    CLASSES,
    CONFIRMED,
    DIFFERS,
    LABELS,
    PHRASES,
    REJECTED,
    VERDICTS,
)
from trajforge.schemas.storage import exists, join, read_bytes
from trajforge.schemas.task_instance import DEFAULT_LANGUAGE

PATCH_BREAKS = [0, 5, 10, 25, 50, 100, 250, 500, 1000]
PATCH_LABELS = ["0", "1-5", "6-10", "11-25", "26-50", "51-100", "101-250", "251-500", "501-1k"]
PATCH_LABELS += [">1k"]  # one label per bin: len(PATCH_BREAKS) + 1


TRAJECTORY_COLUMNS = [
    "instance_id", "resolved", "exit_status", "origin", "model", "soft_reward", "guidance",
    "near_miss",
]  # fmt: skip

LABEL_CHECK_COLUMNS = [
    "candidate_id", "instance_id", "dataset", "repo", "verdict", "reason", "detail",
    "FAIL_TO_PASS", "PASS_TO_PASS",
]  # fmt: skip

# What the report reads of each table, typed by the table's record: a file that holds one of
# these columns with another type (every column cast to text, say) is left out and named.
REPORT_COLUMNS = {
    "tasks": ["repo", "origin", "difficulty", "patch", "language"],
    "trajectories": TRAJECTORY_COLUMNS,
    "label_check": LABEL_CHECK_COLUMNS,
    "rejections": ["reason"],
}


# What validate and explore summaries say of their environment images (generators/.../disk.py).
DISK_FIGURES = (
    "image MB per task",
    "image MB (unique layers)",
    "environment images",
    "build s per image",
)


@dataclass
class StageInfo:
    """One stage's line in the funnel: from its summary.json, else counted from its tables."""

    name: str
    path: str
    ran: bool
    inputs: int | None = None
    kept: int | None = None
    rejected: dict[str, int] = field(default_factory=dict)
    seconds: float | None = None
    note: str = ""  # why numbers are missing or estimated
    disk: dict[str, float] = field(default_factory=dict)  # DISK_FIGURES its summary gives
    cost: cost.CoreSeconds | None = None  # its summary's core-seconds (runtime/cost.py)


@dataclass
class RunData:
    stages: list[StageInfo]
    tasks: pl.DataFrame | None  # the last stage's tasks; None when no stage has the table
    tasks_stage: str
    trajectories: pl.DataFrame | None
    trajectories_stage: str
    version: dict[str, str]
    unreadable: dict[str, str] = field(default_factory=dict)  # file -> why it was left out
    labels: pl.DataFrame | None = None  # the label check of imported rows (validate)
    labels_stage: str = ""

    @property
    def seconds(self) -> float:
        return sum(s.seconds or 0.0 for s in self.stages)

    @property
    def core_seconds(self) -> cost.CoreSeconds | None:
        """Every stage's core-seconds summed; None when no stage's summary says them."""
        said = [s.cost for s in self.stages if s.cost is not None]
        return sum(said[1:], said[0]) if said else None


def load_run(stage_dirs: Mapping[str, str]) -> RunData:
    bad = unreadable_files(stage_dirs.values())
    stages = [load_stage(name, path, bad) for name, path in stage_dirs.items()]
    tasks, tasks_stage = _last_table(stage_dirs, "tasks", REPORT_COLUMNS["tasks"], bad)
    trajectories, traj_stage = _last_table(stage_dirs, "trajectories", TRAJECTORY_COLUMNS, bad)
    labels, labels_stage = _last_table(stage_dirs, "label_check", LABEL_CHECK_COLUMNS, bad)
    return RunData(
        stages, tasks, tasks_stage, trajectories, traj_stage, _version(stage_dirs.values()), bad,
        labels, labels_stage,
    )  # fmt: skip


def unreadable_files(paths: Iterable[str]) -> dict[str, str]:
    """file -> why, for every table file of the local stage outputs that is not readable Parquet
    or holds a column the report reads with a type it cannot take."""
    bad: dict[str, str] = {}
    for path in paths:
        for table in outputs.tables(path):
            record = RECORDS.get(table)
            types = None
            if record is not None and table in REPORT_COLUMNS:
                schema = record.ARROW_SCHEMA  # type: ignore[attr-defined]
                types = outputs.only(schema, REPORT_COLUMNS[table])
            bad.update(outputs.readable(table_files(path, table), (), types)[1])
    return bad


def load_stage(name: str, path: str, bad: Mapping[str, str] | None = None) -> StageInfo:
    if not exists(path):
        return StageInfo(name, path, ran=False, note="not run")
    bad = bad if bad is not None else unreadable_files([path])
    left_out = [f for f in bad if f.startswith(path.rstrip("/") + "/")]
    info = _stage_info(name, path, bad)
    if left_out:
        unreadable = f"{len(left_out)} unreadable file{'s' if len(left_out) > 1 else ''} left out"
        info.note = f"{unreadable}; {info.note}" if info.note else unreadable
    return info


def _stage_info(name: str, path: str, bad: Mapping[str, str]) -> StageInfo:
    summary = outputs.summary(path)
    if summary is not None:
        try:
            return StageInfo(
                name,
                path,
                ran=True,
                inputs=int(summary["inputs"]),
                kept=int(summary["kept"]),
                rejected={str(k): int(v) for k, v in dict(summary.get("rejected", {})).items()},
                seconds=float(summary["seconds"]) if "seconds" in summary else None,
                disk={k: float(summary[k]) for k in DISK_FIGURES if k in summary},
                cost=cost.read(summary.get(cost.LINE)),
            )
        except (ValueError, KeyError, TypeError):
            pass  # fall back to counting the tables
    return _stage_from_tables(name, path, bad)


def _good(files: list[str], bad: Mapping[str, str]) -> list[str]:
    return [f for f in files if f not in bad]


def _stage_from_tables(name: str, path: str, bad: Mapping[str, str]) -> StageInfo:
    """No usable summary.json: count like ``trajforge stats`` does."""
    rejections = read_frame(_good(table_files(path, "rejections"), bad), ["reason"])
    rejected: dict[str, int] = {}
    if "reason" in rejections.columns:
        counts = rejections.group_by("reason").len()
        rejected = {str(r): int(n) for r, n in counts.iter_rows()}
    kept_table = outputs.kept_table(path)
    kept = outputs.row_count(_good(table_files(path, kept_table), bad)) if kept_table else None
    if kept is None and not rejected:
        return StageInfo(name, path, ran=True, note="no summary.json and no tables")
    inputs = (kept or 0) + sum(rejected.values())
    return StageInfo(
        name, path, True, inputs, kept or 0, rejected, note="no summary.json: counted from tables"
    )


def _last_table(
    stage_dirs: Mapping[str, str], table: str, columns: list[str], bad: Mapping[str, str]
) -> tuple[pl.DataFrame | None, str]:
    """The table from the last stage that wrote it (even empty: later stages overrule earlier)."""
    for name, path in reversed(list(stage_dirs.items())):
        if exists(path):
            files = table_files(path, table)
            if files:
                return read_frame(_good(files, bad), columns), name
    return None, ""


def _version(paths: Iterable[str]) -> dict[str, str]:
    """Scalar entries of the last ``version.json`` found (the export writes one)."""
    for path in reversed(list(paths)):
        candidate = join(path, "version.json")
        if not exists(candidate):
            continue
        try:
            data = json.loads(read_bytes(candidate))
        except ValueError:
            return {"version.json": "unreadable"}
        if isinstance(data, dict):
            return {str(k): str(v) for k, v in data.items() if isinstance(v, str | int | float)}
        return {"version": str(data)}
    return {}


# Aggregates: each returns (label, count) pairs in display order.


def counts(frame: pl.DataFrame | None, column: str) -> list[tuple[str, int]]:
    """Every value with its count, most frequent first (ties by value, so output is stable)."""
    if frame is None or column not in frame.columns or frame.height == 0:
        return []
    grouped = (
        frame.select(pl.col(column).cast(pl.String).fill_null("(none)"))
        .group_by(column)
        .len()
        .sort(["len", column], descending=[True, False])
    )
    return [(str(v), int(n)) for v, n in grouped.iter_rows()]


def languages(frame: pl.DataFrame | None) -> list[tuple[str, int]]:
    """Tasks per language, most first; a table without the column, or a task naming none (runs
    before the language layer), is the schemas' ``DEFAULT_LANGUAGE``."""
    if frame is None or frame.height == 0:
        return []
    if "language" not in frame.columns:
        return [(DEFAULT_LANGUAGE, frame.height)]
    filled = frame.with_columns(pl.col("language").fill_null(DEFAULT_LANGUAGE))
    return counts(filled, "language")


def top(pairs: list[tuple[str, int]], limit: int) -> tuple[list[tuple[str, int]], int, int]:
    """The ``limit`` largest pairs, and how many values and rows the rest hold."""
    ordered = sorted(pairs, key=lambda pair: (-pair[1], pair[0]))
    rest = ordered[limit:]
    return ordered[:limit], len(rest), sum(n for _, n in rest)


def difficulty_bins(
    frame: pl.DataFrame | None, bins: int = 10
) -> tuple[list[tuple[str, int]], int]:
    """Equal-width bins over [0, 1] when scores lie there, else over their range; plus unscored."""
    if frame is None or "difficulty" not in frame.columns or frame.height == 0:
        return [], 0
    values = frame.get_column("difficulty").cast(pl.Float64)
    scored = values.drop_nulls().drop_nans()
    unscored = values.len() - scored.len()
    if scored.len() == 0:
        return [], unscored
    low, high = float(scored.min()), float(scored.max())  # type: ignore[arg-type]
    if high == low and not 0.0 <= low <= 1.0:
        return [(f"{low:g}", scored.len())], unscored
    if low >= 0.0 and high <= 1.0:
        low, high = 0.0, 1.0
    width = (high - low) / bins
    index = ((scored - low) / width).floor().clip(0, bins - 1).cast(pl.Int64)
    tally = {int(i): int(n) for i, n in index.value_counts().iter_rows()}
    digits = 1 if width >= 0.1 else 2 if width >= 0.01 else 3
    edges = [f"{low + i * width:.{digits}f}" for i in range(bins + 1)]
    return [(f"{edges[i]}-{edges[i + 1]}", tally.get(i, 0)) for i in range(bins)], unscored


def patch_lines(frame: pl.DataFrame) -> pl.Series:
    """Changed lines of each patch: ``+``/``-`` lines, not counting the ``+++``/``---`` headers."""
    patch = pl.col("patch").fill_null("")
    changed = patch.str.count_matches(r"(?m)^[+-]") - patch.str.count_matches(
        r"(?m)^(?:\+\+\+|---) (?:a/|b/|/dev/null)"
    )
    return frame.select(changed.alias("lines")).get_column("lines")


def patch_size_bins(frame: pl.DataFrame | None) -> list[tuple[str, int]]:
    """Fixed, roughly logarithmic line-count bins, trimmed to the first and last non-empty one."""
    if frame is None or "patch" not in frame.columns or frame.height == 0:
        return []
    # Bins are right-closed: the index of a value is how many breaks lie below it.
    index = pl.Series(PATCH_BREAKS).search_sorted(patch_lines(frame), side="left")
    tally = {int(i): int(n) for i, n in index.value_counts().iter_rows()}
    pairs = [(label, tally.get(i, 0)) for i, label in enumerate(PATCH_LABELS)]
    used = [i for i, (_, n) in enumerate(pairs) if n]
    return pairs[used[0] : used[-1] + 1] if used else []


def outcomes(frame: pl.DataFrame | None) -> list[tuple[str, int]]:
    """Resolved / unresolved / not verified (``resolved`` is null until the patch is checked)."""
    if frame is None or "resolved" not in frame.columns or frame.height == 0:
        return []
    resolved = frame.get_column("resolved")
    return [
        ("resolved", int((resolved == True).sum())),  # noqa: E712 (a polars expression)
        ("unresolved", int((resolved == False).sum())),  # noqa: E712
        ("not verified", int(resolved.is_null().sum())),
    ]


def _guided(frame: pl.DataFrame) -> pl.Series:
    """Per run: was it a guided retry (its prompt carried guidance)?"""
    if "guidance" not in frame.columns:
        return pl.Series([False] * frame.height, dtype=pl.Boolean)
    return frame.get_column("guidance").cast(pl.String).fill_null("").str.len_chars() > 0


def guidance_figures(frame: pl.DataFrame | None) -> dict[str, object]:
    """Solve rate with and without guidance: runs, resolved runs and their share for unguided and
    guided runs (a rate only where there were runs), and the tasks only a guided run solved."""
    if frame is None or "resolved" not in frame.columns or frame.height == 0:
        return {}
    guided = _guided(frame)
    resolved = frame.get_column("resolved").fill_null(False)
    figures: dict[str, object] = {}
    for label, mask in (("unguided", ~guided), ("guided", guided)):
        runs, solved = int(mask.sum()), int((resolved & mask).sum())
        figures[f"{label} runs"] = runs
        figures[f"{label} resolved"] = solved
        if runs:
            figures[f"{label} solve rate"] = round(solved / runs, 4)
    if figures["guided runs"] and "instance_id" in frame.columns:
        ids = frame.get_column("instance_id")
        by_guided = set(ids.filter(resolved & guided).to_list())
        by_unguided = set(ids.filter(resolved & ~guided).to_list())
        figures["tasks solved only with guidance"] = len(by_guided - by_unguided)
    return figures


def soft_reward_bins(
    frame: pl.DataFrame | None, bins: int = 10
) -> tuple[list[tuple[str, int]], int]:
    """Soft rewards of the unresolved runs in equal bins over [0, 1] (the last one closed), and
    how many unresolved runs have none (not rollouts, or a task without a gold patch)."""
    if frame is None or "soft_reward" not in frame.columns or frame.height == 0:
        return [], 0
    unresolved = frame.filter(pl.col("resolved").fill_null(False).not_())
    values = unresolved.get_column("soft_reward").cast(pl.Float64)
    scored = values.drop_nulls().drop_nans()
    if scored.len() == 0:
        return [], values.len()
    index = (scored * bins).floor().clip(0, bins - 1).cast(pl.Int64)
    tally = {int(i): int(n) for i, n in index.value_counts().iter_rows()}
    edges = [f"{i / bins:.1f}" for i in range(bins + 1)]
    pairs = [(f"{edges[i]}-{edges[i + 1]}", tally.get(i, 0)) for i in range(bins)]
    return pairs, values.len() - scored.len()


def near_misses(frame: pl.DataFrame | None) -> int:
    """Unresolved runs curate kept for SFT (``near_miss``)."""
    if frame is None or "near_miss" not in frame.columns:
        return 0
    return int(frame.get_column("near_miss").fill_null(False).sum())


# The label check (validate, for rows imported from a published dataset).


def label_verdicts(frame: pl.DataFrame | None) -> list[tuple[str, int]]:
    """Checked rows per verdict, in VERDICTS order (every verdict, zeros included)."""
    if frame is None or "verdict" not in frame.columns or frame.height == 0:
        return []
    tally = dict(counts(frame, "verdict"))
    return [(verdict, tally.get(verdict, 0)) for verdict in VERDICTS]


def label_class_counts(frame: pl.DataFrame | None) -> dict[str, dict[str, int]]:
    """label -> class -> tests, summed over the checked rows (every class, zeros included)."""
    found: dict[str, dict[str, int]] = {}
    if frame is None or frame.height == 0:
        return found
    for label in LABELS:
        if label not in frame.columns:
            continue
        column = frame.get_column(label).struct
        found[label] = {c: int(column.field(c).list.len().sum() or 0) for c in CLASSES}
    return found


def label_phrase(classes: Mapping[str, int]) -> str:
    """ "5 agree, 1 we missed" (classes with tests only), or "none"."""
    parts = [f"{classes[c]} {PHRASES[c]}" for c in CLASSES if classes.get(c)]
    return ", ".join(parts) if parts else "none"


def label_figures_of(frame: pl.DataFrame | None) -> dict[str, object]:
    """The stage summary's lines: "labels confirmed: X of N", rows that differ or were rejected,
    and each label's tests per class; nothing when no row was checked (no imported rows)."""
    verdicts = dict(label_verdicts(frame))
    if not verdicts or frame is None:
        return {}
    figures: dict[str, object] = {"labels confirmed": f"{verdicts[CONFIRMED]} of {frame.height}"}
    if verdicts[DIFFERS]:
        figures["labels differ"] = verdicts[DIFFERS]
    if verdicts[REJECTED]:
        figures["labels rejected here"] = verdicts[REJECTED]
    for label, classes in label_class_counts(frame).items():
        figures[f"labels {label}"] = label_phrase(classes)
    return figures


def label_differences(frame: pl.DataFrame | None) -> pl.DataFrame:
    """The checked rows that are not confirmed, rejected first, then by instance id."""
    if frame is None or "verdict" not in frame.columns or frame.height == 0:
        return pl.DataFrame()
    rows = frame.filter(pl.col("verdict") != CONFIRMED)
    keys = [k for k in ("instance_id", "candidate_id") if k in rows.columns]
    return rows.sort([pl.col("verdict") != REJECTED, *keys])
