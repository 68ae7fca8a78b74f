"""The ``trajforge`` command line: the parser is built from ``pipelines/commands``, one module each.

Every error a user can cause is one line on stderr and exit code 2, never a traceback.
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence

from trajforge.schemas.errors import UserError

# Beam's optional GCP modules warn at import that apitools is absent; that is not news. The
# command modules import Beam, so the level is set before they are imported.
logging.getLogger().setLevel(logging.ERROR)


def _beam_io_noise(record: logging.LogRecord) -> bool:
    """Beam's S3 and GCS clients log each failed request with its traceback on the root logger
    before raising; trajforge turns the raised error into one line (``StorageError``)."""
    return not any(part in record.pathname for part in ("apache_beam/io/aws", "apache_beam/io/gcp"))


logging.getLogger().addFilter(_beam_io_noise)

from trajforge.pipelines.commands import COMMANDS  # noqa: E402


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="trajforge",
        description="Turn code repositories into verified training data for SWE agents.",
        epilog="Beam pipeline options for remote runners go after `--`.",
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for command in COMMANDS:
        command.add_arguments(sub.add_parser(command.NAME, help=command.HELP))
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args_list = list(sys.argv[1:] if argv is None else argv)
    beam_args: list[str] = []
    if "--" in args_list:
        split = args_list.index("--")
        args_list, beam_args = args_list[:split], args_list[split + 1 :]
    args = build_parser().parse_args(args_list)  # an unknown command: usage and exit code 2
    command = next(c for c in COMMANDS if args.command == c.NAME)
    try:
        return command.run(args, beam_args)
    except UserError as exc:
        print(f"trajforge: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("trajforge: interrupted; rerun the same command to resume", file=sys.stderr)
        return 130


if __name__ == "__main__":
    raise SystemExit(main())
