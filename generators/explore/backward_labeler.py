"""Backward construction: the instruction a recorded run accomplishes, written after the fact.

Following Learn-by-interact, OS-Genesis and NNetnav, the model reads what the agent did (actions
and their results) and writes the instruction a user would have given for exactly that work, with
a 1-5 score of how meaningful and coherent it is (OS-Genesis' trajectory reward). Prefixes of a
run are offered too; a prefix no meaningful instruction describes (no instruction, or a score
below 2) is pruned, as NNetnav prunes.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

from trajforge.generators.llm.client import LLMClient, LLMError
from trajforge.schemas.explore_task import ReplayAction
from trajforge.schemas.trajectory import Message
from trajforge.verifiers.sandbox.workspace import StepOutcome

MIN_SCORE = 2
OUTPUT_CHARS = 600
_OBJECT = re.compile(r"\{.*\}", re.DOTALL)

SYSTEM = """\
You read what an agent did in a code repository and write the instruction a user would have \
given for exactly this work: one or two sentences, concrete (name the module, function, file or \
command), achievable by exactly these actions, without quoting their outputs. Rate the work 1-5: \
5 a clear, useful task fully accomplished; 3 a small but real task; 1 random or nothing. Answer \
with JSON only: {"instruction": "...", "score": N}. If the actions accomplish nothing a user \
would ask for, answer {"instruction": null, "score": 1}."""


@dataclass(frozen=True)
class Label:
    instruction: str | None  # None: pruned
    score: float
    reason: str  # labeled | unlabelable | low_score | bad_label | llm_*


def describe_actions(actions: list[ReplayAction], outcomes: list[StepOutcome]) -> str:
    lines = []
    for number, (action, outcome) in enumerate(zip(actions, outcomes, strict=True), 1):
        output = outcome.observation.strip()
        if len(output) > OUTPUT_CHARS:
            output = output[: OUTPUT_CHARS // 2] + "\n[...]\n" + output[-OUTPUT_CHARS // 2 :]
        lines.append(f"[{number}] {action.tool} {action.arguments}\n-> {output or '(no output)'}")
    return "\n\n".join(lines)


def label_prefix(
    client: LLMClient, repo: str, actions: list[ReplayAction], outcomes: list[StepOutcome]
) -> Label:
    messages = [
        Message("system", SYSTEM),
        Message("user", f"Repository: {repo}\n\n{describe_actions(actions, outcomes)}"),
    ]
    try:
        answer = client.chat([m.to_openai() for m in messages], temperature=0.0)
    except LLMError as exc:
        return Label(None, 1.0, exc.reason)
    return parse_label(answer.message.get("content") or "")


def parse_label(text: str) -> Label:
    """The model's JSON answer; anything else is a bad label, never an exception."""
    match = _OBJECT.search(text)
    try:
        value = json.loads(match.group(0)) if match else None
    except json.JSONDecodeError:
        value = None
    if not isinstance(value, dict):
        return Label(None, 1.0, "bad_label")
    score = value.get("score")
    instruction = value.get("instruction")
    if not isinstance(score, int | float) or not 1 <= score <= 5:
        return Label(None, 1.0, "bad_label")
    if not isinstance(instruction, str) or not instruction.strip():
        return Label(None, float(score), "unlabelable")
    if score < MIN_SCORE:
        return Label(None, float(score), "low_score")
    return Label(instruction.strip(), float(score), "labeled")


def prefix_ends(outcomes: list[StepOutcome], limit: int) -> list[int]:
    """Where a prefix may end: after a step that changed files or ran cleanly with output;
    at most ``limit`` of them, spread over the run, the whole run always among them."""
    ends = [
        i
        for i, outcome in enumerate(outcomes)
        if outcome.exit_code == 0 and (outcome.changed_files or outcome.observation.strip())
    ]
    if not outcomes:
        return []
    last = len(outcomes) - 1
    ends = [e for e in ends if e != last]
    step = max(1, len(ends) // max(1, limit - 1)) if ends else 1
    chosen = ends[::step][: max(0, limit - 1)]
    return [*chosen, last]
