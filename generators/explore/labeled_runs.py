"""A labeled prefix of a recorded run -> its ExploreTask, Trajectory and transitions.

The trajectory is what a model should learn from: the instruction as the user's turn, then the
replayable actions as tool calls with their observations. The task's check is the state the
recording captured after the prefix (files and outputs), which a replay must reproduce.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from trajforge.generators.agents.loop import step_of
from trajforge.generators.trajectories.transitions import transitions_of
from trajforge.schemas.explore_task import ExploreTask, ReplayAction
from trajforge.schemas.records import content_id
from trajforge.schemas.trajectory import FunctionCall, Message, ToolCall, Trajectory
from trajforge.schemas.transition import Transition
from trajforge.verifiers.sandbox.workspace import StepOutcome, tool_schemas

SYSTEM = "You are working in the Python repository at /repo. Use the tools to do what is asked."
TOOLS = ("bash", "view", "create", "str_replace", "submit")


@dataclass(frozen=True)
class ExplorationSite:
    """Where an exploration ran: the repository at one commit, in one environment image."""

    repo: str
    source: str
    commit: str
    image: str
    profile_id: str
    image_digest: str = ""
    env_recipe: str = ""


@dataclass(frozen=True)
class Labeled:
    instruction: str
    score: float
    origin: str  # explore/template | explore/llm
    model: str
    provenance: dict[str, str]


def explore_records(
    where: ExplorationSite,
    actions: list[ReplayAction],
    outcomes: list[StepOutcome],
    state: tuple[dict[str, str], dict[str, str]],
    label: Labeled,
) -> tuple[ExploreTask, Trajectory, list[Transition]]:
    files, outputs = state
    task_id = content_id("explore", where.source, where.commit, label.instruction, actions)
    trajectory_id = content_id("explore-trajectory", task_id, label.model)
    task = ExploreTask(
        task_id=task_id,
        repo=where.repo,
        source=where.source,
        base_commit=where.commit,
        image_name=where.image,
        profile_id=where.profile_id,
        instruction=label.instruction,
        actions=tuple(actions),
        expected_files=files,
        expected_outputs=outputs,
        trajectory_id=trajectory_id,
        origin=label.origin,
        score=label.score,
        provenance=label.provenance,
        image_digest=where.image_digest,
        env_recipe=where.env_recipe,
    )
    trajectory = Trajectory(
        trajectory_id=trajectory_id,
        instance_id=task_id,
        model=label.model,
        messages=_messages(label.instruction, actions, outcomes),
        tools=json.dumps(tool_schemas(TOOLS), sort_keys=True),
        model_patch="",
        exit_status="submitted",
        resolved=None,  # set once the replay agrees
        reward=None,
        origin=label.origin,
    )
    pairs = enumerate(zip(actions, outcomes, strict=True))
    steps = [step_of(i, a.tool, a.arguments, o) for i, (a, o) in pairs]
    return task, trajectory, transitions_of(trajectory_id, task_id, label.origin, steps)


def _messages(
    instruction: str, actions: list[ReplayAction], outcomes: list[StepOutcome]
) -> tuple[Message, ...]:
    messages = [Message("system", SYSTEM), Message("user", instruction)]
    for index, (action, outcome) in enumerate(zip(actions, outcomes, strict=True)):
        call = ToolCall(f"call_{index}", "function", FunctionCall(action.tool, action.arguments))
        messages.append(Message("assistant", "", (call,)))
        observed = Message("tool", outcome.observation, tool_call_id=call.id, name=action.tool)
        messages.append(observed)
    done = ToolCall(f"call_{len(actions)}", "function", FunctionCall("submit", "{}"))
    messages.append(Message("assistant", "", (done,)))
    return tuple(messages)
