"""The prompt an RL trainer starts a rollout from: a system turn and the issue as the user turn.

The reward side (image, test command, FAIL_TO_PASS, PASS_TO_PASS) travels in columns beside the
prompt, so the prompt says nothing about tests: the agent must find the fix from the issue alone.
"""

from __future__ import annotations

from trajforge.schemas.task_instance import TaskInstance
from trajforge.schemas.trajectory import Message

DEFAULT_SYSTEM_PROMPT = (
    "You are an autonomous software engineer working in a checkout of the repository {repo}. "
    "Use the tools to explore the code, reproduce the problem and edit the non-test source files "
    "until the issue described by the user is resolved. Do not modify the tests. When you are "
    "done, submit your changes."
)


def rl_prompt(
    task: TaskInstance, system_prompt: str = DEFAULT_SYSTEM_PROMPT
) -> list[dict[str, str]]:
    """``[system, user]`` chat messages; ``{repo}`` in the system prompt names the repository."""
    messages = [
        Message("system", system_prompt.replace("{repo}", task.repo)),
        Message("user", task.problem_statement),
    ]
    return [m.to_openai() for m in messages]
