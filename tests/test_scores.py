"""Scores, thresholds, the repo split and the SFT renderings on hand-made records."""

from __future__ import annotations

import json
import math
from dataclasses import replace

import pytest
from curated_factory import PATCH, TOOLS, make_task, make_trajectory
from trajforge.filters.task_scores import TASK_SCORE_RANGES, code_ratio, parse_patch, task_scores
from trajforge.filters.thresholds import check_threshold_names, rejection_reason
from trajforge.filters.trajectory_scores import (
    TRAJECTORY_SCORE_RANGES,
    looks_like_error,
    trajectory_scores,
)
from trajforge.generators.trajectories.sft import swesmith_messages, trl_messages
from trajforge.pipelines.release.split import assign_splits
from trajforge.schemas.errors import ParamsError
from trajforge.schemas.params import CurateParams
from trajforge.schemas.trajectory import FunctionCall, Message, ToolCall, Trajectory


def test_parse_patch_counts_lines_files_hunks_even_with_dash_content():
    stats = parse_patch(PATCH)
    assert (stats.lines, len(stats.files), stats.hunks) == (2, 1, 1)
    tricky = (
        "diff --git a/a.sql b/a.sql\n--- a/a.sql\n+++ b/a.sql\n@@ -1,2 +1,1 @@\n"
        "--- a SQL comment\n keep\n"
        "diff --git a/b.py b/b.py\nnew file mode 100644\n--- /dev/null\n+++ b/b.py\n"
        "@@ -0,0 +1,2 @@\n+x = 1\n++++ y\n"
    )
    stats = parse_patch(tricky)
    assert stats.removed == ["-- a SQL comment"]
    assert stats.added == ["x = 1", "+++ y"]
    assert (stats.lines, sorted(stats.files), stats.hunks) == (3, ["a.sql", "b.py"], 2)


def test_task_scores_on_a_hand_made_task():
    task = make_task("acme/alpha", 1)
    size = 0.5 * math.log1p(2) / math.log1p(200)
    assert task_scores(task) == {
        "patch_lines": 2.0,
        "patch_files": 1.0,
        "patch_hunks": 1.0,
        "fail_to_pass": 1.0,
        "pass_to_pass": 1.0,
        "statement_words": 10.0,
        "statement_leaks_patch": 0.0,
        "statement_leaks_test": 0.0,
        "statement_code_ratio": round(3 / 46, 6),  # `add` of 46 non-blank characters
        "difficulty": round(size, 6),
    }
    with_rate = task_scores(task, solve_rate=0.25)
    assert with_rate["solve_rate"] == 0.25
    assert with_rate["difficulty"] == round(0.3 * size + 0.7 * 0.75, 6)
    with pytest.raises(ValueError):
        task_scores(task, solve_rate=1.5)


def test_statement_leakage_and_code_ratio():
    quotes_fix = make_task(
        "acme/alpha", 1, problem_statement="Should be `return a + b  # fixed sum`"
    )
    assert task_scores(quotes_fix)["statement_leaks_patch"] == 1.0
    quotes_bug = make_task("acme/alpha", 1, problem_statement="Line `return a - b` is wrong")
    assert task_scores(quotes_bug)["statement_leaks_patch"] == 0.0  # the bug, not the fix
    names_test = make_task("acme/alpha", 1, problem_statement="see test_add_1 failing")
    assert task_scores(names_test)["statement_leaks_test"] == 1.0
    other_test = make_task("acme/alpha", 1, problem_statement="see test_add_10 failing")
    assert task_scores(other_test)["statement_leaks_test"] == 0.0
    assert code_ratio("```\nx = 1\n```") == 1.0
    assert code_ratio("Run `foo()` now") == pytest.approx(5 / 11)
    assert code_ratio("text\n    indented()\n") == pytest.approx(10 / 14)
    assert code_ratio("") == 0.0


def _call(call_id: str, name: str, arguments: str) -> ToolCall:
    return ToolCall(call_id, "function", FunctionCall(name, arguments))


def _trajectory(*messages: Message, resolved: bool | None = True) -> Trajectory:
    return Trajectory("t", "i", "m", messages, TOOLS, "", "submitted", resolved, None)


def test_trajectory_scores_on_a_hand_made_run():
    run = _trajectory(
        Message("user", "fix"),
        Message("assistant", "", (_call("c1", "bash", '{"command": "ls"}'),)),
        Message("tool", "a.py", tool_call_id="c1"),
        Message("assistant", "", (_call("c2", "bash", '{"command":"ls"}'),)),
        Message("tool", "bash: foo: command not found", tool_call_id="c2"),
        Message("assistant", "done"),
    )
    assert trajectory_scores(run) == {
        "resolved": 1.0,
        "steps": 3.0,
        "tool_calls": 2.0,
        "repeated_actions": 1.0,
        "repeated_action_rate": 0.5,
        "tool_error_rate": 0.5,
        "format_valid": 1.0,
        "length_chars": 72.0,
        "length_tokens": 18.0,
    }
    assert trajectory_scores(replace(run, resolved=None))["resolved"] == 0.0


@pytest.mark.parametrize(
    "messages",
    [
        (Message("assistant", "", (_call("c1", "bash", "not json"),)),
         Message("tool", "x", tool_call_id="c1")),
        (Message("assistant", "", (_call("c1", "bash", "{}"),)),),
        (Message("assistant", "", (_call("c1", "bash", "{}"),)),
         Message("tool", "x", tool_call_id="c9")),
        (Message("assistant", "", (_call("c1", "rm_rf", "{}"),)),
         Message("tool", "x", tool_call_id="c1")),
        (Message("assistant", "", (_call("c1", "bash", "[1]"),)),
         Message("tool", "x", tool_call_id="c1")),
    ],
    ids=["bad-json", "unanswered", "unknown-id", "tool-not-offered", "not-an-object"],
)  # fmt: skip
def test_format_validity_catches_broken_calls(messages):
    assert trajectory_scores(_trajectory(*messages))["format_valid"] == 0.0


def test_error_heuristics():
    for text in ("exit code: 1", "returncode=2", "Traceback (most recent call last):",
                 "Error: file not found", "sh: 1: foo: command not found"):  # fmt: skip
        assert looks_like_error(text), text
    for text in ("exit code: 0", "all 3 tests passed", "def error_handler():"):
        assert not looks_like_error(text), text


def test_every_score_is_inside_its_documented_range():
    task = make_task("acme/beta", 2)
    for scores, ranges in (
        (task_scores(task, solve_rate=0.0), TASK_SCORE_RANGES),
        (trajectory_scores(make_trajectory(task.instance_id, 0, True)), TRAJECTORY_SCORE_RANGES),
    ):
        assert set(scores) <= set(ranges)
        for name, value in scores.items():
            low, high = ranges[name]
            assert isinstance(value, float) and low <= value <= high, name
    assert not set(TASK_SCORE_RANGES) & set(TRAJECTORY_SCORE_RANGES)


def test_thresholds_keep_or_name_the_failing_score():
    scores = {"patch_lines": 5.0, "difficulty": 0.9}
    assert rejection_reason(scores, {"patch_lines": 1}, {"difficulty": 0.95}) is None
    assert rejection_reason(scores, {"patch_lines": 10}, {}) == "score_below:patch_lines"
    assert rejection_reason(scores, {}, {"difficulty": 0.5}) == "score_above:difficulty"
    assert rejection_reason(scores, {"steps": 3}, {}) is None  # a trajectory score: not ours
    check_threshold_names(CurateParams(min_scores={"steps": 2}, max_scores={"difficulty": 1}))
    with pytest.raises(ParamsError, match=r"curate\.min_scores\.stepz"):
        check_threshold_names(CurateParams(min_scores={"stepz": 2}))


def test_repo_split_is_deterministic_disjoint_and_gives_every_config_both_splits():
    tasks = {f"org/r{i}" for i in range(10)}
    for seed in range(20):
        sft = {f"org/r{seed % 10}", f"org/r{(seed + 3) % 10}"}
        split = assign_splits({"tasks": tasks, "sft": sft}, 0.1, seed)
        assert split == assign_splits({"sft": sft, "tasks": tasks}, 0.1, seed)
        assert set(split) == tasks
        assert {split[r] for r in sft} == {"train", "validation"}
        assert {split[r] for r in tasks} == {"train", "validation"}
    assert set(assign_splits({"tasks": {"a"}}, 0.5, 0).values()) == {"train"}
    assert set(assign_splits({"tasks": tasks}, 0.0, 0).values()) == {"train"}


def test_trl_messages_keep_openai_shape():
    messages = trl_messages(make_trajectory("i", 0, True))
    assert [m["role"] for m in messages] == [
        "system", "user", "assistant", "tool", "assistant", "tool", "assistant"
    ]  # fmt: skip
    assert all(
        set(m) == {"role", "content", "tool_calls", "tool_call_id", "name"} for m in messages
    )
    call = messages[2]["tool_calls"][0]
    assert call["function"] == {"name": "bash", "arguments": '{"command": "cat calc/ops.py"}'}
    assert messages[3]["tool_call_id"] == call["id"] and messages[0]["tool_calls"] is None


def test_swesmith_rendering_matches_the_xml_format():
    rendered = swesmith_messages(make_trajectory("i", 0, True))
    assert rendered == [
        {"role": "system", "content": "You are a helpful agent."},
        {"role": "user", "content": "Fix add."},
        {
            "role": "assistant",
            "content": "Let me look.\n\n<function=bash>\n"
            "<parameter=command>cat calc/ops.py</parameter>\n</function>",
        },
        {"role": "user", "content": "OBSERVATION:\ndef add(a, b):\n    return a - b\n"},
        {
            "role": "assistant",
            "content": "Fix the operator.\n\n<function=str_replace_editor>\n"
            "<parameter=command>str_replace</parameter>\n"
            "<parameter=path>calc/ops.py</parameter>\n"
            "<parameter=old_str>\nreturn a - b\n</parameter>\n"
            "<parameter=new_str>\nreturn a + b\n</parameter>\n</function>",
        },
        {"role": "user", "content": "OBSERVATION:\nThe file calc/ops.py has been edited."},
        {"role": "assistant", "content": "Done."},
    ]
    parallel = _trajectory(
        Message("assistant", "", (_call("a", "bash", json.dumps({"command": "ls",
                                  "timeout": 5})), _call("b", "bash", "{}"))),
        Message("tool", "", tool_call_id="a"),
        Message("tool", "OBSERVATION:\nx", tool_call_id="b"),
        Message("assistant", "Done."),
    )  # fmt: skip
    assert swesmith_messages(parallel, system_prompt="S") == [
        {
            "role": "assistant",
            "content": "\n\n<function=bash>\n<parameter=command>ls</parameter>\n"
            "<parameter=timeout>5</parameter>\n</function>\n<function=bash>\n</function>",
        },
        {
            "role": "user",
            "content": "Your command ran successfully and did not produce any "
            "output.\n\nOBSERVATION:\nx",
        },
        {"role": "assistant", "content": "Done."},
    ]
