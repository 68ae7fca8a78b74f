"""trajforge's public API: what a trainer imports, as ``from trajforge import ...``.

This file is the package ``trajforge`` itself (``setup.py`` maps the package to this folder; the
five rooms stay ``trajforge.pipelines`` ... ``trajforge.schemas``). Every name is loaded on first
use (PEP 562), so ``import trajforge`` imports neither Beam, pyarrow nor docker; each name is the
object of its deep path (``trajforge.Evaluator is
trajforge.pipelines.evaluation.evaluator.Evaluator``). ``docs/api.md`` documents them.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from trajforge.generators.agents.task_env import Observation, Outcome, TaskEnv
    from trajforge.pipelines.evaluation.evaluator import Evaluation, Evaluator
    from trajforge.pipelines.evaluation.reward_client import (
        RewardClient,
        RewardServiceError,
        patch_from_completion,
        trl_reward_func,
    )
    from trajforge.pipelines.evaluation.rewards import reward
    from trajforge.pipelines.evaluation.service import RewardService, serve
    from trajforge.pipelines.evaluation.task_rows import load_tasks
    from trajforge.schemas.errors import UserError
    from trajforge.schemas.params import Params, load_params
    from trajforge.schemas.task_instance import TaskInstance
    from trajforge.schemas.trajectory import Message
    from trajforge.verifiers.patch_verifier import PatchVerdict
    from trajforge.verifiers.sandbox.workspace import StepOutcome

# name -> the module that defines it (its deep path, which keeps working)
_EXPORTS = {
    # tasks and params
    "load_tasks": "trajforge.pipelines.evaluation.task_rows",
    "TaskInstance": "trajforge.schemas.task_instance",
    "Params": "trajforge.schemas.params",
    "load_params": "trajforge.schemas.params",
    "UserError": "trajforge.schemas.errors",
    # grading and rewards
    "Evaluator": "trajforge.pipelines.evaluation.evaluator",
    "Evaluation": "trajforge.pipelines.evaluation.evaluator",
    "PatchVerdict": "trajforge.verifiers.patch_verifier",
    "reward": "trajforge.pipelines.evaluation.rewards",
    "patch_from_completion": "trajforge.pipelines.evaluation.reward_client",
    "RewardClient": "trajforge.pipelines.evaluation.reward_client",
    "RewardServiceError": "trajforge.pipelines.evaluation.reward_client",
    "trl_reward_func": "trajforge.pipelines.evaluation.reward_client",
    "RewardService": "trajforge.pipelines.evaluation.service",
    "serve": "trajforge.pipelines.evaluation.service",
    # the multi-turn environment
    "TaskEnv": "trajforge.generators.agents.task_env",
    "Observation": "trajforge.generators.agents.task_env",
    "Outcome": "trajforge.generators.agents.task_env",
    "StepOutcome": "trajforge.verifiers.sandbox.workspace",
    "Message": "trajforge.schemas.trajectory",
}

__all__ = [
    "Evaluation",
    "Evaluator",
    "Message",
    "Observation",
    "Outcome",
    "Params",
    "PatchVerdict",
    "RewardClient",
    "RewardService",
    "RewardServiceError",
    "StepOutcome",
    "TaskEnv",
    "TaskInstance",
    "UserError",
    "load_params",
    "load_tasks",
    "patch_from_completion",
    "reward",
    "serve",
    "trl_reward_func",
]


def __getattr__(name: str) -> Any:
    """Import a public name's module on first use, then keep the name here."""
    if name == "__version__":
        from importlib.metadata import version

        value: Any = version("trajforge")
    elif name in _EXPORTS:
        value = getattr(importlib.import_module(_EXPORTS[name]), name)
    else:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__, "__version__"})
