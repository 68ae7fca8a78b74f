"""A progress bar while a stage runs and a one-screen summary when it ends.

DoFns report through ``tick``; on the local runner they run in this process and move the bar. In
a Dask worker process the tick travels to the launcher as a Dask event (``TOPIC``), where the
runner (``dask_runner.py``) moves the bar with it. On other remote runners the call is a no-op
and the summary's counts come from the tables.
"""

from __future__ import annotations

import sys
import threading
import time
from collections import Counter
from dataclasses import dataclass, field

from tqdm import tqdm

_lock = threading.Lock()
_bar: tqdm | None = None


def start(description: str, total: int | None, unit: str) -> None:
    global _bar
    with _lock:
        _bar = tqdm(total=total, desc=description, unit=unit, file=sys.stderr, dynamic_ncols=True)


TOPIC = "trajforge-progress"  # the Dask event a worker's tick travels as


def tick(outcome: str, n: int = 1) -> None:
    with _lock:
        if _bar is not None:
            _bar.update(n)
            _bar.set_postfix_str(outcome, refresh=False)
            return
    _to_launcher({"tick": outcome, "n": n})


def grow(n: int) -> None:
    """``n`` more units than the bar started with: work the stage makes itself (validate's bug
    combinations), so the bar never counts past its total."""
    with _lock:
        if _bar is not None:
            if _bar.total is not None:
                _bar.total += n
                _bar.refresh()
            return
    _to_launcher({"grow": n})


def from_worker(event: tuple[float, dict]) -> None:
    """A worker's tick or grow, received in the launcher (``Client.subscribe_topic``)."""
    _, said = event
    if "tick" in said:
        tick(str(said["tick"]), int(said.get("n", 1)))
    elif "grow" in said:
        grow(int(said["grow"]))


def _to_launcher(said: dict) -> None:
    """In a Dask worker process, send ``said`` to the launcher; anywhere else, nothing."""
    if "distributed" not in sys.modules:
        return
    from distributed import Worker, get_worker

    worker: Worker | None
    try:
        worker = get_worker()
    except ValueError:  # a DoFn's own thread (rollout's pool) has no task context
        worker = next(iter(Worker._instances), None)
    if worker is not None:  # else not in a worker: no bar to move here
        worker.log_event(TOPIC, said)  # thread-safe: sent from the worker's event loop


def say(line: str) -> None:
    """One line on stderr, above the bar when one is showing (never glued to it)."""
    with _lock:
        if _bar is not None:
            _bar.write(line, file=sys.stderr)
        else:
            print(line, file=sys.stderr)


def stop() -> None:
    global _bar
    with _lock:
        if _bar is not None:
            _bar.close()
            _bar = None


@dataclass
class Summary:
    stage: str
    inputs: int
    kept: int
    rejected: Counter = field(default_factory=Counter)
    seconds: float = 0.0
    extra: dict[str, object] = field(default_factory=dict)
    kept_table: str = ""  # which table ``kept`` counts; recorded so readers agree

    def render(self) -> str:
        lines = [
            f"{self.stage}: {self.inputs} inputs, {self.kept} kept, "
            f"{sum(self.rejected.values())} rejected in {self.seconds:.1f}s"
        ]
        for reason, count in self.rejected.most_common():
            lines.append(f"  rejected {count:>6}  {reason}")
        for key, value in self.extra.items():
            lines.append(f"  {key}: {value}")
        return "\n".join(lines)

    def as_dict(self) -> dict[str, object]:
        return {
            "stage": self.stage,
            "inputs": self.inputs,
            "kept": self.kept,
            "rejected": dict(sorted(self.rejected.items())),
            "seconds": round(self.seconds, 2),
            **({"kept_table": self.kept_table} if self.kept_table else {}),
            **self.extra,
        }


class Timer:
    def __init__(self) -> None:
        self.started = time.monotonic()

    def elapsed(self) -> float:
        return time.monotonic() - self.started
