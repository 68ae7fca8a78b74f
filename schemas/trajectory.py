"""Trajectory: one agent run on a task, as OpenAI chat messages, with the verdict on its patch.

Messages keep OpenAI's shape (``tool_calls`` with JSON-string ``arguments``) so they load into
TRL's conversational format as they are; ``tools`` holds the JSON schemas the model was offered.

``Message`` is trajforge's one chat-message model. Every conversion to and from OpenAI chat dicts
(``{"role", "content", "tool_calls": [{"id", "type": "function", "function": {"name",
"arguments"}}], "tool_call_id", "name"}``) is ``Message.to_openai`` / ``Message.from_openai`` (and
``ToolCall``'s): the agent loop's requests, the SFT/explore rows, the imported runs.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

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


def arguments_text(arguments: Any) -> str:
    """Tool-call arguments as text: a string as written, None as "", anything else as JSON."""
    if isinstance(arguments, str):
        return arguments
    return "" if arguments is None else json.dumps(arguments, ensure_ascii=False)


def _optional_text(value: Any) -> str | None:
    return None if value is None else str(value)


@dataclass(frozen=True)
class ToolCall:
    id: str
    type: str
    function: FunctionCall

    def to_openai(self) -> dict[str, Any]:
        """``{"id", "type", "function": {"name", "arguments"}}``; an empty type is "function"."""
        return {
            "id": self.id,
            "type": self.type or "function",
            "function": {"name": self.function.name, "arguments": self.function.arguments},
        }

    @classmethod
    def from_openai(cls, raw: Mapping[str, Any], default_id: str = "") -> ToolCall:
        """An OpenAI tool call. A missing id is ``default_id``, a missing type "function", a
        missing name ""; ``arguments`` are kept as written (see ``arguments_text``)."""
        function = raw.get("function") or {}
        name, arguments = function.get("name"), function.get("arguments")
        return cls(
            str(raw.get("id") or default_id),
            str(raw.get("type") or "function"),
            FunctionCall(str(name or ""), arguments_text(arguments)),
        )


@dataclass(frozen=True)
class Message:
    role: str
    content: str
    tool_calls: tuple[ToolCall, ...] = ()
    tool_call_id: str | None = None
    name: str | None = None

    def to_openai(self, fixed_keys: bool = False) -> dict[str, Any]:
        """The message as an OpenAI chat dict.

        By default only what is set: ``role`` and ``content``, then ``tool_calls``,
        ``tool_call_id`` and ``name`` where present (what a chat-completions request takes).
        ``fixed_keys`` gives every message all five keys, None where absent, as an Arrow column
        needs and TRL reads (the ``sft`` and ``explore`` rows).
        """
        calls = [call.to_openai() for call in self.tool_calls]
        if fixed_keys:
            return {
                "role": self.role,
                "content": self.content,
                "tool_calls": calls or None,
                "tool_call_id": self.tool_call_id,
                "name": self.name,
            }
        message: dict[str, Any] = {"role": self.role, "content": self.content}
        if calls:
            message["tool_calls"] = calls
        if self.tool_call_id is not None:
            message["tool_call_id"] = self.tool_call_id
        if self.name is not None:
            message["name"] = self.name
        return message

    @classmethod
    def from_openai(cls, raw: Mapping[str, Any]) -> Message:
        """A message from an OpenAI chat dict; ``content`` must be text (or None, read as "")."""
        return cls(
            raw["role"],
            raw.get("content") or "",
            tuple(ToolCall.from_openai(call) for call in raw.get("tool_calls") or ()),
            _optional_text(raw.get("tool_call_id")),
            _optional_text(raw.get("name")),
        )


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
    # Soft verification (SERA), rollouts only (None elsewhere): the share of the gold patch's
    # touched lines the model patch touches too, and the share of FAIL_TO_PASS tests it passes.
    soft_reward: float | None = None
    f2p_pass_rate: float | None = None
    test_output: str = ""  # failing tests' output of the verification run ("" when resolved)
    guidance: str = ""  # the guidance the prompt carried (a guided retry); "" when unguided
    near_miss: bool = False  # set by curate: unresolved, but kept for SFT by its soft_reward
    # the grader's reading of the patch's source: why it looks like a hack no test run sees
    # (caller inspection, reading the tests...), "" when clean or not graded here (imports)
    suspicious_patch: str = ""

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
            ("soft_reward", pa.float64()),
            ("f2p_pass_rate", pa.float64()),
            ("test_output", pa.large_string()),
            ("guidance", pa.large_string()),
            ("near_miss", pa.bool_()),
            ("suspicious_patch", pa.string()),
        ]
    )
