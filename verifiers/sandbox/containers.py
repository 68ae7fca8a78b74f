"""What every container backend (Docker, podman) shares: owner labels and the leftover rule.

A container carries its owner (host, pid and the process's start time), so a sweep removes only
what a dead run left behind; a live run's containers and another host's are left alone. Kept
apart from any one engine so that each backend applies the same rule to its own listing.
"""

from __future__ import annotations

import datetime
import os
import re
import socket
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from trajforge.verifiers.sandbox.base import RegistryError

# 2024-05-01T12:34:56.123456789Z, or with an offset (podman: +02:00, or " +0200 CEST")
_ISO = re.compile(r"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(\.\d+)?\s*(Z|z|[+-]\d\d:?\d\d)?")

LABEL = "trajforge"
OWNER_LABEL = "trajforge.owner"  # "<host>:<pid>"
OWNER_START_LABEL = "trajforge.owner.start"  # the owner's start time: a reused pid is not it

LIVE, DEAD, OTHER_HOST = "live", "dead", "other_host"

SIGKILLED = 128 + 9  # the exit of a command killed with its container (or by the OOM killer)
STOP_SETTLE_S = 1.0  # how long a 137 waits for the engine to see its container stopped


def owner_labels(owner: str, owner_start: str) -> dict[str, str]:
    """The labels a backend puts on each of its containers."""
    return {LABEL: "1", OWNER_LABEL: owner, OWNER_START_LABEL: owner_start}


@dataclass(frozen=True)
class Sweep:
    """What one janitor pass did."""

    removed: int = 0  # containers of dead runs on this host
    live: int = 0  # containers of runs still alive on this host: kept
    other_hosts: int = 0  # containers of another host's runs: kept, not judged from here

    def line(self) -> str:
        return (
            f"removed {self.removed} container(s) of dead runs; kept {self.live} of live runs "
            f"and {self.other_hosts} of other hosts (their runs cannot be checked from here)"
        )


def process_start(pid: int) -> str | None:
    """When process ``pid`` started (clock ticks after boot, /proc/<pid>/stat field 22).

    None when no such process runs. Where /proc is missing, psutil's creation time if installed,
    else "" (unknown: the pid alone decides).
    """
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            stat = handle.read()
    except (FileNotFoundError, ProcessLookupError):
        if os.path.isdir("/proc/self"):
            return None
        return _start_elsewhere(pid)
    except OSError:
        return ""  # exists, unreadable: alive, start unknown
    # The name (field 2) may hold spaces and parentheses: count fields after its last ")".
    fields = stat[stat.rfind(b")") + 2 :].split()
    return fields[19].decode() if len(fields) > 19 else ""


def _start_elsewhere(pid: int) -> str | None:
    try:
        import psutil
    except ImportError:
        return "" if _alive(pid) else None
    try:
        return f"{psutil.Process(pid).create_time():.2f}"
    except psutil.NoSuchProcess:
        return None
    except psutil.Error:
        return ""


def owner_state(labels: dict[str, str], host: str | None = None) -> str:
    """LIVE when the process that started the container still runs, DEAD when not (or its pid now
    belongs to another process), OTHER_HOST when it ran on another machine (or is unreadable)."""
    owner_host, _, pid = labels.get(OWNER_LABEL, "").partition(":")
    if owner_host != (host or socket.gethostname()):
        return OTHER_HOST
    if not pid.isdigit():
        return DEAD
    started = process_start(int(pid))
    if started is None:
        return DEAD
    expected = labels.get(OWNER_START_LABEL, "")
    if expected and started and expected != started:
        return DEAD  # the pid was reused by a process that started later
    return LIVE


def sweep_owned(
    listed: Iterable[tuple[str, dict[str, str]]],
    remove: Callable[[str], bool],
    only_dead_owners: bool = True,
) -> Sweep:
    """Apply the owner rule to an engine's (container id, labels) listing; ``remove`` says whether
    it removed the container (False: gone already, its owner removed it meanwhile)."""
    host = socket.gethostname()
    counted = {DEAD: 0, LIVE: 0, OTHER_HOST: 0}
    for container_id, labels in listed:
        state = owner_state(labels, host) if only_dead_owners else DEAD
        if state != DEAD or remove(container_id):
            counted[state] += 1
    return Sweep(counted[DEAD], counted[LIVE], counted[OTHER_HOST])


def says(state: dict) -> str:
    """An engine's container State (Docker's and podman's have the same keys) in a few words."""
    parts = [f"status {state.get('Status')}", f"exit {state.get('ExitCode')}"]
    if state.get("OOMKilled"):
        parts.append("OOM-killed")
    if state.get("Error"):
        parts.append(str(state["Error"])[:200])
    return ", ".join(parts)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def iso_seconds(text: str | None) -> float:
    """An engine's timestamp (RFC 3339, nanoseconds and all) as epoch seconds; 0.0 for none."""
    if not text:
        return 0.0
    found = _ISO.match(text.strip())
    if found is None:
        return 0.0
    day, fraction, zone = found.groups()
    zone = "+00:00" if zone in ("Z", "z", "") else zone
    try:
        moment = datetime.datetime.fromisoformat(f"{day}{(fraction or '')[:7]}{zone}")
    except ValueError:
        return 0.0
    return moment.timestamp()


def split_image(image: str) -> tuple[str, str]:
    """(repository, tag or digest): ``localhost:5000/a/env:x`` -> (``localhost:5000/a/env``, x);
    the port's colon is no tag."""
    if "@" in image:
        repository, _, digest = image.partition("@")
        return repository, digest
    head, sep, tail = image.rpartition(":")
    if sep and "/" not in tail:
        return head, tail
    return image, "latest"


def registry_host(image: str) -> str | None:
    """The registry an image name points at (its first part when it has a dot or a port, or is
    localhost, as Docker reads it); None for a bare name such as ``trajforge-env:<id>``."""
    first, sep, _ = image.partition("/")
    if sep and ("." in first or ":" in first or first == "localhost"):
        return first
    return None


def needs_registry(image: str, verb: str) -> None:
    if registry_host(image) is None:
        raise RegistryError(
            f"registry: will not {verb} {image}: the name has no registry host; name images "
            "host[:port]/path/env:<profile_id> (set environment.registry)"
        )
