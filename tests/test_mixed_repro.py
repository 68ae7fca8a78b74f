"""`dvc repro` with the project's own dvc.yaml on one Python, one JavaScript and one Go source.

The params name three test-built repositories: the Python calc (its `add` fix), an npm + jest
calc (its `mul` fix, and inject's bugs on its newest commit) and a Go module (its `Mul` fix, and
inject's bugs). The run must end with one dataset holding tasks of all three languages, and the
report must show them. It is also the suite's one `dvc repro` of every stage: describe writes the
statement, rollout's verified runs become the SFT config, export's data docs and DVC's lock are
there, and a second `dvc repro` runs nothing.
"""

from __future__ import annotations

import json
from pathlib import Path

import datasets
import polars as pl
import pytest
from dvc_project import copy_project, dvc, init_project
from go_calc import CALC as GO_CALC
from go_calc import FILES as GO_FILES
from repo_factory import RepoBuilder
from scripted_agents import GOOD_STATEMENT, reporter_and_fixer
from scripted_llm import ScriptedLLM
from test_js_environments import npm_lock
from test_js_validate import CALC, CALC_FIXED, CALC_TESTS, MUL_TESTS, MULTIPLIES, PACKAGE

pytestmark = [pytest.mark.docker, pytest.mark.slow]


@pytest.fixture(scope="module")
def js_calc(tmp_path_factory, docker_engine) -> tuple[Path, str]:
    repo = RepoBuilder(tmp_path_factory.mktemp("mixed") / "jscalc")
    repo.commit(
        "calc with jest",
        {
            "package.json": json.dumps(PACKAGE, indent=2) + "\n",
            "package-lock.json": npm_lock(PACKAGE),
            "src/calc.js": CALC,
            "__tests__/calc.test.js": CALC_TESTS,
        },
    )
    fixed = repo.commit("fix mul", {"src/calc.js": CALC_FIXED, "__tests__/mul.test.js": MUL_TESTS})
    return repo.path, fixed


GO_MUL = "\n// Mul returns a times b.\nfunc Mul(a, b int) int { return a %s b }\n"
GO_MUL_TESTS = """\
package calc

import "testing"

func TestMul(t *testing.T) {
\tif Mul(2, 3) != 6 {
\t\tt.Fatal(Mul(2, 3))
\t}
}
"""


@pytest.fixture(scope="module")
def go_calc(tmp_path_factory, docker_engine) -> tuple[Path, str]:
    repo = RepoBuilder(tmp_path_factory.mktemp("mixed") / "gocalc")
    repo.commit("calc in go", {**GO_FILES, "calc.go": GO_CALC + GO_MUL % "+"})
    fixed = repo.commit("fix Mul", {"calc.go": GO_CALC + GO_MUL % "*", "mul_test.go": GO_MUL_TESTS})
    return repo.path, fixed


def test_dvc_repro_on_python_js_and_go_sources_ends_with_all_three(
    calc_repo, js_calc, go_calc, docker_engine, tmp_path
):
    py_path, shas = calc_repo
    js_path, js_fix = js_calc
    go_path, go_fix = go_calc
    project = copy_project(tmp_path / "project")
    with ScriptedLLM(reporter_and_fixer) as llm:
        (project / "params.yaml").write_text(
            f"cache_dir: {tmp_path / 'cache'}\n"
            f"sources:\n  repos: [{py_path}, {js_path}, {go_path}]\n  pypi: []\n"
            f"inject:\n  repos: [{js_path}, {go_path}]\n  pypi: []\n  max_candidates: 3\n"
            "  combos: 0\n"
            "  min_complexity: 1\n"
            "pipeline:\n  runner: local\n"
            "curate:\n  threshold: 0.8\n"
            "export:\n  name: mixed-tasks\n"
            f"mine:\n  commits: [{shas['fix_add']}, {js_fix}, {go_fix}]\n"
            "environment:\n  default_python: '3.11'\n"
            "sandbox:\n  kind: docker\n"
            "validate:\n  test_timeout_s: 120\n  gold_runs: 0\n"
            f"llm:\n  base_url: {llm.base_url}\n  model: scripted\n"
            "describe:\n  attempts: 2\n"
            "rollout:\n  attempts: 1\n  max_steps: 6\n"
            f"explore:\n  repos: [{py_path}]\n  explorations: 1\n  max_steps: 2\n"
        )
        init_project(project)
        done = dvc("repro", cwd=project)
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
        again = dvc("repro", cwd=project)
    assert again.returncode == 0, again.stdout[-3000:] + again.stderr[-3000:]
    assert "didn't change, skipping" in again.stdout or "up to date" in again.stdout
    assert "export" in (project / "dvc.lock").read_text()  # the version is recorded by DVC

    data = project / "data"
    tasks = pl.read_parquet(data / "validate" / "tasks" / "*.parquet")
    by_language = {
        lang: tasks.filter(pl.col("language") == lang) for lang in ("python", "javascript", "go")
    }
    assert by_language["python"]["FAIL_TO_PASS"].to_list() == [["tests/test_ops.py::test_add"]]
    js = by_language["javascript"]
    assert [MULTIPLIES] in js["FAIL_TO_PASS"].to_list()  # the mined fix
    assert set(js["test_runner"].to_list()) == {"jest"}
    go = by_language["go"]
    assert [".::TestMul"] in go["FAIL_TO_PASS"].to_list()  # the mined fix, its package's id
    assert set(go["test_runner"].to_list()) == {"go"}
    # inject's JS bugs went through validate too: each one a task or a rejection with a reason
    injected = pl.read_parquet(data / "inject" / "candidates" / "*.parquet")
    assert injected.height >= 1
    rejected = pl.read_parquet(data / "validate" / "rejections" / "*.parquet")
    decided = set(tasks["candidate_id"].to_list()) | set(rejected["input"].to_list())
    assert set(injected["candidate_id"].to_list()) <= decided

    # one dataset, three languages: the export's tasks config says each row's language
    # (three repositories: the export splits them by repository, none in two splits)
    splits = datasets.load_dataset(str(data / "export"), "tasks")
    languages = {row["language"] for split in splits for row in splits[split]}
    assert languages == {"python", "javascript", "go"}
    statements = {row["problem_statement"] for split in splits for row in splits[split]}
    assert GOOD_STATEMENT in statements  # describe, through the scripted model
    sft = datasets.load_dataset(str(data / "export"), "sft")  # rollout: verified, exported
    first = next(iter(sft.values()))
    assert [m["role"] for m in first["messages"][0][:2]] == ["system", "user"]
    assert (data / "export" / "data_docs" / "index.html").exists()
    report = (data / "report" / "index.html").read_text()
    assert all(lang in report for lang in ("python", "javascript", "go"))
    assert "<svg" in report
