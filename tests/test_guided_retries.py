"""Guided retries (Agent-RLVR) through the real CLI, real containers and a scripted model behind a
real OpenAI-compatible HTTP server: an agent that fails unguided and succeeds guided, one whose
failed attempt left no test output, and one that never succeeds; then curate, export and report."""

from __future__ import annotations

import json
from pathlib import Path

import datasets
import polars as pl
import pytest
from conftest import run_cli, write_params
from repo_factory import build_add_fix_repo
from scripted_agents import fixer
from scripted_llm import ScriptedLLM, tool_call

pytestmark = pytest.mark.docker

FAILING_TEST = "tests/test_ops.py::test_add"


def _guided(request) -> bool:
    return "<guidance>" in request["messages"][1]["content"]


def _idle(request):
    """Submits without changing anything."""
    return {"content": "Nothing to do.", "tool_calls": [tool_call("submit")]}


def _respond(request):
    model = request["model"]
    if model == "stubborn":  # a wrong fix unguided, the right one guided
        return fixer("return a + b" if _guided(request) else "return a * b")(request)
    if model == "idle":  # an empty patch unguided (no test output), the right fix guided
        return fixer("return a + b")(request) if _guided(request) else _idle(request)
    return fixer("return a * b")(request)  # hopeless: wrong with and without guidance


@pytest.fixture(scope="module")
def llm():
    with ScriptedLLM(_respond) as server:
        yield server


@pytest.fixture(scope="module")
def described(docker_engine, tmp_path_factory):
    """One proven, described task: ``add`` subtracts; FAIL_TO_PASS test_add."""
    root = tmp_path_factory.mktemp("guided")
    build_add_fix_repo(root / "calc")
    work = root / "work"
    work.mkdir()
    extra = (
        "rollout:\n  max_steps: 6\n  command_timeout_s: 5\n  guided_attempts: 2\n"
        "curate:\n  near_miss_soft_reward: 0.5\n"
    )
    write_params(work / "params.yaml", root / "cache", extra)
    for args in (
        ("mine", "--repo", str(root / "calc"), "--output", "mine"),
        ("validate", "--input", "mine", "--output", "validate"),
        ("describe", "--input", "validate", "--output", "describe"),
    ):
        _cli(work, *args)
    return work


def _cli(work: Path, *args: str):
    done = run_cli(*args, cwd=work)
    assert done.returncode == 0, done.stderr
    return done


def _rollout(work: Path, llm, model: str, output: str):
    return _cli(work, "rollout", "--input", "describe", "--output", output,
                "--base-url", llm.base_url, "--model", model)  # fmt: skip


def _runs(path: Path) -> list[dict]:
    rows = pl.read_parquet(path / "trajectories/*.parquet").to_dicts()
    return sorted(rows, key=lambda r: bool(r["guidance"]))  # the unguided run first


def _summary(path: Path) -> dict:
    return json.loads((path / "summary.json").read_text())


def test_an_agent_that_fails_unguided_succeeds_guided(described, llm):
    _rollout(described, llm, "stubborn", "rollout-stubborn")
    out = described / "rollout-stubborn"
    unguided, guided = _runs(out)  # two runs: the second resolved, so no third
    assert unguided["resolved"] is False and unguided["guidance"] == ""
    assert unguided["soft_reward"] == 1.0  # it edited exactly the gold patch's line...
    assert unguided["f2p_pass_rate"] == 0.0  # ...but wrongly: test_add still fails
    assert f"{FAILING_TEST} (FAILED)" in unguided["test_output"]
    assert "assert 6 == 5" in unguided["test_output"]

    assert guided["resolved"] is True and guided["exit_status"] == "submitted"
    assert guided["soft_reward"] == 1.0 and guided["f2p_pass_rate"] == 1.0
    assert guided["test_output"] == ""
    guidance = guided["guidance"]
    assert "- calc/ops.py" in guidance  # the gold patch's file, by name
    assert f"- {FAILING_TEST} (FAILED)" in guidance and "assert 6 == 5" in guidance
    assert "return a + b" not in guidance  # never the gold patch's content
    prompt = guided["messages"][1]["content"]
    assert prompt.endswith(f"<guidance>\n{guidance}\n</guidance>")
    assert "<guidance>" not in unguided["messages"][1]["content"]
    guided_requests = [r for r in llm.requests if r["model"] == "stubborn" and _guided(r)]
    assert guided_requests and guided_requests[0]["messages"][1]["content"] == prompt

    (task,) = pl.read_parquet(out / "tasks/*.parquet").to_dicts()
    assert dict(task["scores"])["solve_rate"] == 0.0  # from the unguided attempts only
    summary = _summary(out)
    assert summary["unguided runs"] == 1 and summary["unguided solve rate"] == 0.0
    assert summary["guided runs"] == 1 and summary["guided solve rate"] == 1.0
    assert summary["tasks solved only with guidance"] == 1
    assert "guidance_without_test_output" not in summary
    transitions = pl.read_parquet(out / "transitions/*.parquet")
    assert set(transitions.get_column("trajectory_id")) == {
        unguided["trajectory_id"], guided["trajectory_id"]
    }  # fmt: skip


def test_rerun_makes_no_calls_and_writes_the_same_bytes(described, llm):
    before = len(llm.requests)
    _rollout(described, llm, "stubborn", "rollout-stubborn-again")
    assert len(llm.requests) == before
    for table in ("trajectories", "tasks", "transitions"):
        first = sorted((described / "rollout-stubborn" / table).glob("*.parquet"))
        again = sorted((described / "rollout-stubborn-again" / table).glob("*.parquet"))
        assert [p.read_bytes() for p in first] == [p.read_bytes() for p in again], table


def test_guidance_without_failing_test_output_is_counted(described, llm):
    done = _rollout(described, llm, "idle", "rollout-idle")
    out = described / "rollout-idle"
    unguided, guided = _runs(out)
    assert unguided["exit_status"] == "submitted" and unguided["model_patch"] == ""
    assert unguided["test_output"] == "" and unguided["soft_reward"] == 0.0
    assert guided["resolved"] is True
    assert "left no failing-test output" in guided["guidance"]
    assert "- calc/ops.py" in guided["guidance"]
    assert _summary(out)["guidance_without_test_output"] == 1
    assert "guidance_without_test_output: 1" in done.stderr


def test_guided_retries_stop_at_the_param(described, llm):
    _rollout(described, llm, "hopeless", "rollout-hopeless")
    out = described / "rollout-hopeless"
    runs = _runs(out)
    assert len(runs) == 3 and not any(r["resolved"] for r in runs)  # 1 unguided + 2 guided
    guided = [r for r in runs if r["guidance"]]
    assert len({r["trajectory_id"] for r in guided}) == 2
    summary = _summary(out)
    assert summary["guided runs"] == 2 and summary["guided solve rate"] == 0.0
    assert summary["tasks solved only with guidance"] == 0


def test_curate_export_and_report_show_guidance(described, llm):
    work = described
    _cli(work, "curate", "--input", "rollout-stubborn", "--output", "curate")
    assert _summary(work / "curate")["near_misses"] == 1  # the wrong fix touched the gold line
    _cli(work, "export", "--input", "curate", "--output", "dataset")
    sft = datasets.load_dataset(str(work / "dataset"), "sft")
    rows = [row for split in sft.values() for row in split]
    assert sorted((r["resolved"], r["near_miss"], bool(r["guidance"])) for r in rows) == [
        (False, True, False),  # the unguided wrong fix, a near miss
        (True, False, True),  # the guided fix
    ]
    rl = [row for split in datasets.load_dataset(str(work / "dataset"), "rl").values()
          for row in split]  # fmt: skip
    (guided,) = [r for r in _runs(work / "curate") if r["guidance"]]
    assert [r["hint"] for r in rl] == [guided["guidance"]]
    card = (work / "dataset/README.md").read_text()
    assert "1 `sft` row(s) are guided retries" in card
    assert "1 `sft` row(s) are unresolved runs kept as near misses" in card
    assert "- `hint`: optional: the guidance a guided retry" in card

    _cli(work, "report", "--stage", "rollout=rollout-stubborn", "--stage", "curate=curate",
         "--output", "report.html")  # fmt: skip
    page = (work / "report.html").read_text()
    assert "Solve rate with and without guidance" in page
    assert "<td>unguided</td><td class=n>1</td><td class=n>0</td><td class=n>0.0%</td>" in page
    assert "<td>guided</td><td class=n>1</td><td class=n>1</td><td class=n>100.0%</td>" in page
    assert "1 task(s) solved only with guidance." in page
    assert "1 unresolved run(s) kept for SFT as near misses." in page
