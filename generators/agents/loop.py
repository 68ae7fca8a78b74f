"""The agent loop: model turn, tool calls, observations, until submit or a limit.

Shared by rollouts (fix a task) and exploration (issue 6): the loop knows nothing of tasks, only of
a step function (a ``Workspace``'s ``run``, a ``TaskEnv``'s ``step``) and an ``LLMClient``. It never
raises for what a model does: malformed tool calls, arguments that are not JSON and turns with no
tool call are answered with an error observation and counted; ``format_error_limit`` of them in a
row end the run. An endpoint that fails ends the run with ``error:<reason>``. Each executed call is
kept as a ``Step`` (action, observation, exit code, files changed), the raw material of transitions.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from trajforge.generators.llm.client import LLMClient, LLMError
from trajforge.schemas.trajectory import Message, ToolCall
from trajforge.verifiers.sandbox.workspace import StepOutcome

Act = Callable[[str, str], StepOutcome]  # (tool name, arguments as JSON text) -> outcome

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
    messages: list[Message]
    exit_status: str = "step_limit"  # submitted | step_limit | token_limit | time_limit | error:*
    usage: dict[str, int] = field(
        default_factory=lambda: {"prompt_tokens": 0, "completion_tokens": 0}
    )
    steps: list[Step] = field(default_factory=list)
    llm_calls: int = 0  # turns answered by the endpoint (not from the cache)


def run_agent(
    client: LLMClient,
    act: Act,
    messages: Sequence[Message],
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
        request = [m.to_openai() for m in run.messages]
        try:
            answer = client.chat(request, tools, temperature=limits.temperature, seed=seed)
        except LLMError as exc:
            run.exit_status = f"error:{exc.reason}"
            return run
        run.llm_calls += 0 if answer.cached else 1
        for name, value in answer.usage.items():
            run.usage[name] = run.usage.get(name, 0) + value
        message = _assistant_message(answer.message, turn)
        run.messages.append(message)
        if not message.tool_calls:
            format_errors += 1
            run.messages.append(Message("user", NO_TOOL_CALL))
        for call in message.tool_calls:
            name, arguments = call.function.name, call.function.arguments
            outcome = act(name, arguments)
            run.steps.append(step_of(turn, name, arguments, outcome))
            run.messages.append(
                Message("tool", outcome.observation, tool_call_id=call.id, name=name)
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


def _assistant_message(raw: dict[str, Any], turn: int) -> Message:
    """The model's turn with every tool call made usable: a missing id is filled in, a missing
    name or non-string arguments become text the tools will refuse (``str``, never JSON)."""
    calls = []
    for index, call in enumerate(raw.get("tool_calls") or []):
        call = {**(call or {}), "type": "function"}
        function = call.get("function") or {}
        if not isinstance(function.get("arguments"), str):
            call["function"] = {**function, "arguments": str(function.get("arguments") or "")}
        calls.append(ToolCall.from_openai(call, default_id=f"call_{turn}_{index}"))
    return Message("assistant", raw.get("content") or "", tuple(calls))


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
