"""``trajforge import-trajectories``: other agents' runs as a trajforge trajectories table.

Reads SWE-agent, mini-swe-agent or nebius-style trajectories (files, or directories walked for
the format's files), optionally grades them with SWE-bench reports, and writes what a stage
writes: ``trajectories/part-NNNNN.parquet``, ``rejections/part-00000.parquet`` and
``summary.json``, so ``curate``, ``export``, ``stats`` and ``report`` read an import like any
stage output. The output is built beside its place and swapped in when complete, so a killed
import never leaves half a table.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections import Counter
from collections.abc import Iterable

from tqdm import tqdm
from trajforge.generators.trajectories.formats.common import BadInput, Result, load_json
from trajforge.generators.trajectories.importer import (
    READERS,
    SUFFIXES,
    Reader,
    Verdict,
    apply_verdicts,
    report_verdicts,
)
from trajforge.pipelines.runtime import progress
from trajforge.schemas.errors import UserError
from trajforge.schemas.rejection import Rejection
from trajforge.schemas.trajectory import Trajectory

STAGE = "import"
PART_ROWS = 1000  # trajectories per Parquet part: a big import never holds every run in memory


def run_import(args: argparse.Namespace) -> int:
    from trajforge.pipelines.runtime.sinks import publish, staging_dir
    from trajforge.schemas.storage import join, write_bytes_atomic, write_records

    timer = progress.Timer()
    verdicts = load_reports(args.report or [])
    files, rejections = input_files(args.format, args.paths)
    reader = READERS[args.format]
    staging = staging_dir(args.output)
    parts = _Parts(join(staging, "trajectories"), verdicts)
    seen: set[str] = set()
    bar = tqdm(total=len(files), desc=STAGE, unit="file", file=sys.stderr, delay=2.0)
    try:
        for path in files:
            results = 0
            for result in _read(reader, path):
                results += 1
                if isinstance(result, Rejection):
                    rejections.append(result)
                elif result.trajectory_id in seen:
                    detail = f"{path}: {result.instance_id}: the same run as one read before"
                    rejections.append(Rejection(path, STAGE, "duplicate", detail))
                else:
                    seen.add(result.trajectory_id)
                    parts.add(result)
            if not results:
                detail = f"{path}: no runs in it; check that it is the file you meant"
                rejections.append(Rejection(path, STAGE, "empty", detail))
            bar.update(1)
            bar.set_postfix_str(f"{parts.kept} kept", refresh=False)
    finally:
        bar.close()
    parts.close()
    write_records(
        join(staging, "rejections", "part-00000.parquet"), rejections, Rejection.ARROW_SCHEMA
    )
    reasons = Counter(r.reason for r in rejections)
    summary = progress.Summary(STAGE, parts.kept + len(rejections), parts.kept, reasons)
    summary.seconds = timer.elapsed()
    summary.extra.update({"format": args.format, "files": len(files), **parts.counts})
    if verdicts:
        summary.extra["graded by report"] = parts.graded
    write_bytes_atomic(
        join(staging, "summary.json"), json.dumps(summary.as_dict(), indent=2).encode()
    )
    publish(staging, args.output)
    print(summary.render(), file=sys.stderr)
    if verdicts and not parts.graded:
        print(
            "import: no imported instance_id is in the report(s); check that they grade this run",
            file=sys.stderr,
        )
    return 0


def _read(reader: Reader, path: str) -> Iterable[Result]:
    from trajforge.schemas.storage import read_bytes

    try:
        data = read_bytes(path)
    except OSError as exc:
        detail = f"{path}: cannot be read ({exc}); check its permissions"
        return [Rejection(path, STAGE, "unreadable", detail)]
    return reader(path, data)


def load_reports(paths: Iterable[str]) -> dict[str, Verdict]:
    """Every report's verdicts, later reports winning; a bad report stops before any work."""
    from trajforge.schemas.storage import read_bytes

    verdicts: dict[str, Verdict] = {}
    for path in paths:
        try:
            data = read_bytes(path)
        except OSError as exc:
            raise UserError(f"--report {path}: cannot be read ({exc})") from None
        try:
            report = load_json(path, data)
        except BadInput as exc:
            raise UserError(f"--report {exc}") from None
        verdicts.update(report_verdicts(report, f"--report {path}"))
    return verdicts


def input_files(fmt: str, paths: Iterable[str]) -> tuple[list[str], list[Rejection]]:
    """Files to read, in a stable order without repeats, and a rejection per path that has none."""
    from apache_beam.io.filesystems import FileSystems
    from trajforge.schemas.storage import is_local, join

    files: list[str] = []
    rejections: list[Rejection] = []
    suffixes = SUFFIXES[fmt]
    for path in paths:
        found: list[str]
        if is_local(path) and os.path.isdir(path):
            found = _walk(path, suffixes)
        elif is_local(path) and not os.path.exists(path):
            detail = f"{path}: no such file or directory; check the path"
            rejections.append(Rejection(path, STAGE, "not_found", detail))
            continue
        elif is_local(path) or FileSystems.exists(path):
            found = [path]
        else:  # a remote directory
            pattern = join(path, "**")
            found = sorted(
                m.path
                for m in FileSystems.match([pattern])[0].metadata_list
                if m.path.endswith(suffixes)
            )
        if not found:
            wanted = ", ".join(f"*{s}" for s in suffixes)
            detail = f"{path}: no {wanted} files in it; check the path and --format {fmt}"
            rejections.append(Rejection(path, STAGE, "no_matching_files", detail))
        files.extend(found)
    unique: dict[str, str] = {}  # a file named twice (or inside a named directory) is read once
    for f in files:
        unique.setdefault(os.path.abspath(f) if is_local(f) else f, f)
    return list(unique.values()), rejections


def _walk(directory: str, suffixes: tuple[str, ...]) -> list[str]:
    found: list[str] = []
    for root, dirs, names in os.walk(directory):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        found.extend(os.path.join(root, n) for n in sorted(names) if n.endswith(suffixes))
    return found


class _Parts:
    """Trajectories written ``PART_ROWS`` at a time, graded by the reports as they go out."""

    def __init__(self, directory: str, verdicts: dict[str, Verdict]) -> None:
        self.directory = directory
        self.verdicts = verdicts
        self.pending: list[Trajectory] = []
        self.written = 0
        self.kept = 0
        self.graded = 0
        self.counts: dict[str, int] = dict.fromkeys(
            ("messages", "tool_calls", "resolved", "unresolved", "unverified"), 0
        )

    def add(self, trajectory: Trajectory) -> None:
        self.pending.append(trajectory)
        self.kept += 1
        if len(self.pending) >= PART_ROWS:
            self._flush()

    def close(self) -> None:
        if self.pending or not self.written:
            self._flush()

    def _flush(self) -> None:
        from trajforge.schemas.storage import join, write_records

        batch = apply_verdicts(self.pending, self.verdicts)
        self.graded += sum(1 for t in self.pending if t.instance_id in self.verdicts)
        for t in batch:
            self.counts["messages"] += len(t.messages)
            self.counts["tool_calls"] += sum(len(m.tool_calls) for m in t.messages)
            verdict = (
                "unverified" if t.resolved is None else "resolved" if t.resolved else "unresolved"
            )
            self.counts[verdict] += 1
        path = join(self.directory, f"part-{self.written:05d}.parquet")
        write_records(path, batch, Trajectory.ARROW_SCHEMA)
        self.written += 1
        self.pending = []
