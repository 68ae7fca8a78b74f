"""A dataset with one Python and one JavaScript task: every config says each row's language (rl
with the test runner), the card counts tasks per language, and so do the report and ``stats``.

Real Parquet in and out through the export, the report's HTML and the stats command.
"""

from __future__ import annotations

import re
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from curated_factory import make_task, make_trajectory, write_curated
from trajforge.pipelines.report.data import languages, load_run
from trajforge.pipelines.report.html import write_report
from trajforge.pipelines.report.stats import print_stats
from trajforge.pipelines.stages.export import export_dataset
from trajforge.schemas.params import ExportParams
from trajforge.schemas.storage import write_records
from trajforge.schemas.task_instance import TaskInstance

PARAMS = ExportParams(name="two-languages", shard_rows=10, validation_fraction=0.0, seed=7)
JS_TEST = "src/__tests__/sum.test.js > sum > adds"


def _tasks() -> list[TaskInstance]:
    python = make_task("acme/calc", 1)
    js = make_task(
        "acme/sumjs",
        1,
        language="javascript",
        test_runner="jest",
        FAIL_TO_PASS=(JS_TEST,),
        PASS_TO_PASS=("src/__tests__/sum.test.js > sum > empty",),
        test_cmd="node_modules/.bin/jest --ci --json --outputFile=/tmp/trajforge-report.json",
    )
    return [python, js]


@pytest.fixture(scope="module")
def exported(tmp_path_factory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("languages")
    tasks = _tasks()
    runs = [make_trajectory(t.instance_id, 0, True) for t in tasks]
    curated = write_curated(root / "curated", tasks, runs)
    export_dataset([str(curated)], str(root / "dataset"), PARAMS)
    return curated, root / "dataset"


def _rows(dataset: Path, config: str) -> dict[str, dict]:
    files = sorted((dataset / config).glob("*.parquet"))
    assert files, config
    rows = [row for f in files for row in pq.read_table(f).to_pylist()]
    return {row["instance_id"]: row for row in rows}


def test_every_config_carries_the_language_of_its_task(exported):
    _, dataset = exported
    python_id, js_id = (t.instance_id for t in _tasks())
    for config in ("tasks", "rl", "sft", "sft_xml"):
        rows = _rows(dataset, config)
        assert {i: r["language"] for i, r in rows.items()} == {
            python_id: "python",
            js_id: "javascript",
        }, config
    tasks, rl = _rows(dataset, "tasks"), _rows(dataset, "rl")
    for rows in (tasks, rl):
        assert rows[js_id]["test_runner"] == "jest" and rows[python_id]["test_runner"] == "pytest"
    assert tasks[js_id]["FAIL_TO_PASS"] == [JS_TEST]
    assert rl[js_id]["test_cmd"].startswith("node_modules/.bin/jest")


def test_the_card_lists_tasks_per_language(exported):
    _, dataset = exported
    card = (dataset / "README.md").read_text()
    assert "Tasks per language: javascript (1), python (1)" in card
    assert "`language, test_runner`" in card  # the column's documentation


def test_the_report_and_stats_count_tasks_per_language(exported, tmp_path, capsys):
    curated, _ = exported
    older = make_task("acme/old", 3)
    old_dir = tmp_path / "old" / "tasks"
    # a tasks file written before the language layer: no language column at all
    schema = TaskInstance.ARROW_SCHEMA
    legacy = schema.remove(schema.get_field_index("test_runner"))
    legacy = legacy.remove(legacy.get_field_index("language"))
    write_records(str(old_dir / "part-00000-of-00001.parquet"), [older], schema)
    table = pq.read_table(old_dir / "part-00000-of-00001.parquet").select(legacy.names)
    pq.write_table(table, old_dir / "part-00000-of-00001.parquet")
    assert languages(load_run({"old": str(tmp_path / "old")}).tasks) == [("python", 1)]

    run = load_run({"curate": str(curated)})
    assert languages(run.tasks) == [("javascript", 1), ("python", 1)]
    page = Path(write_report({"curate": str(curated)}, str(tmp_path / "r.html"), "run"))
    html = page.read_text()
    panel = html[html.index("<h3>Tasks per language") :]
    panel = panel[: panel.index("</div>")]
    assert "<title>javascript: 1</title>" in panel and "<title>python: 1</title>" in panel

    assert print_stats(str(curated)) == 0
    out = capsys.readouterr().out
    block = out[out.index("tasks by language:") :]
    assert re.search(r"^\s+1\s+javascript$", block, re.M) and re.search(
        r"^\s+1\s+python$", block, re.M
    ), out
