"""SWE-agent ``.traj`` files, 0.x and 1.x, as Trajectories.

A ``.traj`` (``Agent.get_trajectory_data``) holds ``history``, the messages as the model saw
them, ``trajectory``, one step per action (a parse of the same turns plus state and timings), and
``info`` (``submission``, ``exit_status``, ``model_stats``). Messages come from ``history``:

- 0.x writes actions as text inside the assistant content (thought, then a fenced command); the
  content is kept as written, with no tool calls, so a text-action model trains on what it wrote.
- 1.x function calling adds OpenAI ``tool_calls`` to assistant turns and ``role: tool``
  observations whose ``tool_call_ids`` (SWE-agent asserts one) becomes ``tool_call_id``.
- Demonstrations (``is_demo``) are dropped: they are another task's solved run pasted into the
  prompt, not this run's work, and would teach the model to replay them.
- SWE-agent's own keys (``agent``, ``message_type``, ``thought``/``action``, which re-parse the
  content, ``thinking_blocks``, ``cache_control``) have no column and are left out.

A retry loop's file (``attempts``) gives its chosen attempt where the file names one (top-level
``history``), else one Trajectory per attempt. The model is ``replay_config``'s
``agent.model.name`` (1.x); 0.x files do not record it. Tool schemas are not in ``.traj`` files
(only the tool bundles' paths), so ``tools`` is ``[]``.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from typing import Any

from trajforge.generators.trajectories.formats.common import (
    BadInput,
    Result,
    as_dict,
    exit_status,
    guarded,
    load_json,
    nested_text,
    openai_message,
    require_dict,
    require_list,
    sha256,
    trajectory_id,
    usage_from,
)
from trajforge.schemas.trajectory import Message, Trajectory

FORMAT = "swe-agent"
ORIGIN = f"import/{FORMAT}"  # how sft.py knows a run is SWE-agent's own
USAGE = {
    "tokens_sent": "prompt_tokens",
    "tokens_received": "completion_tokens",
    "api_calls": "api_calls",
}


def read_swe_agent(path: str, data: bytes) -> Iterator[Result]:
    yield from guarded(path, lambda: _trajectories(path, data))


def _trajectories(path: str, data: bytes) -> list[Trajectory]:
    doc = require_dict(load_json(path, data), path, "the file")
    digest = sha256(data)
    if "history" in doc:
        return [_trajectory(path, doc, digest, None)]
    attempts = doc.get("attempts")
    if isinstance(attempts, list) and attempts:
        return [
            _trajectory(path, require_dict(a, path, f"attempt {n}"), digest, n)
            for n, a in enumerate(attempts)
        ]
    raise BadInput(
        f"{path}: no `history` (the messages); SWE-agent .traj files have one: check --format, "
        "or re-save the run",
        "missing_field",
    )


def _trajectory(path: str, doc: dict[str, Any], digest: str, attempt: int | None) -> Trajectory:
    label = path if attempt is None else f"{path} attempt {attempt}"
    history = require_list(doc.get("history"), label, "history")
    messages = tuple(
        _message(item, f"{label}: history[{n}]")
        for n, item in enumerate(history)
        if not (isinstance(item, dict) and item.get("is_demo"))
    )
    if not messages:
        raise BadInput(f"{label}: `history` has no messages; re-save the run", "missing_field")
    info = as_dict(doc.get("info"))
    config = _replay_config(doc.get("replay_config"))
    instance_id = _instance_id(path, config)
    extra = () if attempt is None else (attempt,)
    return Trajectory(
        trajectory_id=trajectory_id(FORMAT, instance_id, digest, *extra),
        instance_id=instance_id,
        model=_model(config),
        messages=messages,
        tools="[]",
        model_patch=str(info.get("submission") or ""),
        exit_status=exit_status(info.get("exit_status")),
        resolved=None,
        reward=None,
        usage=usage_from(info.get("model_stats"), USAGE),
        origin=ORIGIN,
    )


def _message(raw: Any, where: str) -> Message:
    item = require_dict(raw, where, "the message")
    ids = item.get("tool_call_ids")
    if item.get("tool_call_id") is None and isinstance(ids, list) and ids:
        return openai_message(item, where, tool_call_id=ids[0])
    return openai_message(item, where)


def _replay_config(raw: Any) -> dict[str, Any]:
    """1.x saves the run's config as JSON text (``model_dump_json``); some files as an object."""
    if isinstance(raw, str):
        try:
            raw = json.loads(raw)
        except json.JSONDecodeError:
            return {}
    return raw if isinstance(raw, dict) else {}


def _model(config: dict[str, Any]) -> str:
    return nested_text(config, "agent", "model", "name") or "unknown"


def _instance_id(path: str, config: dict[str, Any]) -> str:
    """The problem statement's id where the config has one, else the file name (``<id>.traj``)."""
    if found := nested_text(config, "problem_statement", "id"):
        return found
    name = os.path.basename(path)
    return name[: -len(".traj")] if name.endswith(".traj") else name
