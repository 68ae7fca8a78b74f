"""Stages on Beam's DaskRunner (``pipeline.runner: dask``): real dask.distributed clusters of
separate worker processes, the real CLI and DVC, no mocks.

Each stage run on Dask must write what the in-process runner writes: the same files, byte for
byte, in every table (a runner that drops a branch leaves a table empty), and the same summary
counts (the Dask runner keeps Beam's metrics per bundle; Beam's own raises).
"""

from __future__ import annotations

import json
import os
import signal
import threading
import time
from pathlib import Path

import polars as pl
import pytest
import yaml
from conftest import ROOT, run_cli
from curated_factory import make_task, make_trajectory
from dvc_project import copy_project, dvc, init_project
from repo_factory import RepoBuilder
from scripted_llm import ScriptedLLM
from test_import_trajectories import _write, report_json, swe_agent_0x, swe_agent_1x
from test_llm_bugs import CORE, TESTS, _respond
from test_llm_bugs import PYPROJECT as TALLY_PYPROJECT
from test_stage_transforms import LEAK_PATCH, OTHER_PATCH, explore_task, step
from trajforge.pipelines.runtime import cost
from trajforge.schemas.explore_task import ExploreTask
from trajforge.schemas.storage import write_records
from trajforge.schemas.task_instance import TaskInstance
from trajforge.schemas.trajectory import Trajectory
from trajforge.schemas.transition import Transition

pytestmark = [pytest.mark.dask, pytest.mark.slow]

CURATE_TABLES = ("tasks", "explore_tasks", "trajectories", "transitions", "rejections")


def _tables(output: Path) -> dict[str, dict[str, bytes]]:
    """Every table of a stage output: file name -> bytes."""
    return {
        table.name: {f.name: f.read_bytes() for f in sorted(table.glob("*.parquet"))}
        for table in sorted(output.iterdir())
        if table.is_dir()
    }


def _summary(output: Path) -> dict:
    summary = json.loads((output / "summary.json").read_text())
    summary.pop("seconds")
    return {key: value for key, value in summary.items() if not cost.is_measured(key)}


def _rows(output: Path, table: str) -> pl.DataFrame:
    return pl.read_parquet(output / table / "*.parquet")


def _same_output(local: Path, dask: Path, tables: tuple[str, ...]) -> None:
    """The Dask run wrote the local run's files, byte for byte, and the same summary; every
    table the local run filled is filled (what a dropped branch would leave empty)."""
    want, got = _tables(local), _tables(dask)
    assert set(tables) <= set(want), want.keys()
    for table in tables:
        assert _rows(local, table).height > 0, f"the local run left {table} empty"
        assert _rows(dask, table).height == _rows(local, table).height, table
    assert got == want
    assert _summary(dask) == _summary(local)


def _cli(*args: str, cwd: Path) -> str:
    proc = run_cli(*args, cwd=cwd, timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr, proc.stderr
    return proc.stderr


def _params(path: Path, cache: Path, extra: str = "") -> Path:
    path.write_text(f"cache_dir: {cache}\n" + extra)
    return path


# 1. multi-sink stages: the same bytes as the local runner --------------------------------------


def test_mine_on_a_dask_cluster_writes_the_local_runners_bytes(calc_repo, tmp_path):
    path, _ = calc_repo
    _params(tmp_path / "params.yaml", tmp_path / "cache")
    run = ("mine", "--repo", str(path), "--shards", "2")
    _cli(*run, "--output", "local", cwd=tmp_path)
    stderr = _cli(*run, "--output", "dask", "--runner", "dask", "--dask_workers", "2", cwd=tmp_path)
    assert "mine: 9 inputs, 6 kept, 3 rejected" in stderr
    # The workers' ticks reach the launcher's bar (as Dask events): it counts every candidate.
    assert "mine: 9candidate" in stderr.replace("\r", "\n"), stderr
    _same_output(tmp_path / "local", tmp_path / "dask", ("candidates", "rejections"))


def write_curate_inputs(root: Path) -> None:
    """Rollout- and explore-like outputs that make every curate table non-empty: kept and
    duplicate tasks, a leaking statement, runs of kept and dropped tasks, their steps, and
    explore tasks with a near copy and a low score."""
    kept = [make_task(f"acme/repo{n}", n) for n in range(1, 9)]
    duplicate = make_task("acme/beta", 1)  # same patch and statement as acme/repo1's
    other = make_task(
        "acme/gamma", 3, patch=OTHER_PATCH,
        problem_statement="Multiplying two numbers with mul returns their sum; a product is due.",
    )  # fmt: skip
    leaking = make_task(
        "acme/delta", 4, patch=LEAK_PATCH,
        problem_statement="ranking() should `return sorted(items, reverse=True)` instead.",
    )  # fmt: skip
    tasks = [*kept, duplicate, other, leaking]
    runs = [make_trajectory(t.instance_id, 0, True) for t in tasks]
    runs.append(make_trajectory("nobody__nothing-9", 0, True))
    steps = [step(run.trajectory_id, n) for run in runs for n in range(2)]
    explore = [
        explore_task("e-best", "Print the number one.", 4.0),
        explore_task("e-copy", "print  the number ONE.", 3.0),
        explore_task("e-low", "Print a one using Python.", 1.0),
        explore_task("e-two", "Print the number two, then exit.", 5.0),
    ]
    part = "part-00000-of-00001.parquet"
    rollout, explored = root / "rollout", root / "explore"
    write_records(str(rollout / "tasks" / part), tasks, TaskInstance.ARROW_SCHEMA)
    write_records(str(rollout / "trajectories" / part), runs, Trajectory.ARROW_SCHEMA)
    write_records(str(rollout / "transitions" / part), steps, Transition.ARROW_SCHEMA)
    write_records(str(explored / "explore_tasks" / part), explore, ExploreTask.ARROW_SCHEMA)


CURATE_PARAMS = (
    "curate:\n  max_scores: {statement_leaks_patch: 0.0}\n  min_scores: {explore_score: 2.0}\n"
)


def test_curate_on_a_dask_cluster_writes_the_local_runners_bytes(tmp_path):
    """curate joins, groups, batches and reads a side input, and writes five tables."""
    write_curate_inputs(tmp_path)
    _params(tmp_path / "params.yaml", tmp_path / "cache", CURATE_PARAMS)
    run = ("curate", "--input", "rollout", "--input", "explore", "--shards", "2")
    _cli(*run, "--output", "local", cwd=tmp_path)
    _cli(*run, "--output", "dask", "--runner", "DaskRunner", cwd=tmp_path)
    _same_output(tmp_path / "local", tmp_path / "dask", CURATE_TABLES)
    reasons = set(_rows(tmp_path / "dask", "rejections")["reason"])
    assert {"exact_duplicate", "task_dropped", "trajectory_dropped"} <= reasons
    assert _summary(tmp_path / "dask")["rejected"]["exact_duplicate"] == 2


# 1b. counters: the summary's counters are the local runner's ------------------------------------


def test_model_bug_counters_on_a_dask_cluster_are_the_local_runners(tmp_path):
    """inject with a (scripted) model counts llm_calls and llm_cache_hits (SUMMARY_COUNTERS)
    and llm_rewrites (the summary namespace) in its DoFns, on worker processes here."""
    repo = RepoBuilder(tmp_path / "tally")
    repo.commit("tally", {"pyproject.toml": TALLY_PYPROJECT, "tally/__init__.py": "",
                          "tally/core.py": CORE, "tests/test_core.py": TESTS})  # fmt: skip
    with ScriptedLLM(_respond) as llm:
        for runner in ("local", "dask"):  # a cache each: the second run must not hit the first's
            no_docker = "inject:\n  measure_coverage: false\n"  # every function asked for
            params = _params(tmp_path / f"{runner}.yaml", tmp_path / f"cache-{runner}", no_docker)
            _cli("inject", "--repo", str(repo.path), "--mode", "both", "--max-candidates", "5",
                 "--base-url", llm.base_url, "--model", "scripted", "--params", str(params),
                 "--runner", runner, "--output", runner, cwd=tmp_path)  # fmt: skip
    summary = _summary(tmp_path / "dask")
    assert summary["llm_calls"] == 8 and summary["llm_cache_hits"] == 0, summary
    assert summary["llm_rewrites"] >= 2, summary
    _same_output(tmp_path / "local", tmp_path / "dask", ("candidates", "rejections"))


def test_import_summary_counters_on_a_dask_cluster_are_the_local_runners(tmp_path):
    """import-trajectories counts files, messages, tool calls and verdicts, and records its
    format (a string set), all in the summary namespace."""
    _write(tmp_path / "in" / "local__calc-1.traj", swe_agent_1x())
    _write(tmp_path / "in" / "local__calc-0.traj", swe_agent_0x())
    (tmp_path / "in" / "broken.traj").write_text('{"history": [')
    report = _write(tmp_path / "report.json", report_json())
    _params(tmp_path / "params.yaml", tmp_path / "cache")
    run = ("import-trajectories", "--format", "swe-agent", "in", "--report", str(report))
    _cli(*run, "--output", "local", cwd=tmp_path)
    _cli(*run, "--output", "dask", "--runner", "dask", cwd=tmp_path)
    summary = _summary(tmp_path / "dask")
    assert summary["format"] == "swe-agent" and summary["files"] == 3, summary
    assert summary["messages"] > 0 and summary["tool_calls"] > 0, summary
    _same_output(tmp_path / "local", tmp_path / "dask", ("trajectories", "rejections"))


# 2. the DVC pipeline with pipeline.runner: dask --------------------------------------------------


def _project(root: Path, calc: Path, runner: str) -> Path:
    """The project's dvc.yaml and code, on a params file that mines and injects the calc repo."""
    project = copy_project(root / runner)
    params = yaml.safe_load((ROOT / "params.yaml").read_text())  # DVC wants every section
    params["cache_dir"] = str(root / f"cache-{runner}")
    params["sources"].update(repos=[str(calc)], pypi=[])
    params["inject"].update(repos=[str(calc)], pypi=[], max_candidates=6, min_complexity=1)
    params["inject"]["measure_coverage"] = False  # no Docker: no clean run on first contact
    params["explore"].update(pypi=[])
    params["pipeline"].update(runner=runner, shards=2, workers=2)
    params["curate"].update(yaml.safe_load(CURATE_PARAMS)["curate"])
    (project / "params.yaml").write_text(yaml.safe_dump(params))
    write_curate_inputs(project / "data")  # what the Docker stages (rollout, explore) write
    for done in ("rollout", "explore"):
        (project / "data" / done / ".trajforge-output").write_text("written by trajforge\n")
    init_project(project)
    return project


def test_dvc_repro_on_dask_writes_what_the_local_runner_writes(calc_repo, tmp_path):
    """``dvc repro`` of two stages that need no Docker (mine, and curate on rollout- and
    explore-like inputs) with ``pipeline.runner: dask`` in params: DVC's params reach the runner.
    inject and export on Dask are compared with the local runner in test_object_storage.py's
    stage chain (export runs in-process on either runner)."""
    calc, _ = calc_repo
    stages = ("mine", "curate")
    outputs = {}
    for runner in ("local", "dask"):
        project = _project(tmp_path, calc, runner)
        for stage in stages:  # -s: the stage alone (rollout and explore are inputs here)
            proc = dvc("repro", "-s", stage, cwd=project)
            assert proc.returncode == 0, proc.stdout + proc.stderr
        outputs[runner] = project / "data"
        lock = yaml.safe_load((project / "dvc.lock").read_text())
        assert lock["stages"]["mine"]["params"]["params.yaml"]["pipeline"]["runner"] == runner
    for stage, tables in (("mine", ("candidates", "rejections")), ("curate", CURATE_TABLES)):
        _same_output(outputs["local"] / stage, outputs["dask"] / stage, tables)


# 3. a worker killed mid-stage -----------------------------------------------------------------


def _many_fixes(path: Path, count: int) -> None:
    """A repository of ``count`` (at most 29: one commit a day in January) fix commits, each
    changing code and its test: all candidates."""
    repo = RepoBuilder(path)
    repo.commit("init", {"lib.py": "X0 = 0\n", "tests/test_lib.py": "def test_0(): pass\n"})
    for n in range(1, count + 1):
        code = "".join(f"X{i} = {i}\n" for i in range(n + 1))
        tests = "".join(f"def test_{i}():\n    assert {i} == {i}\n" for i in range(n + 1))
        repo.commit(f"Fix {n}", {"lib.py": code, "tests/test_lib.py": tests})


class Killer(threading.Thread):
    """Kills one worker process (SIGKILL) while it runs a bundle of ``step``; its nanny starts a
    new one, and the scheduler runs the lost tasks again."""

    def __init__(self, address: str, step: str) -> None:
        super().__init__(daemon=True)
        from dask.distributed import Client

        self.client = Client(address)
        self.step = step
        self.killed: tuple[str, int] | None = None
        self.stop = threading.Event()

    def run(self) -> None:
        while not self.stop.is_set() and self.killed is None:
            for worker, keys in self.client.processing().items():
                if any(self.step in str(key) for key in keys):
                    pid = self.client.run(os.getpid, workers=[worker])[worker]
                    os.kill(pid, signal.SIGKILL)
                    self.killed = (worker, pid)
                    break
            time.sleep(0.02)


def test_a_worker_killed_mid_stage_is_replaced_and_the_tables_are_complete(cluster, tmp_path):
    _many_fixes(tmp_path / "lib", 28)
    _params(tmp_path / "params.yaml", tmp_path / "cache")
    run = ("mine", "--repo", str(tmp_path / "lib"), "--shards", "2")
    _cli(*run, "--output", "local", cwd=tmp_path)
    workers_before = set(cluster.scheduler_info["workers"])
    killer = Killer(cluster.scheduler_address, "MineCommit")
    killer.start()
    try:
        _cli(*run, "--output", "dask", "--runner", "dask",
             "--dask_client_address", cluster.scheduler_address, cwd=tmp_path)  # fmt: skip
        killer.client.wait_for_workers(2, timeout=120)  # the nanny started a new one
        workers_after = set(killer.client.scheduler_info()["workers"])
    finally:
        killer.stop.set()
        killer.join()
        killer.client.close()
    assert killer.killed is not None, "no MineCommit bundle was seen running"
    worker, pid = killer.killed
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)
    assert worker in workers_before and worker not in workers_after
    # The scheduler (in this process) saw a MineCommit bundle lost with the worker, then run
    # again to the end.
    log = [t for t in cluster.scheduler.transition_log if "MineCommit" in str(t.key)]
    lost = {t.key for t in log if t.start == "processing" and t.finish == "released"
            and t.stimulus_id.startswith("handle-worker-cleanup")}  # fmt: skip
    assert lost, log
    assert all(any(t.key == key and t.finish == "memory" for t in log) for key in lost)
    ids = _rows(tmp_path / "dask", "candidates")["candidate_id"]
    assert ids.len() == 28 and ids.n_unique() == 28
    _same_output(tmp_path / "local", tmp_path / "dask", ("candidates",))


def test_dask_options_pick_the_dask_runner_and_clash_with_another(tmp_path):
    _params(tmp_path / "params.yaml", tmp_path / "cache")
    run = ("mine", "--repo", str(tmp_path), "--output", "out", "--dask_workers", "1")
    proc = run_cli(*run, "--runner", "FlinkRunner", cwd=tmp_path)
    assert proc.returncode == 2, proc.stderr
    last = proc.stderr.strip().splitlines()[-1]
    assert last == "trajforge: --dask_workers runs a stage on Dask, but --runner is FlinkRunner"
    missing = tmp_path / "scheduler.json"
    proc = run_cli(*run, "--dask_scheduler_file", str(missing), cwd=tmp_path)
    assert proc.returncode == 2, proc.stderr
    assert f"--dask_scheduler_file {missing}: no such file" in proc.stderr
