"""One task as a multi-turn environment: the rollout stage's and an RL trainer's, the same code.

``reset()`` starts a fresh container of the task's image at the starting tree (``base_commit`` +
``bug_patch``, no test patch, no history) and gives the prompt and the tools; ``step(name,
arguments)`` runs one tool call there (the rollout tools: shell, view, create, str_replace,
submit); ``close()`` takes the patch the agent made, removes the container and grades the patch in
another fresh one (``grade``: ``verify_patch`` with the caller's cache and limits). Nothing the
agent does in its container reaches the grading run except the patch.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import dataclass
from typing import Any

from trajforge.generators.languages.registry import language_named
from trajforge.schemas.task_instance import TaskInstance
from trajforge.schemas.trajectory import Message
from trajforge.verifiers.patch_verifier import PatchVerdict
from trajforge.verifiers.sandbox.base import Sandbox, SessionSpec
from trajforge.verifiers.sandbox.git_tree import apply_patches, archive, scratch_objects
from trajforge.verifiers.sandbox.workspace import StepOutcome, Workspace, tool_schemas

PROMPT_VERSION = "rollout-v1"
TOOLS = ("bash", "view", "str_replace", "create", "submit")

USER = """\
<issue>
{statement}
</issue>

The repository ({repo}) is checked out at /repo. Fix the issue."""

# A guided retry (Agent-RLVR) gets this after the issue: what an earlier, failed attempt left.
GUIDANCE = """

<guidance>
{guidance}
</guidance>"""


@dataclass(frozen=True)
class Observation:
    """What an episode starts from: the chat so far and the tools (OpenAI function schemas)."""

    messages: list[Message]
    tools: list[dict[str, Any]]


@dataclass(frozen=True)
class Outcome:
    """How an episode ended: the agent's patch and its verdict from a fresh container."""

    patch: str
    verdict: PatchVerdict

    @property
    def reward(self) -> float:
        return 1.0 if self.verdict.resolved else 0.0

    @property
    def suspicious_patch(self) -> str:
        """Why the patch's source looks like a hack no test run sees ("" when clean): a
        trainer's to act on (``reward(strict=True)`` scores it 0)."""
        return self.verdict.suspicious_patch


def prompt(task: TaskInstance, guidance: str = "") -> list[Message]:
    """The system and user messages; ``guidance`` (a guided retry's) follows the issue."""
    user = USER.format(statement=task.problem_statement, repo=task.repo)
    if guidance:
        user += GUIDANCE.format(guidance=guidance)
    return [Message("system", system_message(task)), Message("user", user)]


def system_message(task: TaskInstance) -> str:
    """The system message of the task's language (``Language.agent_system_prompt``)."""
    return language_named(task.language).agent_system_prompt(task.test_cmd)


class TaskEnv:
    """reset -> step... -> close, one container per episode (a context manager closes it)."""

    def __init__(
        self,
        task: TaskInstance,
        sandbox: Sandbox,
        repo_path: str,
        grade: Callable[[str], PatchVerdict],
        command_timeout_s: float = 60.0,
        max_observation_chars: int = 10_000,
        guidance: str = "",
    ) -> None:
        self.task = task
        self.sandbox = sandbox
        self.repo_path = repo_path
        self.grade = grade
        self.command_timeout_s = command_timeout_s
        self.max_observation_chars = max_observation_chars
        self.guidance = guidance  # shown after the issue (a guided retry); "" for none
        self.tools = tool_schemas(TOOLS)
        self._stack: ExitStack | None = None
        self._workspace: Workspace | None = None

    def reset(self) -> Observation:
        """A fresh container at the starting tree (any earlier episode's is removed). Raises
        UserError when the starting tree cannot be built (a bad task, not an episode)."""
        self._discard()
        with scratch_objects(self.repo_path) as objects:  # the source repository never grows
            bug = [self.task.bug_patch]
            start = apply_patches(self.repo_path, self.task.base_commit, bug, env=objects)
            files = archive(self.repo_path, start, prefix="repo/", env=objects)
        stack = ExitStack()
        try:
            session = stack.enter_context(self.sandbox.session(SessionSpec(self.task.image_name)))
            session.put_archive(files, "/")
            workspace = Workspace(session, self.command_timeout_s, self.max_observation_chars)
            workspace.open()
        except BaseException:
            stack.close()
            raise
        self._stack, self._workspace = stack, workspace
        return Observation(prompt(self.task, self.guidance), self.tools)

    def step(self, name: str, arguments: str | dict[str, Any]) -> StepOutcome:
        """Run one tool call; ``arguments`` as the model wrote them (JSON text) or a dict."""
        if self._workspace is None:
            raise RuntimeError("TaskEnv.step before reset()")
        text = arguments if isinstance(arguments, str) else json.dumps(arguments)
        return self._workspace.run(name, text)

    def diff(self) -> str:
        """The agent's changes so far, as a patch against the starting tree."""
        if self._workspace is None:
            raise RuntimeError("TaskEnv.diff before reset()")
        return self._workspace.diff()

    def close(self) -> Outcome:
        """End the episode: its patch, graded in a fresh container (this one is removed first)."""
        patch = self.diff()
        self._discard()
        return Outcome(patch, self.grade(patch))

    def _discard(self) -> None:
        stack, self._stack, self._workspace = self._stack, None, None
        if stack is not None:
            stack.close()

    def __enter__(self) -> TaskEnv:
        return self

    def __exit__(self, *exc: object) -> None:
        self._discard()
