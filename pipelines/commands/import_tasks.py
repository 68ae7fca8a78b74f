"""``trajforge import-tasks``: published task datasets (SWE-bench, SWE-Gym, SWE-smith,
nebius/SWE-rebench, Multi-SWE-bench, SWE-PolyBench) as candidates that ``trajforge validate``
proves again."""

from __future__ import annotations

import argparse

from trajforge.generators.imports.formats import FORMATS
from trajforge.generators.languages.registry import LANGUAGES
from trajforge.pipelines.commands import options

NAME = "import-tasks"
HELP = (
    "read SWE-bench, SWE-Gym, SWE-smith, nebius, Multi-SWE-bench or SWE-PolyBench task rows as "
    "candidates to validate"
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.description = (
        "Read a published task dataset (JSONL, a JSON list, Parquet, or a Hugging Face dataset "
        "directory) into a candidates table that `trajforge validate --input` proves again. "
        "Each row keeps its dataset's instance_id, FAIL_TO_PASS and PASS_TO_PASS. "
        "Multi-SWE-bench and SWE-PolyBench rows in a language no plug-in runs (the plug-ins: "
        f"{', '.join(language.name for language in LANGUAGES)}) are set aside as "
        "language_not_supported."
    )
    parser.add_argument("--format", required=True, choices=FORMATS)
    parser.add_argument(
        "paths",
        nargs="+",
        metavar="FILE",
        help="*.jsonl, *.json, *.parquet files, or directories holding them (a save_to_disk "
        "directory or a hub snapshot)",
    )
    parser.add_argument(
        "--source", action="append", default=[], metavar="KEY=PATH_OR_URL",
        help="where a repository's code is: KEY is the rows' repo or its owner/name "
        "(swesmith/<owner>__<name>.<commit8> -> <owner>/<name>), the value a local git checkout "
        "or a clone URL (repeatable)",
    )  # fmt: skip
    parser.add_argument("--output", required=True, help="output directory")
    options.add_run_options(parser)


def run(args: argparse.Namespace, beam_args: list[str]) -> int:
    import os

    import apache_beam as beam
    from trajforge.generators.imports.files import dataset_files
    from trajforge.generators.imports.source_keys import parse_sources
    from trajforge.pipelines.commands import stage_command
    from trajforge.pipelines.runtime import tables as t
    from trajforge.pipelines.stages.import_tasks import ImportTasks

    params = options.load(args)
    sources = parse_sources(args.source)
    files, missing = dataset_files(args.paths)

    def build(p: beam.Pipeline) -> dict:
        numbered = p | "Files" >> beam.Create(list(enumerate(files)))
        return numbered | "ImportTasks" >> ImportTasks(params, args.format, sources)

    return stage_command.run(
        "import-tasks", args, params, beam_args,
        tables={"candidates": t.CANDIDATES, "rejections": t.REJECTIONS},
        build=build,
        kept_table="candidates",
        unit="row",
        sources=[where for where in sources.values() if os.path.isdir(where)],
        set_aside=missing,
    )  # fmt: skip
