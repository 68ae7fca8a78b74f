"""The ``sft_xml`` config renders SWE-agent runs as SWE-smith does, byte for byte.

``tests/fixtures/sft_xml/`` holds two hand-written runs in the shape of a SWE-agent 1.0 ``.traj``
(``history``, and ``trajectory`` steps whose ``messages`` are the history after the step):

- ``local__calc-1.traj``: a submitted run with assistant turns whose thought is empty, a command
  with no output (SWE-agent's no-output sentence, without ``OBSERVATION:``), a ``view_range``
  list, block parameters (``old_str``, ``new_str``, ``file_text``) with non-ASCII text, SWE-agent's
  review step and the final ``submit`` whose observation is the patch;
- ``local__calc-2.traj``: a run stopped by its cost limit (SWE-agent's ``Exit due to cost limit``
  turn, then the autosubmitted patch).

``expected_ft_xml.jsonl`` is what SWE-smith's converter wrote for them: the output of
``swesmith.train.traj_mgr.utils.transform_traj_xml`` (SWE-bench/SWE-smith at cf2e649d) run on
each file, with ``instance_id`` added and each line written with ``json.dumps`` as
``transform_to_ft`` writes it. SWE-smith swaps in the ``system_template`` of its
``agent/swesmith_infer.yaml``; the expected file was made with a template of our own (its first
message), which the test hands to ``swesmith_messages`` as ``system_prompt``.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from trajforge.generators.trajectories.formats.swe_agent import read_swe_agent
from trajforge.generators.trajectories.sft import NO_OUTPUT, swesmith_messages
from trajforge.pipelines.release.tables import sft_xml_table
from trajforge.schemas.trajectory import FunctionCall, Message, ToolCall, Trajectory

FIXTURES = Path(__file__).parent / "fixtures" / "sft_xml"
EXPECTED_LINES = (FIXTURES / "expected_ft_xml.jsonl").read_text(encoding="utf-8").splitlines()
EXPECTED = {json.loads(line)["instance_id"]: line for line in EXPECTED_LINES}


def _imported(instance_id: str) -> Trajectory:
    path = FIXTURES / f"{instance_id}.traj"
    [trajectory] = read_swe_agent(str(path), path.read_bytes())
    assert isinstance(trajectory, Trajectory), trajectory
    return trajectory


@pytest.mark.parametrize("instance_id", sorted(EXPECTED))
def test_swe_agent_runs_render_as_swesmith_writes_them(instance_id):
    expected = json.loads(EXPECTED[instance_id])["messages"]
    rendered = swesmith_messages(_imported(instance_id), system_prompt=expected[0]["content"])
    # Byte for byte: the same JSONL line transform_to_ft writes.
    line = json.dumps({"messages": rendered, "instance_id": instance_id})
    assert line == EXPECTED[instance_id]
    assert [m["content"].encode() for m in rendered] == [m["content"].encode() for m in expected]


def test_the_cases_the_fixtures_hold():
    rendered = swesmith_messages(_imported("local__calc-1"))
    assistant = [m["content"] for m in rendered if m["role"] == "assistant"]
    # An empty thought keeps its blank line; the run ends on the assistant's submit.
    assert assistant[1].startswith("\n\n<function=str_replace_editor>\n")
    assert "<parameter=view_range>[1, 2]</parameter>" in assistant[1]
    assert rendered[-1] == {"role": "assistant", "content": "\n\n<function=submit>\n</function>"}
    # SWE-agent's observations are kept as its templates wrote them.
    assert {"role": "user", "content": NO_OUTPUT} in rendered
    cost_limit = swesmith_messages(_imported("local__calc-2"))
    assert cost_limit[-1]["content"].endswith(
        "let's submit the changes:\n\n<function=submit>\n</function>"
    )


def test_without_a_system_prompt_only_the_system_turn_is_the_runs_own():
    for instance_id, line in EXPECTED.items():
        expected = json.loads(line)["messages"]
        rendered = swesmith_messages(_imported(instance_id))
        assert rendered[0]["role"] == "system" and rendered[0] != expected[0]
        assert rendered[1:] == expected[1:]


def test_the_export_table_holds_the_same_text():
    trajectories = [_imported(i) for i in sorted(EXPECTED)]
    table = sft_xml_table(trajectories, {t.instance_id: "local/calc" for t in trajectories})
    assert table.column("messages").to_pylist() == [swesmith_messages(t) for t in trajectories]


def _call(call_id: str, name: str, arguments: dict[str, object]) -> ToolCall:
    return ToolCall(call_id, "function", FunctionCall(name, json.dumps(arguments)))


def _run(*messages: Message, origin: str = "rollout") -> Trajectory:
    return Trajectory(
        trajectory_id="t",
        instance_id="i",
        model="m",
        messages=(Message("system", "S"), Message("user", "Fix add."), *messages),
        tools="[]",
        model_patch="",
        exit_status="submitted",
        resolved=True,
        reward=1.0,
        usage={},
        origin=origin,
    )


def test_other_origins_get_swe_agents_templates():
    run = _run(
        Message("assistant", "", (_call("a", "bash", {"command": "true", "background": False}),)),
        Message("tool", "", tool_call_id="a"),
        Message("assistant", "Look.", (_call("b", "view", {"path": "x", "view_range": [1, 2]}),)),
        Message("tool", "1\tx = 1\n", tool_call_id="b"),
        Message("assistant", "Done.", (_call("c", "submit", {}),)),
        Message("tool", "diff --git a/x b/x\n", tool_call_id="c"),
    )
    assert swesmith_messages(run)[2:] == [
        {
            "role": "assistant",
            "content": "\n\n<function=bash>\n<parameter=command>true</parameter>\n"
            "<parameter=background>False</parameter>\n</function>",
        },
        {"role": "user", "content": NO_OUTPUT},
        {
            "role": "assistant",
            "content": "Look.\n\n<function=view>\n<parameter=path>x</parameter>\n"
            "<parameter=view_range>[1, 2]</parameter>\n</function>",
        },
        {"role": "user", "content": "OBSERVATION:\n1\tx = 1\n"},
        {"role": "assistant", "content": "Done.\n\n<function=submit>\n</function>"},
    ]


def test_a_turn_without_calls_is_kept_as_written_except_for_swe_agent():
    final = Message("assistant", "All done.")
    assert swesmith_messages(_run(final))[-1]["content"] == "All done."
    swe_agent = _run(final, origin="import/swe-agent")
    assert swesmith_messages(swe_agent)[-1]["content"] == "All done.\n\n"
    # Only SWE-agent's own cost-limit turn becomes SWE-smith's stand-in submit.
    assert swesmith_messages(_run(Message("assistant", "Exit due to cost limit")))[-1] == {
        "role": "assistant",
        "content": "Exit due to cost limit",
    }
