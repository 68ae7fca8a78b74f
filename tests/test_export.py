"""Export curated Parquet tables and load every config back with ``datasets.load_dataset``."""

from __future__ import annotations

import hashlib
import json
import os
import re
from pathlib import Path

import datasets
import pytest
import yaml
from curated_factory import REPOS, curated_tasks, curated_trajectories, make_task, write_curated
from trajforge.filters.quality_gates import QualityGateError
from trajforge.pipelines.runtime.sinks import MARKER
from trajforge.pipelines.stages.export import ExportResult, export_dataset
from trajforge.schemas.errors import UserError
from trajforge.schemas.params import ExportParams

PARAMS = ExportParams(name="trajforge-test", shard_rows=2, validation_fraction=0.3, seed=7)
ROLES = {"system", "user", "assistant", "tool"}


@pytest.fixture(scope="module")
def exported(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, ExportResult]:
    root = tmp_path_factory.mktemp("export")
    tasks = curated_tasks()
    curated = write_curated(root / "curated", tasks, curated_trajectories(tasks))
    result = export_dataset([str(curated)], str(root / "dataset"), PARAMS)
    return root / "dataset", result


def _load(directory: Path, config: str) -> datasets.DatasetDict:
    return datasets.load_dataset(str(directory), config)


def _card(directory: Path) -> dict:
    text = (directory / "README.md").read_text()
    return yaml.safe_load(text.split("---\n")[1])


def test_every_config_loads_with_both_splits_and_no_repo_in_both(exported):
    directory, result = exported
    split_of: dict[str, str] = {}
    for config, rows in (("tasks", 6), ("sft", 6), ("sft_xml", 6), ("rl", 6)):
        loaded = _load(directory, config)
        assert set(loaded) == {"train", "validation"}, config
        assert sum(len(loaded[s]) for s in loaded) == rows, config
        assert result.counts[config] == {s: len(loaded[s]) for s in loaded}
        for split in loaded:
            for repo in loaded[split]["repo"]:
                assert split_of.setdefault(repo, split) == split, (config, repo)
    assert set(split_of) == set(REPOS)
    for path in directory.glob("*/*.parquet"):
        assert re.fullmatch(r"(train|validation)-\d{5}-of-\d{5}\.parquet", path.name), path
    assert len(list((directory / "tasks").glob("train-*"))) == 2  # 4 rows, 2 per shard


def test_sft_rows_are_resolved_and_in_trl_conversational_format(exported):
    directory, result = exported
    sft = _load(directory, "sft")["train"]
    assert all(sft["resolved"])
    for row in sft:
        assert_trl_conversational(row)
        assert row["scores"]["format_valid"] == 1.0 and row["scores"]["steps"] == 3.0
    assert result.dropped == {
        "trajectory_unresolved": 1,
        "trajectory_unverified": 1,
        "trajectory_without_task": 1,
    }
    xml = _load(directory, "sft_xml")["train"][0]["messages"]
    assert xml[2]["content"].startswith("Let me look.\n\n<function=bash>")
    assert xml[3]["content"].startswith("OBSERVATION:\n")


def assert_trl_conversational(row: dict) -> None:
    """TRL's ``is_conversational`` (trl/data_utils.py) plus what its tokenizer path needs: TRL
    itself would pull in torch, so this is the equivalent check, made stricter for tool calls."""
    messages = row["messages"]
    assert isinstance(messages, list) and isinstance(messages[0], dict) and "role" in messages[0]
    calls: set[str] = set()
    for message in messages:
        assert message["role"] in ROLES and isinstance(message["content"], str)
        for call in message["tool_calls"] or ():
            assert message["role"] == "assistant" and call["type"] == "function"
            assert isinstance(json.loads(call["function"]["arguments"]), dict)
            calls.add(call["id"])
        if message["role"] == "tool":
            assert message["tool_call_id"] in calls
    tools = row["tools"]
    tools = json.loads(tools) if isinstance(tools, str) else tools  # TRL's own tokenize_fn line
    assert tools and all(t["type"] == "function" and t["function"]["name"] for t in tools)
    assert all(t["function"]["parameters"]["type"] == "object" for t in tools)


def test_tasks_and_rl_columns(exported):
    directory, _ = exported
    task = _load(directory, "tasks")["train"][0]
    assert task["scores"]["patch_lines"] == 2.0 and task["scores"]["solve_rate"] is None
    assert task["provenance"] == [{"key": "validated_by", "value": "trajforge"}]
    assert task["validation"]["test_runs"] == 3
    rl = _load(directory, "rl")["validation"][0]
    assert [m["role"] for m in rl["prompt"]] == ["system", "user"]
    assert rl["repo"] in rl["prompt"][0]["content"]
    assert rl["prompt"][1]["content"].startswith("`add` returns the difference")
    assert rl["FAIL_TO_PASS"] and rl["image_name"] and rl["test_cmd"] == "pytest -rA"


def test_card_version_and_data_docs(exported):
    directory, result = exported
    card = _card(directory)
    assert card["license"] == "apache-2.0" and card["size_categories"] == ["n<1K"]
    assert card["task_categories"] == ["text-generation"] and "trajforge" in card["tags"]
    assert {c["config_name"] for c in card["configs"]} == {"tasks", "sft", "sft_xml", "rl"}
    info = {i["config_name"]: i for i in card["dataset_info"]}
    assert {s["name"]: s["num_examples"] for s in info["sft"]["splits"]} == result.counts["sft"]
    manifest = json.loads((directory / "version.json").read_text())
    digests = {
        str(p.relative_to(directory)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in directory.glob("*/*.parquet")
    }
    assert manifest["files"] == digests and manifest["version"] == result.version
    listing = "".join(f"{p}\t{d}\n" for p, d in sorted(digests.items()))
    assert result.version == hashlib.sha256(listing.encode()).hexdigest()[:16]
    text = (directory / "README.md").read_text()
    assert f"`{result.version}`" in text and "acme/alpha" in text and "bug/swap_operator" in text
    assert (directory / "data_docs" / "index.html").is_file()
    assert not list(directory.parent.glob("dataset.staging-*"))


def test_rerun_gives_the_same_version(exported, tmp_path):
    directory, result = exported
    again = export_dataset([str(directory.parent / "curated")], str(tmp_path / "again"), PARAMS)
    assert again.version == result.version


def test_config_without_rows_is_omitted_from_the_card(tmp_path):
    curated = write_curated(tmp_path / "curated", [make_task("acme/alpha", 1)])
    result = export_dataset([str(curated)], str(tmp_path / "out"), PARAMS)
    assert result.counts == {"tasks": {"train": 1}, "rl": {"train": 1}}
    assert set(result.omitted) == {"sft", "sft_xml"}
    card = _card(tmp_path / "out")
    assert {c["config_name"] for c in card["configs"]} == {"tasks", "rl"}
    assert "Omitted" in (tmp_path / "out" / "README.md").read_text()
    assert set(_load(tmp_path / "out", "tasks")) == {"train"}  # one repo: nothing to hold out
    with pytest.raises(ValueError):
        _load(tmp_path / "out", "sft")


def test_gate_failure_publishes_nothing_and_names_the_expectation(tmp_path):
    tasks = curated_tasks()
    first = write_curated(tmp_path / "a", tasks)
    second = write_curated(tmp_path / "b", tasks[:1])  # the same instance_id twice
    output = tmp_path / "out"
    output.mkdir()
    (output / MARKER).write_text("")  # an earlier export: one trajforge may replace
    (output / "previous.txt").write_text("kept")
    with pytest.raises(QualityGateError) as caught:
        export_dataset([str(first), str(second)], str(output), PARAMS)
    message = str(caught.value)
    assert "expect_column_values_to_be_unique(instance_id)" in message
    assert "tasks:" in message and "rl:" in message
    assert isinstance(caught.value, UserError)
    assert sorted(os.listdir(output)) == sorted([MARKER, "previous.txt"])
    assert Path(caught.value.docs_index or "").is_file()
    assert not list(tmp_path.glob("out.staging-*"))


def test_bad_inputs_are_one_line_errors(tmp_path):
    with pytest.raises(UserError, match="no tasks"):
        export_dataset([str(tmp_path)], str(tmp_path / "out"), PARAMS)
    with pytest.raises(UserError, match="validation_fraction"):
        export_dataset([str(tmp_path)], str(tmp_path / "o"), ExportParams(validation_fraction=1))


def test_a_task_the_grader_cannot_grade_is_left_out_with_its_reason(tmp_path, capsys):
    """A JS task of a runner the grader has no supervised run for, and one of vitest in a
    workspace package, cannot score a patch: no tasks/rl row, counted, one line per cause."""
    vitest_in_package = "sh -c 'cd packages/core || exit 2; vitest run \"$@\"' workspace"
    js = {"language": "javascript"}
    tasks = [
        make_task("acme/alpha", 1),
        make_task("acme/alpha", 2, **js, test_runner="jasmine"),
        make_task("acme/alpha", 3, **js, test_runner="vitest", test_cmd=vitest_in_package),
        make_task("acme/alpha", 4, **js, test_runner="vitest", test_cmd="vitest run"),
    ]
    curated = write_curated(tmp_path / "curated", tasks)
    result = export_dataset([str(curated)], str(tmp_path / "out"), PARAMS)
    assert result.counts == {"tasks": {"train": 2}, "rl": {"train": 2}}
    assert result.dropped["task_not_gradable"] == 2
    kept = _load(tmp_path / "out", "tasks")["train"]
    assert sorted(kept["instance_id"]) == sorted([tasks[0].instance_id, tasks[3].instance_id])
    said = capsys.readouterr().err
    assert (
        "1 task(s) left out, the grader cannot grade them: grader: the javascript runner 'jasmine'"
        in said
    )
    assert "vitest in the workspace package packages/core is not graded yet" in said
