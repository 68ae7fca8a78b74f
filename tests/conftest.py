"""Shared fixtures: a real test-built repository, the real CLI, real Docker and podman engines."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, os.path.dirname(__file__))
# The baselines the benchmarks measure against (benchmarks/full_suite.py) are compared in tests too.
sys.path.insert(1, os.path.join(os.path.dirname(os.path.dirname(__file__)), "benchmarks"))
# Each language's tests keep their fixtures beside them (tests/languages/<lang>/go_calc.py); a test
# that spans languages (the mixed dvc repro) imports them by name too.
sys.path.extend(str(f) for f in sorted(Path(__file__).parent.glob("languages/*")) if f.is_dir())

from llama_server import llama_endpoint  # noqa: F401  (session fixture: real llama.cpp server)
from repo_factory import build_add_fix_repo, build_calc_repo
from sandbox_backends import BACKENDS, Backend
from trajforge.schemas.storage import read_records
from trajforge.schemas.task_instance import TaskInstance
from trajforge.verifiers.sandbox import usage

ROOT = Path(__file__).resolve().parents[1]
TRAJFORGE = str(Path(sys.executable).parent / "trajforge")


@pytest.fixture(autouse=True)
def _sandbox_seconds_of_this_test_only() -> None:
    """Sandbox seconds are counted per process (``verifiers/sandbox/usage.py``) and a stage's
    next bundle takes them all: what an earlier test on this worker spent outside any stage
    (a sandbox used directly) must not reach this test's summary."""
    usage.drain()


def plain_pytest_env(**extra: str) -> dict[str, str]:
    """The environment for a pytest run a test makes to get a genuine log: no PYTEST_* of this
    session, and no third-party plugins autoloaded (this venv's hydra-core, anyio and platformdirs
    plugins cost about half a second per start, two thirds of it, and no log here is about them).
    """
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
    return {**env, "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1", **extra}


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


# What a test needs beyond Python: ``slow`` ones first, then those that start an engine, a
# cluster or a server; the rest last.
NEEDS = ("docker", "podman", "dask", "s3", "llama", "browser")


def _weight(item: pytest.Item) -> int:
    if item.get_closest_marker("slow"):
        return 0
    return 1 if any(item.get_closest_marker(need) for need in NEEDS) else 2


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """On a pytest-xdist worker (``make test TEST_WORKERS=2``: ``--dist loadfile``, each module
    on one worker, so its module-scoped builds are made once), the heavy modules come first:
    the controller hands modules out in the workers' order, and the light ones then fill the
    end instead of one worker finishing a long module while the other sits idle. A run in one
    process keeps the collection order."""
    if not hasattr(config, "workerinput"):
        return
    rank: dict[str, int] = {}
    for item in items:
        module = item.nodeid.partition("::")[0]
        rank[module] = min(rank.get(module, 2), _weight(item))
    items.sort(key=lambda item: rank[item.nodeid.partition("::")[0]])


_MODULE_SECONDS: dict[str, float] = {}


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    """Each test's setup, call and teardown seconds, summed by module (the unit a speed-up
    works on: a module-scoped build is paid by its first test)."""
    module = report.nodeid.partition("::")[0]
    _MODULE_SECONDS[module] = _MODULE_SECONDS.get(module, 0.0) + report.duration


def pytest_terminal_summary(terminalreporter, config: pytest.Config) -> None:
    """With ``--durations`` (``make test``), the slowest modules too: where the time goes."""
    if config.option.durations is None or not _MODULE_SECONDS:
        return
    slowest = sorted(_MODULE_SECONDS.items(), key=lambda item: -item[1])[:15]
    terminalreporter.write_sep("=", f"slowest {len(slowest)} modules")
    for module, seconds in slowest:
        terminalreporter.write_line(f"{seconds:8.1f}s {module}")
    terminalreporter.write_line(f"{sum(_MODULE_SECONDS.values()):8.1f}s in all tests")


@pytest.fixture
def host_go() -> str:
    """The host's go command: every machine trajforge runs on has one, so a missing one is a
    broken setup, reported as a failure, never a skip."""
    found = shutil.which("go")
    if found is None:
        pytest.fail("no go command on PATH: install the Go toolchain (trajforge's machines do)")
    return found


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


def built_profile(sandbox: Any, repo: Any, commit: str, params: Any, logs: Path) -> Any:
    """The test repository's environment profile at ``commit``, its image built (or reused)."""
    from trajforge.generators.environments.image import build_env_image
    from trajforge.generators.languages.python.profile import detect_profile

    profile = detect_profile(repo.path, commit, repo.name)
    profile = build_env_image(sandbox, profile, repo.path, params.environment, str(logs))
    assert profile.status == "built", profile.log
    return profile


def remove_built_images(root: Path) -> None:
    """Remove every environment image a build under ``root`` made (its build logs name them)."""
    built = sorted({log.stem for log in root.glob("**/build-logs/*.log")})
    if built:
        images = [f"trajforge-env:{profile_id}" for profile_id in built]
        subprocess.run(["docker", "rmi", "-f", *images], capture_output=True, check=False)


def write_params(path: Path, cache_dir: Path, extra: str = "", gold_runs: int = 0) -> Path:
    """A run's params. ``gold_runs``: validate grades kept tasks' gold patches only where a test
    asks (tests/test_gold_runs.py, the import e2e): two graded containers per kept task in every
    validate of the suite otherwise."""
    path.write_text(
        f"cache_dir: {cache_dir}\n"
        f"validate:\n  test_timeout_s: 20\n  workers: 2\n  gold_runs: {gold_runs}\n"
        # reuse: false: the calc fixture's commits each build their own profile (bad_dep's
        # install fails); reuse across profiles is tests/test_environment_reuse.py's
        "environment:\n  pythons: ['3.11']\n  reuse: false\n" + extra
    )
    return path


def run_stages(work: Path, *commands: tuple[str, ...]) -> subprocess.CompletedProcess:
    """Each trajforge command in ``work``, in order, each required to succeed; the last's result."""
    done = None
    for args in commands:
        done = run_cli(*args, cwd=work)
        assert done.returncode == 0, done.stderr
    assert done is not None
    return done


@contextmanager
def hold_image(image: str) -> Iterator[None]:
    """Keep ``image`` here while the block runs, as a trajforge run keeps the images it uses: a
    container of it (created, never started). ``images prune`` (a CI or benchmark machine's
    cleanup, ``--keep-none``) removes unused images older than ``--min-age``, and an image
    rebuilt from the build cache carries its first build's creation time, so a fixture's image
    outlives the age check long before the tests that use it are done."""
    name = f"trajforge-test-hold-{uuid.uuid4().hex[:12]}"
    made = subprocess.run(
        ["docker", "create", "--name", name, "--network", "none", image, "true"],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert made.returncode == 0, made.stderr
    try:
        yield
    finally:
        subprocess.run(["docker", "rm", "-f", name], capture_output=True, check=False)


@pytest.fixture(scope="session")
def calc_task(docker_engine, tmp_path_factory):
    """(task, repo path, work dir): calc (``add`` subtracts; FAIL_TO_PASS test_add, PASS_TO_PASS
    test_mul) mined, validated and described through the CLI, for the forge kit and the reward
    hacking tests: once per session (each reads it and writes only outputs of its own names),
    its image held for the session (``hold_image``).

    Near misses are on: an unresolved run that touched the gold lines would be exported for SFT,
    so a forged run that reaches an export would show.
    """
    root = tmp_path_factory.mktemp("forge")
    build_add_fix_repo(root / "calc")
    work = root / "work"
    work.mkdir()
    extra = "rollout:\n  max_steps: 6\ncurate:\n  near_miss_soft_reward: 0.1\n"
    write_params(work / "params.yaml", root / "cache", extra)
    run_stages(
        work,
        ("mine", "--repo", str(root / "calc"), "--output", "mine"),
        ("validate", "--input", "mine", "--output", "validate"),
        ("describe", "--input", "validate", "--output", "describe"),
    )
    (task,) = read_records(TaskInstance, str(work / "validate/tasks"))
    assert task.FAIL_TO_PASS == ("tests/test_ops.py::test_add",)
    assert task.PASS_TO_PASS == ("tests/test_ops.py::test_mul",)
    with hold_image(task.image_name):
        yield task, str(root / "calc"), work
