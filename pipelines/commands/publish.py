"""``trajforge publish DIR --repo-id ORG/NAME``: push an export to the Hugging Face Hub."""

from __future__ import annotations

import argparse
import sys

NAME = "publish"
HELP = "push an export to the Hugging Face Hub"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("directory", help="a `trajforge export` output")
    parser.add_argument("--repo-id", required=True, help="ORG/NAME on the Hub")
    parser.add_argument("--private", action="store_true")
    parser.add_argument("--dry-run", action="store_true", help="write the manifest, push nothing")
    parser.add_argument("--token-env", default="HF_TOKEN", help="variable holding the token")


def run(args: argparse.Namespace, beam_args: list[str]) -> int:
    from trajforge.pipelines.release.publish import publish_dataset

    result = publish_dataset(
        args.directory,
        args.repo_id,
        private=args.private,
        dry_run=args.dry_run,
        token_env=args.token_env,
    )
    print(result.render(), file=sys.stderr)
    return 0
