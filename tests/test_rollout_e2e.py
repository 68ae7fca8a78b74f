"""validate -> describe -> rollout -> curate -> export through the real CLI, real containers and a
scripted model behind a real OpenAI-compatible HTTP server."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest
from conftest import run_cli, write_params
from repo_factory import (
    build_add_fix_repo,
)
from scripted_agents import GOOD_STATEMENT, fixer
from scripted_llm import ScriptedLLM, tool_call, turn

pytestmark = [pytest.mark.docker, pytest.mark.llama]

LEAKING_STATEMENT = (
    "The add function is broken: its body should read `return a + b` instead, which is what "
    "every user of calc expects from an addition."
)


def _broken(request):
    """Malformed calls: arguments that are not JSON, an unknown tool, then no tool call at all."""
    answers = [
        {"content": "", "tool_calls": [tool_call("bash", raw_arguments="{not json")]},
        {"content": "", "tool_calls": [tool_call("teleport", where="fix")]},
        {"content": "I think I am done."},
    ]
    return answers[min(turn(request), 2)]


def _looper(request):
    """Never submits; its first command hangs past the command timeout."""
    command = "sleep 60" if turn(request) == 0 else "echo still working"
    return {"content": "", "tool_calls": [tool_call("bash", command=command)]}


def _writer(request):
    """Leaks the fix on the first (seed 0) attempt, writes a good report on the second."""
    return {"content": LEAKING_STATEMENT if request.get("seed", 0) == 0 else GOOD_STATEMENT}


def _respond(request):
    return {
        "writer": _writer,
        "fixer": fixer("return a + b"),
        "wrong": fixer("return a * b"),
        "broken": _broken,
        "looper": _looper,
    }[request["model"]](request)


@pytest.fixture(scope="module")
def llm():
    with ScriptedLLM(_respond) as server:
        yield server


@pytest.fixture(scope="module")
def validated(docker_engine, tmp_path_factory):
    """One proven task: ``add`` subtracts; FAIL_TO_PASS test_add, PASS_TO_PASS test_mul."""
    root = tmp_path_factory.mktemp("rollout")
    build_add_fix_repo(root / "calc")
    work = root / "work"
    work.mkdir()
    extra = "rollout:\n  max_steps: 4\n  command_timeout_s: 3\n  workers: 2\n"
    write_params(work / "params.yaml", root / "cache", extra)
    write_params(work / "params-llama.yaml", root / "cache", extra + "llm:\n  max_tokens: 64\n")
    for args in (
        ("mine", "--repo", str(root / "calc"), "--output", "mine"),
        ("validate", "--input", "mine", "--output", "validate"),
    ):
        done = run_cli(*args, cwd=work)
        assert done.returncode == 0, done.stderr
    assert pl.read_parquet(work / "validate/tasks/*.parquet").height == 1
    return work


def _cli(work: Path, *args: str):
    done = run_cli(*args, cwd=work)
    assert done.returncode == 0, done.stderr
    return done


def _endpoint(llm, model: str) -> tuple[str, ...]:
    return ("--base-url", llm.base_url, "--model", model)


def _table(path: Path) -> list[dict]:
    return pl.read_parquet(path / "*.parquet").to_dicts()


def test_template_writer_without_endpoint(validated):
    done = _cli(validated, "describe", "--input", "validate", "--output", "describe-template")
    assert "no endpoint configured" in done.stderr
    (task,) = _table(validated / "describe-template/tasks")
    statement = task["problem_statement"]
    assert "assert -1 == 5" in statement and "add(2, 3)" in statement
    assert "test_add" not in statement and "return a + b" not in statement
    provenance = dict(task["provenance"])
    assert provenance["problem_statement"] == "template"
    assert "no endpoint configured" in provenance["problem_statement_note"]


def test_leaking_statement_is_rejected_and_the_next_kept(validated, llm):
    _cli(validated, "describe", "--input", "validate", "--output", "describe",
         *_endpoint(llm, "writer"))  # fmt: skip
    (task,) = _table(validated / "describe/tasks")
    assert task["problem_statement"] == GOOD_STATEMENT
    assert dict(task["provenance"])["problem_statement"] == "llm:writer"
    attempts = sorted(_table(validated / "describe/statements"), key=lambda a: a["attempt"])
    assert [(a["reason"], a["accepted"]) for a in attempts] == [
        ("leaks_patch", False),
        ("accepted", True),
    ]
    prompt = next(r for r in llm.requests if r["model"] == "writer")["messages"][-1]["content"]
    assert "assert -1 == 5" in prompt and "def test_add" in prompt  # failure output and source


def test_scripted_fix_is_verified_resolved(validated, llm):
    _cli(validated, "rollout", "--input", "describe", "--output", "rollout-fixer",
         "--attempts", "2", *_endpoint(llm, "fixer"))  # fmt: skip
    trajectories = _table(validated / "rollout-fixer/trajectories")
    assert len(trajectories) == 2
    for row in trajectories:
        assert row["resolved"] is True and row["reward"] == 1.0
        assert row["exit_status"] == "submitted" and row["origin"] == "rollout"
        assert "-    return a - b\n+    return a + b" in row["model_patch"]
        assert dict(row["test_report"]) == {
            "tests/test_ops.py::test_add": "PASSED",
            "tests/test_ops.py::test_mul": "PASSED",
        }
        roles = [m["role"] for m in row["messages"]]
        assert roles == ["system", "user", *["assistant", "tool"] * 4]
        assert GOOD_STATEMENT in row["messages"][1]["content"]
        bash_result = row["messages"][7]
        assert bash_result["content"].strip() == "5" and bash_result["name"] == "bash"
        assert {t["function"]["name"] for t in json.loads(row["tools"])} == {
            "bash", "view", "str_replace", "create", "submit"
        }  # fmt: skip
        assert dict(row["usage"])["steps"] == 4
    (task,) = _table(validated / "rollout-fixer/tasks")
    assert dict(task["scores"])["solve_rate"] == 1.0
    transitions = _table(validated / "rollout-fixer/transitions")
    assert len(transitions) == 8 and {t["origin"] for t in transitions} == {"rollout"}
    edit = next(t for t in transitions if json.loads(t["action"])["tool"] == "str_replace")
    assert edit["changed_files"] == ["calc/ops.py"] and edit["observation"] == "edited calc/ops.py"


def test_rerun_makes_no_calls_and_writes_the_same_bytes(validated, llm):
    before = len(llm.requests)
    _cli(validated, "rollout", "--input", "describe", "--output", "rollout-again",
         "--attempts", "2", *_endpoint(llm, "fixer"))  # fmt: skip
    assert len(llm.requests) == before
    for table in ("trajectories", "tasks"):
        first = sorted((validated / "rollout-fixer" / table).glob("*.parquet"))
        again = sorted((validated / "rollout-again" / table).glob("*.parquet"))
        assert [p.read_bytes() for p in first] == [p.read_bytes() for p in again]


def test_scripted_wrong_fix_is_verified_unresolved(validated, llm):
    _cli(validated, "rollout", "--input", "describe", "--output", "rollout-wrong",
         *_endpoint(llm, "wrong"))  # fmt: skip
    (row,) = _table(validated / "rollout-wrong/trajectories")
    assert row["exit_status"] == "submitted" and row["resolved"] is False
    assert dict(row["test_report"])["tests/test_ops.py::test_add"] == "FAILED"
    (task,) = _table(validated / "rollout-wrong/tasks")
    assert dict(task["scores"])["solve_rate"] == 0.0


def test_malformed_tool_calls_end_the_run_with_a_reason(validated, llm):
    _cli(validated, "rollout", "--input", "describe", "--output", "rollout-broken",
         *_endpoint(llm, "broken"))  # fmt: skip
    (row,) = _table(validated / "rollout-broken/trajectories")
    assert row["exit_status"] == "error:format_errors" and row["resolved"] is False
    tool_messages = [m["content"] for m in row["messages"] if m["role"] == "tool"]
    assert "arguments are not valid JSON" in tool_messages[0]
    assert "unknown tool 'teleport'" in tool_messages[1]
    assert row["messages"][-1]["content"].startswith("Your reply had no tool call")


def test_a_model_that_never_submits_hits_the_step_limit(validated, llm):
    _cli(validated, "rollout", "--input", "describe", "--output", "rollout-looper",
         *_endpoint(llm, "looper"))  # fmt: skip
    (row,) = _table(validated / "rollout-looper/trajectories")
    assert row["exit_status"] == "step_limit" and row["resolved"] is False
    assert "timed out after 3 s" in row["messages"][3]["content"]
    assert row["messages"][5]["content"].strip() == "still working"  # the container survived


def test_endpoint_down_ends_each_run_not_the_stage(validated):
    done = _cli(validated, "rollout", "--input", "describe", "--output", "rollout-down",
                "--base-url", "http://127.0.0.1:9/v1", "--model", "fixer")  # fmt: skip
    (row,) = _table(validated / "rollout-down/trajectories")
    assert row["exit_status"] == "error:llm_unreachable" and row["resolved"] is False
    assert "kept 1" in done.stderr or "1 kept" in done.stderr


def test_verified_trajectories_reach_the_sft_export(validated, llm):
    _cli(validated, "curate", "--input", "rollout-fixer", "--output", "curate")
    _cli(validated, "export", "--input", "curate", "--output", "dataset")
    rows = pl.read_parquet(next((validated / "dataset").rglob("sft/*.parquet"))).to_dicts()
    assert rows and rows[0]["messages"][0]["role"] == "system"


def test_real_llama_server_garbage_is_recorded_as_failed_attempts(validated, llama_endpoint):
    """A real llama.cpp server with random weights: everything runs, nothing it says is kept."""
    endpoint = ("--base-url", llama_endpoint["base_url"], "--model", llama_endpoint["model"])
    params = ("--params", "params-llama.yaml")
    _cli(validated, "describe", *params, "--input", "validate", "--output", "describe-llama",
         *endpoint)  # fmt: skip
    attempts = _table(validated / "describe-llama/statements")
    model_attempts = [a for a in attempts if a["writer"] == "llm:tiny"]
    assert len(model_attempts) == 2 and not any(a["accepted"] for a in model_attempts)
    (task,) = _table(validated / "describe-llama/tasks")
    assert dict(task["provenance"])["problem_statement"] == "template"
    assert "model statements rejected" in dict(task["provenance"])["problem_statement_note"]

    _cli(validated, "rollout", *params, "--input", "describe-llama", "--output", "rollout-llama",
         *endpoint)  # fmt: skip
    (row,) = _table(validated / "rollout-llama/trajectories")
    assert row["resolved"] is False and row["model"] == "tiny"
    assert row["exit_status"] in ("error:format_errors", "step_limit")
    assert dict(row["usage"])["prompt_tokens"] > 0
    assert [m["role"] for m in row["messages"][:3]] == ["system", "user", "assistant"]
