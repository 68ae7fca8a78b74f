"""`trajforge describe` on a JavaScript task: its issue text comes from the JS test's source and
jest's failure section, the prompt says JavaScript, and a JS test's title counts as its name.

The task is written by the test as validate writes one (language javascript, ids
``file > describe > title``, the runner's base run with jest's log) over a real git repository;
describe runs through the real CLI, once with no endpoint (the template) and once against the
scripted model (the only stand-in).
"""

from __future__ import annotations

import subprocess
from pathlib import Path

from scripted_llm import ScriptedLLM
from trajforge.generators.issues.context import IssueContext, build_context
from trajforge.generators.issues.writer import request_messages
from trajforge.pipelines.cli import main as cli
from trajforge.schemas.records import content_id
from trajforge.schemas.storage import parquet_files, read_records, write_records
from trajforge.schemas.task_instance import TaskInstance, Validation
from trajforge.schemas.test_ids import short_test_name
from trajforge.schemas.test_run import TestRun, TestStatus

LIB = """\
function clamp (value, low, high) {
  if (value < low) return low
  if (value > high) return high
  return value
}

module.exports = { clamp }
"""
BUGGY = LIB.replace("value > high", "value >= high + 1")
TESTS = """\
const { clamp } = require('../lib/clamp')

describe('clamp', () => {
  it('keeps a value inside the range', () => {
    expect(clamp(5, 0, 10)).toBe(5)
  })

  it("caps a value above the range at 'high'", () => {
    expect(clamp(10.5, 0, 10)).toBe(10)
  })
})
"""
F2P = "test/clamp.test.js > clamp > caps a value above the range at 'high'"
P2P = "test/clamp.test.js > clamp > keeps a value inside the range"
JEST_LOG = """\
FAIL test/clamp.test.js
  clamp
    \u2713 keeps a value inside the range (2 ms)
    \u2715 caps a value above the range at 'high' (3 ms)

  \u25cf clamp \u203a caps a value above the range at 'high'

    expect(received).toBe(expected) // Object.is equality

    Expected: 10
    Received: 10.5

       7 |
       8 |   it("caps a value above the range at 'high'", () => {
    >  9 |     expect(clamp(10.5, 0, 10)).toBe(10)
         |                                ^
      10 |   })

      at Object.toBe (test/clamp.test.js:9:32)

Test Suites: 1 failed, 1 total
Tests:       1 failed, 1 passed, 2 total
"""


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@localhost", *args],
        cwd=repo, capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip


def _bug_and_fix(repo: Path, path: str, buggy: str) -> tuple[str, str]:
    """The bug as a diff from HEAD, and its undo (the fix), the tree left clean."""
    clean = (repo / path).read_text()
    (repo / path).write_text(buggy)
    bug, fix = (
        _git(repo, "diff", "--", path),
        _git(repo, "diff", "-R", "--src-prefix=b/", "--dst-prefix=a/", "--", path),
    )
    (repo / path).write_text(clean)
    return bug, fix


def _validated(tmp_path: Path) -> tuple[Path, TaskInstance]:
    """A clamp library in git, and a validate output holding its one injected-bug task."""
    repo = tmp_path / "clamp"
    (repo / "lib").mkdir(parents=True)
    (repo / "test").mkdir()
    (repo / "lib/clamp.js").write_text(LIB)
    (repo / "test/clamp.test.js").write_text(TESTS)
    (repo / "package.json").write_text('{"name": "clamp", "scripts": {"test": "jest"}}\n')
    _git(repo, "init", "-q")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-qm", "clamp")
    base = _git(repo, "rev-parse", "HEAD").strip()
    bug, fix = _bug_and_fix(repo, "lib/clamp.js", BUGGY)
    task = TaskInstance(
        instance_id="local__clamp-1", repo="local/clamp", base_commit=base, patch=fix,
        test_patch="", problem_statement="", hints_text="", created_at="2026-01-01T00:00:00Z",
        FAIL_TO_PASS=(F2P,), PASS_TO_PASS=(P2P,), environment_setup_commit=base,
        image_name="trajforge-env:clamp", test_cmd="node_modules/.bin/jest --json",
        origin="bug/swap_comparison", profile_id="p-clamp", candidate_id="c-clamp",
        source=str(repo), flaky_tests=(), difficulty=None, provenance={"validated_by": "t"},
        validation=Validation(1, 0, "a" * 64, "b" * 64, 1, 3), bug_patch=bug,
        language="javascript", test_runner="jest",
    )  # fmt: skip
    run = TestRun(
        run_id=content_id("c-clamp", "base"), candidate_id="c-clamp", profile_id="p-clamp",
        state="base", attempt=0, selection=(), exit_code=1, suite_ran=True, timed_out=False,
        duration_s=1.0, tests=(TestStatus(F2P, "FAILED"), TestStatus(P2P, "PASSED")),
        collection_errors=(), log_digest="d" * 64, log=JEST_LOG,
    )  # fmt: skip
    out = tmp_path / "validated"
    write_records(str(out / "tasks" / "part-0.parquet"), [task], TaskInstance.ARROW_SCHEMA)
    write_records(str(out / "runs" / "part-0.parquet"), [run], TestRun.ARROW_SCHEMA)
    return out, task


def _describe(tmp_path: Path, validated: Path, name: str, *extra: str) -> list[TaskInstance]:
    params = tmp_path / "params.yaml"
    params.write_text(f"cache_dir: {tmp_path / 'cache'}\n")
    out = tmp_path / name
    code = cli(["describe", "--input", str(validated), "--output", str(out),
                "--params", str(params), *extra])  # fmt: skip
    assert code == 0
    return [t for f in parquet_files(str(out / "tasks")) for t in read_records(TaskInstance, f)]


def test_a_js_test_title_is_its_name():
    assert short_test_name(F2P) == "caps a value above the range at 'high'"
    assert short_test_name("tests/t.py::TestX::test_a[1 > 0]") == "test_a"  # Python unchanged


def test_the_context_reads_the_js_test_and_jest_failure(tmp_path):
    validated, task = _validated(tmp_path)
    run = next(r for f in parquet_files(str(validated / "runs")) for r in read_records(TestRun, f))
    context = build_context(task, task.source, [run])
    assert context.language == "javascript"
    assert context.test_sources[F2P].startswith("it(\"caps a value above the range at 'high'\"")
    assert "expect(clamp(10.5, 0, 10)).toBe(10)" in context.test_sources[F2P]
    assert P2P not in context.test_sources  # only the failing tests are shown
    assert "Received: 10.5" in context.failures[F2P]
    assert "at Object.toBe" not in context.failures[F2P]  # stack frames left out
    assert {"clamp", "lib"} <= context.anchors
    assert not {"expect", "toBe", "describe"} & context.anchors  # the runner's words are no anchor
    assert not {"caps", "above", "range", "the"} & context.anchors  # nor the title's words


def test_describe_writes_a_js_task_from_its_evidence(tmp_path):
    validated, _ = _validated(tmp_path)
    [task] = _describe(tmp_path, validated, "template")
    text = task.problem_statement
    assert task.provenance["problem_statement"] == "template"
    assert "Expected: 10" in text and "Received: 10.5" in text
    assert "expect(clamp(10.5, 0, 10)).toBe(10)" in text  # jest's `>` line, its frame dropped
    assert "caps a value above the range" not in text  # the graded test is not named
    assert "value > high" not in text  # nor the fix quoted

    answers = iter(
        [
            # names the graded test: refused, the model tries again
            "clamp is wrong: the check caps a value above the range at 'high' fails for me "
            "when I call it with 10.5 and a range from 0 to 10, and I expected 10 instead.",
            "`clamp()` lets values just above the range through\n\nWhen I call "
            "`clamp(10.5, 0, 10)` from the `clamp` module I get `10.5` back. I expected the "
            "value to be capped at the upper bound, `10`.",
        ]
    )
    with ScriptedLLM(lambda request: {"content": next(answers)}) as llm:
        [task] = _describe(tmp_path, validated, "model", "--base-url", llm.base_url,
                           "--model", "scripted")  # fmt: skip
    system, _, _, request = (m["content"] for m in llm.requests[0]["messages"])
    assert "JavaScript/TypeScript projects" in system and "Python" not in system
    assert "```javascript\nit(\"caps a value above the range at 'high'\"" in request
    assert "Received: 10.5" in request
    assert len(llm.requests) == 2
    assert task.problem_statement.startswith("`clamp()` lets values just above the range")
    assert task.provenance["problem_statement"] == "llm:scripted"
    assert task.provenance["prompt"] == "describe-js-v1"
    python = IssueContext("acme/calc", "", {}, {}, frozenset())  # Python's prompt unchanged
    assert request_messages(python, 100)[0]["content"].startswith(
        "You write GitHub issues for Python projects"
    )
