"""What a DoFn's pool threads hand back: counts replayed in the bundle's thread, and whether
units overlapped (pipelines/runtime/pool_work.py), with real threads."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

from trajforge.pipelines.runtime.pool_work import InFlight, PoolCounts


def test_units_that_run_together_both_learn_it():
    flight = InFlight()
    both_inside = threading.Barrier(2, timeout=30)

    def unit() -> bool:
        with flight.entered() as overlap:
            both_inside.wait()  # neither leaves before the other has entered
        return overlap.seen

    with ThreadPoolExecutor(max_workers=2) as pool:
        seen = [f.result() for f in [pool.submit(unit), pool.submit(unit)]]
    assert seen == [True, True]


def test_units_one_after_another_overlap_nothing():
    flight = InFlight()
    seen = []
    for _ in range(3):
        with flight.entered() as overlap:
            pass
        seen.append(overlap.seen)
    assert seen == [False, False, False]


def test_counts_made_in_a_thread_are_replayed_in_order():
    counts = PoolCounts()
    thread = threading.Thread(target=lambda: (counts.add("images_built"), counts.add("x", 3)))
    thread.start()
    thread.join()
    replayed: list[tuple[str, int]] = []
    counts.replay(lambda name, value: replayed.append((name, value)))
    assert replayed == [("images_built", 1), ("x", 3)]
