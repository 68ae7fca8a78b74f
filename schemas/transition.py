"""Transition: one step of an agent run, as (state, action, observation), for world-model data.

Rollouts and explorations both produce them
(``generators.trajectories.transitions.transitions_of``). ``state`` summarizes the workspace
*before* the action, so a row alone says what the agent saw and did and what came of it:
``{"changed_files": [...], "last_exit_code": int|null}``. ``action`` keeps the tool call's
arguments as the JSON text the model wrote: ``{"tool": name, "arguments": "<json>"}``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import pyarrow as pa


@dataclass(frozen=True)
class Transition:
    transition_id: str
    trajectory_id: str
    instance_id: str
    step: int  # 0-based position in the run
    state: str  # JSON: the state before the action
    action: str  # JSON: {"tool": ..., "arguments": "<the JSON text as written>"}
    observation: str
    exit_code: int | None  # the shell's for bash; None for a call the tools refused
    changed_files: tuple[str, ...]  # files that differ from the start, after the action
    origin: str  # rollout | explore/template | explore/llm | import/<format>

    ARROW_SCHEMA: ClassVar[pa.Schema] = pa.schema(
        [
            ("transition_id", pa.string()),
            ("trajectory_id", pa.string()),
            ("instance_id", pa.string()),
            ("step", pa.int32()),
            ("state", pa.large_string()),
            ("action", pa.large_string()),
            ("observation", pa.large_string()),
            ("exit_code", pa.int32()),
            ("changed_files", pa.list_(pa.string())),
            ("origin", pa.string()),
        ]
    )
