"""explore through the real CLI, real containers and a scripted model behind a real HTTP server."""

from __future__ import annotations

import json
import re
from pathlib import Path

import polars as pl
import pytest
from conftest import run_cli, write_params
from repo_factory import OPS_FIXED, TESTS_BASE, RepoBuilder, pyproject
from scripted_llm import ScriptedLLM, tool_call, turn

pytestmark = pytest.mark.docker

README = """\
# calc

Small arithmetic helpers.

```python
from calc.ops import mul
print(mul(3, 4))
```

```python
from calc.ops import missing_function
```

## Adding

Import it with from calc.ops import add, then call it:

```python
from calc.ops import add
print(add(2, 5))
```

## Bare

```python
from calc.ops import mul
print(mul(6, 7))
```
"""

SCRIPT = "from calc.ops import add\nprint(add(2, 3))\n"
EXPLORATION = [
    tool_call("create", path="/tmp/explore/try_add.py", file_text=SCRIPT),
    tool_call("bash", command="cd /repo && python3 /tmp/explore/try_add.py"),
    tool_call("bash", command="python3 -c 'import random; print(random.random())'"),
    tool_call("submit"),
]
GOOD_LABEL = "Write a script that prints calc.ops.add(2, 3) and run it."


def _explorer(request):
    return {"content": "Trying things.", "tool_calls": [EXPLORATION[turn(request)]]}


def _labeler(request):
    """No instruction for the lone `create`; a good one for create + run; the random step last."""
    steps = len(re.findall(r"^\[\d+\] ", request["messages"][-1]["content"], re.MULTILINE))
    if steps == 1:
        return {"content": '{"instruction": null, "score": 1}'}
    if steps == 2:
        return {"content": json.dumps({"instruction": GOOD_LABEL, "score": 4})}
    return {"content": '{"instruction": "Print a random number after adding.", "score": 3}'}


def _respond(request):
    return _explorer(request) if request.get("tools") else _labeler(request)


@pytest.fixture(scope="module")
def work(docker_engine, tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("explore")
    repo = RepoBuilder(root / "calc")
    repo.commit(
        "calc with docs",
        {
            "pyproject.toml": pyproject(),
            "README.md": README,
            "calc/__init__.py": "",
            "calc/ops.py": OPS_FIXED,
            "tests/test_ops.py": TESTS_BASE,
        },
    )
    extra = f"explore:\n  repos: [{root / 'calc'}]\n  explorations: 1\n  command_timeout_s: 20\n"
    write_params(root / "params.yaml", root / "cache", extra)
    return root


def _table(path: Path) -> list[dict]:
    return pl.read_parquet(path / "*.parquet").to_dicts()


def test_template_explorer_runs_doc_examples_without_endpoint(work):
    done = run_cli("explore", "--output", "template", cwd=work)
    assert done.returncode == 0, done.stderr
    assert "no endpoint configured" in done.stderr
    (task,) = _table(work / "template/explore_tasks")
    assert task["origin"] == "explore/template" and task["score"] == 4.0
    # written from the section's prose and the example's inputs, never its code
    instruction = task["instruction"]
    assert instruction.startswith('Try what the "calc" section of README.md describes:')
    assert "> Small arithmetic helpers." in instruction
    assert "uses `calc.ops.mul` with the inputs `3`, `4`, run it" in instruction
    assert "print(mul(3, 4))" not in instruction and "import" not in instruction
    assert dict(task["provenance"])["labeler"] == "template"
    reasons = sorted(r["reason"] for r in _table(work / "template/rejections"))
    # the example importing a missing function fails; "Adding"'s prose quotes its code; "Bare"
    # has no prose to write an instruction from (and is never run)
    assert reasons == ["example_fails", "leaks_code", "no_prose"]
    (trajectory,) = _table(work / "template/trajectories")
    assert trajectory["resolved"] is True and trajectory["instance_id"] == task["task_id"]
    assert trajectory["messages"][1]["content"] == task["instruction"]
    assert [t["step"] for t in _table(work / "template/transitions")] == [0, 1]


def test_model_exploration_is_labeled_pruned_and_replayed(work):
    with ScriptedLLM(_respond) as llm:
        done = run_cli(
            "explore", "--output", "llm", "--base-url", llm.base_url, "--model", "scripted",
            cwd=work,
        )  # fmt: skip
    assert done.returncode == 0, done.stderr
    (task,) = _table(work / "llm/explore_tasks")
    assert task["instruction"] == GOOD_LABEL and task["origin"] == "explore/llm"
    assert task["score"] == 4.0 and [a["tool"] for a in task["actions"]] == ["create", "bash"]
    assert "/tmp/explore/try_add.py" in dict(task["expected_files"])
    reasons = sorted(r["reason"] for r in _table(work / "llm/rejections"))
    # the lone `create` has no instruction (pruned); the run with the random step cannot replay
    assert reasons == ["output_differs", "pruned_unlabelable"]
    (trajectory,) = _table(work / "llm/trajectories")
    assert trajectory["resolved"] is True and trajectory["messages"][1]["content"] == GOOD_LABEL
    tool_outputs = [m["content"] for m in trajectory["messages"] if m["role"] == "tool"]
    assert tool_outputs[-1].strip() == "5"
    transitions = _table(work / "llm/transitions")
    assert [json.loads(t["action"])["tool"] for t in transitions] == ["create", "bash"]
    assert json.loads(transitions[1]["state"])["last_exit_code"] == 0
