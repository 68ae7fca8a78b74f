"""``trajforge stats DIR``: counts, yield and rejection reasons of any stage output (polars)."""

from __future__ import annotations

import os
import sys

import polars as pl
from trajforge.schemas.errors import UserError
from trajforge.schemas.storage import parquet_files


def print_stats(directory: str) -> int:
    if not os.path.isdir(directory):
        raise UserError(f"stats: {directory} is not a directory; pass a stage output directory")
    tables = sorted(
        name for name in os.listdir(directory) if parquet_files(os.path.join(directory, name))
    )
    if not tables:
        raise UserError(f"stats: no tables in {directory}; pass a stage output directory")
    counts = {name: _frame(directory, name).height for name in tables}
    for name, count in counts.items():
        print(f"{name:<12} {count:>8} rows")
    kept = next((counts[n] for n in ("tasks", "candidates", "trajectories") if n in counts), None)
    rejected = counts.get("rejections", 0)
    if kept is not None and kept + rejected:
        print(f"yield        {kept / (kept + rejected):8.1%}  ({kept} of {kept + rejected})")
    if rejected:
        reasons = (
            _frame(directory, "rejections")
            .group_by("stage", "reason")
            .len()
            .sort("len", descending=True)
        )
        print("rejections by reason:")
        for stage, reason, count in reasons.iter_rows():
            print(f"  {count:>6}  {stage}/{reason}")
    sys.stdout.flush()
    return 0


def _frame(directory: str, name: str) -> pl.DataFrame:
    return pl.concat([pl.read_parquet(f) for f in parquet_files(os.path.join(directory, name))])
