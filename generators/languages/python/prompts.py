"""Python's words to the models: the issue writer's worked example and the rollout agent's
system message (the shared text is ``issues/writer.py``'s and ``agents/task_env.py``'s)."""

from __future__ import annotations

from trajforge.generators.languages.base import IssuePrompt

EXAMPLE_REQUEST = """\
Repository: example/textkit

The fix (the reader must not see it):
```diff
--- a/textkit/wrap.py
+++ b/textkit/wrap.py
@@ -10,3 +10,3 @@ def wrap(text, width):
-    while len(line) > width + 1:
+    while len(line) > width:
```

Tests that fail before the fix:
```python
def test_wrap_exact_width():
    assert wrap("abcdef", 3) == ["abc", "def"]
```

Their failure output:
```
E       AssertionError: assert ['abcd', 'ef'] == ['abc', 'def']
```"""

EXAMPLE_ANSWER = """\
`wrap()` produces lines one character longer than the width

When I wrap text with `textkit.wrap.wrap`, lines can end up longer than the width I asked for:

```python
>>> from textkit.wrap import wrap
>>> wrap("abcdef", 3)
['abcd', 'ef']
```

I expected every line to be at most 3 characters, i.e. `['abc', 'def']`."""

ISSUE_PROMPT = IssuePrompt("describe-v1", "Python", EXAMPLE_REQUEST, EXAMPLE_ANSWER, "python")

AGENT_SYSTEM = """\
You are a software engineer working in a Python repository at /repo. Fix the issue you are given \
by editing the source code. Explore with the tools, reproduce the problem, make the smallest \
change that fixes it and check it. Do not change or add tests. The machine has no network. When \
the fix is done, call `submit`."""
