"""Rejection: every dropped input, with a reason, so a user can see where yield was lost."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import pyarrow as pa
from trajforge.schemas.redact import redact_text


@dataclass(frozen=True)
class Rejection:
    input: str  # what was rejected: a candidate id, "repo@sha", a source spec
    stage: str  # mine | validate | ...
    reason: str  # a short stable code, e.g. "no_test_change", "collection_error_at_base"
    detail: str  # one line a person can act on (plus a log tail where one helps)

    def __post_init__(self) -> None:
        # Inputs are often raw source specs: a credential in a clone URL never reaches a row.
        object.__setattr__(self, "input", redact_text(self.input))
        object.__setattr__(self, "detail", redact_text(self.detail))

    ARROW_SCHEMA: ClassVar[pa.Schema] = pa.schema(
        [
            ("input", pa.string()),
            ("stage", pa.string()),
            ("reason", pa.string()),
            ("detail", pa.large_string()),
        ]
    )
