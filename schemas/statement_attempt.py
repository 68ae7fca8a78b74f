"""StatementAttempt: one try at a task's issue text, kept or not, so rejections can be audited."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import pyarrow as pa


@dataclass(frozen=True)
class StatementAttempt:
    instance_id: str
    attempt: int
    writer: str  # llm:<model> | template
    accepted: bool
    reason: str  # accepted | template | empty | truncated | not_prose | ungrounded | ...
    text: str
    prompt_tokens: int
    completion_tokens: int

    ARROW_SCHEMA: ClassVar[pa.Schema] = pa.schema(
        [
            ("instance_id", pa.string()),
            ("attempt", pa.int32()),
            ("writer", pa.string()),
            ("accepted", pa.bool_()),
            ("reason", pa.string()),
            ("text", pa.large_string()),
            ("prompt_tokens", pa.int64()),
            ("completion_tokens", pa.int64()),
        ]
    )
