"""Trajectories as SFT conversations: TRL tool-call messages, or SWE-smith's text function calls.

``trl_messages`` keeps OpenAI's shape, which TRL's SFTTrainer and ``apply_chat_template`` read as
is: every message has the same keys (``role, content, tool_calls, tool_call_id, name``) because an
Arrow column gives every row the same struct; absent values are None. ``arguments`` stay the JSON
text the model wrote (OpenAI's convention); templates that want a dict must ``json.loads`` it.

``swesmith_messages`` follows SWE-smith's ``transform_traj_xml`` (swesmith/train/traj_mgr/utils.py),
the format SWE-agent-LM was fine-tuned on: an assistant turn is its thought, a blank line, then one
block per call::

    <function=NAME>
    <parameter=KEY>VALUE</parameter>
    </function>

with ``old_str``, ``new_str`` and ``file_text`` values wrapped in newlines; tool results become user
turns. Where trajforge differs (SWE-smith reads SWE-agent's own files, we read OpenAI messages):

- SWE-agent's template already starts observations with ``OBSERVATION:``; we add that prefix to raw
  tool output (and SWE-agent's no-output sentence to empty output); consecutive tool results (one
  turn with several calls) merge into one user turn so roles keep alternating.
- SWE-smith writes non-string argument values with Python's ``str``; we write them as JSON
  (identical for numbers and lists of numbers such as ``view_range``; ``true`` not ``True``).
- SWE-smith swaps in its own inference system prompt; we keep the trajectory's unless
  ``system_prompt`` is given.
"""

from __future__ import annotations

import json
from typing import Any

from trajforge.schemas.trajectory import Message, ToolCall, Trajectory

BLOCK_PARAMETERS = ("old_str", "new_str", "file_text")  # SWE-smith's XML_STR_REPLACES
OBSERVATION_PREFIX = "OBSERVATION:\n"
NO_OUTPUT = "Your command ran successfully and did not produce any output."


def trl_message(message: Message) -> dict[str, Any]:
    """One message in TRL's shape: ``Message.to_openai`` with every key (None where absent)."""
    return message.to_openai(fixed_keys=True)


def trl_messages(trajectory: Trajectory) -> list[dict[str, Any]]:
    """The conversation in TRL's conversational format (OpenAI tool-call messages)."""
    return [trl_message(m) for m in trajectory.messages]


def _parameter_value(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


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
    if content.startswith(OBSERVATION_PREFIX.rstrip("\n")):
        return content
    return OBSERVATION_PREFIX + (content if content.strip() else NO_OUTPUT)


def swesmith_messages(
    trajectory: Trajectory, system_prompt: str | None = None
) -> list[dict[str, str]]:
    """The conversation as SWE-smith's ``xml`` fine-tuning messages (role and content only)."""
    rendered: list[dict[str, str]] = []
    after_tool = False  # the last rendered turn holds tool output
    for message in trajectory.messages:
        if message.role == "tool":
            observation = _observation(message.content or "")
            if after_tool:
                rendered[-1]["content"] += "\n\n" + observation
            else:
                rendered.append({"role": "user", "content": observation})
            after_tool = True
            continue
        after_tool = False
        if message.role == "assistant":
            actions = "\n".join(swesmith_action(call) for call in message.tool_calls)
            rendered.append(
                {"role": "assistant", "content": f"{message.content}\n\n{actions}".strip()}
            )
        elif message.role == "system" and system_prompt is not None:
            rendered.append({"role": "system", "content": system_prompt})
        else:
            rendered.append({"role": message.role, "content": message.content})
    return rendered
