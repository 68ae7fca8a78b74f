"""What a stage cost: core-seconds split into build / test / other, and per kept row.

A run holds ``cores`` for its wall time (``pipeline.cores_held``: what a machine costs while it
runs), so ``core_s = seconds x cores``. Of those, the seconds the sandboxes spent building images
and running commands are measured where they are waited for (``verifiers/sandbox/usage.py``,
drained into the tally by ``StageFn.finish_bundle``); the rest is ``other``: the CLI's start,
Beam, table writes, image measuring. Summed over concurrent containers, build and test may exceed
``core_s`` when more containers run than cores are held; ``other`` is then 0.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from trajforge.pipelines.runtime.progress import Summary

# The tally's names for the sandbox seconds (milliseconds, as integer counters).
BUILD_MS = "sandbox_build_ms"
RUN_MS = "sandbox_run_ms"
LINE = "core_s"  # the summary's cost line; ``read`` parses it back (the report sums stages)
_LINE = re.compile(r"(\d+) \(\d+ s x \d+ cores\): build (\d+), test (\d+), other (\d+)")


@dataclass(frozen=True)
class CoreSeconds:
    total: float
    build: float
    test: float
    other: float

    def __add__(self, more: CoreSeconds) -> CoreSeconds:
        return CoreSeconds(
            self.total + more.total,
            self.build + more.build,
            self.test + more.test,
            self.other + more.other,
        )


def read(line: object) -> CoreSeconds | None:
    """A summary's ``core_s`` line as numbers; None for a summary without one (older runs)."""
    match = _LINE.fullmatch(line) if isinstance(line, str) else None
    if match is None:
        return None
    return CoreSeconds(*(float(group) for group in match.groups()))


def fold(summary: Summary, cores: int, core_hour_price: float | None = None) -> None:
    """Replace the sandbox counters in ``summary.extra`` by the cost lines."""
    extra = summary.extra
    build_s = _number(extra.pop(BUILD_MS, 0)) / 1000
    test_s = _number(extra.pop(RUN_MS, 0)) / 1000
    core_s = summary.seconds * cores
    other_s = max(core_s - build_s - test_s, 0.0)
    extra[LINE] = (
        f"{core_s:.0f} ({summary.seconds:.0f} s x {cores} cores): build {build_s:.0f}, "
        f"test {test_s:.0f}, other {other_s:.0f}"
    )
    unit = summary.kept_table or "kept"
    if summary.kept and core_s > 0:
        extra[f"{unit}_per_core_hour"] = round(summary.kept * 3600 / core_s, 1)
        extra[f"core_s_per_{_one(unit)}"] = round(core_s / summary.kept, 1)
        if core_hour_price is not None:
            dollars = core_s / 3600 * core_hour_price / summary.kept
            extra[f"usd_per_{_one(unit)}"] = round(dollars, 4)


def is_measured(key: str) -> bool:
    """A cost figure of a summary: measured time, or how the lanes happened to be shared, so,
    like ``seconds``, never the same in two runs (what compares two runs' summaries leaves
    these out)."""
    return (
        key == LINE
        or key in SCHEDULED
        or key.endswith("_per_core_hour")
        or key.startswith(COST_PREFIXES)
    )


COST_PREFIXES = ("core_s_per_", "usd_per_")
SCHEDULED = ("runs_beside",)  # validate's pairs run at once in a free lane (sandbox/lanes.py)


def _one(unit: str) -> str:
    """A table's name for one of its rows: tasks -> task."""
    return unit[:-1] if unit.endswith("s") and len(unit) > 1 else unit


def _number(value: object) -> float:
    return float(value) if isinstance(value, (int, float)) else 0.0
