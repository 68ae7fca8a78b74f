"""The model explorer: an agent that learns a repository by using it, guided by its own docs.

It gets the start of the README, the doc examples trajforge found and a focus picked by the seed
(so several explorations of one repository go different ways), and the rollout tools. Nothing it
does is graded here: the recording is labeled afterwards (backward construction) and proven by
replay.
"""

from __future__ import annotations

from trajforge.generators.agents.loop import AgentRun, LoopLimits, run_agent
from trajforge.generators.explore.doc_examples import DocExample
from trajforge.generators.explore.recording import RecordingWorkspace
from trajforge.generators.llm.client import LLMClient
from trajforge.schemas.params import ExploreParams
from trajforge.schemas.trajectory import Message
from trajforge.verifiers.sandbox.workspace import tool_schemas

TOOLS = ("bash", "view", "create", "str_replace", "submit")
README_CHARS = 3000
FOCUSES = (
    "the main API the README shows",
    "edge cases and errors of the core functions",
    "the command-line interface, if there is one, else the most used module",
    "how the test suite exercises one module",
)

SYSTEM = """\
You are exploring the Python repository at /repo to learn what it does and how to use it, as a \
new contributor would. Read its docs and code, write small scripts under /tmp/explore that use \
the library and run them with `python3`, run parts of its test suite, try small edits. One \
concrete thing per step. Keep every command fast and deterministic (no randomness, no clocks); \
there is no network. When you have done a few meaningful things, call `submit`."""


def exploration_prompt(repo: str, readme: str, examples: list[DocExample], seed: int) -> str:
    listed = "\n".join(f"- {e.source}: {e.title or e.kind}" for e in examples[:15]) or "- none"
    focus = examples[seed % len(examples)].source if examples and seed % 2 else None
    return (
        f"Repository: {repo}\n\nThe README begins:\n{readme[:README_CHARS] or '(no README)'}\n\n"
        f"Documentation examples:\n{listed}\n\n"
        f"Focus of this exploration: {focus or FOCUSES[seed % len(FOCUSES)]}."
    )


def explore(
    client: LLMClient,
    workspace: RecordingWorkspace,
    prompt: str,
    params: ExploreParams,
    seed: int,
) -> AgentRun:
    limits = LoopLimits(
        max_steps=params.max_steps,
        max_tokens=params.max_tokens,
        max_time_s=params.max_time_s,
        format_error_limit=3,
        temperature=params.temperature,
    )
    messages = [Message("system", SYSTEM), Message("user", prompt)]
    return run_agent(client, workspace.run, messages, tool_schemas(TOOLS), limits, seed=seed)
