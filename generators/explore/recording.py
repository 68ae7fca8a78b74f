"""What an exploration leaves for replay: its replayable actions and the state after each.

A ``RecordingWorkspace`` is the agent's workspace that also keeps, step by step, the part of the
run a replay can reproduce: refused calls (they changed nothing) and ``submit`` are left out, and
recording stops at the first command that timed out (its effects are unknown). After every kept
step the check of the run so far is captured with ``verifiers.replay``'s own hashing, so any
prefix can become a task without running it again, and a replay compares like with like.
"""

from __future__ import annotations

from trajforge.schemas.explore_task import ReplayAction
from trajforge.verifiers.replay import capture_end_state, step_failure
from trajforge.verifiers.sandbox.base import Session
from trajforge.verifiers.sandbox.workspace import StepOutcome, Workspace

State = tuple[dict[str, str], dict[str, str]]  # (expected_files, expected_outputs)


class RecordingWorkspace(Workspace):
    def __init__(self, session: Session, command_timeout_s: float, max_observation_chars: int):
        super().__init__(session, command_timeout_s, max_observation_chars)
        self.actions: list[ReplayAction] = []
        self.outcomes: list[StepOutcome] = []
        self.states: list[State] = []  # states[i]: the check after actions[: i + 1]
        self.cut = False

    def run(self, name: str, arguments: str) -> StepOutcome:
        outcome = super().run(name, arguments)
        if self.cut or name == "submit" or outcome.error is not None:
            return outcome
        if step_failure(outcome) is not None:
            self.cut = True
            return outcome
        self.actions.append(ReplayAction(name, arguments))
        self.outcomes.append(outcome)
        self.states.append(capture_end_state(self.session, self.actions, self.outcomes))
        return outcome
