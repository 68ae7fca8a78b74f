"""mini-swe-agent ``.traj.json`` files as Trajectories.

``DefaultAgent.serialize`` (``trajectory_format`` ``mini-swe-agent-1.1``; ``save_traj`` wrote
``mini-swe-agent-1`` before v2) keeps ``messages`` in the shape the model API took them, so they
are copied as they are: text-action runs (a fenced ``mswea_bash_command`` inside the content, no
tool calls), tool-calling runs (OpenAI ``tool_calls`` and ``role: tool`` results), and Responses
API runs, whose items become the same chat messages (``output_text`` parts -> content,
``function_call`` -> a tool call, ``function_call_output`` -> a tool message; ``reasoning`` items
have no column). The last message, ``role: exit``, is bookkeeping, not a turn: its exit status and
submission are ``info``'s, so it is left out, as is each message's ``extra`` (costs, raw
responses), except the token counts, which are summed into ``usage``. Files from before
``trajectory_format`` are a bare list of messages.

The instance id is the top-level ``instance_id`` the batch runner writes, else the file name
(``<id>.traj.json``); the model is ``info.config.model.model_name``. Tool schemas are not saved
(the bash tool is built into the model class), so ``tools`` is ``[]``.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

from trajforge.generators.trajectories.formats.common import (
    BadInput,
    Result,
    as_dict,
    count,
    exit_status,
    guarded,
    load_json,
    message,
    nested_text,
    openai_message,
    require_dict,
    require_list,
    sha256,
    text_of,
    trajectory_id,
    usage_from,
)
from trajforge.schemas.trajectory import FunctionCall, Message, ToolCall, Trajectory

FORMAT = "mini-swe-agent"
SUFFIX = ".traj.json"
TOKENS = {  # chat completions, Responses API
    "prompt_tokens": "prompt_tokens",
    "completion_tokens": "completion_tokens",
    "input_tokens": "prompt_tokens",
    "output_tokens": "completion_tokens",
}


def read_mini_swe_agent(path: str, data: bytes) -> Iterator[Result]:
    yield from guarded(path, lambda: [_trajectory(path, data)])


def _trajectory(path: str, data: bytes) -> Trajectory:
    doc = load_json(path, data)
    if isinstance(doc, list):  # before trajectory_format: the messages alone
        doc = {"messages": doc}
    doc = require_dict(doc, path, "the file")
    raw_messages = require_list(doc.get("messages"), path, "messages")
    messages = _messages(path, raw_messages)
    if not messages:
        raise BadInput(f"{path}: `messages` is empty; the run saved nothing", "missing_field")
    info = as_dict(doc.get("info"))
    instance_id = _instance_id(path, doc)
    return Trajectory(
        trajectory_id=trajectory_id(FORMAT, instance_id, sha256(data)),
        instance_id=instance_id,
        model=_model(info),
        messages=messages,
        tools="[]",
        model_patch=str(info.get("submission") or ""),
        exit_status=exit_status(info.get("exit_status")),
        resolved=None,
        reward=None,
        usage={
            **_tokens(raw_messages),
            **usage_from(info.get("model_stats"), {"api_calls": "api_calls"}),
        },
        origin=f"import/{FORMAT}",
    )


def _messages(path: str, raw_messages: list[Any]) -> tuple[Message, ...]:
    messages = []
    for n, raw in enumerate(raw_messages):
        where = f"{path}: messages[{n}]"
        item = require_dict(raw, where, "the message")
        if item.get("role") == "exit":
            continue
        if item.get("object") == "response":
            messages.append(_response(item, where))
        elif item.get("type") == "function_call_output":
            output = text_of(item.get("output"), where)
            messages.append(message("tool", output, where, tool_call_id=item.get("call_id")))
        else:
            messages.append(openai_message(item, where))
    return tuple(messages)


def _response(item: dict[str, Any], where: str) -> Message:
    """A Responses API reply: its text parts and function calls as one assistant message."""
    texts, calls = [], []
    for output in require_list(item.get("output"), where, "output"):
        kind = output.get("type") if isinstance(output, dict) else None
        if kind == "message":
            texts.append(text_of(output.get("content"), where))
        elif kind == "function_call":
            name, arguments = output.get("name"), output.get("arguments")
            if not isinstance(name, str):
                raise BadInput(f"{where}: a function call has no name", "missing_field")
            call_id = str(output.get("call_id") or output.get("id") or "")
            text = "" if arguments is None else str(arguments)
            calls.append(ToolCall(call_id, "function", FunctionCall(name, text)))
    return message("assistant", "".join(texts), where, tuple(calls))


def _tokens(raw_messages: list[Any]) -> dict[str, int]:
    """Token counts summed over the raw API responses kept in each reply's ``extra``."""
    totals: dict[str, int] = {}
    for raw in raw_messages:
        extra = raw.get("extra") if isinstance(raw, dict) else None
        response = extra.get("response") if isinstance(extra, dict) else None
        usage = response.get("usage") if isinstance(response, dict) else None
        if not isinstance(usage, dict):
            continue
        for source, target in TOKENS.items():
            value = count(usage.get(source))
            if value is not None:
                totals[target] = totals.get(target, 0) + value
    return totals


def _model(info: dict[str, Any]) -> str:
    return nested_text(info, "config", "model", "model_name") or "unknown"


def _instance_id(path: str, doc: dict[str, Any]) -> str:
    if found := nested_text(doc, "instance_id"):
        return found
    name = os.path.basename(path)
    for suffix in (SUFFIX, ".json"):
        if name.endswith(suffix):
            return name[: -len(suffix)]
    return name
