"""Counters that reach the summary on runners without metrics: a tally file per bundle.

Beam's metrics are the summary's first source, but not every runner keeps them (Beam's own
DaskRunner raises; a portable runner may drop them). So every count a ``StageFn`` makes is also
summed in the worker and written, when its bundle ends, as one small JSON file in the run's
staging folder (``<staging>/.tally/``), where any worker can write and the launcher can read. The
launcher sums the files only when the runner returned no metrics: a retried bundle writes its
file again, so tally files count attempts, as Beam's "attempted" metrics do.
"""

from __future__ import annotations

import json
import shutil
import threading
import uuid
from collections import Counter

from trajforge.schemas.storage import (
    delete_files,
    files_under,
    is_local,
    join,
    read_bytes,
    write_bytes_atomic,
)

FOLDER = ".tally"
# A stage's own summary lines: every counter and string set in this namespace, under its name
# (``StageFn.summary_count("files")``).
SUMMARY = "summary"


class Tally:
    """One bundle's counts by (namespace, name), and string sets by (namespace, name); safe to
    count from a DoFn's own threads (rollout's pool)."""

    def __init__(self) -> None:
        self.counts: Counter[tuple[str, str]] = Counter()
        self.texts: dict[tuple[str, str], set[str]] = {}
        self.lock = threading.Lock()

    def __getstate__(self) -> dict:
        return {"counts": self.counts, "texts": self.texts}  # a lock does not pickle

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state, lock=threading.Lock())

    def count(self, namespace: str, name: str, value: int = 1) -> None:
        with self.lock:
            self.counts[(namespace, name)] += value

    def text(self, namespace: str, name: str, value: str) -> None:
        with self.lock:
            self.texts.setdefault((namespace, name), set()).add(value)

    def flush(self, directory: str | None) -> None:
        """Write what was counted since the last flush to ``directory`` (None: nowhere)."""
        with self.lock:
            self._flush(directory)

    def _flush(self, directory: str | None) -> None:
        if directory and (self.counts or self.texts):
            body = {
                "counts": [[ns, name, value] for (ns, name), value in sorted(self.counts.items())],
                "texts": [[ns, name, sorted(v)] for (ns, name), v in sorted(self.texts.items())],
            }
            path = join(directory, f"{uuid.uuid4().hex}.json")
            write_bytes_atomic(path, json.dumps(body).encode())
        self.counts.clear()
        self.texts.clear()


def read(directory: str) -> tuple[Counter[tuple[str, str]], dict[tuple[str, str], set[str]]]:
    """Every tally file's counts summed, and string sets joined."""
    counts: Counter[tuple[str, str]] = Counter()
    texts: dict[tuple[str, str], set[str]] = {}
    for path in _files(directory):
        body = json.loads(read_bytes(path))
        for namespace, name, value in body["counts"]:
            counts[(namespace, name)] += value
        for namespace, name, values in body["texts"]:
            texts.setdefault((namespace, name), set()).update(values)
    return counts, texts


def remove(directory: str) -> None:
    """The tally is the run's bookkeeping, not part of its output."""
    if is_local(directory):
        shutil.rmtree(directory, ignore_errors=True)
    else:
        delete_files(_files(directory))


def _files(directory: str) -> list[str]:
    return sorted(p for p in files_under(directory) if p.endswith(".json"))
