"""A monorepo's package folder, read back from a task's command by the grader: only the form
validate writes, only a folder inside the repository; and the supervisor refuses a working
folder that leaves /repo whatever the host asked (the second check, in the container)."""

from __future__ import annotations

import shlex
import shutil
import subprocess
import sys
from importlib import resources

import pytest
from trajforge.schemas.js_commands import in_package, package_dir


def _command(folder: str, script: str = 'mocha "$@"') -> str:
    return " ".join(shlex.quote(w) for w in in_package(folder, script))


@pytest.mark.parametrize("folder", ["packages/core", "packages/my core", "apps/web/ui"])
def test_the_folder_validate_wrote_reads_back(folder):
    assert package_dir(_command(folder)) == folder


@pytest.mark.parametrize(
    "command",
    [
        _command("../outside"),
        _command("/etc"),
        _command("packages/../../x"),
        _command("."),
        _command("packages/a\nb"),
        "sh -c 'cd packages/core || exit 2; mocha' runner",  # not the workspace form
        "sh -c 'cd packages/core; mocha' workspace",  # no `|| exit 2`
        "sh -c 'cd a b || exit 2; mocha' workspace",  # two words
        "node_modules/.bin/jest",
        "sh -c 'unterminated",
        "",
    ],
)
def test_anything_else_is_the_root(command):
    assert package_dir(command) == ""


def test_the_supervisor_refuses_a_working_folder_outside_the_repository(tmp_path):
    """Run as it is shipped (its own folder, its ``out``), unprivileged (uid -1): a hostile
    TRAJFORGE_WORKDIR stops it before anything starts, with one line."""
    grader = tmp_path / "grader"
    grader.mkdir()
    shipped = resources.files("trajforge.verifiers.grader.in_container")
    for name in ("supervisor.py", "lockdown.py"):  # what ``supervised.add_grader`` ships
        shutil.copyfile(str(shipped.joinpath(name)), grader / name)
    repo = tmp_path / "repo"
    repo.mkdir()
    guard = tmp_path / "guard.txt"
    guard.write_text("")
    run = [sys.executable, "-I", str(grader / "supervisor.py"), "exec", "-1", "5", str(guard),
           "--", "true"]  # fmt: skip

    def supervise(workdir: str) -> subprocess.CompletedProcess:
        env = {"TRAJFORGE_WORKDIR": workdir, "PATH": "/usr/bin:/bin"}
        return subprocess.run(run, cwd=repo, capture_output=True, text=True, timeout=60, env=env)

    for hostile in ("../..", "/etc", "sub/../../.."):
        done = supervise(hostile)
        assert done.returncode != 0 and "is outside" in done.stderr, done.stderr
        assert not (grader / "out").exists()  # nothing ran, no result written
    (repo / "packages").mkdir()
    done = supervise("packages")
    assert done.returncode == 0, done.stderr
    assert (grader / "out" / "result.json").is_file()
    # shipped without lockdown.py, it runs nothing and says why in one line
    (grader / "lockdown.py").unlink()
    (grader / "out" / "result.json").unlink()
    done = supervise("packages")
    assert done.returncode != 0 and "Traceback" not in done.stderr, done.stderr
    assert "lockdown.py is not beside it, no test runs" in done.stderr
    assert not (grader / "out" / "result.json").exists()
