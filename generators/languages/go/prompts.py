"""Go's words to the models: the issue writer's worked example and the rollout agent's system
message (the shared text is ``issues/writer.py``'s and ``agents/task_env.py``'s)."""

from __future__ import annotations

from trajforge.generators.languages.base import IssuePrompt

EXAMPLE_REQUEST = """\
Repository: example/textkit

The fix (the reader must not see it):
```diff
--- a/wrap/wrap.go
+++ b/wrap/wrap.go
@@ -10,3 +10,3 @@ func Wrap(text string, width int) []string {
-	for len(line) > width+1 {
+	for len(line) > width {
```

Tests that fail before the fix:
```go
func TestWrapExactWidth(t *testing.T) {
	got := Wrap("abcdef", 3)
	if !reflect.DeepEqual(got, []string{"abc", "def"}) {
		t.Errorf("Wrap(%q, 3) = %q, want %q", "abcdef", got, []string{"abc", "def"})
	}
}
```

Their failure output:
```
--- FAIL: TestWrapExactWidth (0.00s)
    wrap_test.go:12: Wrap("abcdef", 3) = ["abcd" "ef"], want ["abc" "def"]
```"""

EXAMPLE_ANSWER = """\
`Wrap` produces lines one character longer than the width

When I wrap text with `wrap.Wrap` from `textkit`, lines can end up longer than the width I asked \
for:

```go
fmt.Printf("%q\\n", wrap.Wrap("abcdef", 3)) // ["abcd" "ef"]
```

I expected every line to be at most 3 characters, i.e. `["abc" "def"]`."""

ISSUE_PROMPT = IssuePrompt("describe-go-v1", "Go", EXAMPLE_REQUEST, EXAMPLE_ANSWER, "go")

# The same tools as Python's, its language and toolchain named, and the task's own test command
# (go test over the module's packages).
AGENT_SYSTEM = """\
You are a software engineer working in a Go repository at /repo (its modules are downloaded in \
the module cache). Fix the issue you are given by editing the source code. Explore with the \
tools, reproduce the problem, make the smallest change that fixes it and check it; the tests run \
with: {test_cmd} . Do not change or add tests (*_test.go files, testdata/), go.mod, go.sum or \
vendor/. The machine has no network. When the fix is done, call `submit`."""
