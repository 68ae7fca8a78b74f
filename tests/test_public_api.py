"""The public API: ``from trajforge import ...`` (``pipelines/api/``, installed as ``trajforge``).

Every name imports and is its deep path's object; ``import trajforge`` loads nothing heavy; the
package map holds in the editable install and in a wheel; and a trainer's path runs end to end
through the public names alone: without Docker, tasks written as the project's Parquet rows, loaded
back and answered in process and over HTTP where no container is needed; with Docker, a task the
CLI mined and validated, rewarded (gold 1, wrong 0) and solved in one ``TaskEnv`` episode.
"""

from __future__ import annotations

import importlib
import json
import shutil
import subprocess
import sys
import threading
import zipfile
from pathlib import Path

import pyarrow.parquet as pq
import pytest
import trajforge
from conftest import ROOT, run_stages, write_params
from repo_factory import build_add_fix_repo
from trajforge.generators.languages.python.profile import TEST_CMD
from trajforge.schemas.records import to_table
from trajforge.schemas.task_instance import TaskInstance

pytestmark = pytest.mark.docker

# What the brief promises a trainer, at the least.
PROMISED = ("load_tasks", "reward", "RewardClient", "trl_reward_func", "Evaluator", "TaskEnv")
# Modules `import trajforge` must not load: each costs seconds or needs a service.
HEAVY = ("apache_beam", "pyarrow", "docker", "datasets", "pandas", "polars", "openai", "dask")
FOLDERS = ("pipelines", "generators", "verifiers", "filters", "schemas")


def _python(*args: str, cwd: Path, timeout: int = 120) -> str:
    """This interpreter run with ``args``; its stdout, or the test fails with its stderr."""
    proc = subprocess.run(
        [sys.executable, *args], cwd=cwd, capture_output=True, text=True, timeout=timeout
    )
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def test_every_public_name_imports_and_is_its_deep_paths_object():
    assert set(PROMISED) <= set(trajforge.__all__)
    assert set(trajforge.__all__) == set(trajforge._EXPORTS)
    assert trajforge.__all__ == sorted(trajforge.__all__)
    for name in trajforge.__all__:
        value = getattr(trajforge, name)
        module = importlib.import_module(trajforge._EXPORTS[name])
        assert value is getattr(module, name), name
        assert name in dir(trajforge)
    namespace: dict[str, object] = {}
    exec("from trajforge import *", namespace)
    assert set(trajforge.__all__) <= set(namespace)
    assert isinstance(trajforge.__version__, str) and trajforge.__version__
    with pytest.raises(AttributeError, match="no attribute 'no_such_name'"):
        _ = trajforge.no_such_name  # type: ignore[attr-defined]
    # The rooms are still subpackages: the deep paths keep working.
    from trajforge.pipelines.evaluation import rewards

    assert rewards.reward is trajforge.reward


def test_import_trajforge_loads_nothing_heavy(tmp_path):
    code = (
        "import json, sys, trajforge\n"
        "print(json.dumps({'file': trajforge.__file__, 'modules': sorted(sys.modules)}))\n"
    )
    found = json.loads(_python("-c", code, cwd=tmp_path))
    assert Path(found["file"]).resolve() == ROOT / "pipelines" / "api" / "__init__.py"
    heavy = [m for m in found["modules"] if m.split(".")[0] in HEAVY]
    assert heavy == []
    # Not even trajforge's own rooms: every public name is loaded on first use.
    assert [m for m in found["modules"] if m.startswith("trajforge.")] == []


def test_the_http_side_of_rewards_loads_nothing_heavy(tmp_path):
    """A trainer that only talks to ``serve-rewards`` needs neither Beam nor docker."""
    code = (
        "import json, sys\n"
        "from trajforge import RewardClient, patch_from_completion, trl_reward_func\n"
        "print(json.dumps(sorted(sys.modules)))\n"
    )
    modules = json.loads(_python("-c", code, cwd=tmp_path))
    assert [m for m in modules if m.split(".")[0] in HEAVY] == []


def test_a_wheel_ships_trajforge_once_and_it_imports(tmp_path):
    """A regular (not editable) install: the wheel built from the same setup.py."""
    src = tmp_path / "src"
    src.mkdir()
    for name in ("setup.py", "pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, src / name)
    for folder in FOLDERS:
        ignore = shutil.ignore_patterns("__pycache__")
        shutil.copytree(ROOT / folder, src / folder, ignore=ignore)
    _python("-m", "pip", "wheel", "-q", "--no-deps", "-w", str(tmp_path), str(src), cwd=tmp_path,
            timeout=600)  # fmt: skip
    (wheel,) = tmp_path.glob("trajforge-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    assert {"trajforge/__init__.py", "trajforge/py.typed"} <= names
    assert "trajforge/pipelines/evaluation/rewards.py" in names
    assert not [n for n in names if n.startswith("trajforge/pipelines/api/")]
    site = tmp_path / "site"
    _python("-m", "pip", "install", "-q", "--no-deps", "-t", str(site), str(wheel), cwd=tmp_path,
            timeout=300)  # fmt: skip
    # The installed copy alone: the checkout's editable finder is taken off the import path.
    code = (
        "import json, sys\n"
        "sys.meta_path = [f for f in sys.meta_path if 'editable' not in f.__module__]\n"
        f"sys.path.insert(0, {str(site)!r})\n"
        "import trajforge\n"
        "from trajforge import Evaluator, TaskEnv, load_tasks, reward\n"
        "from trajforge.pipelines.evaluation import evaluator\n"
        "print(json.dumps([trajforge.__file__, evaluator.__file__,\n"
        "                  Evaluator is evaluator.Evaluator]))\n"
    )
    out = _python("-c", code, cwd=tmp_path)
    init, deep, same = json.loads(out.strip().splitlines()[-1])
    assert Path(init) == site / "trajforge" / "__init__.py"
    assert Path(deep) == site / "trajforge" / "pipelines" / "evaluation" / "evaluator.py"
    assert same is True


def test_the_layer_check_counts_an_import_of_the_api(tmp_path):
    """``from trajforge import X`` inside a room imports pipelines (the API lives there)."""
    sys.path.insert(0, str(ROOT / "scripts"))
    try:
        import check_layers
    finally:
        sys.path.remove(str(ROOT / "scripts"))
    probe = tmp_path / "probe.py"
    probe.write_text("def run():\n    from trajforge import TaskEnv\n\n    return TaskEnv\n")
    name = "trajforge.generators.agents.probe"
    assert check_layers.API in check_layers.imports_of(probe, name)
    assert check_layers.layer_errors({name: {check_layers.API}}) == [
        f"{name} imports trajforge.pipelines.api: generators may not import pipelines"
    ]


# -- end to end ----------------------------------------------------------------------------------

F2P = "tests/test_ops.py::test_add"
P2P = "tests/test_ops.py::test_mul"


def _task(tmp_path: Path) -> TaskInstance:
    """The add fix of a repository written here, as validate would record it."""
    repo = build_add_fix_repo(tmp_path / "calc")
    base = repo.git("rev-parse", "HEAD~1")
    return TaskInstance(
        instance_id="calc__add-1",
        repo="local/calc",
        base_commit=base,
        patch=repo.git("diff", "HEAD~1", "HEAD", "--", "calc") + "\n",
        test_patch=repo.git("diff", "HEAD~1", "HEAD", "--", "tests") + "\n",
        problem_statement="add(2, 3) returns -1; it should return 5.",
        hints_text="",
        created_at="2024-01-02T12:00:00+00:00",
        FAIL_TO_PASS=(F2P,),
        PASS_TO_PASS=(P2P,),
        environment_setup_commit=base,
        image_name="trajforge-env:public-api",
        test_cmd=TEST_CMD,
        origin="commit",
        profile_id="public-api",
        candidate_id="calc-add",
        source=str(tmp_path / "calc"),
        flaky_tests=(),
        difficulty=None,
    )


def test_tasks_load_and_rewards_answer_without_docker(tmp_path):
    """A stage's Parquet read back, and every reward path that needs no container: no patch in a
    completion, an unknown task, over HTTP as TRL's GRPOTrainer calls it."""
    from trajforge import (
        Evaluator,
        RewardClient,
        RewardService,
        RewardServiceError,
        load_params,
        load_tasks,
        patch_from_completion,
        reward,
        serve,
        trl_reward_func,
    )

    written = _task(tmp_path)
    tables = tmp_path / "validate" / "tasks"
    tables.mkdir(parents=True)
    pq.write_table(to_table([written], TaskInstance.ARROW_SCHEMA), tables / "part-00000.parquet")
    tasks = load_tasks([str(tmp_path / "validate")])
    assert tasks == {written.instance_id: written}
    task = tasks[written.instance_id]

    params = tmp_path / "params.yaml"
    params.write_text(f"cache_dir: {tmp_path / 'cache'}\nsandbox:\n  kind: local\n")
    evaluator = Evaluator(load_params(str(params)), use_cache=False)
    try:
        chat = [{"role": "assistant", "content": f"The fix:\n```diff\n{task.patch}```\n"}]
        assert patch_from_completion(chat) == task.patch
        assert patch_from_completion("I could not find the bug.") is None
        none = reward(task, None, evaluator=evaluator)
        assert (none.reward, none.resolved, none.reason, none.error) == (
            0.0, False, "empty_patch", False,
        )  # fmt: skip
        assert none.report["patch_is_None"] is True

        service = RewardService(evaluator, tasks, workers=1)
        server = serve(service, port=0)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        try:
            url = f"http://127.0.0.1:{server.server_address[1]}"
            func = trl_reward_func(url)
            completions = ["no diff here", [{"role": "assistant", "content": "nor here"}]]
            ids = [task.instance_id] * 2
            assert func(prompts=["", ""], completions=completions, instance_id=ids) == [0.0, 0.0]
            # A refusal is no reward: it is raised, at once (the request's fault, not a busy
            # service), and its body carries none to misread.
            with pytest.raises(RewardServiceError, match="404 unknown_instance") as refused:
                RewardClient(url).score("no-such-task", task.patch)
            assert (refused.value.status, refused.value.attempts) == (404, 1)
            assert sum(service.stats()["counts"].values()) >= 3  # every answer counted
        finally:
            server.shutdown()
            server.server_close()
            service.close()
    finally:
        evaluator.close()


def test_a_trainer_grades_and_steps_a_validated_task(docker_engine, tmp_path):
    """The real thing: a task mined and validated by the CLI, rewarded and played through the
    public names only, in Docker containers."""
    from trajforge import Evaluator, TaskEnv, load_params, load_tasks, reward

    build_add_fix_repo(tmp_path / "calc")
    work = tmp_path / "work"
    work.mkdir()
    write_params(work / "params.yaml", tmp_path / "cache")
    run_stages(
        work,
        ("mine", "--repo", str(tmp_path / "calc"), "--output", "mine"),
        ("validate", "--input", "mine", "--output", "validate"),
    )
    (task,) = load_tasks([str(work / "validate")]).values()
    assert task.FAIL_TO_PASS == (F2P,)
    wrong = task.patch.replace("+    return a + b", "+    return a * b")
    assert wrong != task.patch

    evaluator = Evaluator(load_params(str(work / "params.yaml")), use_cache=False, timeout_s=60)
    try:
        gold = reward(task, task.patch, evaluator=evaluator)
        assert (gold.reward, gold.resolved, gold.reason) == (1.0, True, "resolved"), gold.log
        bad = reward(task, wrong, evaluator=evaluator)
        assert (bad.reward, bad.resolved, bad.error) == (0.0, False, False), bad.log

        with evaluator.env(task) as env:
            assert isinstance(env, TaskEnv)
            start = env.reset()
            assert [m.role for m in start.messages] == ["system", "user"]
            assert {t["function"]["name"] for t in start.tools} >= {"bash", "str_replace"}
            probe = "python -c 'from calc.ops import add; print(add(2, 3))'"
            assert env.step("bash", {"command": probe}).observation.strip().endswith("-1")
            edit = {"path": "calc/ops.py", "old_str": "a - b", "new_str": "a + b"}
            assert env.step("str_replace", edit).error is None
            outcome = env.close()
        assert outcome.reward == 1.0 and outcome.verdict.reason == "resolved"
        assert "+    return a + b" in outcome.patch
    finally:
        evaluator.close()
