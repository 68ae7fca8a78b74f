"""The agent loop: model turn, tool calls, observations, until submit or a limit.

Shared by rollouts (fix a task) and exploration (issue 6): the loop knows nothing of tasks, only
of a ``Workspace`` and an ``LLMClient``. It never raises for what a model does: malformed tool
calls, arguments that are not JSON and turns with no tool call are answered with an error
observation and counted; ``format_error_limit`` of them in a row end the run. An endpoint that
fails ends the run with ``error:<reason>``. Each executed call is kept as a ``Step`` (action,
observation, exit code, files changed), the raw material of transitions.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from trajforge.generators.llm.client import LLMClient, LLMError
from trajforge.verifiers.sandbox.workspace import StepOutcome, Workspace

NO_TOOL_CALL = (
    "Your reply had no tool call. Use one of the tools to act, or call `submit` when done."
)


@dataclass(frozen=True)
class LoopLimits:
    max_steps: int
    max_tokens: int
    max_time_s: float
    format_error_limit: int
    temperature: float


@dataclass(frozen=True)
class Step:
    turn: int
    tool: str
    arguments: str  # JSON text exactly as the model wrote it
    observation: str
    exit_code: int | None
    changed_files: tuple[str, ...]
    error: str | None


@dataclass
class AgentRun:
    messages: list[dict[str, Any]]
    exit_status: str = "step_limit"  # submitted | step_limit | token_limit | time_limit | error:*
    usage: dict[str, int] = field(
        default_factory=lambda: {"prompt_tokens": 0, "completion_tokens": 0}
    )
    steps: list[Step] = field(default_factory=list)
    llm_calls: int = 0  # turns answered by the endpoint (not from the cache)


def run_agent(
    client: LLMClient,
    workspace: Workspace,
    messages: list[dict[str, Any]],
    tools: list[dict[str, Any]],
    limits: LoopLimits,
    seed: int,
) -> AgentRun:
    """Drive the model from ``messages`` (system + user) until it submits or hits a limit."""
    run = AgentRun(messages=list(messages))
    started = time.monotonic()
    format_errors = 0
    for turn in range(limits.max_steps):
        if time.monotonic() - started > limits.max_time_s:
            run.exit_status = "time_limit"
            return run
        if sum(run.usage.values()) >= limits.max_tokens:
            run.exit_status = "token_limit"
            return run
        try:
            answer = client.chat(run.messages, tools, temperature=limits.temperature, seed=seed)
        except LLMError as exc:
            run.exit_status = f"error:{exc.reason}"
            return run
        run.llm_calls += 0 if answer.cached else 1
        for name, value in answer.usage.items():
            run.usage[name] = run.usage.get(name, 0) + value
        message = _assistant_message(answer.message, turn)
        run.messages.append(message)
        calls = message.get("tool_calls") or []
        if not calls:
            format_errors += 1
            run.messages.append({"role": "user", "content": NO_TOOL_CALL})
        for call in calls:
            name, arguments = call["function"]["name"], call["function"]["arguments"]
            outcome = workspace.run(name, arguments)
            run.steps.append(step_of(turn, name, arguments, outcome))
            run.messages.append(
                {
                    "role": "tool",
                    "tool_call_id": call["id"],
                    "name": name,
                    "content": outcome.observation,
                }
            )
            format_errors = format_errors + 1 if outcome.error else 0
            if outcome.submitted:
                run.exit_status = "submitted"
                return run
        if format_errors >= limits.format_error_limit:
            run.exit_status = "error:format_errors"
            return run
    run.exit_status = "step_limit"
    return run


def _assistant_message(raw: dict[str, Any], turn: int) -> dict[str, Any]:
    """The model's turn in OpenAI's shape, with every tool call made usable: a missing id is
    filled in, a missing name or non-string arguments become text the tools will refuse."""
    message: dict[str, Any] = {"role": "assistant", "content": raw.get("content") or ""}
    calls = []
    for index, call in enumerate(raw.get("tool_calls") or []):
        function = (call or {}).get("function") or {}
        arguments = function.get("arguments")
        calls.append(
            {
                "id": (call or {}).get("id") or f"call_{turn}_{index}",
                "type": "function",
                "function": {
                    "name": str(function.get("name") or ""),
                    "arguments": arguments if isinstance(arguments, str) else str(arguments or ""),
                },
            }
        )
    if calls:
        message["tool_calls"] = calls
    return message


def step_of(turn: int, name: str, arguments: str, outcome: StepOutcome) -> Step:
    return Step(
        turn=turn,
        tool=name,
        arguments=arguments,
        observation=outcome.observation,
        exit_code=outcome.exit_code,
        changed_files=outcome.changed_files,
        error=outcome.error,
    )
