"""One rollout: an agent works on a task in its environment (``TaskEnv``); its patch is verified.

The agent starts where a solver would: the task's starting tree (``base_commit`` + ``bug_patch``)
without the test patch, and the issue text. Whatever happens, a run ends as a Trajectory: the
messages so far, the patch so far, an exit status, and the verdict of a fresh container on that
patch (``resolved`` is never taken from the agent's own word). The environment is the one an RL
trainer steps through (``TaskEnv``), so data generation and training see the same tools.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass

from trajforge.generators.agents.loop import AgentRun, LoopLimits, run_agent
from trajforge.generators.agents.task_env import PROMPT_VERSION, TaskEnv
from trajforge.generators.llm.client import LLMClient
from trajforge.schemas.params import RolloutParams
from trajforge.schemas.records import content_id
from trajforge.schemas.task_instance import TaskInstance
from trajforge.schemas.trajectory import Trajectory
from trajforge.verifiers.patch_verifier import PatchVerdict
from trajforge.verifiers.sandbox.base import Sandbox


@dataclass(frozen=True)
class RolloutResult:
    trajectory: Trajectory
    run: AgentRun


def rollout_id(task: TaskInstance, model: str, attempt: int) -> str:
    return content_id(PROMPT_VERSION, task.instance_id, model, attempt)


def run_rollout(
    client: LLMClient,
    sandbox: Sandbox,
    task: TaskInstance,
    repo_path: str,
    params: RolloutParams,
    attempt: int,
    verify: Callable[[str], PatchVerdict],
) -> RolloutResult:
    """Raises UserError when the task's starting tree cannot be built (a bad task, not a run)."""
    limits = LoopLimits(
        max_steps=params.max_steps,
        max_tokens=params.max_tokens,
        max_time_s=params.max_time_s,
        format_error_limit=params.format_error_limit,
        temperature=params.temperature,
    )
    env = TaskEnv(
        task, sandbox, repo_path, verify, params.command_timeout_s, params.max_observation_chars
    )
    with env:
        start = env.reset()
        run = run_agent(client, env.step, start.messages, start.tools, limits, seed=attempt)
        outcome = env.close()
    verdict = outcome.verdict
    usage = {**run.usage, "llm_calls": run.llm_calls, "steps": len(run.steps)}
    trajectory = Trajectory(
        trajectory_id=rollout_id(task, client.model, attempt),
        instance_id=task.instance_id,
        model=client.model,
        messages=tuple(run.messages),
        tools=json.dumps(start.tools, sort_keys=True),
        model_patch=outcome.patch,
        exit_status=run.exit_status,
        resolved=verdict.resolved,
        reward=outcome.reward,
        test_report=verdict.test_report,
        usage=usage,
        origin="rollout",
    )
    return RolloutResult(trajectory, run)
