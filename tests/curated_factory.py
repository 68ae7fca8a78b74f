"""Hand-made curated runs: real TaskInstance / Trajectory Parquet tables, as curate writes them."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

from trajforge.filters.task_scores import task_scores
from trajforge.schemas.records import content_id
from trajforge.schemas.storage import write_records
from trajforge.schemas.task_instance import TaskInstance, Validation
from trajforge.schemas.trajectory import FunctionCall, Message, ToolCall, Trajectory

REPOS = ("acme/alpha", "acme/beta", "acme/gamma")

PATCH = """diff --git a/calc/ops.py b/calc/ops.py
--- a/calc/ops.py
+++ b/calc/ops.py
@@ -1,2 +1,2 @@
 def add(a, b):
-    return a - b
+    return a + b  # fixed sum
"""

TOOLS = json.dumps(
    [
        {
            "type": "function",
            "function": {
                "name": "bash",
                "description": "run a shell command",
                "parameters": {
                    "type": "object",
                    "properties": {"command": {"type": "string"}},
                    "required": ["command"],
                },
            },
        },
        {
            "type": "function",
            "function": {
                "name": "str_replace_editor",
                "description": "view and edit files",
                "parameters": {
                    "type": "object",
                    "properties": {
                        "command": {"type": "string", "enum": ["view", "str_replace"]},
                        "path": {"type": "string"},
                        "old_str": {"type": "string"},
                        "new_str": {"type": "string"},
                    },
                    "required": ["command", "path"],
                },
            },
        },
    ]
)


def make_task(repo: str, n: int, **changes: object) -> TaskInstance:
    instance_id = f"{repo.replace('/', '__')}-{n}"
    task = TaskInstance(
        instance_id=instance_id,
        repo=repo,
        base_commit=content_id(repo, n, length=40),
        patch=PATCH,
        test_patch="diff --git a/tests/test_ops.py b/tests/test_ops.py\n",
        problem_statement=f"`add` returns the difference instead of the sum (case {n}).",
        hints_text="",
        created_at="2024-01-01T00:00:00Z",
        FAIL_TO_PASS=(f"tests/test_ops.py::test_add_{n}",),
        PASS_TO_PASS=("tests/test_ops.py::test_sub",),
        environment_setup_commit=content_id(repo, n, length=40),
        image_name=f"trajforge/env:{repo.replace('/', '-')}",
        test_cmd="pytest -rA",
        origin="commit" if n % 2 else "bug/swap_operator",
        profile_id="p1",
        candidate_id=f"c-{instance_id}",
        source=f"/repos/{repo}",
        flaky_tests=(),
        difficulty=None,
        provenance={"validated_by": "trajforge"},
        validation=Validation(1, 0, "a" * 64, "b" * 64, 1, 3),
        bug_patch="" if n % 2 else "--- bug\n",
    )
    task = replace(task, **changes)  # type: ignore[arg-type]
    scores = task_scores(task)
    return replace(task, scores=scores, difficulty=scores["difficulty"])


def make_trajectory(task_id: str, n: int, resolved: bool | None) -> Trajectory:
    view = ToolCall("call_1", "function", FunctionCall("bash", '{"command": "cat calc/ops.py"}'))
    edit_args = {
        "command": "str_replace",
        "path": "calc/ops.py",
        "old_str": "return a - b",
        "new_str": "return a + b",
    }
    edit = ToolCall("call_2", "function", FunctionCall("str_replace_editor", json.dumps(edit_args)))
    messages = (
        Message("system", "You are a helpful agent."),
        Message("user", "Fix add."),
        Message("assistant", "Let me look.", (view,)),
        Message("tool", "def add(a, b):\n    return a - b\n", tool_call_id="call_1", name="bash"),
        Message("assistant", "Fix the operator.", (edit,)),
        Message("tool", "The file calc/ops.py has been edited.", tool_call_id="call_2"),
        Message("assistant", "Done."),
    )
    return Trajectory(
        trajectory_id=content_id(task_id, n),
        instance_id=task_id,
        model="test-model",
        messages=messages,
        tools=TOOLS,
        model_patch=PATCH,
        exit_status="submitted",
        resolved=resolved,
        reward=1.0 if resolved else 0.0,
        origin="rollout",
    )


def curated_tasks() -> list[TaskInstance]:
    return [make_task(repo, n) for repo in REPOS for n in (1, 2)]


def curated_trajectories(tasks: list[TaskInstance]) -> list[Trajectory]:
    """Resolved runs in every repository, plus unresolved, unverified and orphan runs."""
    runs = [make_trajectory(t.instance_id, 0, True) for t in tasks]
    runs.append(make_trajectory(tasks[0].instance_id, 1, False))
    runs.append(make_trajectory(tasks[1].instance_id, 2, None))
    runs.append(make_trajectory("nobody__nothing-9", 0, True))
    return runs


def write_curated(
    root: Path, tasks: list[TaskInstance], trajectories: list[Trajectory] | None = None
) -> Path:
    write_records(
        str(root / "tasks" / "part-00000-of-00001.parquet"), tasks, TaskInstance.ARROW_SCHEMA
    )
    if trajectories is not None:
        write_records(
            str(root / "trajectories" / "part-00000-of-00001.parquet"),
            trajectories,
            Trajectory.ARROW_SCHEMA,
        )
    return root
