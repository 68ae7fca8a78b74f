"""Template instructions that do not hand over the answer: written from the docs' prose around an
example and the example's inputs, never its code; any explore instruction that quotes its
trajectory's code or checked output is dropped, counted (real git repositories, no container)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from repo_factory import RepoBuilder
from trajforge.generators.explore.doc_blocks import markdown_blocks, rst_blocks
from trajforge.generators.explore.doc_examples import DocExample, find_examples
from trajforge.generators.explore.doc_prose import MAX_CHARS, clean_prose, docstring_prose
from trajforge.generators.explore.example_inputs import ExampleParts, example_parts
from trajforge.generators.explore.instruction_check import instruction_leak
from trajforge.generators.explore.labeled_runs import ExplorationSite, Labeled, explore_records
from trajforge.generators.explore.template_explorer import template_actions, template_instruction
from trajforge.generators.issues.leaks import quoted_line, statement_leak
from trajforge.pipelines.stages.explore import ExploreRepoFn
from trajforge.schemas.diff import parse_patch
from trajforge.schemas.explore_task import ReplayAction
from trajforge.schemas.params import Params
from trajforge.schemas.rejection import Rejection
from trajforge.verifiers.sandbox.workspace import StepOutcome

README = """\
# shapes

[![build](https://ci.invalid/badge.svg)](https://ci.invalid) Geometry helpers for **plain**
Python numbers, see [the docs](https://docs.invalid).

## Areas

Compute the area of a rectangle from its width and height with `area`:

```python
from shapes.core import area
print(area(3, 4))
```

```python
from shapes.core import area
print(area(width=2, height=5))
```

The second call prints 10, as you would expect from these numbers.

## Scaling

```python
from shapes.core import scale
print(scale([1, 2, 3], factor=2))
```

## Perimeter

Call perimeter(2, 3) to get the perimeter, as below:

```python
from shapes.core import perimeter
perimeter(2, 3)
```
"""

CORE = '''\
"""Small geometry helpers."""


def area(width, height):
    """Multiply *width* by ``height`` to get the area of a rectangle.

    Negative sides are taken as they are::

        >>> area(2, -3)
        -6
        >>> area(0, 5)
        0

    The result is always a number.
    """
    return width * height


def scale(values, factor):
    """
    >>> scale([1, 2], factor=3)
    [3, 6]
    """
    return [v * factor for v in values]


def perimeter(width, height):
    return 2 * (width + height)
'''

GUIDE = """\
Guide
=====

.. note::

   Read the README first.

Counting
--------

Use :func:`~shapes.core.area` on ``rows`` and ``cols`` (see `the API <https://x.invalid>`_)::

   >>> from shapes.core import area
   >>> area(2, 2)
   4

.. autofunction:: shapes.core.scale
   :members: a, b

For example:

.. code-block:: python

   from shapes.core import scale
   print(scale([2], 2))
"""


@pytest.fixture(scope="module")
def examples(tmp_path_factory: pytest.TempPathFactory) -> list[DocExample]:
    builder = RepoBuilder(tmp_path_factory.mktemp("instructions") / "shapes")
    sha = builder.commit(
        "shapes with docs",
        {
            "README.md": README,
            "docs/guide.rst": GUIDE,
            "shapes/__init__.py": "",
            "shapes/core.py": CORE,
        },
    )
    return find_examples(str(builder.path), sha)


def test_each_example_keeps_the_prose_before_it(examples):
    prose = {e.source: e.prose for e in examples}
    assert list(prose) == [
        "README.md:11",
        "README.md:16",
        "README.md:25",
        "README.md:34",
        "docs/guide.rst:13",
        "docs/guide.rst:24",
        "shapes/core.py:9",
        "shapes/core.py:21",
    ]
    area = "Compute the area of a rectangle from its width and height with `area`:"
    # a block right after another gets its section's opening text; the text after a block
    # ("The second call prints 10") is never used
    assert prose["README.md:11"] == prose["README.md:16"] == area
    assert prose["README.md:25"] == ""  # "Scaling" has no text at all
    assert prose["README.md:34"] == "Call perimeter(2, 3) to get the perimeter, as below:"
    # rst: roles, inline literals and links made plain, "::" a colon, the note and the
    # directive options left out; "For example:" is too little, so the section's text is used
    counting = "Use `shapes.core.area` on `rows` and `cols` (see the API):"
    assert prose["docs/guide.rst:13"] == prose["docs/guide.rst:24"] == counting
    # a docstring: its text before the first example, never the expected output
    assert prose["shapes/core.py:9"] == (
        "Multiply width by `height` to get the area of a rectangle.\n"
        "Negative sides are taken as they are:"
    )
    assert prose["shapes/core.py:21"] == ""  # only an example


def test_template_instruction_is_prose_names_and_inputs_never_code(examples):
    by_source = {e.source: (i, e) for i, e in enumerate(examples)}
    index, example = by_source["README.md:16"]
    instruction = template_instruction(example, index)
    assert instruction == (
        'Try what the "Areas" section of README.md describes:\n\n'
        "> Compute the area of a rectangle from its width and height with `area`:\n\n"
        f"Write a Python script at `/tmp/explore/example_{index}.py` that uses "
        "`shapes.core.area` with the inputs `width=2`, `height=5`, run it from /repo with the "
        "installed package, and report what it prints."
    )
    index, example = by_source["shapes/core.py:9"]
    instruction = template_instruction(example, index)
    assert instruction is not None
    assert instruction.startswith("Try `shapes.core.area` (shapes/core.py) as its docstring")
    assert "uses `shapes.core.area` with the inputs `2`, `-3`, `0`, `5`, run it" in instruction
    assert "-6" not in instruction  # the expected output is the answer
    written = 0
    for index, example in enumerate(examples):
        instruction = template_instruction(example, index)
        if instruction is None:
            continue
        written += 1
        assert "```" not in instruction and "import" not in instruction
        actions = template_actions(example, index)
        leak = instruction_leak(instruction, actions, [], {})
        if example.source == "README.md:34":  # its own prose quotes its only call
            assert leak == ("leaks_code", "perimeter(2, 3)")
        else:
            assert leak is None, (example.source, leak)
    assert written == 6  # README "Scaling" and the bare `scale` docstring have no prose


def test_an_example_without_prose_gets_no_instruction(examples):
    bare = [e for e in examples if not e.prose]
    assert [e.source for e in bare] == ["README.md:25", "shapes/core.py:21"]
    assert all(template_instruction(e, 0) is None for e in bare)
    for prose in ("", "For example:", "[![b](http://x)](http://y)", ".. note::", "`x`"):
        assert (
            template_instruction(DocExample("python", "README.md:1", "X", "x = 1", "", prose), 0)
            is None
        )
    command = DocExample("command", "pyproject.toml:6", "shapes", "shapes --help")
    assert template_instruction(command, 0) == "Show the command-line help of `shapes`."


def test_prose_cleaning_and_cap():
    lines = [
        "Some **bold**, *emphasis*, a :class:`dict`, a {func}`attrs.define` and ``__init__``.",
        "",
        "* first item of a list",
        "* second item",
        "",
        "    indented code right after a blank line",
        "| a | table |",
        "[ref]: https://x.invalid",
        "",
        "Ends with a literal block::",
        "",
        "    not prose at all",
        "",
        "Back to prose here.",
    ]
    assert clean_prose(lines) == (
        "Some bold, emphasis, a `dict`, a `attrs.define` and `__init__`.\n"
        "* first item of a list\n* second item\n"
        "Ends with a literal block:\nBack to prose here."
    )
    long = clean_prose([f"Sentence number {n} says something." for n in range(60)])
    assert len(long) <= MAX_CHARS and long.endswith("says something.")
    assert docstring_prose(">>> f(1)\n2\n\nThe call returns twice its input.") == (
        "The call returns twice its input."
    )
    assert docstring_prose("Bad prompt\n  >>> x\n >>> y") in ("", "Bad prompt")  # never raises


def test_rst_and_markdown_headings_reset_the_prose():
    markdown = "Intro words before any heading.\n\nTitle\n-----\n\n```python\nx = 1\n```\n"
    assert [b.prose for b in markdown_blocks("README.md", markdown)] == [""]
    rst = "Title\n=====\n\nSome prose words here::\n\n   >>> 1\n   1\n"
    assert [b.prose for b in rst_blocks("docs/x.rst", rst)] == ["Some prose words here:"]


def test_example_parts_names_and_inputs_not_outputs():
    code = (
        "from shapes.core import *\n"
        "import shapes.extra as extra\n"
        "from pprint import pprint\n"
        "\n"
        "\n"
        "def _show(value):\n"
        "    if value is not None:\n"
        "        print(repr(value))\n"
        "\n"
        "\n"
        "box = Box(width=2, tags=['a', 'b'])\n"
        "box['k'] = (1, -2)\n"
        "_show(area(box, [2] * 3))\n"
        "_show('shown, not an input')\n"
        "print('printed, not an input')\n"
        "pprint(extra.mirror(box))\n"
        "_show(shapes.core.UNIT)\n"
        "_show(len(f'{box}'))\n"
    )
    parts = example_parts(code)
    assert parts.names == (
        "shapes.core.Box",
        "shapes.core.area",
        "shapes.extra.mirror",
        "shapes.core.UNIT",
    )
    assert parts.inputs == ("width=2", "tags=['a', 'b']", "'k'", "(1, -2)", "[2] * 3")
    for broken in ("def (:\n", "", "x\x00 = 1"):  # no syntax tree: nothing named, never a crash
        assert example_parts(broken) == ExampleParts((), ())


def test_instruction_leak_code_and_checked_output_only():
    create = ReplayAction(
        "create", json.dumps({"path": "/tmp/explore/a.py", "file_text": "x = area(2, 3)\nok\n"})
    )
    run = ReplayAction("bash", json.dumps({"command": "python3 /tmp/explore/a.py"}))
    observations = ["wrote /tmp/explore/a.py (2 lines)", "the area is 6 square units\n"]
    assert instruction_leak("Compute an area.", [create, run], observations, {"1": "h"}) is None
    quoting = "Run `x = area(2, 3)` and print it."
    assert instruction_leak(quoting, [create, run], observations, {"1": "h"}) == (
        "leaks_code",
        "x = area(2, 3)",
    )
    command = "Then python3 /tmp/explore/a.py please."
    assert instruction_leak(command, [create, run], observations, {}) == (
        "leaks_code",
        "python3 /tmp/explore/a.py",
    )
    answer = "Check that it says the area is 6 square units."
    assert instruction_leak(answer, [create, run], observations, {"1": "h"}) == (
        "leaks_output",
        "the area is 6 square units",
    )
    assert instruction_leak(answer, [create, run], observations, {}) is None  # not checked
    assert instruction_leak("Just ok.", [create], [], {}) is None  # short lines never count
    broken = [ReplayAction("bash", "not json"), ReplayAction("view", '{"path": "x"}')]
    assert (
        instruction_leak("Anything at all.", broken, ["x"], {"0": "h", "9": "h", "a": "h"}) is None
    )


def test_shared_leak_rule_for_statements():
    patch = (
        "diff --git a/m.py b/m.py\n--- a/m.py\n+++ b/m.py\n"
        "@@ -1,2 +1,2 @@\n def f(a, b):\n-    return a - b\n+    return a + b\n"
    )
    stats = parse_patch(patch)
    fail_to_pass = ("tests/test_m.py::test_f",)
    assert statement_leak("f subtracts instead of adding.", stats, fail_to_pass) is None
    assert statement_leak("It should `return a + b`.", stats, fail_to_pass) == "leaks_patch"
    assert statement_leak("The line return a - b is wrong.", stats, fail_to_pass) == "leaks_patch"
    assert statement_leak("See test_f fail.", stats, fail_to_pass) == "leaks_test"
    assert quoted_line("says return x here", ["return x"]) is None  # under MIN_LEAK_CHARS


def _explore_fn() -> ExploreRepoFn:
    return ExploreRepoFn(Params(cache_dir="/tmp/trajforge-unused-cache"))


SITE = ExplorationSite("local/shapes", "/repos/shapes", "a" * 40, "img", "p1")


def test_stage_rejects_no_prose_before_running(examples):
    bare = [e for e in examples if not e.prose]
    out = list(_explore_fn()._template_runs(SITE, bare, b""))  # no sandbox: nothing may run
    assert [(r.reason, r.input) for r in out if isinstance(r, Rejection)] == [
        ("no_prose", f"local/shapes@{'a' * 12}:README.md:25"),
        ("no_prose", f"local/shapes@{'a' * 12}:shapes/core.py:21"),
    ]
    assert len(out) == 2


def test_stage_drops_an_instruction_quoting_its_trajectory_before_replay(tmp_path: Path):
    code = "from shapes.core import area\nprint(area(3, 4))\n"
    actions = [
        ReplayAction(
            "create", json.dumps({"path": "/tmp/explore/example_0.py", "file_text": code})
        ),
        ReplayAction("bash", json.dumps({"command": "python3 /tmp/explore/example_0.py"})),
    ]
    outcomes = [
        StepOutcome("wrote /tmp/explore/example_0.py (2 lines)", 0, ()),
        StepOutcome("12\n", 0, ()),
    ]
    state = ({"/tmp/explore/example_0.py": "f" * 64}, {"1": "e" * 64})
    fn = _explore_fn()
    for origin, instruction in (
        ("explore/template", f"Run this:\n\n```python\n{code}```"),  # the old template
        ("explore/llm", "Write `print(area(3, 4))` in a script and run it."),
    ):
        label = Labeled(instruction, 4.0, origin, "m", {})
        labeled = explore_records(SITE, actions, outcomes, state, label)
        (out,) = list(fn._verified(SITE, b"", labeled))  # before any sandbox is needed
        rejection = out.value
        assert isinstance(rejection, Rejection) and rejection.reason == "leaks_code"
        assert "the instruction quotes" in rejection.detail
