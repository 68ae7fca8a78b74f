"""An exploration's instruction must not hand over its trajectory: the describe stage's leak rule.

Whoever wrote it (a template or a model), an instruction that quotes a line of the code the
actions write or run (``create``'s file, ``str_replace``'s new text, a ``bash`` command) makes the
trajectory a copy of the prompt; one that quotes a line of an output the check holds gives away
the answer. Both are found with ``generators.issues.leaks.quoted_line``, the rule issue text is
held to.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence

from trajforge.generators.issues.leaks import quoted_line
from trajforge.schemas.explore_task import ReplayAction

CODE_ARGUMENTS = {"create": "file_text", "str_replace": "new_str", "bash": "command"}


def instruction_leak(
    instruction: str,
    actions: Sequence[ReplayAction],
    observations: Sequence[str],
    checked: Mapping[str, str],
) -> tuple[str, str] | None:
    """(``leaks_code`` | ``leaks_output``, the quoted line) or None. ``observations[i]`` is what
    ``actions[i]`` returned; ``checked`` is the task's ``expected_outputs`` (step -> hash)."""
    if (line := quoted_line(instruction, _code_lines(actions))) is not None:
        return "leaks_code", line
    outputs = [
        observations[int(step)]
        for step in checked
        if step.isdigit() and int(step) < len(observations)
    ]
    lines = (line for output in outputs for line in output.splitlines())
    if (line := quoted_line(instruction, lines)) is not None:
        return "leaks_output", line
    return None


def _code_lines(actions: Sequence[ReplayAction]) -> Iterator[str]:
    for action in actions:
        key = CODE_ARGUMENTS.get(action.tool)
        try:
            arguments = json.loads(action.arguments)
        except json.JSONDecodeError:
            continue
        value = arguments.get(key) if key and isinstance(arguments, dict) else None
        if isinstance(value, str):
            yield from value.splitlines()
