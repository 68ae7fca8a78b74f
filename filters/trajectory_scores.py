"""Scores of one trajectory: verdict, soft verification, effort, loops, tool errors, format
validity and length.

Pure functions of a ``Trajectory``, so curation can threshold on them and the SFT export carries
them as its ``scores`` struct. Names are stable and disjoint from the task score names.
``soft_reward`` and ``f2p_pass_rate`` come from the rollout's soft verification and exist only on
runs that have them (rollouts). ``is_near_miss`` is curate's rule for unresolved runs it keeps
for SFT.
"""

from __future__ import annotations

import json
import math
import re
from itertools import pairwise

from trajforge.schemas.trajectory import Message, ToolCall, Trajectory

INF = math.inf
CHARS_PER_TOKEN = 4  # rough average for code and English with BPE tokenizers

# name -> (lowest, highest) value the score can take; the quality gates check these bounds.
TRAJECTORY_SCORE_RANGES: dict[str, tuple[float, float]] = {
    "resolved": (0.0, 1.0),  # 1 when the verified patch resolves the task; 0 otherwise or unknown
    "soft_reward": (0.0, 1.0),  # share of the gold patch's touched lines the patch touches
    "f2p_pass_rate": (0.0, 1.0),  # share of FAIL_TO_PASS tests passing after the patch
    "steps": (0.0, INF),  # assistant turns
    "tool_calls": (0.0, INF),  # tool calls over all assistant turns
    "repeated_actions": (0.0, INF),  # tool calls identical to the call just before them
    "repeated_action_rate": (0.0, 1.0),  # repeated_actions / tool_calls (0 without calls)
    "tool_error_rate": (0.0, 1.0),  # tool messages that look like an error / tool messages
    "format_valid": (0.0, 1.0),  # 1 when every call parses and is answered (see format_valid)
    "length_chars": (0.0, INF),  # characters of all contents and call arguments
    "length_tokens": (0.0, INF),  # length_chars / CHARS_PER_TOKEN, rounded up
}

# What a failed command or tool looks like in its output: a non-zero exit code reported by the
# harness, a Python traceback, the shell's and the editor tool's own error lines.
_ERROR_PATTERNS = [
    re.compile(r"(?im)\b(?:exit(?:[ _]?(?:code|status))?|return[ _]?code)\s*[:=]?\s*[1-9]\d*\b"),
    re.compile(r"Traceback \(most recent call last\)"),
    re.compile(r"(?m)^(?:bash: |/bin/sh: )?.*: (?:command not found|No such file or directory)$"),
    re.compile(r"(?m)^(?:ERROR|Error|error)(?::|\b)"),
    re.compile(r"No replacement was performed|did not appear verbatim"),
]


def looks_like_error(content: str) -> bool:
    return any(p.search(content) for p in _ERROR_PATTERNS)


def _action_key(call: ToolCall) -> tuple[str, str]:
    """A call's identity: its name and its arguments with key order and spacing normalized."""
    try:
        arguments = json.dumps(json.loads(call.function.arguments), sort_keys=True)
    except (json.JSONDecodeError, TypeError):
        arguments = call.function.arguments
    return call.function.name, arguments


def _calls(messages: tuple[Message, ...]) -> list[ToolCall]:
    return [call for m in messages if m.role == "assistant" for call in m.tool_calls]


def repeated_actions(messages: tuple[Message, ...]) -> int:
    """Calls identical to the previous call: an agent stuck in a loop. Re-running the same test
    after an edit is not counted, because the edit sits between the two runs."""
    keys = [_action_key(call) for call in _calls(messages)]
    return sum(1 for before, after in pairwise(keys) if before == after)


def offered_tool_names(tools: str) -> set[str] | None:
    """Names in the ``tools`` JSON list; None when the list is missing or unreadable."""
    try:
        schemas = json.loads(tools) if tools else None
    except json.JSONDecodeError:
        return None
    if not isinstance(schemas, list) or not schemas:
        return None
    names = set()
    for schema in schemas:
        if isinstance(schema, dict):
            function = schema.get("function", schema)
            if isinstance(function, dict) and isinstance(function.get("name"), str):
                names.add(function["name"])
    return names


def format_valid(trajectory: Trajectory) -> bool:
    """Every call has a JSON-object argument string, a unique id, a name among the offered tools
    (when tools were recorded) and exactly one later tool message answering it; every tool message
    answers a call. A trainer can render such a conversation with any chat template."""
    offered = offered_tool_names(trajectory.tools)
    pending: set[str] = set()
    seen: set[str] = set()
    for message in trajectory.messages:
        if message.role == "tool":
            if message.tool_call_id not in pending:
                return False
            pending.discard(message.tool_call_id)
            continue
        for call in message.tool_calls:
            if message.role != "assistant" or not call.id or call.id in seen:
                return False
            if offered is not None and call.function.name not in offered:
                return False
            try:
                arguments = json.loads(call.function.arguments)
            except (json.JSONDecodeError, TypeError):
                return False
            if not isinstance(arguments, dict):
                return False
            seen.add(call.id)
            pending.add(call.id)
    return not pending


def length_chars(messages: tuple[Message, ...]) -> int:
    return sum(
        len(m.content or "") + sum(len(c.function.arguments or "") for c in m.tool_calls)
        for m in messages
    )


def is_near_miss(trajectory: Trajectory, min_soft_reward: float | None) -> bool:
    """Unresolved but close: verified unresolved, submitted (not cut off by a limit or an error),
    and ``soft_reward`` at least ``min_soft_reward`` (None: nothing is a near miss)."""
    return (
        min_soft_reward is not None
        and trajectory.resolved is False
        and trajectory.exit_status == "submitted"
        and trajectory.soft_reward is not None
        and trajectory.soft_reward >= min_soft_reward
    )


def trajectory_scores(trajectory: Trajectory) -> dict[str, float]:
    """Every trajectory score (see ``TRAJECTORY_SCORE_RANGES``); the soft verification scores
    only where the run has them."""
    messages = trajectory.messages
    calls = len(_calls(messages))
    repeats = repeated_actions(messages)
    tool_messages = [m for m in messages if m.role == "tool"]
    errors = sum(1 for m in tool_messages if looks_like_error(m.content or ""))
    chars = length_chars(messages)
    soft = {
        name: float(value)
        for name, value in (
            ("soft_reward", trajectory.soft_reward),
            ("f2p_pass_rate", trajectory.f2p_pass_rate),
        )
        if value is not None
    }
    return {
        "resolved": 1.0 if trajectory.resolved else 0.0,
        **soft,
        "steps": float(sum(1 for m in messages if m.role == "assistant")),
        "tool_calls": float(calls),
        "repeated_actions": float(repeats),
        "repeated_action_rate": round(repeats / calls, 6) if calls else 0.0,
        "tool_error_rate": round(errors / len(tool_messages), 6) if tool_messages else 0.0,
        "format_valid": float(format_valid(trajectory)),
        "length_chars": float(chars),
        "length_tokens": float(math.ceil(chars / CHARS_PER_TOKEN)),
    }
