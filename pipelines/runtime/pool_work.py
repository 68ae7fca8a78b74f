"""What work a DoFn hands to its own threads needs: counts made there, and whether units overlapped.

Beam keeps a bundle's metrics per thread (its state sampler is thread-local), so a count made in
a pool thread never reaches the run's metrics on the in-process or the Dask runner. A unit of
work records its counts in a ``PoolCounts`` and the bundle's thread replays them when it takes
the unit's result. ``InFlight`` tells each unit whether another ran beside it: what the stage
counts to show that its units really ran at once (a figure, never a wall time).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager


class PoolCounts:
    """Counts made in a pool thread, kept until the bundle's thread replays them."""

    def __init__(self) -> None:
        self.made: list[tuple[str, int]] = []

    def add(self, name: str, value: int = 1) -> None:
        self.made.append((name, value))

    def replay(self, count: Callable[[str, int], None]) -> None:
        for name, value in self.made:
            count(name, value)


class Overlap:
    """One unit's flag: whether another unit of the same ``InFlight`` ran while it did."""

    seen = False


class InFlight:
    """The units running now; each one entered learns whether it overlapped another."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.running: set[Overlap] = set()

    @contextmanager
    def entered(self) -> Iterator[Overlap]:
        mine = Overlap()
        with self.lock:
            if self.running:
                mine.seen = True
                for other in self.running:
                    other.seen = True
            self.running.add(mine)
        try:
            yield mine
        finally:
            with self.lock:
                self.running.discard(mine)
