"""Steps of an agent run -> transitions (state before, action, observation, state after).

One function for rollouts and explorations alike, so both feed the same world-model table.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from trajforge.generators.agents.loop import Step
from trajforge.schemas.records import content_id
from trajforge.schemas.transition import Transition


def transitions_of(
    trajectory_id: str, instance_id: str, origin: str, steps: Sequence[Step]
) -> list[Transition]:
    """One transition per executed step; the state before step 0 is the clean checkout."""
    transitions = []
    changed: tuple[str, ...] = ()
    last_exit_code: int | None = None
    for index, step in enumerate(steps):
        state = {"changed_files": list(changed), "last_exit_code": last_exit_code}
        action = {"tool": step.tool, "arguments": step.arguments}
        transitions.append(
            Transition(
                transition_id=content_id("transition", trajectory_id, index),
                trajectory_id=trajectory_id,
                instance_id=instance_id,
                step=index,
                state=json.dumps(state, ensure_ascii=False),
                action=json.dumps(action, ensure_ascii=False),
                observation=step.observation,
                exit_code=step.exit_code,
                changed_files=tuple(step.changed_files),
                origin=origin,
            )
        )
        changed, last_exit_code = tuple(step.changed_files), step.exit_code
    return transitions
