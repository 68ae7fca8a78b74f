"""Bug runs fork from a pytest imported once per container, and give what fresh runs give.

One test-built repository in its real profile image: the same runs through the fork server and
as fresh ``python -m pytest`` processes agree test by test and in exit code; a run the server
cannot serve as a fresh process would start (another ``PYTHONPATH``) runs pytest itself; a
timeout kills the tests, not just the caller; where pytest's own import would load a file of the
repository, no server serves.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from conftest import built_profile, write_params
from repo_factory import RepoBuilder, pyproject
from trajforge.generators.languages.python.profile import JUNIT_PATH
from trajforge.generators.sources.specs import SourceOptions, open_source
from trajforge.schemas.candidate import Candidate
from trajforge.schemas.params import load_params
from trajforge.verifiers.languages.python.coverage import FORK_READY, start_fork_server
from trajforge.verifiers.languages.python.fork_server import LOG
from trajforge.verifiers.languages.python.mutants import clean_workspace, mutant_context
from trajforge.verifiers.sandbox.base import Session
from trajforge.verifiers.sandbox.factory import make_sandbox
from trajforge.verifiers.test_runner import run_tests
from trajforge.verifiers.validation.candidate import TestTree
from trajforge.verifiers.validation.mutants import mutation_of

pytestmark = [pytest.mark.docker, pytest.mark.usefixtures("docker_engine")]

CORE = "def inc(x):\n    return x + 1\n"
TESTS = """\
import os
import sys

from probe.core import inc


def test_inc():
    assert inc(1) == 2


def test_wrong():
    assert inc(1) == 3


def test_environment():
    assert os.environ.get("PROBE_MARK") == "seen"  # the caller's environment, not the server's
    assert sys.argv[0].endswith("pytest/__main__.py")
"""
SLOW = "import time\n\n\ndef test_sleeps():\n    time.sleep(120)\n"
T = "tests/test_core.py::"


def _repo(path: Path) -> tuple[Path, str]:
    builder = RepoBuilder(path)
    files = {
        "pyproject.toml": pyproject().replace('"calc"', '"probe"'),
        "probe/__init__.py": "",
        "probe/core.py": CORE,
        "tests/__init__.py": "",
        "tests/test_core.py": TESTS,
        "tests/test_slow.py": SLOW,
    }
    return path, builder.commit("probe", files)


def _served(session: Session) -> int:
    text = session.read_file(LOG)
    return len(text.decode().splitlines()) if text else 0


def _processes(session: Session) -> str:
    listing = "for p in /proc/[0-9]*; do tr '\\0' ' ' < $p/cmdline; echo; done"
    return session.exec(listing, timeout_s=30).output


def test_forked_runs_match_fresh_ones_and_fall_back_where_they_cannot(tmp_path: Path):
    path, commit = _repo(tmp_path / "probe")
    params = load_params(str(write_params(tmp_path / "p.yaml", tmp_path / "cache")))
    repo = open_source(str(path), SourceOptions(cache_dir=str(tmp_path / "cache")))
    sandbox = make_sandbox(params, quiet=True)
    try:
        profile = built_profile(sandbox, repo, commit, params, tmp_path / "logs")
        clean = TestTree.at(repo.path, commit, [])
        bug = Candidate(
            candidate_id="probe-bug", repo="probe", source=str(path), base_commit=commit,
            patch="", test_patch="", origin="bug/hand_written",
            created_at="2026-01-01T00:00:00Z", bug_patch="",
        )  # fmt: skip
        mutation = mutation_of(repo.path, bug, clean.tree_id)
        with clean_workspace(sandbox, profile, clean, fork_server=True) as workspace:
            assert workspace.forked
            session = workspace.session
            forked = mutant_context(profile, mutation, JUNIT_PATH, 60, forked=True)
            fresh = mutant_context(profile, mutation, JUNIT_PATH, 60, forked=False)
            marked = [
                dataclasses.replace(ctx, test_cmd=f"PROBE_MARK=seen {ctx.test_cmd}")
                for ctx in (forked, fresh)
            ]
            selection = (f"{T}test_inc", f"{T}test_wrong", f"{T}test_environment")
            runs = [run_tests(session, ctx, "base", 0, selection) for ctx in marked]
            assert _served(session) == 1
            by_fork, by_fresh = (run.statuses() for run in runs)
            assert by_fork == by_fresh == {
                f"{T}test_inc": "PASSED", f"{T}test_wrong": "FAILED",
                f"{T}test_environment": "PASSED",
            }  # fmt: skip
            assert runs[0].exit_code == runs[1].exit_code == 1
            assert "1 failed, 2 passed" in runs[0].log

            # Another PYTHONPATH would start another interpreter: the caller runs pytest itself.
            moved = dataclasses.replace(
                forked, test_cmd=forked.test_cmd.replace("env PYTHONPATH=", "env PYTHONPATH=/x:")
            )
            alone = run_tests(session, moved, "base", 0, (f"{T}test_inc",))
            assert alone.statuses() == {f"{T}test_inc": "PASSED"}
            assert _served(session) == 1

            # A timeout kills the caller; the supervisor then kills the forked tests too.
            short = dataclasses.replace(
                forked, test_cmd=forked.test_cmd.replace("timeout -k 5 60 ", "timeout -k 1 3 ")
            )
            hung = run_tests(session, short, "base", 0, ("tests/test_slow.py::test_sleeps",))
            assert hung.exit_code == 124, hung.log
            assert "test_slow" not in _processes(session)
            assert _served(session) == 2

            # pytest's own import loads iniconfig: a repository shipping it at its root would
            # have the server hold the clean copy, so a server started there refuses to serve.
            copy = (
                f"rm -f {FORK_READY} && python -c 'import iniconfig, shutil, os; "
                'shutil.copytree(os.path.dirname(iniconfig.__file__), "/repo/iniconfig")\''
            )
            assert session.exec(copy, timeout_s=60, workdir="/tmp").exit_code == 0
            assert not start_fork_server(session)
    finally:
        sandbox.close()
