"""Environments through a real registry, as a second machine sees them: validate builds and
pushes; with the local images gone, a second validate pulls them (no build) and names the same
digests; a registry that is down is one line and a count, and the stage still builds here."""

from __future__ import annotations

import json
import socket
import subprocess
import uuid
from dataclasses import replace
from pathlib import Path

import polars as pl
import pytest
from conftest import run_cli, write_params
from registry_server import Registry, start_registry
from trajforge.schemas.records import from_row
from trajforge.schemas.task_instance import TaskInstance
from trajforge.verifiers.patch_verifier import verify_patch
from trajforge.verifiers.sandbox.podman import PodmanSandbox

pytestmark = [pytest.mark.docker, pytest.mark.podman]

RUN = uuid.uuid4().hex[:8]


@pytest.fixture(scope="module")
def registry(tmp_path_factory: pytest.TempPathFactory):
    started = start_registry(tmp_path_factory.mktemp("registry"))
    yield started
    started.stop()


def _params(work: Path, namespace: str) -> None:
    extra = f"  registry: {namespace}\n  push: true\n"
    text = write_params(work / "params.yaml", work / "cache").read_text()
    (work / "params.yaml").write_text(text.replace("environment:\n", "environment:\n" + extra))


def _tasks(out: Path) -> pl.DataFrame:
    return pl.read_parquet(out / "tasks" / "*.parquet")


def _summary(out: Path) -> dict:
    return json.loads((out / "summary.json").read_text())


def _remove(images: set[str]) -> None:
    subprocess.run(["docker", "rmi", "-f", *images], capture_output=True, check=False)


@pytest.fixture(scope="module")
def pushed(calc_repo, docker_engine, registry: Registry, tmp_path_factory):
    path, _ = calc_repo
    work = tmp_path_factory.mktemp("pushed")
    namespace = f"{registry.host}/trajforge-stage-{RUN}"
    _params(work, namespace)
    assert run_cli("mine", "--repo", str(path), "--output", "mine", cwd=work).returncode == 0
    done = run_cli("validate", "--input", "mine", "--output", "first", cwd=work)
    assert done.returncode == 0, done.stderr
    images = set(_tasks(work / "first")["image_name"])
    yield work, namespace, images
    _remove(images)


def test_built_images_are_pushed_and_tasks_name_them_by_digest(pushed):
    work, namespace, images = pushed
    tasks = _tasks(work / "first")
    summary = _summary(work / "first")
    assert images and all(image.startswith(f"{namespace}/env:") for image in images)
    assert summary["images_pushed"] == len(images)  # every image that built (one install fails)
    for image, digest in zip(tasks["image_name"], tasks["image_digest"], strict=True):
        assert digest.startswith(f"{image.rpartition(':')[0]}@sha256:")


def test_another_engine_with_only_the_registry_runs_a_task_at_gold(pushed, calc_repo):
    """podman keeps its own image store: to it, the registry is the only source of the image."""
    work, _, _ = pushed
    repo, _ = calc_repo
    rows = _tasks(work / "first").filter(pl.col("FAIL_TO_PASS").list.len() > 0).to_dicts()
    task = from_row(TaskInstance, rows[0])
    by_digest = replace(task, image_name=task.image_digest)
    sandbox = PodmanSandbox()
    try:
        assert sandbox.image_info(task.image_digest) is None
        assert sandbox.pull_image(task.image_digest)
        gold = verify_patch(sandbox, by_digest, str(repo), task.patch, 120, None)
        assert gold.resolved, gold
        assert not verify_patch(sandbox, by_digest, str(repo), "", 120, None).resolved
    finally:
        sandbox.close()  # its containers go first: an image in use cannot be removed
        sandbox.remove_image(task.image_digest)


def test_a_second_run_without_the_images_pulls_them_and_builds_nothing(pushed):
    work, _, images = pushed
    _remove(images)  # as on a second machine: only the registry has them
    done = run_cli("validate", "--input", "mine", "--output", "second", cwd=work)
    assert done.returncode == 0, done.stderr
    summary = _summary(work / "second")
    assert summary["images_pulled"] == len(images)
    assert "images_built" not in summary and "images_pushed" not in summary
    first, second = _tasks(work / "first"), _tasks(work / "second")
    assert sorted(second["image_digest"]) == sorted(first["image_digest"])
    assert sorted(second["instance_id"]) == sorted(first["instance_id"])


def test_a_registry_that_is_down_is_one_line_and_the_stage_builds_here(calc_repo, tmp_path):
    """One fix is enough to pull, build and push (the whole log would add a test timeout and a
    failed build to wait out, which ``pushed`` already covers)."""
    path, shas = calc_repo
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        dead = f"127.0.0.1:{probe.getsockname()[1]}"
    _params(tmp_path, f"{dead}/trajforge-down-{RUN}")
    mine = ("mine", "--repo", str(path), "--commits", shas["fix_add"], "--output", "mine")
    assert run_cli(*mine, cwd=tmp_path).returncode == 0
    done = run_cli("validate", "--input", "mine", "--output", "out", cwd=tmp_path)
    images = set(_tasks(tmp_path / "out")["image_name"]) if (tmp_path / "out").exists() else set()
    try:
        assert done.returncode == 0, done.stderr
        assert "Traceback" not in done.stderr
        lines = [line for line in done.stderr.splitlines() if dead in line]
        assert lines and all(line.startswith("validate: profile ") for line in lines)
        summary = _summary(tmp_path / "out")
        assert summary["registry_errors"] >= 2  # the pull before the build, the push after
        assert summary["kept"] > 0 and summary["images_built"] >= 1
        digests = _tasks(tmp_path / "out")["image_digest"]
        assert all(d.startswith("sha256:") for d in digests)  # not pushed: the local image id
    finally:
        _remove(images)
