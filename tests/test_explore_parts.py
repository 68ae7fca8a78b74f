"""Exploration's deterministic parts: doc examples, template actions, end state and replay, in real
git repositories and real containers."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from repo_factory import RepoBuilder
from trajforge.generators.agents.loop import Step
from trajforge.generators.environments.base_image import base_image_tag
from trajforge.generators.explore.doc_examples import DocExample, find_examples
from trajforge.generators.explore.template_explorer import (
    script_path,
    template_actions,
    template_instruction,
)
from trajforge.generators.trajectories.transitions import transitions_of
from trajforge.schemas.explore_task import DELETED, ExploreTask, ReplayAction
from trajforge.schemas.records import check_schema, content_id
from trajforge.schemas.storage import read_records, write_records
from trajforge.schemas.transition import Transition
from trajforge.verifiers.replay import capture_end_state, normalize_output, replay, run_actions
from trajforge.verifiers.sandbox.base import Limits, SessionSpec
from trajforge.verifiers.sandbox.docker import DockerSandbox
from trajforge.verifiers.sandbox.git_tree import archive
from trajforge.verifiers.sandbox.workspace import StepOutcome, Workspace

pytestmark = pytest.mark.docker

IMAGE = base_image_tag("3.11")
TIMEOUT_S = 3.0
MAX_CHARS = 4000

README = """\
# Calc

A tiny calculator.

## Quick start

```python
from calc.ops import add
print(add(2, 3))
```

## In the REPL

```pycon
>>> from calc.ops import mul
>>> mul(3, 4)
12
>>> None
>>> for i in range(2):
...     print(i)
0
1
>>> mul("a", None)
Traceback (most recent call last):
TypeError: can't multiply sequence by non-int of type 'NoneType'
```

## Status

```python
import requests
print(requests.get("https://example.invalid/status").status_code)
```

## Your numbers

```python
from calc.ops import add
print(add(..., ...))
```

## Install

```bash
pip install calc
```

Again
-----

```python
from calc.ops import add
print(add(2, 3))
```
"""

GUIDE = """\
Guide
=====

Multiplying
-----------

.. code-block:: python
   :linenos:

   from calc.ops import mul
   print(mul(2, 5))

Adding in the REPL::

   >>> from calc.ops import add
   >>> add(1, 1)
   2

.. code-block:: bash

   calc --help
"""

OPS = '''\
"""Arithmetic on two numbers.

>>> add(2, 2)
4
"""


def add(a, b):
    return a + b


def mul(a, b):
    """Multiply.

    >>> mul(2, 3)
    6
    >>> mul(2, 0)  # doctest: +SKIP
    1
    """
    return a * b
'''

PYPROJECT = """\
[project]
name = "calc"
version = "0.1.0"

[project.scripts]
calc = "calc.cli:main"
"""


@pytest.fixture(scope="module")
def repo(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    builder = RepoBuilder(tmp_path_factory.mktemp("explore") / "calc")
    sha = builder.commit(
        "calc with docs",
        {
            "README.md": README,
            "docs/guide.rst": GUIDE,
            "pyproject.toml": PYPROJECT,
            "calc/__init__.py": "",
            "calc/ops.py": OPS,
            "tests/test_ops.py": 'def test_add():\n    """\n    >>> 1 + 1\n    2\n    """\n',
        },
    )
    return builder.path, sha


@pytest.fixture(scope="module")
def sandbox(docker_engine) -> DockerSandbox:
    return DockerSandbox(Limits(memory="512m", cpus=1.0, pids=128, max_output_bytes=20_000))


@pytest.fixture(scope="module")
def start_tar(repo: tuple[Path, str]) -> bytes:
    path, sha = repo
    return archive(str(path), sha, prefix="repo/")


def explore(sandbox, start_tar: bytes, actions: list[ReplayAction]):
    """What an explorer does: run the actions in a fresh container and record where they end."""
    with sandbox.session(SessionSpec(IMAGE)) as session:
        session.put_archive(start_tar, "/")
        workspace = Workspace(session, TIMEOUT_S, MAX_CHARS)
        workspace.open()
        outcomes = run_actions(workspace, actions)
        files, outputs = capture_end_state(session, actions, outcomes)
    return outcomes, files, outputs


def make_task(actions, files, outputs, instruction="Do it.") -> ExploreTask:
    return ExploreTask(
        task_id=content_id("explore", [a.arguments for a in actions]),
        repo="calc",
        source="test",
        base_commit="0" * 40,
        image_name=IMAGE,
        profile_id="p",
        instruction=instruction,
        actions=tuple(actions),
        expected_files=files,
        expected_outputs=outputs,
        trajectory_id="t",
        origin="explore/template",
        score=4.0,
        provenance={"writer": "template"},
    )


def python_example(code: str) -> DocExample:
    return DocExample("python", "README.md:1", "Quick start", code)


def test_examples_found_in_docs_docstrings_and_console_scripts(repo):
    path, sha = repo
    examples = find_examples(str(path), sha)
    found = [(e.kind, e.source, e.title) for e in examples]
    assert found == [
        ("python", "README.md:8", "Quick start"),
        ("doctest", "README.md:15", "In the REPL"),
        ("python", "docs/guide.rst:10", "Multiplying"),
        ("doctest", "docs/guide.rst:15", "Multiplying"),
        ("doctest", "calc/ops.py:3", "calc.ops"),
        ("doctest", "calc/ops.py:15", "calc.ops.mul"),
        ("command", "pyproject.toml:6", "calc"),
    ]  # network, placeholder, bash, duplicate and tests/ examples are skipped
    repl = examples[1]
    assert "_show(mul(3, 4))" in repl.code and "_show(None)" in repl.code
    assert repl.expected.startswith("12\n0\n1\nTraceback")
    assert examples[4].code.startswith("from calc.ops import *\n")
    assert "mul(2, 0)" not in examples[5].code  # +SKIP
    assert examples[6].code == "calc --help"
    # the prose each was found with: "Quick start", "In the REPL" and "Multiplying" have none
    assert [e.prose for e in examples] == [
        "", "", "", "Adding in the REPL:", "Arithmetic on two numbers.", "", ""
    ]  # fmt: skip
    assert find_examples(str(path), sha) == examples  # deterministic
    assert len(find_examples(str(path), sha, max_examples=2)) == 2


def test_template_run_replays_in_a_fresh_container(repo, sandbox, start_tar):
    path, sha = repo
    examples = find_examples(str(path), sha)
    for index in (0, 1, 4):  # README python, README pycon, module docstring
        actions = template_actions(examples[index], index)
        assert [a.tool for a in actions] == ["create", "bash"]
        assert json.loads(actions[0].arguments)["path"] == script_path(index)
        outcomes, files, outputs = explore(sandbox, start_tar, actions)
        assert all(o.error is None for o in outcomes)
        assert outcomes[1].exit_code == 0, outcomes[1].observation
        assert files.keys() == {script_path(index)} and list(outputs) == ["1"]
        task = make_task(actions, files, outputs)
        verdict = replay(sandbox, IMAGE, start_tar, task, TIMEOUT_S, MAX_CHARS)
        assert (verdict.ok, verdict.reason) == (True, "replayed"), verdict.mismatches
    repl_output = explore(sandbox, start_tar, template_actions(examples[1], 1))[0][1]
    error = "TypeError: can't multiply sequence by non-int of type 'NoneType'"
    assert repl_output.observation.split("\n")[:4] == ["12", "0", "1", error]
    assert template_instruction(examples[0], 0) is None  # no prose in "Quick start"
    instruction = template_instruction(examples[4], 4)
    assert instruction is not None and "> Arithmetic on two numbers." in instruction
    assert "`calc.ops.add` with the inputs `2`," in instruction and "add(2, 2)" not in instruction
    assert template_instruction(examples[6], 6) == "Show the command-line help of `calc`."


def test_memory_addresses_are_normalized_and_the_check_still_replays(sandbox, start_tar):
    actions = template_actions(python_example("print(object())\nprint(hex(id(1)))"), 0)
    _, files, outputs = explore(sandbox, start_tar, actions)
    task = make_task(actions, files, outputs)
    assert replay(sandbox, IMAGE, start_tar, task, TIMEOUT_S, MAX_CHARS).reason == "replayed"
    assert normalize_output("<object at 0x7f3a2b1c9d80>  \n\n") == "<object at 0x?>"


@pytest.mark.parametrize(
    "code", ["import random\nprint(random.random())", "import time\nprint(time.time_ns())"]
)
def test_nondeterministic_output_fails_replay(sandbox, start_tar, code):
    actions = template_actions(python_example(code), 3)
    _, files, outputs = explore(sandbox, start_tar, actions)
    verdict = replay(sandbox, IMAGE, start_tar, make_task(actions, files, outputs), 3, MAX_CHARS)
    assert (verdict.ok, verdict.reason) == (False, "output_differs")
    assert verdict.mismatches[0].startswith("step 1: output differs")


def test_random_file_content_fails_replay(sandbox, start_tar):
    write = (
        "python3 -c \"import os; open('noise.bin', 'wb').write(os.urandom(16))\" && rm README.md"
    )
    actions = [ReplayAction("bash", json.dumps({"command": write}))]
    outcomes, files, outputs = explore(sandbox, start_tar, actions)
    assert outcomes[0].changed_files == ("README.md", "noise.bin")
    assert files["README.md"] == DELETED and set(files) == {"README.md", "noise.bin"}
    verdict = replay(sandbox, IMAGE, start_tar, make_task(actions, files, outputs), 3, MAX_CHARS)
    assert (verdict.ok, verdict.reason) == (False, "files_differ")
    assert [m.split(":")[0] for m in verdict.mismatches] == ["noise.bin"]


def test_hanging_command_is_bounded_recorded_and_not_replayable(sandbox, start_tar):
    hang = DocExample("command", "pyproject.toml:6", "calc", "echo started; sleep 600")
    actions = [*template_actions(hang, 0), ReplayAction("bash", '{"command": "echo after"}')]
    outcomes, _, outputs = explore(sandbox, start_tar, actions)
    assert outcomes[0].exit_code == 124 and "timed out after 3 s" in outcomes[0].observation
    assert outcomes[0].observation.startswith("started")
    assert outcomes[1].observation.strip() == "after"  # the container and the run go on
    assert list(outputs) == ["1"]  # a timed-out step is no part of the check
    verdict = replay(sandbox, IMAGE, start_tar, make_task(actions, {}, outputs), 3, MAX_CHARS)
    assert (verdict.reason, verdict.mismatches) == ("action_failed", ["step 0 (bash): timed out"])


def test_refused_call_and_missing_image(sandbox, start_tar):
    edit = ReplayAction("str_replace", '{"path": "calc/ops.py", "old_str": "nope", "new_str": ""}')
    task = make_task([edit], {}, {})
    verdict = replay(sandbox, IMAGE, start_tar, task, 3, MAX_CHARS)
    assert verdict.reason == "action_failed" and "refused" in verdict.mismatches[0]
    broken = replay(sandbox, "trajforge-no-such-image:0", start_tar, task, 3, MAX_CHARS)
    assert (broken.ok, broken.reason) == (False, "sandbox_error")


def test_transitions_and_records_round_trip_through_arrow(tmp_path):
    outcomes = [
        StepOutcome("wrote x.py (1 lines)", 0, ("x.py",)),
        StepOutcome("boom\n[exit code 1]", 1, ("x.py",)),
        StepOutcome("error: unknown tool 'fly'", None, ("x.py",), error="unknown tool"),
    ]
    calls = [("create", '{"path": "x.py", "file_text": "1/0"}'), ("bash", '{"command": "x"}')]
    calls.append(("fly", "{}"))
    steps = [
        Step(0, tool, args, o.observation, o.exit_code, o.changed_files, o.error)
        for (tool, args), o in zip(calls, outcomes, strict=True)
    ]
    transitions = transitions_of("traj1", "inst1", "explore/template", steps)
    assert [json.loads(t.state) for t in transitions] == [
        {"changed_files": [], "last_exit_code": None},
        {"changed_files": ["x.py"], "last_exit_code": 0},
        {"changed_files": ["x.py"], "last_exit_code": 1},
    ]
    assert json.loads(transitions[0].action) == {"tool": "create", "arguments": calls[0][1]}
    assert len({t.transition_id for t in transitions}) == 3
    assert transitions_of("traj1", "inst1", "explore/template", steps) == transitions
    task = make_task([ReplayAction("bash", '{"command": "ls"}')], {"a.py": "f" * 64}, {"0": "e"})
    for cls, records in ((Transition, transitions), (ExploreTask, [task])):
        check_schema(cls)
        path = str(tmp_path / f"{cls.__name__}.parquet")
        write_records(path, records, cls.ARROW_SCHEMA)
        assert read_records(cls, path) == records
