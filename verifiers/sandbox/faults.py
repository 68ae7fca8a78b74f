"""Faults of the machine, not of a repository: a full disk, an engine that errs under a build.

A verdict (``install_failed``, a task kept or rejected) is cached so a rerun does not pay for it
again; a fault of the machine must never become one, or a rerun after the disk is freed replays
"No space left on device" as the repository's failure (measured: three EnvBench repositories
recorded ``install_failed`` on a full disk, replayed in 7 s after it was freed). So a build that
fails on such a fault raises ``MachineFault`` (a ``SandboxBroken``: never cached, the stage
rejects the item as ``infra_failure`` and a rerun builds again), and no build starts while the
engine's image storage has less free space than ``environment.min_free_gb``.

What counts as a fault is what the kernel or the engine says, not the project's own output: an
``ENOSPC``/``EDQUOT`` line, or the engine's API failing under the build. A repository that prints
such a line itself gains nothing by it: its items are rejected, uncached, on every run.
"""

from __future__ import annotations

import re
import shutil

from trajforge.verifiers.sandbox.base import SandboxBroken

GB = 1_000_000_000
INFRA_FAILURE = "infra_failure"
# The kernel's words for a full disk or quota (strerror of ENOSPC, EDQUOT), in any tool's line.
_DISK_FULL = re.compile(r"no space left on device|disk quota exceeded|ENOSPC|EDQUOT", re.I)
# The builders' own line when the engine's API failed under a build (docker.py, podman.py).
_ENGINE = re.compile(r"^(docker|podman) build failed: ", re.M)
PRUNE_HINT = (
    "`trajforge images prune --outputs DIR` removes environment images no dataset there uses "
    "(`--keep-none`: all unused), `trajforge janitor` what dead runs left; "
    "environment.min_free_gb sets the floor"
)


class MachineFault(SandboxBroken):
    """The machine failed a build or a run, not the repository: never a cached verdict."""

    reason = INFRA_FAILURE


class DiskFull(MachineFault):
    """The engine's image storage is below the free-space floor: no build may start."""


def machine_fault(log: str) -> str:
    """The line of ``log`` that names a fault of the machine, "" when none does."""
    for line in log.splitlines():
        if _DISK_FULL.search(line) or _ENGINE.match(line):
            return line.strip()[:300]
    return ""


def free_bytes(path: str) -> int | None:
    """Free bytes of the filesystem holding ``path``, None when it is not here to measure."""
    try:
        return shutil.disk_usage(path).free
    except OSError:
        return None


def check_free_space(free: int | None, where: str, min_free_gb: float, what: str) -> None:
    """DiskFull when ``free`` bytes (None: unknown, no check) are below the floor."""
    if free is None or min_free_gb <= 0 or free >= min_free_gb * GB:
        return
    raise DiskFull(
        f"{what}: disk full: {free / GB:.1f} GB free where the engine keeps images ({where}), "
        f"a build needs at least {min_free_gb:g} GB; nothing was built or cached. {PRUNE_HINT}"
    )
