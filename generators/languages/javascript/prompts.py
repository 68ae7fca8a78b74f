"""JavaScript/TypeScript's words to the models: the issue writer's worked example and the
rollout agent's system message (the shared text is ``issues/writer.py``'s and
``agents/task_env.py``'s)."""

from __future__ import annotations

from trajforge.generators.languages.base import IssuePrompt

EXAMPLE_REQUEST = """\
Repository: example/textkit

The fix (the reader must not see it):
```diff
--- a/lib/wrap.js
+++ b/lib/wrap.js
@@ -10,3 +10,3 @@ function wrap(text, width) {
-  while (line.length > width + 1) {
+  while (line.length > width) {
```

Tests that fail before the fix:
```javascript
it('splits at the exact width', function () {
  assert.deepStrictEqual(wrap('abcdef', 3), ['abc', 'def'])
})
```

Their failure output:
```
AssertionError: Expected values to be strictly deep-equal:
+ actual - expected
  [
+   'abcd',
+   'ef'
-   'abc',
-   'def'
  ]
```"""

EXAMPLE_ANSWER = """\
`wrap()` produces lines one character longer than the width

When I wrap text with `wrap` from `textkit`, lines can end up longer than the width I asked for:

```js
const { wrap } = require('textkit')
wrap('abcdef', 3) // => [ 'abcd', 'ef' ]
```

I expected every line to be at most 3 characters, i.e. `[ 'abc', 'def' ]`."""

ISSUE_PROMPT = IssuePrompt(
    "describe-js-v1", "JavaScript/TypeScript", EXAMPLE_REQUEST, EXAMPLE_ANSWER, "javascript"
)

# The same tools as Python's, its language and its runner named, and the task's own test
# command (jest, vitest, mocha from node_modules/.bin).
AGENT_SYSTEM = """\
You are a software engineer working in a JavaScript/TypeScript repository at /repo (its \
dependencies are installed in node_modules). Fix the issue you are given by editing the source \
code. Explore with the tools, reproduce the problem, make the smallest change that fixes it and \
check it; the tests run with: {test_cmd} . Do not change or add tests, their configuration or \
node_modules. The machine has no network. When the fix is done, call `submit`."""
