"""Environment images through a real registry: Debian's docker-registry on a free local port, the
real engine, real images built FROM the base image (and removed at the end)."""

from __future__ import annotations

import io
import json
import socket
import subprocess
import tarfile
import threading
import time
import urllib.request
import uuid
from collections import Counter
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from conftest import run_cli
from curated_factory import make_task
from registry_server import Registry, start_registry
from trajforge.generators.environments import registry as envreg
from trajforge.generators.environments.base_image import base_image_tag
from trajforge.generators.environments.recipe import PROFILE_LABEL
from trajforge.generators.environments.task_image import NAMED, ensure_task_image
from trajforge.pipelines.runtime.sinks import MARKER
from trajforge.schemas.params import EnvironmentParams
from trajforge.verifiers.sandbox.base import ImageBuild, RegistryError
from trajforge.verifiers.sandbox.docker import DockerSandbox

pytestmark = pytest.mark.docker

BASE = base_image_tag("3.11")
RUN = uuid.uuid4().hex[:8]  # this run's images: concurrent runs never share a name


@pytest.fixture(scope="module")
def registry(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Registry]:
    started = start_registry(tmp_path_factory.mktemp("registry"))
    yield started
    started.stop()


@pytest.fixture(scope="module")
def sandbox(docker_engine, registry: Registry) -> Iterator[DockerSandbox]:
    """The engine; at the end every image this module made (named in its registry) is removed."""
    box = DockerSandbox()
    yield box
    for tag in box.list_images(PROFILE_LABEL):
        if tag.startswith(f"{registry.namespace}/") or RUN in tag:
            box.remove_image(tag)
    box.close()


def build(box: DockerSandbox, tag: str) -> str:
    """A tiny environment image (one small layer over the base image) carrying the profile label;
    its image id."""
    dockerfile = (
        f"FROM {BASE}\nLABEL {PROFILE_LABEL}={tag.rpartition(':')[2]}\n"
        f"RUN echo {tag} > /trajforge-test-marker\n"
    )
    empty = io.BytesIO()
    tarfile.open(fileobj=empty, mode="w").close()
    result = box.build_image(ImageBuild(tag=tag, dockerfile=dockerfile, context=empty.getvalue()))
    assert result.ok, result.log
    info = box.image_info(tag)
    assert info is not None
    return info.image_id


@pytest.fixture(scope="module")
def pushed(sandbox: DockerSandbox, registry: Registry) -> tuple[str, str, str]:
    """(tag, image id, digest) of an image built here and pushed once for the module."""
    tag = f"{registry.namespace}/env:pushed{RUN}"
    image_id = build(sandbox, tag)
    return tag, image_id, sandbox.push_image(tag)


def manifest_digest(registry: Registry, repository: str, tag: str) -> str:
    """What the registry itself says the tag's manifest digest is (its HTTP API, no engine)."""
    request = urllib.request.Request(
        f"http://{registry.host}/v2/{repository}/manifests/{tag}",
        headers={"Accept": "application/vnd.docker.distribution.manifest.v2+json"},
        method="HEAD",
    )
    with urllib.request.urlopen(request, timeout=10) as answer:
        return answer.headers["Docker-Content-Digest"]


def test_push_returns_the_digest_the_registry_holds(sandbox, registry, pushed):
    tag, _, digest = pushed
    repository = tag.rpartition(":")[0]
    assert digest.startswith(f"{repository}@sha256:")
    served = manifest_digest(registry, repository.partition("/")[2], tag.rpartition(":")[2])
    assert digest == f"{repository}@{served}"
    info = sandbox.image_info(tag)
    assert info is not None and digest in info.repo_digests


def test_a_removed_image_comes_back_by_pull_as_the_same_image(sandbox, pushed):
    tag, image_id, digest = pushed
    sandbox.remove_image(tag)
    assert sandbox.image_info(tag) is None
    sandbox.remove_image(tag)  # absent: nothing to do, no error
    assert sandbox.pull_image(tag) is True
    info = sandbox.image_info(tag)
    assert info is not None and info.image_id == image_id and digest in info.repo_digests


def test_pull_of_an_unknown_tag_is_false(sandbox, registry):
    assert sandbox.pull_image(f"{registry.namespace}/env:never{RUN}") is False
    assert sandbox.pull_image(f"{registry.namespace}/nothing-here/env:never{RUN}") is False


def test_a_stopped_registry_is_one_line(sandbox, pushed, tmp_path):
    tag = pushed[0]
    dead = start_registry(tmp_path)
    dead.stop()
    there = f"{dead.namespace}/env:pushed{RUN}"
    sandbox.client.api.tag(tag, there.rpartition(":")[0], there.rpartition(":")[2])
    try:
        for attempt in (sandbox.push_image, sandbox.pull_image):
            started = time.monotonic()
            with pytest.raises(RegistryError) as info:
                attempt(there)
            message = str(info.value)
            assert "\n" not in message and there in message and "registry" in message
            assert time.monotonic() - started < 30  # fails fast, the engine says refused
    finally:
        sandbox.remove_image(there)
    # The command line: the same one line on stderr, exit 2, no traceback.
    out = write_output(tmp_path / "out", [f"{dead.namespace}/env:absent{RUN}"])
    params = registry_params(tmp_path, dead)
    proc = run_cli("images", "pull", "--outputs", str(out), "--params", str(params), cwd=tmp_path)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr and len(proc.stderr.strip().splitlines()) == 1
    assert "registry" in proc.stderr and f"env:absent{RUN}" in proc.stderr


def test_a_registry_that_never_answers_is_cut_off(sandbox, pushed):
    """A port that accepts and says nothing: the pull ends at its time limit, not the engine's."""
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(16)
        held: list[socket.socket] = []
        threading.Thread(target=lambda: held.append(silent.accept()[0]), daemon=True).start()
        image = f"127.0.0.1:{silent.getsockname()[1]}/trajforge-test/env:silent{RUN}"
        started = time.monotonic()
        with pytest.raises(RegistryError, match="timed out after 2 s"):
            sandbox.pull_image(image, timeout_s=2)
        assert time.monotonic() - started < 10
        for conn in held:
            conn.close()


def test_ensure_image_uses_pulls_builds_and_pushes(sandbox, registry, pushed):
    tag, image_id, digest = pushed
    env = EnvironmentParams(registry=registry.namespace, push=True)
    counted: list[str] = []

    def no_build() -> bool:
        raise AssertionError("the image was there to use or pull")

    here = envreg.ensure_image(
        sandbox, tag, env, no_build, expected_digest=digest, count=counted.append
    )
    assert (here.how, here.digest, counted) == (envreg.PRESENT, digest, [])

    sandbox.remove_image(tag)
    pulled = envreg.ensure_image(sandbox, tag, env, no_build, count=counted.append)
    assert (pulled.how, pulled.digest, counted) == (envreg.PULLED, digest, ["images_pulled"])
    assert sandbox.image_info(tag).image_id == image_id  # type: ignore[union-attr]

    fresh = envreg.image_name(registry.namespace, f"fresh{RUN}")
    built = envreg.ensure_image(
        sandbox, fresh, env, lambda: bool(build(sandbox, fresh)), count=counted.append
    )
    assert built.how == envreg.BUILT and counted[-1] == "images_pushed"
    assert built.digest.startswith(f"{registry.namespace}/env@sha256:")
    assert sandbox.pull_image(fresh) is True  # the registry has it now

    failed = envreg.ensure_image(
        sandbox, envreg.image_name(registry.namespace, f"fails{RUN}"), env, lambda: False
    )
    assert failed == envreg.Ensured(envreg.FAILED, "")


def test_ensure_image_refuses_another_image_than_the_task_names(sandbox, registry, pushed):
    tag = pushed[0]
    env = EnvironmentParams(registry=registry.namespace)
    wrong = "sha256:" + "0" * 64
    with pytest.raises(RegistryError) as info:
        envreg.ensure_image(sandbox, tag, env, lambda: True, expected_digest=wrong)
    message = str(info.value)
    assert "\n" not in message and f"profile pushed{RUN}" in message and wrong in message

    nowhere = envreg.image_name(registry.namespace, f"nowhere{RUN}")
    with pytest.raises(RegistryError, match=f"profile nowhere{RUN}"):
        envreg.ensure_image(sandbox, nowhere, env, lambda: pytest.fail("built"), wrong)
    assert envreg.image_name(None, "abc") == "trajforge-env:abc"


def test_a_rollout_gets_the_named_image_pulled_and_never_built(sandbox, registry, pushed):
    """What rollout asks before running a proven task (``ensure_task_image``, no rebuilds): that
    very image, here or pulled, run by its id."""
    tag, image_id, digest = pushed
    env = EnvironmentParams(registry=registry.namespace)
    task = make_task("calc-org/calc", 1, image_name=tag, image_digest=digest)
    counts: list[str] = []
    sandbox.remove_image(tag)
    pulled = ensure_task_image(sandbox, task, "", env, counts.append, rebuild=False)
    assert (pulled.run, pulled.tag, pulled.how) == (image_id, tag, NAMED)
    assert counts == [envreg.PULLED_COUNTER]
    assert ensure_task_image(sandbox, task, "", env, rebuild=False).run == image_id
    other = replace(task, image_digest="sha256:" + "1" * 64)
    with pytest.raises(RegistryError, match=f"profile pushed{RUN}"):
        ensure_task_image(sandbox, other, "", env, rebuild=False)
    nowhere = replace(task, image_name=envreg.image_name(registry.namespace, f"gone{RUN}"))
    with pytest.raises(RegistryError, match="images pull"):
        ensure_task_image(sandbox, replace(nowhere, image_digest=""), "", env, rebuild=False)


def write_output(directory: Path, images: list[str]) -> Path:
    """A stage output by hand: the marker and a tasks table naming ``images``."""
    (directory / "tasks").mkdir(parents=True)
    (directory / MARKER).write_text("written by a test\n")
    (directory / "summary.json").write_text(json.dumps({"kept_table": "tasks"}))
    table = pa.table(
        {
            "instance_id": [f"task-{i}" for i in range(len(images))],
            "image_name": pa.array(images, pa.string()),
        }
    )
    pq.write_table(table, directory / "tasks" / "part-00000-of-00001.parquet")
    return directory


def registry_params(directory: Path, registry: Registry) -> Path:
    path = directory / "params.yaml"
    path.write_text(f"environment:\n  registry: {registry.namespace}\n")
    return path


def test_images_list_and_prune_remove_exactly_the_unreferenced(sandbox, registry, tmp_path):
    prune_here = f"{registry.namespace}/prune"  # this test's images only: --repository
    used = envreg.image_name(prune_here, f"used{RUN}")
    unused = envreg.image_name(prune_here, f"unused{RUN}")
    busy = envreg.image_name(prune_here, f"busy{RUN}")
    for tag in (used, unused, busy):
        build(sandbox, tag)
    out = write_output(tmp_path / "validate-out", [used, used])
    params = registry_params(tmp_path, registry)
    scope = ("--repository", prune_here, "--params", str(params))

    listed = run_cli("images", "list", "--outputs", str(out), *scope, cwd=tmp_path)
    assert listed.returncode == 0, listed.stderr
    lines = listed.stdout.splitlines()
    assert any(line.startswith("used") and used in line and " MB" in line for line in lines)
    assert any(line.startswith("unused") and unused in line for line in lines)

    container = subprocess.run(
        ["docker", "run", "-d", "--rm", "--network", "none", busy, "sleep", "300"],
        capture_output=True, text=True, check=True,
    ).stdout.strip()  # fmt: skip
    try:
        dry = run_cli(
            "images", "prune", "--outputs", str(out), "--dry-run", "--min-age", "0", *scope,
            cwd=tmp_path,
        )  # fmt: skip
        assert dry.returncode == 0, dry.stderr
        assert f"would remove {unused}" in dry.stdout and sandbox.has_image(unused)

        pruned = run_cli(
            "images", "prune", "--outputs", str(out), "--min-age", "0", *scope, cwd=tmp_path
        )
        assert pruned.returncode == 0, pruned.stderr
        removed = [line for line in pruned.stdout.splitlines() if line.startswith("removed ")]
        assert removed[0].startswith(f"removed {unused}  ") and len(removed) == 2  # and summary
        assert f"keep    {busy}: a container uses it" in pruned.stdout
        assert f"keep    {used}: 2 task(s) use it" in pruned.stdout
        assert pruned.stdout.splitlines()[-1].startswith("removed 1 image(s)")

        # --keep-none: no task keeps an image; a container's image and the base still stay
        keep_none = run_cli(
            "images", "prune", "--keep-none", "--min-age", "0", *scope, cwd=tmp_path
        )
        assert keep_none.returncode == 0, keep_none.stderr
        assert f"removed {used}  " in keep_none.stdout
        assert f"keep    {busy}: a container uses it" in keep_none.stdout
    finally:
        subprocess.run(["docker", "rm", "-f", container], capture_output=True, check=False)
    assert not sandbox.has_image(unused) and not sandbox.has_image(used)
    assert sandbox.has_image(busy) and sandbox.has_image(BASE)


def test_images_push_and_pull_the_referenced(sandbox, registry, tmp_path):
    tag = envreg.image_name(registry.namespace, f"cli{RUN}")
    image_id = build(sandbox, tag)
    out = write_output(tmp_path / "out", [tag])
    params = registry_params(tmp_path, registry)
    pushed = run_cli("images", "push", "--outputs", str(out), "--params", str(params), cwd=tmp_path)
    assert pushed.returncode == 0, pushed.stdout + pushed.stderr
    assert f"pushed  {tag}  {registry.namespace}/env@sha256:" in pushed.stdout

    sandbox.remove_image(tag)
    pulled = run_cli("images", "pull", "--outputs", str(out), "--params", str(params), cwd=tmp_path)
    assert pulled.returncode == 0, pulled.stdout + pulled.stderr
    assert f"pulled  {tag}" in pulled.stdout
    assert sandbox.image_info(tag).image_id == image_id  # type: ignore[union-attr]


def test_a_rebuild_from_the_cache_counts_as_made_now_for_prune(sandbox, registry):
    """A build served whole from the cache keeps the first build's Created time but tags the image
    anew: prune judges the image's age by the later of the two, so a run that rebuilt it just now
    keeps it (the race behind test_image_trust's flake under a machine's cleanup)."""
    from trajforge.pipelines.commands.images import _keep

    tag = envreg.image_name(f"{registry.namespace}/rebuilt", f"again{RUN}")
    build(sandbox, tag)
    first = sandbox.image_info(tag)
    time.sleep(2.0)
    build(sandbox, tag)  # the same Dockerfile: every step from the cache
    again = sandbox.image_info(tag)
    assert first is not None and again is not None
    assert (again.image_id, again.created) == (first.image_id, first.created)
    assert again.tagged > again.created + 1.5
    between = again.created + 1.0  # the first build is older than this, the rebuild younger
    why = _keep(tag, again, Counter(), set(), BASE, {}, made_before=between)
    assert why.startswith("made within --min-age"), why
    sandbox.remove_image(tag)


@pytest.mark.parametrize("given", [(), ("--keep-none", "--outputs", "out")])
def test_images_prune_needs_outputs_or_keep_none_in_one_line(tmp_path, given):
    (tmp_path / "out").mkdir()
    proc = run_cli("images", "prune", *given, cwd=tmp_path)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr and len(proc.stderr.strip().splitlines()) == 1
    assert "--outputs DIR... (the tasks whose images to keep) or --keep-none" in proc.stderr


@pytest.mark.parametrize("kind", ["missing", "not_an_output", "no_tasks", "no_image_column"])
def test_images_bad_outputs_are_one_line(tmp_path, kind):
    directory = tmp_path / "out"
    if kind != "missing":
        directory.mkdir()
    if kind in ("no_tasks", "no_image_column"):
        (directory / MARKER).write_text("")
    if kind == "no_image_column":
        (directory / "tasks").mkdir()
        pq.write_table(pa.table({"instance_id": ["a"]}), directory / "tasks" / "part.parquet")
    proc = run_cli("images", "prune", "--outputs", str(directory), cwd=tmp_path)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr and len(proc.stderr.strip().splitlines()) == 1
    assert str(directory) in proc.stderr
