"""The ``import`` stage: other agents' runs as a trajforge trajectories table, one composite.

Reads SWE-agent, mini-swe-agent or nebius-style trajectories (files, or directories walked for
the format's files), optionally grades them with SWE-bench reports, and writes what every stage
writes (sorted ``trajectories/`` and ``rejections/`` shards and ``summary.json``), so ``curate``,
``export``, ``stats`` and ``report`` read an import like any stage output.

``input_files`` and ``load_reports`` run before the pipeline starts (a bad report is one line);
``ImportTrajectories`` reads each numbered file, keeps the first of runs read twice (by file
order, then by place in the file) and grades the rest by the reports.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping

import apache_beam as beam
from trajforge.generators.trajectories.formats.common import BadInput, Result, load_json
from trajforge.generators.trajectories.importer import (
    READERS,
    SUFFIXES,
    Reader,
    Verdict,
    apply_verdicts,
    report_verdicts,
)
from trajforge.pipelines.runtime.stage_fn import REJECTED, StageFn
from trajforge.schemas.errors import UserError
from trajforge.schemas.rejection import Rejection
from trajforge.schemas.trajectory import Trajectory

STAGE = "import"
GRADED = "graded by report"  # the summary line: imported runs a report has a verdict for
VERDICTS = ("resolved", "unresolved", "unverified")


class ReadFileFn(StageFn):
    """(position, path) -> ((trajectory_id), (position, place, path, trajectory)) for every run
    the file holds, and a rejection for each row or file that cannot be read."""

    STAGE = STAGE

    def __init__(self, fmt: str) -> None:  # no params: an import reads only its files
        self.fmt = fmt

    def process(self, element: tuple[int, str]):
        position, path = element
        self.summary_text("format", self.fmt)
        self.summary_count("files")
        results = 0
        for place, result in enumerate(_read(READERS[self.fmt], path)):
            results += 1
            if isinstance(result, Rejection):
                yield self.rejection(result)
            else:
                yield result.trajectory_id, (position, place, path, result)
        if not results:
            yield self.reject(
                path, "empty", f"{path}: no runs in it; check that it is the file you meant"
            )


class KeepFirstFn(StageFn):
    """A run read more than once: the first read (by file order) is kept, the others rejected."""

    STAGE = STAGE

    def __init__(self) -> None:
        pass

    def process(self, element: tuple[str, Iterable[tuple[int, int, str, Trajectory]]]):
        _, reads = element
        first, *again = sorted(reads, key=lambda read: read[:2])
        for _, _, path, trajectory in again:
            detail = f"{path}: {trajectory.instance_id}: the same run as one read before"
            yield self.reject(path, "duplicate", detail)
        yield first[3]


class GradeFn(StageFn):
    """A kept run -> the run with the reports' verdict on its instance, counted for the summary."""

    STAGE = STAGE

    def __init__(self, verdicts: Mapping[str, Verdict]) -> None:
        self.verdicts = dict(verdicts)

    def start_bundle(self) -> None:
        for name in ("messages", "tool_calls", *VERDICTS, *([GRADED] if self.verdicts else [])):
            self.summary_count(name, 0)  # a line in the summary even when none

    def process(self, trajectory: Trajectory):
        [graded] = apply_verdicts([trajectory], self.verdicts)
        summary = {
            "messages": len(graded.messages),
            "tool_calls": sum(len(m.tool_calls) for m in graded.messages),
            _verdict(graded): 1,
            GRADED: int(graded.instance_id in self.verdicts),
        }
        for name, value in summary.items():
            self.summary_count(name, value)
        self.tick("kept")
        yield graded


class ImportTrajectories(beam.PTransform):
    """(position, path) of every file -> {"trajectories", "rejections"}.

    ``position`` is the file's place in ``input_files``' order: of a run read twice, the read
    from the first file (then the first in that file) is kept."""

    def __init__(self, fmt: str, verdicts: Mapping[str, Verdict]) -> None:
        super().__init__()
        if fmt not in READERS:
            raise UserError(f"import: unknown format {fmt!r}; choose from {', '.join(READERS)}")
        self.fmt = fmt
        self.verdicts = dict(verdicts)

    def expand(self, files):
        read = files | "ReadFiles" >> beam.ParDo(ReadFileFn(self.fmt)).with_outputs(
            REJECTED, main="runs"
        )
        kept = (
            read.runs
            | "GroupReads" >> beam.GroupByKey()
            | "KeepFirst" >> beam.ParDo(KeepFirstFn()).with_outputs(REJECTED, main="runs")
        )
        trajectories = kept.runs | "Grade" >> beam.ParDo(GradeFn(self.verdicts))
        rejections = (read[REJECTED], kept[REJECTED]) | "AllRejections" >> beam.Flatten()
        return {"trajectories": trajectories, "rejections": rejections}


def _verdict(trajectory: Trajectory) -> str:
    if trajectory.resolved is None:
        return "unverified"
    return "resolved" if trajectory.resolved else "unresolved"


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
    from trajforge.schemas.storage import escape_glob, is_local, join, match

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
            pattern = join(escape_glob(path), "**")
            found = sorted(m.path for m in match(pattern) if m.path.endswith(suffixes))
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
