"""One rollout: an agent works on a task in its environment (``TaskEnv``); its patch is verified.

The agent starts where a solver would: the task's starting tree (``base_commit`` + ``bug_patch``)
without the test patch, and the issue text. Whatever happens, a run ends as a Trajectory: the
messages so far, the patch so far, an exit status, and the verdict of a fresh container on that
patch (``resolved`` is never taken from the agent's own word). The environment is the one an RL
trainer steps through (``TaskEnv``), so data generation and training see the same tools.

Besides the verdict, each run carries its soft verification (``verifiers.soft_verification``:
``soft_reward``, the share of the gold patch's touched lines the patch touches, and
``f2p_pass_rate``) and, when unresolved, the failing tests' output (what a guided retry is shown).
A guided retry passes ``guidance`` (``generators.agents.guidance``): it follows the issue in the
prompt and is recorded on the trajectory.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass

from trajforge.generators.agents.guidance import failing_output
from trajforge.generators.agents.loop import AgentRun, LoopLimits, run_agent
from trajforge.generators.agents.task_env import PROMPT_VERSION, TaskEnv
from trajforge.generators.languages.registry import language_named
from trajforge.generators.llm.client import LLMClient
from trajforge.schemas.params import RolloutParams
from trajforge.schemas.records import content_id
from trajforge.schemas.task_instance import TaskInstance
from trajforge.schemas.trajectory import Trajectory
from trajforge.verifiers.patch_verifier import PatchVerdict
from trajforge.verifiers.sandbox.base import Sandbox
from trajforge.verifiers.soft_verification import f2p_pass_rate, soft_reward


@dataclass(frozen=True)
class RolloutResult:
    trajectory: Trajectory
    run: AgentRun


def rollout_id(task: TaskInstance, model: str, attempt: int, guidance: str = "") -> str:
    """The run's id; a guided run's also hashes its guidance (unguided ids are unchanged)."""
    if guidance:
        return content_id(PROMPT_VERSION, task.instance_id, model, attempt, guidance)
    return content_id(PROMPT_VERSION, task.instance_id, model, attempt)


def run_rollout(
    client: LLMClient,
    sandbox: Sandbox,
    task: TaskInstance,
    repo_path: str,
    params: RolloutParams,
    attempt: int,
    verify: Callable[[str], PatchVerdict],
    guidance: str = "",
) -> RolloutResult:
    """Raises UserError when the task's starting tree cannot be built (a bad task, not a run).
    ``guidance``: a guided retry's guidance, shown after the issue ("" for an unguided run)."""
    limits = LoopLimits(
        max_steps=params.max_steps,
        max_tokens=params.max_tokens,
        max_time_s=params.max_time_s,
        format_error_limit=params.format_error_limit,
        temperature=params.temperature,
    )
    env = TaskEnv(
        task,
        sandbox,
        repo_path,
        verify,
        params.command_timeout_s,
        params.max_observation_chars,
        guidance=guidance,
    )
    with env:
        start = env.reset()
        run = run_agent(client, env.step, start.messages, start.tools, limits, seed=attempt)
        outcome = env.close()
    verdict = outcome.verdict
    usage = {**run.usage, "llm_calls": run.llm_calls, "steps": len(run.steps)}
    output = (
        ""
        if verdict.resolved
        else failing_output(
            verdict.log,
            verdict.test_report,
            params.max_guidance_chars,
            language_named(task.language),
        )
    )
    trajectory = Trajectory(
        trajectory_id=rollout_id(task, client.model, attempt, guidance),
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
        # A run whose evidence was bent earns no soft signal either: never a near miss.
        soft_reward=soft_reward(task.patch, outcome.patch) if verdict.trusted else None,
        f2p_pass_rate=f2p_pass_rate(task.FAIL_TO_PASS, verdict.test_report)
        if verdict.trusted
        else 0.0,
        test_output=output,
        guidance=guidance,
        suspicious_patch=verdict.suspicious_patch,
    )
    return RolloutResult(trajectory, run)
