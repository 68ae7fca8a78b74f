"""Figures a stage command adds to its summary from the tables it wrote."""

from __future__ import annotations

import statistics
from collections.abc import Callable

from trajforge.schemas.params import Params

GIB = 1024**3


def image_disk(params: Params, table: str) -> Callable[[str], dict[str, object]]:
    """Disk per task of ``table``'s rows (their ``image_name``), for backends with images."""

    def measure(staging: str) -> dict[str, object]:
        from trajforge.generators.environments.disk import disk_use
        from trajforge.pipelines.runtime.outputs import column, table_files
        from trajforge.verifiers.sandbox.base import ImageStore
        from trajforge.verifiers.sandbox.factory import make_sandbox

        if params.sandbox.kind == "local":
            return {}
        images = column(table_files(staging, table), "image_name")
        if not images:
            return {}
        sandbox = make_sandbox(params, quiet=True)
        try:
            if not isinstance(sandbox, ImageStore):
                return {}
            return disk_use(sandbox, images).figures()
        finally:
            sandbox.close()

    return measure


def build_seconds(table: str) -> Callable[[str], dict[str, object]]:
    """Seconds per image built in this run, from ``table``'s ``build_s`` (0: reused, pulled)."""

    def measure(staging: str) -> dict[str, object]:
        from trajforge.pipelines.runtime.outputs import column, table_files

        files = table_files(staging, table)
        try:
            timed = [float(s) for s in column(files, "build_s") if s]
        except (KeyError, ValueError):  # a table written before the column existed
            return {}
        if not timed:
            return {}
        return {
            "build s per image": round(sum(timed) / len(timed), 1),
            "build s (slowest image)": round(max(timed), 1),
        }

    return measure


def image_sizes(table: str) -> Callable[[str], dict[str, object]]:
    """Each repository's largest environment image, from ``table``'s ``image_bytes`` (what
    ``environment.max_image_size`` caps): the median over repositories and the largest one."""

    def measure(staging: str) -> dict[str, object]:
        import polars as pl
        from trajforge.pipelines.runtime.outputs import read_frame, table_files

        frame = read_frame(table_files(staging, table), ["repo", "image_bytes"])
        if "image_bytes" not in frame.columns:  # a table written before the column existed
            return {}
        largest = (
            frame.filter(pl.col("image_bytes") > 0)
            .group_by("repo")
            .agg(pl.col("image_bytes").max())
            .sort("image_bytes")
        )
        if largest.is_empty():
            return {}
        sizes: list[int] = largest["image_bytes"].to_list()
        middle = statistics.median(sizes)
        return {
            "image GiB per repository (median)": round(middle / GIB, 2),
            "image GiB (largest)": f"{sizes[-1] / GIB:.2f} ({largest['repo'][-1]})",
        }

    return measure
