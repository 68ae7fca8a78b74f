"""trajforge's pytest plugin on a real pytest run: the project's options, and covering tests first.

The plugin is what the container runs (``verifiers/languages/python/pytest_plugin.py`` shipped as
``trajforge_pytest``); here it runs in a subprocess on a project written by the test.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from trajforge.verifiers.languages.python import pytest_plugin
from trajforge.verifiers.languages.python.coverage import BLOCKED, FIRST_ENV, PLUGIN

TESTS = """\
import os


def test_a():
    assert True


def test_b():
    assert os.environ.get("BREAK_B") is None


def test_c():
    assert True
"""


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_things.py").write_text(TESTS)
    # what arrow's tox.ini does, and an xdist -n: options of plugins the run keeps out
    (tmp_path / "pytest.ini").write_text(
        "[pytest]\naddopts = --cov=things --cov-branch --cov-report=term-missing "
        "--cov-fail-under=99 -n 2 --dist=load --junitxml=their-junit.xml -p no:cacheprovider\n"
    )
    support = tmp_path / "support"
    support.mkdir()
    shutil.copy(pytest_plugin.__file__, support / f"{PLUGIN}.py")
    return tmp_path


def _run(project: Path, first: list[str] | None = None, env: dict[str, str] | None = None):
    environ = {**os.environ, "PYTHONPATH": str(project / "support"), **(env or {})}
    environ.pop(FIRST_ENV, None)
    if first is not None:
        (project / "first.txt").write_text("".join(f"{t}\n" for t in first))
        environ[FIRST_ENV] = str(project / "first.txt")
    junit = project / "ours.xml"
    command = [sys.executable, "-m", "pytest", *BLOCKED.split(), "-p", PLUGIN, "-rA"]
    proc = subprocess.run(
        [*command, f"--junitxml={junit}"], cwd=project, env=environ, capture_output=True,
        text=True, check=False,
    )  # fmt: skip
    ran = [case.get("name") for case in ET.parse(junit).getroot().iter("testcase")]
    return proc, ran


def test_the_projects_coverage_and_xdist_options_parse_and_do_nothing(project: Path):
    proc, ran = _run(project)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert ran == ["test_a", "test_b", "test_c"]  # one process, the suite's own order
    assert not (project / "their-junit.xml").exists()  # our --junitxml won over addopts'
    assert "coverage:" not in proc.stdout.lower()  # no report, no fail-under


def test_covering_tests_run_first_and_the_run_stops_when_none_fails(project: Path):
    proc, ran = _run(project, first=["tests/test_things.py::test_b"])
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert ran == ["test_b"]
    assert "none of the 1 covering test(s) failed" in proc.stdout


def test_a_failing_covering_test_runs_the_whole_suite_in_the_same_process(project: Path):
    proc, ran = _run(project, first=["tests/test_things.py::test_b"], env={"BREAK_B": "1"})
    assert proc.returncode == 1
    assert ran == ["test_b", "test_a", "test_c"]
    assert "covering test(s) failed" not in proc.stdout


def test_no_covering_test_found_means_the_whole_suite(project: Path):
    proc, ran = _run(project, first=["tests/test_things.py::test_gone"])
    assert proc.returncode == 0
    assert ran == ["test_a", "test_b", "test_c"]
