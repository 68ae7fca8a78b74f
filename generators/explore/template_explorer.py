"""The explorer used without a model endpoint: each doc example becomes a fixed run of tool calls.

A Python or doctest example is written to ``/tmp/explore/example_<index>.py`` (outside ``/repo``,
so the checkout stays clean; the check records that absolute path) and run from ``/repo`` with the
checkout first on ``PYTHONPATH``, which works both where the package is installed into the image's
venv and where it is not; ``python3`` because bare images have no ``python`` (a venv has both,
first on PATH). A console script is run as written. The calls are exactly what
``verifiers.sandbox.workspace.Workspace.run`` takes, so a replay is the same calls again; the
instruction is a template over the example, marked ``explore/template`` by the caller.
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Sequence

from trajforge.generators.explore.doc_examples import DocExample
from trajforge.schemas.explore_task import ReplayAction

SCRIPT_DIR = "/tmp/explore"
RUN_PYTHON = "cd /repo && PYTHONPATH=/repo${{PYTHONPATH:+:$PYTHONPATH}} python3 {script}"
ERROR_MARK = "Traceback (most recent call last)"


def script_path(index: int) -> str:
    return f"{SCRIPT_DIR}/example_{index}.py"


def template_actions(example: DocExample, index: int) -> list[ReplayAction]:
    if example.kind == "command":
        return [_call("bash", command=example.code)]
    path = script_path(index)
    return [
        _call("create", path=path, file_text=example.code),
        _call("bash", command=RUN_PYTHON.format(script=shlex.quote(path))),
    ]


def template_instruction(example: DocExample, observations: Sequence[str]) -> str:
    """What the run accomplishes, from the example alone; the observations only say whether it
    ended in an error, so the answer the task asks for is never written into the instruction."""
    if example.kind == "command":
        return f"Show the command-line help of `{example.title}`."
    where = example.source.rsplit(":", 1)[0]
    if example.kind == "doctest" and where.endswith(".py"):
        what = f"the doctest example of `{example.title}` ({where})"
    elif example.title and example.title != where:
        what = f'the usage example from {where} ("{example.title}")'
    else:
        what = f"the usage example from {where}"
    failed = bool(observations) and ERROR_MARK in observations[-1]
    report = "report the error it ends with" if failed else "report what it prints"
    return (
        f"Run {what} with the installed package and {report}.\n\n"
        f"```python\n{example.code.rstrip()}\n```"
    )


def _call(tool: str, **arguments: str) -> ReplayAction:
    return ReplayAction(tool, json.dumps(arguments, ensure_ascii=False))
