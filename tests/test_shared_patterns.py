"""The one chat-message model (schemas.trajectory) and the one git wrapper (git_tree.git)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from trajforge.generators.agents.loop import _assistant_message
from trajforge.schemas.trajectory import FunctionCall, Message, ToolCall
from trajforge.verifiers.sandbox.git_tree import GitError, git

CALL = ToolCall("c1", "function", FunctionCall("bash", '{"command": "ls"}'))
CALL_DICT = {
    "id": "c1",
    "type": "function",
    "function": {"name": "bash", "arguments": CALL.function.arguments},
}


def test_to_openai_has_only_what_is_set_or_every_key():
    assert Message("user", "hi").to_openai() == {"role": "user", "content": "hi"}
    assert Message("assistant", "", (CALL,)).to_openai() == {
        "role": "assistant",
        "content": "",
        "tool_calls": [CALL_DICT],
    }
    tool = Message("tool", "out", tool_call_id="c1", name="bash")
    assert tool.to_openai() == {
        "role": "tool",
        "content": "out",
        "tool_call_id": "c1",
        "name": "bash",
    }
    assert Message("user", "hi").to_openai(fixed_keys=True) == {
        "role": "user",
        "content": "hi",
        "tool_calls": None,
        "tool_call_id": None,
        "name": None,
    }


@pytest.mark.parametrize(
    "message",
    [
        Message("system", "s"),
        Message("assistant", "thinking", (CALL,)),
        Message("tool", "", tool_call_id="c1", name="bash"),
    ],
)
def test_from_openai_reads_back_what_to_openai_writes(message: Message):
    assert Message.from_openai(message.to_openai()) == message
    assert Message.from_openai(message.to_openai(fixed_keys=True)) == message


def test_from_openai_fills_defaults_and_writes_non_text_arguments_as_json():
    call = ToolCall.from_openai({"function": {"name": "view", "arguments": {"path": "é"}}}, "d")
    assert call == ToolCall("d", "function", FunctionCall("view", '{"path": "é"}'))
    message = Message.from_openai({"role": "tool", "content": None, "tool_call_id": 7})
    assert message == Message("tool", "", tool_call_id="7")


def test_the_loop_repairs_a_model_turn_into_calls_the_tools_refuse_not_run():
    raw = {"content": None, "tool_calls": [None, {"function": {"arguments": {"a": 1}}}]}
    message = _assistant_message(raw, turn=3)
    assert message == Message(
        "assistant",
        "",
        (
            ToolCall("call_3_0", "function", FunctionCall("", "")),
            ToolCall("call_3_1", "function", FunctionCall("", "{'a': 1}")),  # str, not JSON
        ),
    )


def test_git_without_repo_with_config_and_only_the_given_env(tmp_path: Path, monkeypatch):
    monkeypatch.setenv("GIT_AUTHOR_DATE", "@978307200 +0000")  # 2001: must not reach the commit
    repo = str(tmp_path / "r")
    git(None, "init", "-q", repo, config=["init.defaultBranch=trunk"])
    assert git(repo, "symbolic-ref", "HEAD").strip() == b"refs/heads/trunk"
    identity = {
        f"GIT_{who}_{what}": "a" for who in ("AUTHOR", "COMMITTER") for what in ("NAME", "EMAIL")
    }
    env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path), **identity}
    git(repo, "commit", "-q", "--allow-empty", "-m", "m", env=env, inherit_env=False)
    assert git(repo, "log", "--format=%an %at").split() != [b"a", b"978307200"]
    assert git(repo, "log", "--format=%an").strip() == b"a"


def test_git_error_keeps_gits_last_line_and_exit_status(tmp_path: Path):
    with pytest.raises(GitError) as caught:
        git(str(tmp_path), "rev-parse", "HEAD")
    assert caught.value.returncode != 0 and "not a git repository" in caught.value.stderr_tail
    assert caught.value.detail == caught.value.stderr_tail
    assert str(caught.value).startswith(f"git rev-parse in {tmp_path}: ")
    assert GitError("x", returncode=3).detail == "exit 3"
