"""Trajectory: one agent run on a task, as OpenAI chat messages, with the verdict on its patch.

Messages keep OpenAI's shape (``tool_calls`` with JSON-string ``arguments``) so they load into
TRL's conversational format as they are; ``tools`` holds the JSON schemas the model was offered.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

import pyarrow as pa

FUNCTION_CALL_TYPE = pa.struct([("name", pa.string()), ("arguments", pa.large_string())])
TOOL_CALL_TYPE = pa.struct(
    [("id", pa.string()), ("type", pa.string()), ("function", FUNCTION_CALL_TYPE)]
)
MESSAGE_TYPE = pa.struct(
    [
        ("role", pa.string()),  # system | user | assistant | tool
        ("content", pa.large_string()),
        ("tool_calls", pa.list_(TOOL_CALL_TYPE)),
        ("tool_call_id", pa.string()),
        ("name", pa.string()),
    ]
)


@dataclass(frozen=True)
class FunctionCall:
    name: str
    arguments: str  # JSON text, exactly as the model wrote it


@dataclass(frozen=True)
class ToolCall:
    id: str
    type: str
    function: FunctionCall


@dataclass(frozen=True)
class Message:
    role: str
    content: str
    tool_calls: tuple[ToolCall, ...] = ()
    tool_call_id: str | None = None
    name: str | None = None


@dataclass(frozen=True)
class Trajectory:
    trajectory_id: str
    instance_id: str
    model: str
    messages: tuple[Message, ...]
    tools: str  # JSON list of the tool schemas offered to the model
    model_patch: str
    exit_status: str  # submitted | step_limit | token_limit | time_limit | error:<reason>
    resolved: bool | None  # None until the patch has been verified
    reward: float | None
    test_report: dict[str, str] = field(default_factory=dict)  # test id -> status after the patch
    usage: dict[str, int] = field(default_factory=dict)  # prompt_tokens, completion_tokens, ...
    origin: str = "rollout"  # rollout | explore | import/<format>

    ARROW_SCHEMA: ClassVar[pa.Schema] = pa.schema(
        [
            ("trajectory_id", pa.string()),
            ("instance_id", pa.string()),
            ("model", pa.string()),
            ("messages", pa.list_(MESSAGE_TYPE)),
            ("tools", pa.large_string()),
            ("model_patch", pa.large_string()),
            ("exit_status", pa.string()),
            ("resolved", pa.bool_()),
            ("reward", pa.float64()),
            ("test_report", pa.map_(pa.string(), pa.string())),
            ("usage", pa.map_(pa.string(), pa.int64())),
            ("origin", pa.string()),
        ]
    )
