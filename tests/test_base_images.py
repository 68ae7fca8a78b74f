"""Base images for every Python 3.8 to 3.14: the recipe of each, the lock that keeps two workers
from building one twice, the one line when none can be had, and (Docker) a project that requires
Python 3.14 reaching a task through ``inject`` + ``validate`` with its base image built on demand.
"""

from __future__ import annotations

import json
import multiprocessing
import subprocess
import time
from pathlib import Path

import polars as pl
import pytest
from conftest import run_cli
from reach_repos import TEST_EXTRA, DatedRepo, package, pyproject
from trajforge.generators.environments.base_image import (
    SUITES,
    UBUNTU_KEYRING_SHA256,
    _build_lock,
    _debootstrap_import,
    base_image_recipe,
    base_image_tag,
    ensure_for_sandbox,
)
from trajforge.schemas.errors import UserError
from trajforge.schemas.params import EnvironmentParams
from trajforge.verifiers.sandbox.local import LocalSandbox

SEVEN = ("3.8", "3.9", "3.10", "3.11", "3.12", "3.13", "3.14")
PY314 = "trajforge-base:py3.14"


def test_every_offered_python_has_a_release() -> None:
    assert tuple(EnvironmentParams().pythons) == SEVEN
    assert tuple(sorted(SUITES, key=lambda v: int(v.split(".")[1]))) == SEVEN


@pytest.mark.parametrize("python", SEVEN)
def test_recipe_names_the_release_and_is_valid_shell(python: str) -> None:
    suite = SUITES[python]
    recipe = base_image_recipe(python)
    assert f" {suite.name} " in recipe and suite.mirror in recipe
    assert f"docker import - {base_image_tag(python)}" in recipe
    assert f"python{python}" in recipe  # python3 is made the asked minor when it is not
    assert (UBUNTU_KEYRING_SHA256 in recipe) == suite.ubuntu  # Ubuntu's keys, checked by digest
    assert ("--components=main,universe" in recipe) == suite.ubuntu
    syntax = subprocess.run(["sh", "-n"], input=recipe, text=True, capture_output=True)
    assert syntax.returncode == 0, syntax.stderr


def test_a_python_no_release_ships_is_one_line() -> None:
    with pytest.raises(UserError) as caught:
        _debootstrap_import("3.7", "trajforge-base:py3.7", None)
    assert caught.value.reason == "no_base_image"
    message = str(caught.value)
    assert "\n" not in message and "3.7" in message and "environment.pythons" in message
    assert base_image_recipe("3.7").rstrip().endswith("exit 1")


def test_a_sandbox_with_no_image_store_cannot_build_one(tmp_path: Path) -> None:
    with pytest.raises(UserError) as caught:
        ensure_for_sandbox(LocalSandbox(str(tmp_path), quiet=True), "3.14", say=print)
    assert caught.value.reason == "no_base_image"
    assert "trajforge base-image --python 3.14" in str(caught.value)


def _hold(tag: str, log: str, name: str, entered: multiprocessing.synchronize.Event) -> None:
    with _build_lock(tag):
        entered.set()
        with open(log, "a") as handle:
            handle.write(f"{name} in\n")
        time.sleep(0.5)
        with open(log, "a") as handle:
            handle.write(f"{name} out\n")


def test_the_build_lock_lets_one_worker_in_at_a_time(tmp_path: Path) -> None:
    log = str(tmp_path / "order.txt")
    tag = f"trajforge-base:test-{tmp_path.name}"
    context = multiprocessing.get_context("fork")
    first_in, second_in = context.Event(), context.Event()
    first = context.Process(target=_hold, args=(tag, log, "first", first_in))
    first.start()
    assert first_in.wait(30)
    second = context.Process(target=_hold, args=(tag, log, "second", second_in))
    second.start()
    first.join(30)
    second.join(30)
    assert (first.exitcode, second.exitcode) == (0, 0)
    assert Path(log).read_text().split("\n")[:4] == [
        "first in",
        "first out",
        "second in",
        "second out",
    ]


# --- Docker: requires-python >=3.14, end to end -------------------------------------------------

TEMPLATES = '''\
"""t-strings (PEP 750) exist from Python 3.14 on."""

from string.templatelib import Interpolation


def shout(name):
    template = t"hello {name}"
    return "".join(
        str(part.value).upper() if isinstance(part, Interpolation) else part
        for part in template
    )
'''

TEMPLATES_TESTS = """\
from newest.templates import shout


def test_shout():
    assert shout("ada") == "hello ADA"
"""


def build_newest_python(path: Path) -> None:
    """``requires-python = ">=3.14"`` and code only 3.14 can even parse."""
    repo = DatedRepo(path)
    files = {
        "pyproject.toml": pyproject("newest", TEST_EXTRA, requires_python=">=3.14"),
        **package("newest"),
        "newest/templates.py": TEMPLATES,
        "tests/test_templates.py": TEMPLATES_TESTS,
    }
    repo.commit("newest: t-strings", files)


def _docker(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["docker", *args], capture_output=True, text=True, check=False)


@pytest.fixture
def built_env_images(tmp_path: Path):
    """The environment images this test builds are removed after it: a later run must find no
    environment image, so that it needs the base image again."""
    yield
    built = [f"trajforge-env:{log.stem}" for log in tmp_path.glob("cache/build-logs/*.log")]
    if built:
        _docker("rmi", "-f", *built)


@pytest.mark.docker
@pytest.mark.usefixtures("docker_engine", "built_env_images")
def test_requires_python_314_reaches_a_task_with_its_base_image_built_on_demand(
    tmp_path: Path,
) -> None:
    repo = tmp_path / "newest"
    build_newest_python(repo)
    users = _docker("ps", "-aq", "--filter", f"ancestor={PY314}").stdout.split()
    if _docker("image", "inspect", PY314).returncode == 0 and not users:
        assert _docker("rmi", PY314).returncode == 0  # so the run must build it itself
    on_demand = _docker("image", "inspect", PY314).returncode != 0
    params = tmp_path / "params.yaml"
    params.write_text(
        f"cache_dir: {tmp_path / 'cache'}\nvalidate:\n  test_timeout_s: 60\n  gold_runs: 0\n"
    )

    inject = run_cli(
        "inject", "--repo", str(repo), "--max-candidates", "3", "--seed", "0",
        "--params", str(params), "--output", str(tmp_path / "inject"), cwd=tmp_path,
    )  # fmt: skip
    assert inject.returncode == 0, inject.stderr
    validate = run_cli(
        "validate", "--input", str(tmp_path / "inject"), "--output", str(tmp_path / "val"),
        "--params", str(params), cwd=tmp_path,
    )  # fmt: skip
    assert validate.returncode == 0, validate.stderr
    if on_demand:  # built here, or by another run on this engine meanwhile (the build lock),
        # by the first stage that prepares the environment: inject, measuring coverage on first
        # contact (validate then finds the environment made)
        said = inject.stderr + validate.stderr
        built_here = f"base image {PY314}: building with debootstrap" in said
        built_beside = f"base image {PY314}: present (another worker built it)" in said
        assert built_here or built_beside, said
    tasks = pl.read_parquet(tmp_path / "val" / "tasks" / "*.parquet").to_dicts()
    assert tasks, pl.read_parquet(tmp_path / "val" / "rejections" / "*.parquet").to_dicts()
    base = _docker("run", "--rm", PY314, "python3", "--version")
    assert base.stdout.startswith("Python 3.14."), base
    task_python = _docker("run", "--rm", tasks[0]["image_name"], "python", "--version")
    assert task_python.stdout.startswith("Python 3.14."), task_python

    again = run_cli(
        "validate", "--input", str(tmp_path / "inject"), "--output", str(tmp_path / "val2"),
        "--params", str(params), cwd=tmp_path,
    )  # fmt: skip
    assert again.returncode == 0, again.stderr
    assert "building with debootstrap" not in again.stderr
    assert json.loads((tmp_path / "val2" / "summary.json").read_text()).get("images_built", 0) == 0
