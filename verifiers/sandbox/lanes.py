"""A stage's test lanes: ``workers`` containers running at once, and none of them idle while a
candidate still has a run that could start.

A validate worker takes ``workers`` candidates at a time; each holds one lane for its whole
validation (``held``). The runs inside one candidate are sequential by default (base, then gold;
base reruns, then gold reruns; the gold patch graded, then the inert one), but several of those
pairs do not depend on each other. When a lane is free (the last candidates of a run, a
candidate that hangs beside one that ended), ``pair`` runs the second of such a pair at once in
that lane instead of after the first: the same runs in the same kinds of containers, so the
same verdict, in less wall. A lane is never taken from a candidate that is waiting for one.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from typing import TypeVar

A = TypeVar("A")
B = TypeVar("B")


class Lanes:
    """``count`` lanes; a candidate ``held`` one, a pair's second run borrows a free one.
    ``Lanes(0)`` (``NONE``) has none to lend: its pairs run one after the other, for callers
    that run one candidate alone (an audit, ``evaluate``)."""

    def __init__(self, count: int) -> None:
        self.count = max(0, count)
        self._free = threading.BoundedSemaphore(self.count)
        self._lock = threading.Lock()
        self.borrowed = 0  # pairs whose second run took a free lane (the summary's counter)

    @contextmanager
    def held(self) -> Iterator[None]:
        """One lane for the caller's runs, waited for."""
        if not self.count:
            raise ValueError("Lanes(0) has no lane to hold")
        self._free.acquire()
        try:
            yield
        finally:
            self._free.release()

    def pair(
        self,
        first: Callable[[], A],
        second: Callable[[bool], B],
        needed: Callable[[A], bool] = lambda _: True,
    ) -> tuple[A, B | None]:
        """``first()`` and ``second(alongside)``: at once in a free lane (``alongside`` True: it
        must not touch what ``first`` uses), else one after the other, ``second`` only when
        ``needed(first's result)``, as the sequential order has it. The caller holds a lane
        already. The second result is None when it was not run or not needed, so both orders
        hand back the same results."""
        beside = self._beside(first, second)
        if beside is None:
            done = first()
            return done, (second(False) if needed(done) else None)
        done, later = beside
        return done, (later.result() if needed(done) else None)

    def both(self, first: Callable[[], A], second: Callable[[], B]) -> tuple[A, B]:
        """``first()`` and ``second()``, at once when a lane is free, else one after the other."""
        beside = self._beside(first, lambda _alongside: second())
        if beside is None:
            return first(), second()
        done, later = beside
        return done, later.result()

    def _beside(
        self, first: Callable[[], A], second: Callable[[bool], B]
    ) -> tuple[A, Future[B]] | None:
        """Both run to their end, ``second`` in a free lane; None (nothing run) when no lane is
        free. ``second``'s error stays in its future: a caller that does not need it drops it."""
        if not self._free.acquire(blocking=False):
            return None
        with self._lock:
            self.borrowed += 1
        try:
            with ThreadPoolExecutor(max_workers=1, thread_name_prefix="lane") as other:
                later = other.submit(second, True)
                try:
                    done = first()
                finally:
                    later.exception()  # both finish before either result is handed back
                return done, later
        finally:
            self._free.release()

    def take_borrowed(self) -> int:
        """How many pairs ran at once since the last call (a summary counter)."""
        with self._lock:
            taken, self.borrowed = self.borrowed, 0
        return taken


NONE = Lanes(0)
