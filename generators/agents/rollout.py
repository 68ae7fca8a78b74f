"""One rollout: an agent works on a task in a container of its image; its patch is then verified.

The agent starts where a solver would: the task's starting tree (``base_commit`` + ``bug_patch``)
without the test patch, and the issue text. Whatever happens, a run ends as a Trajectory: the
messages so far, the patch so far, an exit status, and the verdict of a fresh container on that
patch (``resolved`` is never taken from the agent's own word).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass

from trajforge.generators.agents.loop import AgentRun, LoopLimits, run_agent
from trajforge.generators.llm.client import LLMClient
from trajforge.schemas.params import RolloutParams
from trajforge.schemas.records import content_id
from trajforge.schemas.task_instance import TaskInstance
from trajforge.schemas.trajectory import Message, Trajectory
from trajforge.verifiers.patch_verifier import PatchVerdict
from trajforge.verifiers.sandbox.base import Sandbox, SessionSpec
from trajforge.verifiers.sandbox.git_tree import apply_patches, archive
from trajforge.verifiers.sandbox.workspace import Workspace, tool_schemas

PROMPT_VERSION = "rollout-v1"
TOOLS = ("bash", "view", "str_replace", "create", "submit")

SYSTEM = """\
You are a software engineer working in a Python repository at /repo. Fix the issue you are given \
by editing the source code. Explore with the tools, reproduce the problem, make the smallest \
change that fixes it and check it. Do not change or add tests. The machine has no network. When \
the fix is done, call `submit`."""

USER = """\
<issue>
{statement}
</issue>

The repository ({repo}) is checked out at /repo. Fix the issue."""


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
    start = apply_patches(repo_path, task.base_commit, [task.bug_patch])
    tools = tool_schemas(TOOLS)
    messages = [
        Message("system", SYSTEM),
        Message("user", USER.format(statement=task.problem_statement, repo=task.repo)),
    ]
    limits = LoopLimits(
        max_steps=params.max_steps,
        max_tokens=params.max_tokens,
        max_time_s=params.max_time_s,
        format_error_limit=params.format_error_limit,
        temperature=params.temperature,
    )
    with sandbox.session(SessionSpec(task.image_name)) as session:
        session.put_archive(archive(repo_path, start, prefix="repo/"), "/")
        workspace = Workspace(session, params.command_timeout_s, params.max_observation_chars)
        workspace.open()
        run = run_agent(client, workspace, messages, tools, limits, seed=attempt)
        patch = workspace.diff()
    verdict = verify(patch)
    usage = {**run.usage, "llm_calls": run.llm_calls, "steps": len(run.steps)}
    trajectory = Trajectory(
        trajectory_id=rollout_id(task, client.model, attempt),
        instance_id=task.instance_id,
        model=client.model,
        messages=tuple(run.messages),
        tools=json.dumps(tools, sort_keys=True),
        model_patch=patch,
        exit_status=run.exit_status,
        resolved=verdict.resolved,
        reward=1.0 if verdict.resolved else 0.0,
        test_report=verdict.test_report,
        usage=usage,
        origin="rollout",
    )
    return RolloutResult(trajectory, run)
