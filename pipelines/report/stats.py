"""``trajforge stats DIR``: counts, yield and rejection reasons of any stage output (polars)."""

from __future__ import annotations

import os
import sys

from trajforge.pipelines.report.data import languages
from trajforge.pipelines.runtime import outputs
from trajforge.schemas.errors import UserError
from trajforge.schemas.storage import is_local


def print_stats(directory: str) -> int:
    if is_local(directory) and not os.path.isdir(directory):
        raise UserError(f"stats: {directory} is not a directory; pass a stage output directory")
    tables = outputs.tables(directory)
    if not tables:
        raise UserError(f"stats: no tables in {directory}; pass a stage output directory")
    files: dict[str, list[str]] = {}
    for name in tables:
        files[name], bad = outputs.readable(outputs.table_files(directory, name))
        for path, why in bad.items():  # left out: the other files still count
            print(f"stats: left out {path}: {why}", file=sys.stderr)
    counts = {name: outputs.row_count(found) for name, found in files.items()}
    for name, count in counts.items():
        print(f"{name:<12} {count:>8} rows")
    kept_table = outputs.kept_table(directory)
    kept = counts.get(kept_table) if kept_table else None
    rejected = counts.get("rejections", 0)
    if kept is not None and kept + rejected:
        print(f"yield        {kept / (kept + rejected):8.1%}  ({kept} of {kept + rejected})")
    if counts.get("tasks"):
        print_languages(files["tasks"])
    if rejected:
        frame = outputs.read_frame(files["rejections"], ["stage", "reason"])
        if {"stage", "reason"} <= set(frame.columns):
            reasons = frame.group_by("stage", "reason").len().sort("len", descending=True)
            print("rejections by reason:")
            for stage, reason, count in reasons.iter_rows():
                print(f"  {count:>6}  {stage}/{reason}")
    sys.stdout.flush()
    return 0


def print_languages(task_files: list[str]) -> None:
    """Tasks per language (the report's numbers: ``data.languages``)."""
    print("tasks by language:")
    for language, count in languages(outputs.read_frame(task_files, ["language"])):
        print(f"  {count:>6}  {language}")
