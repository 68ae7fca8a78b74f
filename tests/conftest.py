"""Shared fixtures: a real test-built repository, the real CLI, real Docker and podman engines."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, os.path.dirname(__file__))
# The baselines the benchmarks measure against (benchmarks/full_suite.py) are compared in tests too.
sys.path.insert(1, os.path.join(os.path.dirname(os.path.dirname(__file__)), "benchmarks"))

from llama_server import llama_endpoint  # noqa: F401  (session fixture: real llama.cpp server)
from repo_factory import build_calc_repo
from sandbox_backends import BACKENDS, Backend

ROOT = Path(__file__).resolve().parents[1]
TRAJFORGE = str(Path(sys.executable).parent / "trajforge")


def run_cli(*args: str, cwd: Path, env: dict[str, str] | None = None, timeout: int = 900):
    """The real console script, as a user runs it."""
    return subprocess.run(
        [TRAJFORGE, *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, **(env or {})},
        check=False,
    )


@pytest.fixture(scope="session")
def docker_engine() -> None:
    """Tests that need Docker fail loudly without it: `make setup` starts the engine."""
    proc = subprocess.run(["docker", "info"], capture_output=True, check=False)
    assert proc.returncode == 0, "no Docker engine answers; run `make setup` first"


@pytest.fixture(scope="session")
def podman_engine() -> None:
    """podman cases skip only where podman is not installed (`make setup` installs it); where it
    is, the base image is copied into its store as `make setup` does."""
    if shutil.which("podman") is None:
        pytest.skip(
            "podman is not installed here; `make setup` installs it (scripts/setup_podman.sh)"
        )
    from trajforge.generators.environments.base_image import ensure_podman_base_image

    ensure_podman_base_image("3.11", say=lambda _line: None)


@pytest.fixture(scope="session", params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> Backend:
    """Each container sandbox in turn: a test taking it proves its promise for Docker and podman."""
    request.getfixturevalue("docker_engine" if request.param == "docker" else "podman_engine")
    return Backend(request.param)


@pytest.fixture(scope="session")
def calc_repo(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str]]:
    path = tmp_path_factory.mktemp("repos") / "calc"
    return path, build_calc_repo(path)


@pytest.fixture
def cluster():
    """A real dask.distributed LocalCluster of 2 worker processes (the Dask runner's own)."""
    from trajforge.pipelines.runtime.dask_runner import local_cluster

    found = local_cluster(2)
    yield found
    found.close()


def write_params(path: Path, cache_dir: Path, extra: str = "") -> Path:
    path.write_text(
        f"cache_dir: {cache_dir}\n"
        "validate:\n  test_timeout_s: 20\n  workers: 2\n"
        "environment:\n  pythons: ['3.11']\n" + extra
    )
    return path
