"""TestRun: one execution of a test command, with the raw evidence next to the parsed statuses."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import pyarrow as pa

STATUSES = ("PASSED", "FAILED", "ERROR", "SKIPPED", "XFAIL")


@dataclass(frozen=True)
class TestStatus:
    __test__ = False  # not a pytest test class

    test_id: str  # pytest node id, as SWE-bench writes it
    status: str  # one of STATUSES


@dataclass(frozen=True)
class TestRun:
    __test__ = False  # not a pytest test class

    run_id: str
    candidate_id: str
    profile_id: str
    state: str  # base (base + test_patch) | gold (base + patch + test_patch)
    attempt: int  # 0 for the main run, 1.. for reruns
    selection: tuple[str, ...]  # test ids this run was limited to; empty means the whole suite
    exit_code: int
    suite_ran: bool  # False on collection/import errors, usage errors, timeouts, no tests
    timed_out: bool
    duration_s: float
    tests: tuple[TestStatus, ...]
    collection_errors: tuple[str, ...]
    log_digest: str  # sha256 of the full raw log
    log: str  # the raw log (its tail when longer than the configured cap)

    ARROW_SCHEMA: ClassVar[pa.Schema] = pa.schema(
        [
            ("run_id", pa.string()),
            ("candidate_id", pa.string()),
            ("profile_id", pa.string()),
            ("state", pa.string()),
            ("attempt", pa.int32()),
            ("selection", pa.list_(pa.string())),
            ("exit_code", pa.int32()),
            ("suite_ran", pa.bool_()),
            ("timed_out", pa.bool_()),
            ("duration_s", pa.float64()),
            ("tests", pa.list_(pa.struct([("test_id", pa.string()), ("status", pa.string())]))),
            ("collection_errors", pa.list_(pa.string())),
            ("log_digest", pa.string()),
            ("log", pa.large_string()),
        ]
    )

    def statuses(self) -> dict[str, str]:
        return {t.test_id: t.status for t in self.tests}
