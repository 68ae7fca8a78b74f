"""Environments as artifacts: validate builds images from recipes, the export carries them, and a
plain `docker build` of an exported recipe runs the task's tests at gold."""

from __future__ import annotations

import json
import shutil
import subprocess
from dataclasses import replace
from pathlib import Path

import polars as pl
import pytest
from conftest import run_cli, write_params
from trajforge.generators.environments.disk import disk_use
from trajforge.generators.environments.recipe import marker, render_dockerfile
from trajforge.schemas.records import from_row
from trajforge.schemas.task_instance import TaskInstance
from trajforge.verifiers.patch_verifier import verify_patch
from trajforge.verifiers.sandbox.docker import DockerSandbox

pytestmark = pytest.mark.docker

CA_BUNDLE = "/etc/ssl/certs/ca-certificates.crt"


@pytest.fixture(scope="module")
def exported(calc_repo, docker_engine, tmp_path_factory):
    path, _ = calc_repo
    work = tmp_path_factory.mktemp("recipes")
    write_params(work / "params.yaml", work / "cache")
    for args in (
        ("mine", "--repo", str(path), "--output", "mine"),
        ("validate", "--input", "mine", "--output", "out"),
        ("export", "--input", "out", "--output", "dataset", "--configs", "tasks,rl"),
    ):
        done = run_cli(*args, cwd=work)
        assert done.returncode == 0, done.stderr
    return work, path


def _tasks(work: Path) -> list[TaskInstance]:
    rows = pl.read_parquet(work / "out" / "tasks" / "*.parquet").to_dicts()
    return [from_row(TaskInstance, row) for row in rows]


def test_tasks_name_their_recipe_and_digest(exported):
    work, _ = exported
    tasks = _tasks(work)
    assert tasks
    for task in tasks:
        assert task.env_recipe.startswith("# trajforge environment recipe")
        assert task.image_digest.startswith("sha256:")  # no registry: the image id
        assert task.image_name == f"trajforge-env:{task.profile_id}"
    summary = json.loads((work / "out" / "summary.json").read_text())
    assert summary["environment images"] == len({t.image_name for t in tasks})
    assert 0 < summary["image MB per task"] <= summary["image MB (unique layers)"]


def test_export_carries_recipes_and_the_base_recipe(exported):
    work, _ = exported
    tasks = _tasks(work)
    dataset = work / "dataset"
    for task in tasks:
        folder = dataset / "environments" / task.profile_id
        assert (folder / "Dockerfile").read_text() == task.env_recipe
        reference = json.loads((folder / "environment.json").read_text())
        assert reference["image"] == task.image_name
        assert reference["image_digest"] == task.image_digest
        assert reference["setup_commit"] == task.environment_setup_commit
    build = (dataset / "environments" / "base" / "py3.11" / "build.sh").read_text()
    assert "debootstrap" in build and "docker import - trajforge-base:py3.11" in build
    version = json.loads((dataset / "version.json").read_text())
    assert any(name.startswith("environments/") for name in version["files"])
    assert "## Environments" in (dataset / "README.md").read_text()


def test_plain_docker_build_of_the_exported_recipe_passes_at_gold(exported, tmp_path):
    """What a user does with the dataset alone: rebuild the image, run the task's tests."""
    work, repo = exported
    task = next(t for t in _tasks(work) if t.FAIL_TO_PASS)
    recipe = work / "dataset" / "environments" / task.profile_id / "Dockerfile"
    context = tmp_path / "context"
    (context / "trajforge").mkdir(parents=True)
    shutil.copy(CA_BUNDLE, context / "trajforge" / "ca.crt")
    (context / "trajforge" / "env.json").write_bytes(
        marker(task.profile_id, task.environment_setup_commit)
    )
    tree = subprocess.run(
        ["git", "-C", str(repo), "archive", "--prefix=repo/", task.environment_setup_commit],
        capture_output=True,
        check=True,
    ).stdout
    subprocess.run(["tar", "-x", "-C", str(context)], input=tree, check=True)
    tag = f"trajforge-test-rebuilt:{task.profile_id}"
    built = subprocess.run(
        ["docker", "build", "-q", "-f", str(recipe), "-t", tag, str(context)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert built.returncode == 0, built.stderr[-2000:]
    sandbox = DockerSandbox()
    try:
        rebuilt = replace(task, image_name=tag)
        verdict = verify_patch(sandbox, rebuilt, str(repo), task.patch, 120, None)
        assert verdict.resolved, verdict
        assert set(verdict.test_report) == {*task.FAIL_TO_PASS, *task.PASS_TO_PASS}
        unsolved = verify_patch(sandbox, rebuilt, str(repo), "", 120, None)
        assert not unsolved.resolved
    finally:
        sandbox.close()
        subprocess.run(["docker", "rmi", "-f", tag], capture_output=True, check=False)


def test_disk_use_counts_shared_layers_once(exported):
    """Two tasks in one image cost one image; the base layer under every image is counted once."""
    work, _ = exported
    tasks = _tasks(work)
    sandbox = DockerSandbox()
    try:
        image = tasks[0].image_name
        one = disk_use(sandbox, [image])
        two = disk_use(sandbox, [image, image])
        with_base = disk_use(sandbox, [image, "trajforge-base:py3.11"])
        base = disk_use(sandbox, ["trajforge-base:py3.11"])
        absent = disk_use(sandbox, [image, "trajforge-env:absent"])
    finally:
        sandbox.close()
    assert two.unique_bytes == one.unique_bytes and two.per_task_mb == one.per_task_mb / 2
    assert with_base.unique_bytes == one.unique_bytes  # the base's layer is already in the image
    assert 0 < base.unique_bytes < one.unique_bytes
    assert absent.missing == 1 and absent.unique_bytes == one.unique_bytes


def test_recipe_is_a_pure_function_of_python_and_install():
    first = render_dockerfile("3.11", ["pip install -e ."])
    assert first == render_dockerfile("3.11", ["pip install -e ."])
    assert first != render_dockerfile("3.11", ["pip install -e .[test]"])
    assert "ARG BASE=trajforge-base:py3.13" in render_dockerfile("3.13", [])
    # The CA bundle is a build input of the install stages only: the final stage copies the
    # dependency layer's /venv and the commit's delta of it, nothing under /tmp/trajforge.
    final = first.split("\nFROM ${BASE}\n", 1)[1]
    assert "ca.crt" not in final and "/tmp/trajforge/" not in final
    assert "COPY --from=deps /venv /venv" in final
    assert "COPY --from=build /tmp/trajforge-delta/ /" in final
