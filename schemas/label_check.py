"""LabelCheck: a published dataset's FAIL_TO_PASS / PASS_TO_PASS for one imported row, against ours.

validate writes one per candidate that carries ``labels`` (``trajforge import-tasks``): every test
of the union of their list and ours, per label, in exactly one class, and a one-line verdict.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

import pyarrow as pa

# The classes of a test, in the order lines and reports list them.
AGREES = "agrees"  # in their list and in ours
FLAKY_HERE = "flaky_here"  # in their list; its status changed between identical runs here
NOT_RUN_HERE = "not_run_here"  # in their list; skipped or absent in our runs
THEY_MISSED = "they_missed"  # in our list, not in theirs
WE_MISSED = "we_missed"  # in their list, ran here, not flaky, not in ours (``why`` says how)
NAME_UNMAPPED = "name_unmapped"  # their name (a JS dataset's) matches none or several of our ids
CLASSES = (AGREES, FLAKY_HERE, NOT_RUN_HERE, THEY_MISSED, WE_MISSED, NAME_UNMAPPED)
# How lines and reports name each class ("5 agree, 1 we missed").
PHRASES = {
    AGREES: "agree",
    FLAKY_HERE: "flaky here",
    NOT_RUN_HERE: "not run here",
    THEY_MISSED: "they missed",
    WE_MISSED: "we missed",
    NAME_UNMAPPED: "name unmapped",
}

CONFIRMED = "confirmed"  # every test of both labels agrees
DIFFERS = "differs"
REJECTED = "rejected"  # no task here: ``reason`` is our rejection's
VERDICTS = (CONFIRMED, DIFFERS, REJECTED)

LABELS = ("FAIL_TO_PASS", "PASS_TO_PASS")

CLASSES_TYPE = pa.struct(
    [
        *((name, pa.list_(pa.string())) for name in CLASSES),
        ("why", pa.map_(pa.string(), pa.string())),
    ]
)


@dataclass(frozen=True)
class LabelClasses:
    """One label's tests by class (each list sorted); ``why``: test -> what we saw here, for each
    ``we_missed`` and ``not_run_here`` test, and why each ``name_unmapped`` name is not mapped."""

    agrees: tuple[str, ...] = ()
    flaky_here: tuple[str, ...] = ()
    not_run_here: tuple[str, ...] = ()
    they_missed: tuple[str, ...] = ()
    we_missed: tuple[str, ...] = ()
    name_unmapped: tuple[str, ...] = ()
    why: dict[str, str] = field(default_factory=dict)

    def of(self, name: str) -> tuple[str, ...]:
        """The tests of class ``name`` (one of CLASSES)."""
        tests: tuple[str, ...] = getattr(self, name)
        return tests


@dataclass(frozen=True)
class LabelCheck:
    candidate_id: str
    instance_id: str  # the dataset's own id
    dataset: str  # swe-bench | swe-smith | swe-gym | nebius | multi-swe-bench | swe-polybench
    repo: str
    verdict: str  # one of VERDICTS
    reason: str  # our rejection reason when rejected, else ""
    detail: str  # one line: "FAIL_TO_PASS: 5 agree, 1 we missed; PASS_TO_PASS: 120 agree"
    FAIL_TO_PASS: LabelClasses
    PASS_TO_PASS: LabelClasses

    ARROW_SCHEMA: ClassVar[pa.Schema] = pa.schema(
        [
            ("candidate_id", pa.string()),
            ("instance_id", pa.string()),
            ("dataset", pa.string()),
            ("repo", pa.string()),
            ("verdict", pa.string()),
            ("reason", pa.string()),
            ("detail", pa.string()),
            ("FAIL_TO_PASS", CLASSES_TYPE),
            ("PASS_TO_PASS", CLASSES_TYPE),
        ]
    )

    def label(self, name: str) -> LabelClasses:
        """``FAIL_TO_PASS`` or ``PASS_TO_PASS``."""
        classes: LabelClasses = getattr(self, name)
        return classes
