"""A fault of the machine is never a repository's verdict (issue 43, item 4), on real engines.

The full disk here is the kernel's own: a project whose install writes to ``/dev/full`` gets
``ENOSPC`` inside a real build, exactly as a build on a full disk does. Such a build is
``infra_failure``, raised rather than cached, so a rerun builds again; no build starts below the
free-space floor; and a full disk an older trajforge cached as ``install_failed`` is not replayed.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from repo_factory import RepoBuilder
from trajforge.generators.environments.prepare import Prepared
from trajforge.generators.languages.python.prepare import (
    PREPARE_VERSION,
    _to_cache,
    prepare_environment,
)
from trajforge.generators.languages.python.profile import detect_profile
from trajforge.pipelines.runtime.stage_fn import sandbox_error
from trajforge.schemas.params import Params, ParamsError, load_params
from trajforge.schemas.records import content_id
from trajforge.schemas.storage import ContentCache
from trajforge.verifiers.sandbox.base import SandboxBroken
from trajforge.verifiers.sandbox.docker import DockerSandbox
from trajforge.verifiers.sandbox.faults import (
    INFRA_FAILURE,
    DiskFull,
    MachineFault,
    check_free_space,
    machine_fault,
)
from trajforge.verifiers.sandbox.podman import PodmanSandbox

# setup.py runs at install: its write to /dev/full fails with the kernel's ENOSPC.
FULL_DISK_SETUP = (
    "from setuptools import setup\n"
    "with open('/dev/full', 'w') as disk:\n"
    "    disk.write('x' * 65536)\n"
    "setup(name='fills', packages=['fills'])\n"
)
HEALTHY_SETUP = "from setuptools import setup\nsetup(name='calm', packages=['calm'])\n"
TEST = "def test_one():\n    assert 1 + 1 == 2\n"


def _repo(root: Path, name: str, setup_py: str) -> tuple[str, str]:
    builder = RepoBuilder(root / name)
    files = {f"{name}/__init__.py": "", "setup.py": setup_py, "tests/test_one.py": TEST}
    return str(root / name), builder.commit(name, files)


def _params(tmp_path: Path) -> Params:
    params = load_params(None)
    params.cache_dir = str(tmp_path / "cache")
    return params


def _prepare(
    sandbox: DockerSandbox, path: str, sha: str, params: Params, counts: dict[str, int]
) -> Prepared:
    def count(name: str, value: int = 1) -> None:
        counts[name] = counts.get(name, 0) + value

    profile = detect_profile(path, sha, f"local/{Path(path).name}")
    return prepare_environment(sandbox, profile, path, params, count=count)


def test_the_kernels_and_the_engines_words_are_faults_a_projects_failure_is_not() -> None:
    assert machine_fault("step 3\nOSError: [Errno 28] No space left on device\n").startswith(
        "OSError: [Errno 28] No space left on device"
    )
    assert machine_fault("write /var/lib/docker/x: disk quota exceeded") != ""
    assert machine_fault("docker build failed: APIError: 500 Server Error") != ""
    assert machine_fault("npm error code ENOSPC") != ""
    for verdict in (
        "ERROR: No matching distribution found for nosuchpackage",
        "ModuleNotFoundError: No module named 'space'",
        "build timed out after 600 s",
        "  docker build failed: indented, so a project's own echo, not our builder's line",
    ):
        assert machine_fault(verdict) == "", verdict


def test_the_free_space_floor_says_how_much_and_what_to_prune() -> None:
    check_free_space(None, "", 2.0, "img")  # a remote engine: nothing to measure, no floor
    check_free_space(10**9, "/data", 0, "img")  # 0 turns the floor off
    check_free_space(5 * 10**9, "/data", 2.0, "img")
    with pytest.raises(DiskFull) as caught:
        check_free_space(1_200_000_000, "/data/docker", 2.0, "trajforge-env:abc")
    line = str(caught.value)
    assert "\n" not in line and caught.value.reason == INFRA_FAILURE
    assert "1.2 GB free" in line and "/data/docker" in line and "at least 2 GB" in line
    assert "trajforge images prune" in line and "min_free_gb" in line
    params = load_params(None)
    params.environment.min_free_gb = -1
    with pytest.raises(ParamsError, match=r"environment\.min_free_gb"):
        params.check()


def test_a_machine_fault_keeps_its_reason_when_a_stage_rejects_the_item() -> None:
    fault = sandbox_error("repo@abc", "validate", MachineFault("img: the machine failed"))
    assert (fault.reason, fault.stage) == (INFRA_FAILURE, "validate")
    assert fault.detail.startswith("repo@abc: infra failure MachineFault: img")
    broken = sandbox_error("repo@abc", "validate", SandboxBroken("container gone"))
    assert broken.reason == "sandbox_error" and "sandbox error" in broken.detail


@pytest.mark.docker
def test_the_engines_storage_is_measured_where_it_is(docker_engine) -> None:
    sandbox = DockerSandbox()
    try:
        assert Path(sandbox.storage_path() or "missing").is_dir()
    finally:
        sandbox.close()


@pytest.mark.podman
def test_podmans_storage_is_measured_where_it_is(podman_engine) -> None:
    sandbox = PodmanSandbox()
    try:
        assert Path(sandbox.storage_path() or "missing").is_dir()
    finally:
        sandbox.close()


@pytest.mark.docker
def test_a_full_disk_in_a_build_is_infra_failure_and_a_rerun_builds_again(
    docker_engine, tmp_path: Path
) -> None:
    path, sha = _repo(tmp_path, "fills", FULL_DISK_SETUP)
    params, counts = _params(tmp_path), {}
    key = content_id(PREPARE_VERSION, detect_profile(path, sha, "local/fills").profile_id, False)
    cache = ContentCache(params.results_cache, "environments")
    sandbox = DockerSandbox()
    try:
        for _attempt in (1, 2):  # the second builds again: there is nothing to replay
            with pytest.raises(MachineFault) as caught:
                _prepare(sandbox, path, sha, params, counts)
            assert caught.value.reason == INFRA_FAILURE
            assert "No space left on device" in str(caught.value), str(caught.value)
            assert cache.get(key) is None
    finally:
        sandbox.close()


@pytest.mark.docker
def test_no_build_starts_below_the_floor(docker_engine, tmp_path: Path) -> None:
    path, sha = _repo(tmp_path, "calm", HEALTHY_SETUP)
    params, counts = _params(tmp_path), {}
    params.environment.min_free_gb = 10**9  # a petabyte: more than this machine has
    sandbox = DockerSandbox()
    try:
        with pytest.raises(DiskFull, match="disk full") as caught:
            _prepare(sandbox, path, sha, params, counts)
        profile = detect_profile(path, sha, "local/calm")
        assert not sandbox.has_image(profile.image)
        assert "\n" not in str(caught.value)
    finally:
        sandbox.close()


@pytest.mark.docker
def test_a_full_disk_cached_by_an_older_run_is_not_replayed(docker_engine, tmp_path: Path) -> None:
    path, sha = _repo(tmp_path, "calm", HEALTHY_SETUP)
    params, counts = _params(tmp_path), {}
    profile = detect_profile(path, sha, "local/calm")
    stale = dataclasses.replace(profile, status="failed")
    detail = "local/calm: nothing installs: OSError: [Errno 28] No space left on device"
    cache = ContentCache(params.results_cache, "environments")
    cache.put(
        content_id(PREPARE_VERSION, profile.profile_id, False),
        _to_cache(Prepared(stale, "install_failed", detail, 0)),
    )
    sandbox = DockerSandbox()
    try:
        prepared = _prepare(sandbox, path, sha, params, counts)
    finally:
        sandbox.close()
    assert prepared.reason == "" and prepared.profile.status == "built", prepared.detail
    assert counts.get("images_built") == 1
