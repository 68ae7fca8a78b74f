"""The ``import-tasks`` stage: published task rows -> candidates (+ rejections), one composite.

Reads SWE-bench, SWE-Gym, SWE-smith, nebius/SWE-rebench, Multi-SWE-bench or SWE-PolyBench files
(``generators/imports/``), keeps the first row of an instance id read twice (by file order, then
place in the file), and turns each row into a ``Candidate`` in the repository its ``--source``
names, as ``mine`` and ``inject`` do; ``validate`` reads the ``candidates`` table like theirs.
Every row that cannot be one is a rejection with its reason; the other rows go on.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import apache_beam as beam
from trajforge.generators.imports.candidates import import_candidate
from trajforge.generators.imports.files import read_rows
from trajforge.generators.imports.formats import FORMATS, parse_row
from trajforge.generators.imports.rows import STAGE, BadRow, ImportRow
from trajforge.generators.imports.source_keys import find_source, suggested_key
from trajforge.generators.sources.specs import SourceOptions, open_source
from trajforge.pipelines.runtime.stage_fn import REJECTED, StageFn
from trajforge.schemas.candidate import Candidate
from trajforge.schemas.errors import UserError
from trajforge.schemas.params import Params
from trajforge.schemas.rejection import Rejection


class ReadFileFn(StageFn):
    """(position, path) -> (instance_id, (position, place, row)) for every row the file holds,
    and a rejection for each row or file that cannot be read."""

    STAGE = STAGE

    def __init__(self, params: Params, fmt: str) -> None:
        super().__init__(params)
        self.fmt = fmt

    def process(self, element: tuple[int, str]):
        position, path = element
        self.summary_text("format", self.fmt)
        self.summary_count("files")
        rows = 0
        for place, read in enumerate(read_rows(path)):
            rows += 1
            if isinstance(read, Rejection):
                yield self.rejection(read)
                continue
            where, raw = read
            try:
                row = parse_row(self.fmt, where, raw)
            except BadRow as exc:
                yield self.reject(_row_id(raw, where), exc.reason, str(exc))
                continue
            yield row.instance_id, (position, place, row)
        if not rows:
            yield self.reject(
                path, "bad_input_file", f"{path}: no rows in it; check that it is the file meant"
            )


class KeepFirstFn(StageFn):
    """An instance id read more than once: the first read is kept, the others rejected."""

    STAGE = STAGE

    def process(self, element: tuple[str, Iterable[tuple[int, int, ImportRow]]]):
        _, reads = element
        first, *again = sorted(reads, key=lambda read: read[:2])
        for _, _, row in again:
            detail = (
                f"{row.where} ({row.instance_id}): the same instance id as "
                f"{first[2].where}, read first; the first is kept"
            )
            yield self.reject(row.instance_id, "duplicate", detail)
        yield first[2]


class ToCandidateFn(StageFn):
    """A row -> its candidate in the repository its ``--source`` names, or why not."""

    STAGE = STAGE

    def __init__(self, params: Params, sources: Mapping[str, str]) -> None:
        super().__init__(params)
        self.sources = dict(sources)

    def process(self, row: ImportRow):
        spec = find_source(self.sources, row.repo)
        if spec is None:
            key = suggested_key(row.repo)
            detail = (
                f"{row.where} ({row.instance_id}): no --source for {row.repo}; pass "
                f"--source {key}=PATH_OR_URL (a git checkout or clone URL of {key})"
            )
            yield self.reject(row.instance_id, "unknown_repo", detail)
            return
        try:
            repo = open_source(spec, SourceOptions.from_params(self.params))
        except UserError as exc:
            detail = f"{row.where} ({row.instance_id}): --source for {row.repo}: {exc}"
            yield self.reject(row.instance_id, exc.reason, detail)
            return
        result = import_candidate(row, repo)
        if isinstance(result, Candidate):
            self.tick("candidate")
            yield result
        else:
            yield self.rejection(result)


class ImportTasks(beam.PTransform):
    """(position, path) of every file -> {"candidates", "rejections"}."""

    def __init__(self, params: Params, fmt: str, sources: Mapping[str, str]) -> None:
        super().__init__()
        if fmt not in FORMATS:
            raise UserError(
                f"import-tasks: unknown format {fmt!r}; choose from {', '.join(FORMATS)}"
            )
        self.params = params
        self.fmt = fmt
        self.sources = dict(sources)

    def expand(self, files):
        read = files | "ReadFiles" >> beam.ParDo(ReadFileFn(self.params, self.fmt)).with_outputs(
            REJECTED, main="rows"
        )
        kept = (
            read.rows
            | "GroupById" >> beam.GroupByKey()
            | "KeepFirst"
            >> beam.ParDo(KeepFirstFn(self.params)).with_outputs(REJECTED, main="rows")
        )
        made = (
            kept.rows
            | "SpreadRows" >> beam.Reshuffle()
            | "ToCandidate"
            >> beam.ParDo(ToCandidateFn(self.params, self.sources)).with_outputs(
                REJECTED, main="candidates"
            )
        )
        rejections = (read[REJECTED], kept[REJECTED], made[REJECTED]) | "AllRejections" >> (
            beam.Flatten()
        )
        return {"candidates": made.candidates, "rejections": rejections}


def _row_id(raw: object, where: str) -> str:
    """What a rejected row is called: its instance id where it has one, else where it was read."""
    value = raw.get("instance_id") if isinstance(raw, dict) else None
    return value if isinstance(value, str) and value else where
