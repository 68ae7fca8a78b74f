"""Import SWE-agent, mini-swe-agent and nebius trajectories; every message survives exactly.

The fixtures are written here in each tool's own shape (SWE-agent's ``get_trajectory_data``,
mini-swe-agent's ``DefaultAgent.serialize``, the nebius/SWE-agent-trajectories columns, SWE-bench's
``report.json``), then read back from the Parquet the command writes and compared field by field
with what was written.
"""

from __future__ import annotations

import argparse
import hashlib
import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from conftest import run_cli
from trajforge.generators.trajectories.importer import READERS, apply_report
from trajforge.generators.trajectories.sft import swesmith_messages, trl_messages
from trajforge.pipelines.commands import import_trajectories as command
from trajforge.schemas.records import content_id
from trajforge.schemas.rejection import Rejection
from trajforge.schemas.storage import read_records
from trajforge.schemas.trajectory import Message, Trajectory

PATCH = (
    "diff --git a/calc.py b/calc.py\n--- a/calc.py\n+++ b/calc.py\n@@ -1,2 +1,2 @@\n"
    " def add(a, b):\n-    return a - b\n+    return a + b\n"
)
ISSUE = "add() subtracts: `add(2, 2)` returns 0 \u2014 caf\u00e9 users are upset"


# --- fixtures, in each tool's own format -----------------------------------------------------


def swe_agent_0x() -> dict[str, Any]:
    """SWE-agent 0.x: text actions in the assistant content, a demonstration, no tool calls."""
    thought = "Let's look at calc.py first."
    response = f"{thought}\n\n```\nopen calc.py\n```"
    edit = "The operator is wrong.\n\n```\nedit 2:2\n    return a + b\nend_of_edit\n```"
    observation = "[File: /calc/calc.py (2 lines total)]\n1:def add(a, b):\n2:    return a - b"
    history = [
        {
            "role": "system",
            "content": "SETTING: You are an autonomous programmer.",
            "agent": "primary",
        },
        {
            "agent": "primary",
            "content": "Here is a demonstration of how to accomplish this task.\n--- DEMO",
            "is_demo": True,
            "role": "user",
        },
        {
            "role": "user",
            "content": f"ISSUE:\n{ISSUE}\n\n(Open file: n/a)\nbash-$",
            "agent": "primary",
        },
        {
            "role": "assistant",
            "content": response,
            "thought": thought,
            "action": "open calc.py\n",
            "agent": "primary",
        },
        {
            "role": "user",
            "content": f"{observation}\n(Open file: /calc/calc.py)\nbash-$",
            "agent": "primary",
        },
        {"role": "assistant", "content": edit, "thought": "", "action": "edit", "agent": "primary"},
        {"role": "user", "content": "File updated.\r\n\tbash-$ ", "agent": "primary"},
        {
            "role": "assistant",
            "content": "```\nsubmit\n```",
            "action": "submit\n",
            "agent": "primary",
        },
    ]
    steps = [
        {
            "action": "open calc.py\n",
            "observation": observation,
            "response": response,
            "state": '{"open_file": "/calc/calc.py", "working_dir": "/calc"}\n',
            "thought": thought,
        }
    ]
    info = {
        "exit_status": "submitted",
        "submission": PATCH,
        "model_stats": {
            "total_cost": 0.53839,
            "instance_cost": 0.53839,
            "tokens_sent": 52861,
            "tokens_received": 326,
            "api_calls": 3,
        },
    }
    return {"environment": "swe_main", "trajectory": steps, "history": history, "info": info}


def _call(call_id: str, name: str, arguments: str) -> dict[str, Any]:
    return {"function": {"arguments": arguments, "name": name}, "id": call_id, "type": "function"}


VIEW_ARGS = '{ "command":"view","path":"/testbed/calc.py" , "view_range":[1, 2]}'
EDIT_ARGS = json.dumps(
    {
        "command": "str_replace",
        "path": "/testbed/calc.py",
        "old_str": "    return a - b",
        "new_str": "    return a + b  # caf\u00e9",
    },
    ensure_ascii=False,
)


def swe_agent_1x() -> dict[str, Any]:
    """SWE-agent 1.x function calling: tool_calls, tool_call_ids, list content, thinking blocks."""
    history: list[dict[str, Any]] = [
        {
            "role": "system",
            "content": "You are a helpful assistant.",
            "agent": "main",
            "message_type": "system_prompt",
        },
        {
            "role": "user",
            "content": [
                {
                    "type": "text",
                    "text": f"<pr_description>\n{ISSUE}\n</pr_description>",
                    "cache_control": {"type": "ephemeral"},
                }
            ],
            "agent": "main",
            "message_type": "observation",
        },
        {
            "role": "assistant",
            "content": "Let me view the file.",
            "thought": "Let me view the file.",
            "action": "str_replace_editor view /testbed/calc.py  --view_range 1 2",
            "agent": "main",
            "tool_calls": [_call("call_view", "str_replace_editor", VIEW_ARGS)],
            "message_type": "action",
            "thinking_blocks": [{"type": "thinking", "thinking": "hmm", "signature": "x"}],
        },
        {
            "role": "tool",
            "content": "Here's the result of running `cat -n` on /testbed/calc.py:\n"
            "     1\tdef add(a, b):\n     2\t    return a - b\n",
            "agent": "main",
            "message_type": "observation",
            "tool_call_ids": ["call_view"],
        },
        {
            "role": "assistant",
            "content": "",
            "thought": "",
            "action": "str_replace_editor str_replace ...",
            "agent": "main",
            "tool_calls": [_call("call_edit", "str_replace_editor", EDIT_ARGS)],
            "message_type": "action",
        },
        {
            "role": "tool",
            "content": "The file /testbed/calc.py has been edited.",
            "agent": "main",
            "message_type": "observation",
            "tool_call_ids": ["call_edit"],
        },
        {
            "role": "assistant",
            "content": "Done.",
            "thought": "Done.",
            "action": "submit",
            "agent": "main",
            "tool_calls": [_call("call_submit", "submit", "{}")],
            "message_type": "action",
        },
    ]
    replay_config = {
        "agent": {"model": {"name": "claude-3-7-sonnet-20250219", "per_instance_cost_limit": 3.0}},
        "problem_statement": {"type": "swe_bench", "id": "local__calc-1", "text": ISSUE},
    }
    steps = [
        {
            "action": "str_replace_editor view /testbed/calc.py  --view_range 1 2",
            "observation": "...",
            "response": "Let me view the file.",
            "thought": "Let me view the file.",
            "execution_time": 0.12,
            "state": {"working_dir": "/testbed"},
            "query": [{"role": "system", "content": "You are a helpful assistant."}],
            "extra_info": {},
            "tool_calls": history[2]["tool_calls"],
            "tool_call_ids": ["call_view"],
        }
    ]
    info = {
        "swe_agent_version": "1.1.0",
        "exit_status": "submitted",
        "submission": PATCH,
        "model_stats": {
            "instance_cost": 0.1,
            "tokens_sent": 9000,
            "tokens_received": 400,
            "api_calls": 3,
        },
    }
    return {
        "trajectory": steps,
        "history": history,
        "info": info,
        "replay_config": json.dumps(replay_config),
        "environment": "main",
    }


def mini_swe_agent() -> dict[str, Any]:
    """mini-swe-agent v2 (``mini-swe-agent-1.1``), tool calling, ending in a ``role: exit``."""

    def reply(
        content: str | None, calls: list[dict[str, Any]], prompt: int, completion: int
    ) -> dict[str, Any]:
        usage = {
            "prompt_tokens": prompt,
            "completion_tokens": completion,
            "total_tokens": prompt + completion,
        }
        return {
            "role": "assistant",
            "content": content,
            "tool_calls": calls,
            "function_call": None,
            "extra": {
                "actions": [],
                "response": {"id": "r", "usage": usage},
                "cost": 0.01,
                "timestamp": 1.0,
            },
        }

    def output(call_id: str, text: str) -> dict[str, Any]:
        return {
            "content": text,
            "extra": {"raw_output": text, "returncode": 0},
            "tool_call_id": call_id,
            "role": "tool",
        }

    messages = [
        {
            "role": "system",
            "content": "You are a helpful assistant that can interact with a computer.",
        },
        {"role": "user", "content": f"Please solve this issue: {ISSUE}"},
        reply(
            "Look first.",
            [
                _call("call_1", "bash", '{"command": "cat calc.py"}'),
                _call("call_2", "bash", '{"command":"ls -a"}'),
            ],
            100,
            20,
        ),
        output(
            "call_1",
            "<returncode>0</returncode>\n<output>\ndef add(a, b):\n    return a - b\n</output>",
        ),
        output("call_2", "<returncode>0</returncode>\n<output>\n.\n..\ncalc.py\n</output>"),
        reply(
            None,
            [_call("call_3", "bash", '{"command": "sed -i \'s/a - b/a + b/\' calc.py"}')],
            150,
            30,
        ),
        output("call_3", "<returncode>0</returncode>\n<output>\n</output>"),
        reply(
            "Submit.",
            [
                _call(
                    "call_4",
                    "bash",
                    '{"command": "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT && git diff"}',
                )
            ],
            200,
            10,
        ),
        {
            "role": "exit",
            "content": PATCH,
            "extra": {"exit_status": "Submitted", "submission": PATCH},
        },
    ]
    info = {
        "model_stats": {"instance_cost": 0.03, "api_calls": 3},
        "config": {
            "agent": {"step_limit": 250},
            "agent_type": "minisweagent.agents.default.DefaultAgent",
            "model": {"model_name": "anthropic/claude-sonnet-4-5-20250929", "model_kwargs": {}},
            "model_type": "minisweagent.models.litellm_model.LitellmModel",
        },
        "mini_version": "2.4.6",
        "exit_status": "Submitted",
        "submission": PATCH,
    }
    return {
        "info": info,
        "messages": messages,
        "trajectory_format": "mini-swe-agent-1.1",
        "instance_id": "local__calc-2",
    }


def nebius_rows() -> list[dict[str, Any]]:
    """Rows with nebius/SWE-agent-trajectories' columns: roles system/user/ai, ``target``."""

    def turn(
        role: str, text: str | None, system_prompt: str | None = None, mask: bool = False
    ) -> dict[str, Any]:
        return {
            "cutoff_date": None,
            "mask": mask,
            "role": role,
            "system_prompt": system_prompt,
            "text": text,
        }

    rows = []
    for n, (target, status) in enumerate([(True, "submitted"), (False, "exit_cost")]):
        rows.append(
            {
                "instance_id": "local__calc-3",
                "model_name": "swe-agent-llama-70b",
                "target": target,
                "trajectory": [
                    turn("system", None, "SETTING: You are an autonomous programmer."),
                    turn("user", f"ISSUE:\n{ISSUE}\n(Open file: n/a)\nbash-$"),
                    turn("ai", f"Attempt {n}: look.\n\n```\nopen calc.py\n```", mask=True),
                    turn("user", "[File: /calc/calc.py (2 lines total)]\n\r\n"),
                    turn("ai", "```\nsubmit\n```", mask=True),
                ],
                "exit_status": status,
                "generated_patch": PATCH if target else "",
                "eval_logs": "Will execute following command for apply_patch: ...",
            }
        )
    return rows


def report_json() -> dict[str, Any]:
    """SWE-bench's per-instance report.json (``get_eval_report`` with tests_status)."""
    return {
        "local__calc-1": {
            "patch_is_None": False,
            "patch_exists": True,
            "patch_successfully_applied": True,
            "resolved": True,
            "tests_status": {
                "FAIL_TO_PASS": {"success": ["tests/test_calc.py::test_add"], "failure": []},
                "PASS_TO_PASS": {
                    "success": ["tests/test_calc.py::test_sub"],
                    "failure": ["tests/test_calc.py::test_mul"],
                },
                "FAIL_TO_FAIL": {"success": [], "failure": []},
                "PASS_TO_FAIL": {"success": [], "failure": []},
            },
        }
    }


# --- helpers ----------------------------------------------------------------------------------


def _args(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="trajforge")
    command.add_arguments(parser.add_subparsers(dest="command").add_parser(command.NAME))
    return parser.parse_args([command.NAME, *argv])


def _import(*argv: str) -> int:
    return command.run(_args(*argv), [])


def _write(path: Path, value: Any) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(value, indent=2, ensure_ascii=False))
    return path


def _trajectories(out: Path) -> list[Trajectory]:
    assert list((out / "trajectories").glob("part-*.parquet"))
    return read_records(Trajectory, str(out / "trajectories"))


def _rejections(out: Path) -> list[Rejection]:
    assert list((out / "rejections").glob("part-*.parquet"))
    return read_records(Rejection, str(out / "rejections"))


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _text(content: Any) -> str:
    if isinstance(content, list):
        return "".join(part["text"] for part in content)
    return content or ""


def assert_same_messages(got: tuple[Message, ...], want: list[dict[str, Any]]) -> None:
    """Field by field: role, text, every tool call, the id a tool result answers."""
    assert len(got) == len(want)
    for message, raw in zip(got, want, strict=True):
        assert message.role == {"ai": "assistant"}.get(raw["role"], raw["role"])
        text = raw.get("content", raw.get("text"))
        if text is None and raw["role"] == "system":
            text = raw.get("system_prompt")
        assert message.content == _text(text)
        calls = raw.get("tool_calls") or []
        assert len(message.tool_calls) == len(calls)
        for call, raw_call in zip(message.tool_calls, calls, strict=True):
            assert call.id == raw_call["id"]
            assert call.type == raw_call["type"]
            assert call.function.name == raw_call["function"]["name"]
            assert call.function.arguments == raw_call["function"]["arguments"]  # exact text
        assert message.tool_call_id == (
            raw.get("tool_call_id") or (raw.get("tool_call_ids") or [None])[0]
        )
        assert message.name == raw.get("name")


# --- tests ------------------------------------------------------------------------------------


def test_swe_agent_0x_text_actions_survive_exactly_without_demonstrations(tmp_path):
    doc = swe_agent_0x()
    source = _write(tmp_path / "in" / "local__calc-0.traj", doc)
    assert _import("--format", "swe-agent", str(source), "--output", str(tmp_path / "out")) == 0
    [t] = _trajectories(tmp_path / "out")
    assert_same_messages(t.messages, [m for m in doc["history"] if not m.get("is_demo")])
    assert all(not m.tool_calls for m in t.messages)
    assert "```\nopen calc.py\n```" in t.messages[2].content  # the action stays in the text
    assert t.instance_id == "local__calc-0"
    assert t.trajectory_id == content_id("swe-agent", "local__calc-0", _sha(source))
    assert (t.model, t.tools, t.model_patch, t.exit_status) == ("unknown", "[]", PATCH, "submitted")
    assert t.usage == {"prompt_tokens": 52861, "completion_tokens": 326, "api_calls": 3}
    assert (t.resolved, t.reward, t.test_report, t.origin) == (None, None, {}, "import/swe-agent")
    assert _rejections(tmp_path / "out") == []


def test_swe_agent_1x_tool_calls_survive_exactly(tmp_path):
    doc = swe_agent_1x()
    source = _write(tmp_path / "run" / "local__calc-1" / "local__calc-1.traj", doc)
    assert (
        _import("--format", "swe-agent", str(tmp_path / "run"), "--output", str(tmp_path / "out"))
        == 0
    )
    [t] = _trajectories(tmp_path / "out")
    assert_same_messages(t.messages, doc["history"])
    assert [m.role for m in t.messages] == [
        "system",
        "user",
        "assistant",
        "tool",
        "assistant",
        "tool",
        "assistant",
    ]
    assert t.messages[4].tool_calls[0].function.arguments == EDIT_ARGS
    assert t.messages[2].tool_calls[0].function.arguments == VIEW_ARGS  # odd spacing kept
    assert t.messages[3].tool_call_id == "call_view"
    assert t.model == "claude-3-7-sonnet-20250219"
    assert t.instance_id == "local__calc-1"
    assert t.trajectory_id == content_id("swe-agent", "local__calc-1", _sha(source))
    assert t.usage == {"prompt_tokens": 9000, "completion_tokens": 400, "api_calls": 3}


def test_swe_agent_retry_loop_file_gives_one_trajectory_per_attempt(tmp_path):
    first, second = swe_agent_0x(), swe_agent_1x()
    _write(tmp_path / "x.traj", {"attempts": [first, second]})
    assert (
        _import(
            "--format", "swe-agent", str(tmp_path / "x.traj"), "--output", str(tmp_path / "out")
        )
        == 0
    )
    got = _trajectories(tmp_path / "out")
    assert len(got) == 2 and len({t.trajectory_id for t in got}) == 2
    assert_same_messages(got[0].messages, [m for m in first["history"] if not m.get("is_demo")])
    assert_same_messages(got[1].messages, second["history"])


def test_mini_swe_agent_messages_survive_and_exit_message_is_left_out(tmp_path):
    doc = mini_swe_agent()
    source = _write(tmp_path / "local__calc-2" / "local__calc-2.traj.json", doc)
    assert (
        _import("--format", "mini-swe-agent", str(tmp_path), "--output", str(tmp_path / "out")) == 0
    )
    [t] = _trajectories(tmp_path / "out")
    assert_same_messages(t.messages, doc["messages"][:-1])
    assert t.messages[5].content == ""  # content None (tool call only) reads as ""
    assert sum(len(m.tool_calls) for m in t.messages) == 4
    assert t.model == "anthropic/claude-sonnet-4-5-20250929"
    assert (t.instance_id, t.exit_status, t.model_patch) == ("local__calc-2", "Submitted", PATCH)
    assert t.usage == {"prompt_tokens": 450, "completion_tokens": 60, "api_calls": 3}
    assert t.trajectory_id == content_id("mini-swe-agent", "local__calc-2", _sha(source))


def test_mini_swe_agent_responses_api_and_bare_list_files(tmp_path):
    responses = {
        "info": {"exit_status": "LimitsExceeded", "submission": ""},
        "messages": [
            {"role": "system", "content": "sys"},
            {"role": "user", "content": "task"},
            {
                "object": "response",
                "output": [
                    {"type": "reasoning", "summary": []},
                    {
                        "type": "message",
                        "role": "assistant",
                        "content": [{"type": "output_text", "text": "Listing."}],
                    },
                    {
                        "type": "function_call",
                        "call_id": "fc_1",
                        "name": "bash",
                        "arguments": '{"command": "ls"}',
                    },
                ],
                "extra": {"response": {"usage": {"input_tokens": 7, "output_tokens": 3}}},
            },
            {"type": "function_call_output", "call_id": "fc_1", "output": "calc.py\n"},
            {
                "type": "message",
                "role": "user",
                "content": [{"type": "input_text", "text": "format error"}],
            },
            {
                "role": "exit",
                "content": "LimitsExceeded",
                "extra": {"exit_status": "LimitsExceeded"},
            },
        ],
        "trajectory_format": "mini-swe-agent-1.1",
    }
    _write(tmp_path / "in" / "resp__1.traj.json", responses)
    _write(
        tmp_path / "in" / "old__1.traj.json",
        [{"role": "system", "content": "s"}, {"role": "user", "content": "u"}],
    )
    assert (
        _import(
            "--format", "mini-swe-agent", str(tmp_path / "in"), "--output", str(tmp_path / "out")
        )
        == 0
    )
    by_id = {t.instance_id: t for t in _trajectories(tmp_path / "out")}
    resp = by_id["resp__1"]
    assert [(m.role, m.content) for m in resp.messages] == [
        ("system", "sys"),
        ("user", "task"),
        ("assistant", "Listing."),
        ("tool", "calc.py\n"),
        ("user", "format error"),
    ]
    call = resp.messages[2].tool_calls[0]
    assert (call.id, call.function.name, call.function.arguments) == (
        "fc_1",
        "bash",
        '{"command": "ls"}',
    )
    assert resp.messages[3].tool_call_id == "fc_1"
    assert resp.usage == {"prompt_tokens": 7, "completion_tokens": 3}
    assert resp.exit_status == "LimitsExceeded"
    assert by_id["old__1"].exit_status == "unknown" and len(by_id["old__1"].messages) == 2


@pytest.mark.parametrize("suffix", ["parquet", "jsonl"])
def test_nebius_rows_from_parquet_and_jsonl(tmp_path, suffix):
    rows = nebius_rows()
    source = tmp_path / f"train-00000.{suffix}"
    if suffix == "parquet":
        pq.write_table(pa.Table.from_pylist(rows), source)
    else:
        source.write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert _import("--format", "nebius", str(tmp_path), "--output", str(tmp_path / "out")) == 0
    got = _trajectories(tmp_path / "out")
    assert len(got) == 2 and len({t.trajectory_id for t in got}) == 2  # same instance, two runs
    for t, row in zip(got, rows, strict=True):
        assert_same_messages(t.messages, row["trajectory"])
        assert t.messages[0].content == "SETTING: You are an autonomous programmer."
        assert (t.resolved, t.reward) == (row["target"], 1.0 if row["target"] else 0.0)
        assert (t.model, t.exit_status, t.model_patch) == (
            row["model_name"],
            row["exit_status"],
            row["generated_patch"],
        )
        assert t.origin == "import/nebius"


def test_nebius_same_rows_get_the_same_ids_from_either_file_type(tmp_path):
    rows = nebius_rows()
    pq.write_table(pa.Table.from_pylist(rows), tmp_path / "a.parquet")
    (tmp_path / "b.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert _import("--format", "nebius", str(tmp_path), "--output", str(tmp_path / "out")) == 0
    assert len(_trajectories(tmp_path / "out")) == 2
    assert [r.reason for r in _rejections(tmp_path / "out")] == ["duplicate", "duplicate"]


def test_report_sets_resolved_reward_and_test_report(tmp_path):
    _write(tmp_path / "in" / "local__calc-1.traj", swe_agent_1x())
    _write(tmp_path / "in" / "local__calc-0.traj", swe_agent_0x())
    report = _write(tmp_path / "report.json", report_json())
    run_report = _write(
        tmp_path / "run.json",
        {"resolved_ids": [], "unresolved_ids": ["local__calc-0"], "error_ids": []},
    )
    argv = ["--format", "swe-agent", str(tmp_path / "in"), "--output", str(tmp_path / "out")]
    assert _import(*argv, "--report", str(report), "--report", str(run_report)) == 0
    by_id = {t.instance_id: t for t in _trajectories(tmp_path / "out")}
    graded = by_id["local__calc-1"]
    assert (graded.resolved, graded.reward) == (True, 1.0)
    assert graded.test_report == {
        "tests/test_calc.py::test_add": "PASSED",
        "tests/test_calc.py::test_sub": "PASSED",
        "tests/test_calc.py::test_mul": "FAILED",
    }
    assert (by_id["local__calc-0"].resolved, by_id["local__calc-0"].reward) == (False, 0.0)
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert (
        summary["resolved"] == 1 and summary["unresolved"] == 1 and summary["graded by report"] == 2
    )


def test_apply_report_reads_both_report_shapes_and_leaves_other_runs_alone(tmp_path):
    source = _write(tmp_path / "local__calc-1.traj", swe_agent_1x())
    [t] = list(READERS["swe-agent"](str(source), source.read_bytes()))
    assert isinstance(t, Trajectory)
    [per_instance] = apply_report([t], report_json())
    assert per_instance.resolved is True and len(per_instance.test_report) == 3
    [run_level] = apply_report([t], {"resolved_ids": ["local__calc-1"], "unresolved_ids": []})
    assert (run_level.resolved, run_level.reward, run_level.test_report) == (True, 1.0, {})
    [untouched] = apply_report([t], {"resolved_ids": ["other__repo-1"]})
    assert untouched == t


def test_bad_files_are_rejected_with_a_reason_and_the_others_kept(tmp_path):
    good = _write(tmp_path / "in" / "good.traj", swe_agent_0x())
    text = json.dumps(swe_agent_1x())
    (tmp_path / "in" / "truncated.traj").write_text(text[: len(text) // 2])
    _write(tmp_path / "in" / "list.traj", [1, 2, 3])
    _write(tmp_path / "in" / "nohistory.traj", {"info": {}})
    _write(tmp_path / "in" / "badrole.traj", {"history": [{"role": "robot", "content": "hi"}]})
    missing = tmp_path / "nowhere"
    argv = [
        "--format",
        "swe-agent",
        str(tmp_path / "in"),
        str(missing),
        "--output",
        str(tmp_path / "out"),
    ]
    assert _import(*argv) == 0
    [kept] = _trajectories(tmp_path / "out")
    assert kept.instance_id == "good" and kept.trajectory_id == content_id(
        "swe-agent", "good", _sha(good)
    )
    reasons = {Path(r.input).name: r for r in _rejections(tmp_path / "out")}
    assert {name: r.reason for name, r in reasons.items()} == {
        "truncated.traj": "malformed_json",
        "list.traj": "unknown_format",
        "nohistory.traj": "missing_field",
        "badrole.traj": "unknown_role",
        "nowhere": "not_found",
    }
    for rejection in reasons.values():
        assert rejection.stage == "import"
        assert rejection.detail.startswith(rejection.input) and "\n" not in rejection.detail
    assert "copy it again" in reasons["truncated.traj"].detail


def test_a_bad_nebius_row_is_rejected_alone(tmp_path):
    rows = nebius_rows()
    lines = [
        json.dumps(rows[0]),
        json.dumps(rows[1])[:40],
        json.dumps({"model_name": "m", "trajectory": []}),
    ]
    (tmp_path / "in" / "rows.jsonl").parent.mkdir()
    (tmp_path / "in" / "rows.jsonl").write_text("\n".join(lines) + "\n")
    (tmp_path / "in" / "zero.jsonl").write_text("\n")
    assert (
        _import("--format", "nebius", str(tmp_path / "in"), "--output", str(tmp_path / "out")) == 0
    )
    assert len(_trajectories(tmp_path / "out")) == 1
    got = [(Path(r.input).name, r.reason) for r in _rejections(tmp_path / "out")]
    assert got == [
        ("rows.jsonl:2", "malformed_json"),
        ("rows.jsonl:3", "missing_field"),
        ("zero.jsonl", "empty"),
    ]


def test_a_rerun_writes_the_same_trajectories(tmp_path):
    _write(tmp_path / "in" / "local__calc-1.traj", swe_agent_1x())
    _write(tmp_path / "in" / "local__calc-0.traj", swe_agent_0x())
    for out in ("a", "b"):
        assert (
            _import("--format", "swe-agent", str(tmp_path / "in"), "--output", str(tmp_path / out))
            == 0
        )
    for table in ("trajectories", "rejections"):
        parts = sorted(p.name for p in (tmp_path / "a" / table).iterdir())
        assert parts == sorted(p.name for p in (tmp_path / "b" / table).iterdir())
        for part in parts:
            assert (tmp_path / "a" / table / part).read_bytes() == (
                tmp_path / "b" / table / part
            ).read_bytes()


def test_imported_1x_trajectory_renders_for_sft(tmp_path):
    _write(tmp_path / "local__calc-1.traj", swe_agent_1x())
    assert _import("--format", "swe-agent", str(tmp_path), "--output", str(tmp_path / "out")) == 0
    [t] = _trajectories(tmp_path / "out")
    rendered = swesmith_messages(t)
    assistant = [m["content"] for m in rendered if m["role"] == "assistant"]
    assert "<function=str_replace_editor>\n<parameter=command>view</parameter>" in assistant[0]
    assert "<parameter=old_str>\n    return a - b\n</parameter>" in assistant[1]
    assert "<parameter=new_str>\n    return a + b  # caf\u00e9\n</parameter>" in assistant[1]
    assert assistant[2].endswith("<function=submit>\n</function>")
    assert [m["role"] for m in rendered] == [
        "system",
        "user",
        "assistant",
        "user",
        "assistant",
        "user",
        "assistant",
    ]
    trl = trl_messages(t)
    assert trl[2]["tool_calls"][0]["function"]["arguments"] == VIEW_ARGS


def test_stats_reads_an_import_output(tmp_path):
    _write(tmp_path / "in" / "local__calc-1.traj", swe_agent_1x())
    (tmp_path / "in" / "broken.traj").write_text('{"history": [')
    assert (
        _import("--format", "swe-agent", str(tmp_path / "in"), "--output", str(tmp_path / "out"))
        == 0
    )
    stats = run_cli("stats", str(tmp_path / "out"), cwd=tmp_path, timeout=120)
    assert stats.returncode == 0, stats.stderr
    assert "trajectories        1 rows" in stats.stdout and "import/malformed_json" in stats.stdout


def test_cli_import_trajectories(tmp_path):
    """Through the real console script (needs the subcommand wired into pipelines/cli.py)."""
    _write(tmp_path / "in" / "local__calc-1.traj", swe_agent_1x())
    (tmp_path / "in" / "broken.traj").write_text('{"history": [')
    report = _write(tmp_path / "report.json", report_json())
    proc = run_cli(
        "import-trajectories",
        "--format",
        "swe-agent",
        "in",
        "--output",
        "out",
        "--report",
        str(report),
        cwd=tmp_path,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    assert "import: 2 inputs, 1 kept, 1 rejected" in proc.stderr
    assert "Traceback" not in proc.stderr
    [t] = _trajectories(tmp_path / "out")
    assert t.resolved is True
    [rejected] = _rejections(tmp_path / "out")
    assert rejected.reason == "malformed_json"


def test_a_big_import_is_written_in_parts(tmp_path):
    """Rows are spread over ``--shards`` sorted shards: no shard holds the whole import."""
    rows = [{**row, "instance_id": f"local__calc-{n}"} for n in range(12) for row in nebius_rows()]
    (tmp_path / "rows.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    argv = ["--format", "nebius", str(tmp_path), "--output", str(tmp_path / "out")]
    assert _import(*argv, "--shards", "4") == 0
    parts = sorted((tmp_path / "out" / "trajectories").iterdir())
    assert len(parts) > 1 and all(p.name.endswith("-of-00004.parquet") for p in parts)
    sizes = [len(read_records(Trajectory, str(p))) for p in parts]
    assert sum(sizes) == len(rows) and max(sizes) < len(rows)
    for part in parts:  # each shard is sorted
        ids = [t.trajectory_id for t in read_records(Trajectory, str(part))]
        assert ids == sorted(ids)
