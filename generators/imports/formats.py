"""Which reader turns a row of each ``--format`` into an ``ImportRow``.

SWE-bench, SWE-Gym, SWE-smith and nebius share SWE-bench's columns (``rows.py``); Multi-SWE-bench
and SWE-PolyBench have their own (``multiswebench.py``, ``polybench.py``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from trajforge.generators.imports import rows
from trajforge.generators.imports.multiswebench import DATASET as MULTI_SWE_BENCH
from trajforge.generators.imports.multiswebench import parse_multi_swe_bench
from trajforge.generators.imports.polybench import DATASET as SWE_POLYBENCH
from trajforge.generators.imports.polybench import parse_polybench

OWN_COLUMNS: dict[str, Callable[[str, Any], rows.ImportRow]] = {
    MULTI_SWE_BENCH: parse_multi_swe_bench,
    SWE_POLYBENCH: parse_polybench,
}
FORMATS = (*rows.SWE_BENCH_SHAPED, *OWN_COLUMNS)


def parse_row(fmt: str, where: str, raw: Any) -> rows.ImportRow:
    """``raw`` (a dict read from a file) as an ``ImportRow`` of format ``fmt``, or ``BadRow``."""
    reader = OWN_COLUMNS.get(fmt)
    return reader(where, raw) if reader is not None else rows.parse_row(fmt, where, raw)
