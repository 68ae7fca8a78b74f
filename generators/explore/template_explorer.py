"""The explorer used without a model endpoint: each doc example becomes a fixed run of tool calls.

A Python or doctest example is written to ``/tmp/explore/example_<index>.py`` (outside ``/repo``,
so the checkout stays clean; the check records that absolute path) and run from ``/repo`` with the
checkout first on ``PYTHONPATH``, which works both where the package is installed into the image's
venv and where it is not; ``python3`` because bare images have no ``python`` (a venv has both,
first on PATH). A console script is run as written. The calls are exactly what
``verifiers.sandbox.workspace.Workspace.run`` takes, so a replay is the same calls again.

The instruction (marked ``explore/template`` by the caller) is written from the prose around the
example (``doc_prose``), the names it uses and the values it passes in (``example_inputs``): the
code is what the trajectory writes, so the instruction never holds it. An example without prose
gets no instruction.
"""

from __future__ import annotations

import json
import shlex

from trajforge.generators.explore.doc_examples import DocExample
from trajforge.generators.explore.doc_prose import has_prose
from trajforge.generators.explore.example_inputs import example_parts
from trajforge.schemas.explore_task import ReplayAction

SCRIPT_DIR = "/tmp/explore"
RUN_PYTHON = "cd /repo && PYTHONPATH=/repo${{PYTHONPATH:+:$PYTHONPATH}} python3 {script}"


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


def template_instruction(example: DocExample, index: int) -> str | None:
    """What the run accomplishes, written from the docs' prose around the example, what the
    example uses and the values it passes in, never its code (the code is the trajectory) nor its
    output (the answer). None when the example has no prose to write from."""
    if example.kind == "command":
        return f"Show the command-line help of `{example.title}`."
    if not has_prose(example.prose):
        return None
    where = example.source.rsplit(":", 1)[0]
    if example.kind == "doctest" and where.endswith(".py"):
        head = f"Try `{example.title}` ({where}) as its docstring describes it:"
    elif example.title and example.title != where:
        head = f'Try what the "{example.title}" section of {where} describes:'
    else:
        head = f"Try what {where} describes:"
    quote = "\n".join(f"> {paragraph}" for paragraph in example.prose.splitlines())
    parts = example_parts(example.code)
    uses = ", ".join(_code(name) for name in parts.names) or "the package"
    given = f" with the inputs {', '.join(_code(v) for v in parts.inputs)}" if parts.inputs else ""
    return (
        f"{head}\n\n{quote}\n\n"
        f"Write a Python script at `{script_path(index)}` that uses {uses}{given}, run it from "
        "/repo with the installed package, and report what it prints."
    )


def _code(text: str) -> str:
    return f"`` {text} ``" if "`" in text else f"`{text}`"


def _call(tool: str, **arguments: str) -> ReplayAction:
    return ReplayAction(tool, json.dumps(arguments, ensure_ascii=False))
