"""The programs trajforge ships into a container run under the project's own Python, which may
be the oldest one a profile picks (``environment.pythons`` in schemas/params.py): each must run
there. A newer API in one of them fails every run of such a project, not with an error a test
here would see (``os.waitstatus_to_exitcode``, 3.9+, made every bug run on Python 3.8 exit 70).
vermin reads each program for the standard library's and the language's version needs."""

from __future__ import annotations

import glob
import subprocess
import sys
from pathlib import Path

from trajforge.schemas.params import EnvironmentParams

ROOT = Path(__file__).resolve().parent.parent
# Run by the project's interpreter: the graded run's files, the fork server, the plugins.
PROGRAMS = (
    "verifiers/grader/in_container/*.py",
    "verifiers/languages/python/in_container/*.py",
    "verifiers/languages/python/fork_server.py",
    "verifiers/languages/python/pytest_plugin.py",
    "verifiers/origin_plugin.py",
)


def oldest_python() -> str:
    versions = EnvironmentParams().pythons
    return min(versions, key=lambda v: tuple(int(part) for part in v.split(".")))


def main() -> int:
    files = sorted(f for pattern in PROGRAMS for f in glob.glob(str(ROOT / pattern)))
    target = oldest_python()
    vermin = Path(sys.executable).with_name("vermin")
    command = [str(vermin), "-q", "--no-tips", "--violations", f"-t={target}-", *files]
    done = subprocess.run(command, check=False)
    if done.returncode:
        print(f"check_container_python: the programs above must run on Python {target}")
    return done.returncode


if __name__ == "__main__":
    sys.exit(main())
