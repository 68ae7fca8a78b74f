"""Seconds this process's sandboxes spent building images and running commands.

A stage's cost splits into build, test and other (issue 44): the builder and the commands run in
containers, so their time is measured where the sandbox waits for them, summed per process, and
drained into the stage's tally at each bundle's end (``StageFn.finish_bundle``), from whichever
thread or DoFn ran them. A sum over a pool's threads is core time: each command holds its own
container's CPUs (``sandbox.cpus``) while it runs.
"""

from __future__ import annotations

import threading

BUILD = "build"  # an image build (``ImageStore.build_image``)
RUN = "run"  # a command in a session: a test run, mostly (the stage's ``test`` share)

_lock = threading.Lock()
_seconds: dict[str, float] = {}


def record(kind: str, seconds: float) -> None:
    with _lock:
        _seconds[kind] = _seconds.get(kind, 0.0) + max(seconds, 0.0)


def drain() -> dict[str, float]:
    """What was recorded since the last drain, and zero again."""
    with _lock:
        taken = dict(_seconds)
        _seconds.clear()
    return taken
