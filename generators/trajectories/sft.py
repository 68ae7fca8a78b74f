"""Trajectories as SFT conversations: TRL tool-call messages, or SWE-smith's text function calls.

``trl_messages`` keeps OpenAI's shape, which TRL's SFTTrainer and ``apply_chat_template`` read as
is: every message has the same keys (``role, content, tool_calls, tool_call_id, name``) because an
Arrow column gives every row the same struct; absent values are None. ``arguments`` stay the JSON
text the model wrote (OpenAI's convention); templates that want a dict must ``json.loads`` it.

``swesmith_messages`` follows SWE-smith's ``transform_traj_xml`` (swesmith/train/traj_mgr/utils.py),
the format SWE-agent-LM was fine-tuned on: an assistant turn is its thought, a blank line, then one
block per call (the blank line stays when the thought is empty)::

    <function=NAME>
    <parameter=KEY>VALUE</parameter>
    </function>

with ``old_str``, ``new_str`` and ``file_text`` values wrapped in newlines and other values written
as Python's ``str`` writes them (SWE-smith's f-string: ``[85, 105]``, ``True``); tool results
become user turns; the conversation ends on the assistant's last turn (SWE-smith drops the last
message of the run, the output of ``submit``; we drop the tool results after the last assistant
turn, the same message for every SWE-agent run, which always ends on an observation).

For a SWE-agent run (origin ``import/swe-agent``) the text is SWE-smith's byte for byte, system
turn aside: its observations are kept as SWE-agent's templates wrote them (``OBSERVATION:`` and
the output, or the no-output sentence alone), a turn without calls is its thought and a blank
line, and SWE-agent's ``Exit due to cost limit`` turn becomes SWE-smith's stand-in submit. Where
other runs differ (they are OpenAI messages, not SWE-agent's files):

- raw tool output gets SWE-agent's template: ``OBSERVATION:`` and the output, or the no-output
  sentence where it is empty (output that already starts with ``OBSERVATION:`` is kept as is);
  consecutive tool results (one turn with several calls, which SWE-agent never makes) merge into
  one user turn so roles keep alternating;
- a turn without calls (a text-action agent's, a final answer) is its text as written, with no
  blank line after it;
- SWE-smith swaps in its own inference system prompt for every run; we keep the trajectory's unless
  ``system_prompt`` is given.
"""

from __future__ import annotations

import json
from typing import Any

from trajforge.generators.trajectories.formats.swe_agent import ORIGIN as SWE_AGENT_ORIGIN
from trajforge.schemas.trajectory import Message, ToolCall, Trajectory

BLOCK_PARAMETERS = ("old_str", "new_str", "file_text")  # SWE-smith's XML_STR_REPLACES
# SWE-agent's next_step_template and next_step_no_output_template (SWE-smith's configs).
OBSERVATION_PREFIX = "OBSERVATION:\n"
NO_OUTPUT = "Your command ran successfully and did not produce any output."
# SWE-agent's assistant turn when a run hits its cost limit, and what SWE-smith writes instead.
COST_LIMIT_EXIT = "Exit due to cost limit"
COST_LIMIT_SUBMIT = (
    "Since we have successfully fixed the issue and verified it works, "
    "let's submit the changes:\n\n<function=submit>\n</function>"
)


def trl_message(message: Message) -> dict[str, Any]:
    """One message in TRL's shape: ``Message.to_openai`` with every key (None where absent)."""
    return message.to_openai(fixed_keys=True)


def trl_messages(trajectory: Trajectory) -> list[dict[str, Any]]:
    """The conversation in TRL's conversational format (OpenAI tool-call messages)."""
    return [trl_message(m) for m in trajectory.messages]


def _parameter_value(value: Any) -> str:
    return str(value)  # SWE-smith's f"{v}" of the parsed JSON value


def swesmith_action(call: ToolCall) -> str:
    """One call as SWE-agent's XML function-calling text; unreadable arguments render empty."""
    try:
        arguments = json.loads(call.function.arguments) if call.function.arguments else {}
    except json.JSONDecodeError:
        arguments = {}
    lines = [f"<function={call.function.name}>"]
    for key, value in arguments.items() if isinstance(arguments, dict) else ():
        text = _parameter_value(value)
        if key in BLOCK_PARAMETERS:
            lines.append(f"<parameter={key}>\n{text}\n</parameter>")
        else:
            lines.append(f"<parameter={key}>{text}</parameter>")
    lines.append("</function>")
    return "\n".join(lines)


def _observation(content: str) -> str:
    """Raw tool output as SWE-agent's templates write it."""
    if not content.strip():
        return NO_OUTPUT
    if content.startswith(OBSERVATION_PREFIX.rstrip("\n")):
        return content
    return OBSERVATION_PREFIX + content


def _trained_part(messages: tuple[Message, ...]) -> tuple[Message, ...]:
    """The run up to its last assistant turn: what the environment answered last is dropped."""
    end = len(messages)
    while end and messages[end - 1].role == "tool":
        end -= 1
    return messages[:end]


def _assistant(message: Message, from_swe_agent: bool) -> str:
    if from_swe_agent and message.content == COST_LIMIT_EXIT:
        return COST_LIMIT_SUBMIT
    if not message.tool_calls and not from_swe_agent:
        return message.content
    actions = "\n".join(swesmith_action(call) for call in message.tool_calls)
    return f"{message.content}\n\n{actions}"


def swesmith_messages(
    trajectory: Trajectory, system_prompt: str | None = None
) -> list[dict[str, str]]:
    """The conversation as SWE-smith's ``xml`` fine-tuning messages (role and content only)."""
    from_swe_agent = trajectory.origin == SWE_AGENT_ORIGIN
    rendered: list[dict[str, str]] = []
    after_tool = False  # the last rendered turn holds tool output
    for message in _trained_part(trajectory.messages):
        if message.role == "tool":
            content = message.content or ""
            observation = content if from_swe_agent else _observation(content)
            if after_tool:
                rendered[-1]["content"] += "\n\n" + observation
            else:
                rendered.append({"role": "user", "content": observation})
            after_tool = True
            continue
        after_tool = False
        if message.role == "assistant":
            rendered.append({"role": "assistant", "content": _assistant(message, from_swe_agent)})
        elif message.role == "system" and system_prompt is not None:
            rendered.append({"role": "system", "content": system_prompt})
        else:
            rendered.append({"role": message.role, "content": message.content})
    return rendered
