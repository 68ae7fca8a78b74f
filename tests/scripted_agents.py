"""Scripted models for the calc task (``add`` subtracts): a bug reporter and a fixer."""

from __future__ import annotations

from scripted_llm import tool_call, turn

GOOD_STATEMENT = (
    "`add` from calc gives the wrong answer\n\n"
    "When I call `calc.ops.add(2, 3)` I get `-1`, but adding two numbers should give `5`. "
    "It looks like the two arguments are combined the wrong way."
)


def fixer(new_body: str):
    """A model that reads the file, edits it, checks the result, and submits."""
    steps = [
        tool_call("view", path="calc/ops.py"),
        tool_call("str_replace", path="calc/ops.py", old_str="return a - b", new_str=new_body),
        tool_call("bash", command="python -c 'from calc.ops import add; print(add(2, 3))'"),
        tool_call("submit"),
    ]
    return lambda request: {"content": "Next step.", "tool_calls": [steps[turn(request)]]}


def reporter_and_fixer(request):
    """Writes the issue when offered no tools, fixes the bug when offered tools."""
    if request.get("tools"):
        return fixer("return a + b")(request)
    return {"content": GOOD_STATEMENT}
