"""prepare_environment's bad inputs on real Docker: each ends with a reason, none stops the rest.

A build that hangs spends one budget for all of its install sets (not one per set), a repository
without tests is ``no_tests`` (one whose every test module fails to import is
``collection_failed``), a unittest suite in files pytest's default names miss is collected,
and a rerun reuses the cached outcome without building.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from repo_factory import RepoBuilder
from trajforge.generators.environments.prepare import Prepared
from trajforge.generators.languages.python.prepare import prepare_environment
from trajforge.generators.languages.python.profile import detect_profile
from trajforge.schemas.params import Params, load_params
from trajforge.verifiers.sandbox.docker import DockerSandbox

SETUP_PY = "from setuptools import setup\nsetup(name='{name}', packages=['{name}'])\n"


def _repo(root: Path, name: str, files: dict[str, str]) -> tuple[str, str]:
    builder = RepoBuilder(root / name)
    sha = builder.commit(name, {f"{name}/__init__.py": "", **files})
    return str(root / name), sha


def _params(tmp_path: Path, build_timeout_s: int = 600) -> Params:
    params = load_params(None)
    params.cache_dir = str(tmp_path / "cache")
    params.environment.build_timeout_s = build_timeout_s
    return params


def _prepare(path: str, sha: str, params: Params, counts: dict[str, int]) -> Prepared:
    def count(name: str, value: int = 1) -> None:
        counts[name] = counts.get(name, 0) + value

    sandbox = DockerSandbox()
    try:
        profile = detect_profile(path, sha, f"local/{Path(path).name}")
        return prepare_environment(sandbox, profile, path, params, count=count)
    finally:
        sandbox.close()


@pytest.mark.docker
def test_a_hanging_build_spends_one_budget_for_all_its_sets(docker_engine, tmp_path: Path) -> None:
    hang = "import time\ntime.sleep(300)\n" + SETUP_PY.format(name="hang")
    files = {
        "setup.py": hang,
        "requirements.txt": "attrs\n",  # a second set ("package-only") to fall back to
        "tests/test_hang.py": "def test_x():\n    assert True\n",
    }
    path, sha = _repo(tmp_path, "hang", files)
    counts: dict[str, int] = {}
    prepared = _prepare(path, sha, _params(tmp_path, build_timeout_s=40), counts)
    assert prepared.reason == "install_failed"
    assert prepared.profile.status == "failed"
    attempts = prepared.profile.attempts
    assert len(attempts) >= 2 and "timed out" in attempts[0]
    assert all("budget spent" in a for a in attempts[1:]), attempts
    assert counts.get("images_built", 0) == 1  # one build tried; the rest never started
    assert "nothing installs" in prepared.detail and "local/hang" in prepared.detail


@pytest.mark.docker
def test_no_tests_unittest_names_and_rerun(docker_engine, tmp_path: Path) -> None:
    empty_path, empty_sha = _repo(tmp_path, "empty", {"setup.py": SETUP_PY.format(name="empty")})
    unit = (
        "import unittest\n\nfrom unit import one\n\n\n"
        "class OneTests(unittest.TestCase):\n    def test_one(self):\n"
        "        self.assertEqual(one(), 1)\n"
    )
    files = {
        "setup.py": SETUP_PY.format(name="unit"),
        "unit/__init__.py": "def one():\n    return 1\n",
        "unit/tests.py": unit,
    }
    unit_path, unit_sha = _repo(tmp_path, "unit", files)
    params = _params(tmp_path)
    counts: dict[str, int] = {}

    empty = _prepare(empty_path, empty_sha, params, counts)
    assert (empty.reason, empty.collected) == ("no_tests", 0)
    assert "collects no tests" in empty.detail

    found = _prepare(unit_path, unit_sha, params, counts)
    assert found.reason == "" and found.collected == 1
    assert "python_files=" in found.profile.test_cmd
    assert any("unittest files" in r for r in found.profile.repairs)

    built = counts["images_built"]
    again = _prepare(unit_path, unit_sha, params, counts)
    assert again == found
    assert counts["images_built"] == built  # cached: no build, no probe


@pytest.mark.docker
def test_tests_that_all_fail_to_import_are_a_collection_failure_not_no_tests(
    docker_engine, tmp_path: Path
) -> None:
    """Every test module excluded leaves 0 collected: not "no tests" (Repo2Run's success)."""
    broken = "import nowhere_declared_module_xyz\n\n\ndef test_x():\n    assert True\n"
    files = {"setup.py": SETUP_PY.format(name="broken"), "tests/test_broken.py": broken}
    path, sha = _repo(tmp_path, "broken", files)
    prepared = _prepare(path, sha, _params(tmp_path), {})
    assert (prepared.reason, prepared.collected) == ("collection_failed", 0), prepared.detail
    assert "none of the 1 test modules can be collected" in prepared.detail
    assert "tests/test_broken.py" in prepared.detail and "nowhere_declared" in prepared.detail


STAMPED_PYPROJECT = """\
[build-system]
requires = ["setuptools>=64", "setuptools-scm>=8"]
build-backend = "setuptools.build_meta"

[project]
name = "stamped"
dynamic = ["version"]

[tool.setuptools_scm]
version_file = "stamped/_version.py"

[tool.setuptools]
packages = ["stamped"]
"""


@pytest.mark.docker
def test_a_version_file_the_build_writes_reaches_the_tests(docker_engine, tmp_path: Path) -> None:
    """setuptools-scm (or hatch-vcs) writes stamped/_version.py at install time; the git tree
    the tests get lacks it (it is ignored), so the image must carry it (filelock, humanize)."""
    files = {
        "pyproject.toml": STAMPED_PYPROJECT,
        ".gitignore": "stamped/_version.py\n",
        "stamped/__init__.py": "from stamped._version import version\n",
        "tests/test_stamped.py": "import stamped\n\n\ndef test_version():\n"
        "    assert stamped.version\n",
    }
    path, sha = _repo(tmp_path, "stamped", files)
    counts: dict[str, int] = {}
    prepared = _prepare(path, sha, _params(tmp_path), counts)
    assert prepared.reason == "", prepared.detail
    assert prepared.collected == 1 and prepared.profile.excluded == ()
