"""Draw the public yardstick of environments.py: repositories from EnvBench's Python list.

EnvBench (JetBrains-Research, 2025) lists 329 Python repositories that its baseline could not set
up; a sample of them is a hard, public, repeatable test of how far trajforge's environments reach
(issue 30). The list is not committed: save it outside the repository first (the Hugging Face
dataset ``JetBrains-Research/EnvBench``, or a copy of it, one JSON object a line with
``repository`` as ``owner/name``; a plain ``owner/name`` a line works too).

The draw is a seeded shuffle of the whole list, so it is the same on every machine: the first
``--count`` names are the sample, the rest in order are the replacements for a repository that
cannot be fetched, or whose mirror lacks a file of its newest commit. Two steps:

  1. ``envbench_sample.py --list L`` prints the draw (sample, then replacements); fetch each
     repository as a bare git mirror under ``--mirrors`` (``owner+name/repo``).
  2. ``envbench_sample.py --list L --mirrors DIR --repos-out FILE`` writes the first
     ``--count`` fetched, complete repositories in draw order as environments.py's ``name path
     commit`` lines (the newest commit of each mirror), and names on stderr each one skipped,
     with why (not fetched, or files absent: `git archive` would fail on it).

Usage: .venv/bin/python benchmarks/envbench_sample.py --list FILE [--seed 30] [--count 30]
       [--mirrors DIR --repos-out FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys

SEED = 30  # issue 30; the one the README's figures were drawn with


def read_list(path: str) -> list[str]:
    """``owner/name`` for each line of a JSON-lines or plain list, in the file's order."""
    names = []
    with open(path, encoding="utf-8") as handle:
        for line in handle:
            line = line.strip()
            if line and not line.startswith("#"):
                names.append(json.loads(line)["repository"] if line.startswith("{") else line)
    return names


def draw(names: list[str], seed: int) -> list[str]:
    """The whole list in seeded order: the sample first, then its replacements."""
    order = list(names)
    random.Random(seed).shuffle(order)
    return order


def mirror_of(mirrors: str, name: str) -> str:
    """Where the fetch tool puts a bare mirror of ``owner/name``."""
    return os.path.join(mirrors, name.replace("/", "+"), "repo")


def newest_commit(git_dir: str) -> str | None:
    done = subprocess.run(
        ["git", "--git-dir", git_dir, "rev-parse", "HEAD"],
        capture_output=True,
        text=True,
        check=False,
    )
    return done.stdout.strip() if done.returncode == 0 else None


def missing_blobs(git_dir: str, commit: str) -> int:
    """Files of the commit's tree whose content the mirror lacks (a snapshot service may leave
    out the largest): `git archive` fails on any of them, so no version could be measured."""
    tree = subprocess.run(
        ["git", "--git-dir", git_dir, "ls-tree", "-r", commit],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    blobs = "".join(f"{row.split()[2]}\n" for row in tree.splitlines() if row.split()[1] == "blob")
    checked = subprocess.run(
        ["git", "--git-dir", git_dir, "cat-file", "--batch-check"],
        input=blobs,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return sum(line.endswith(" missing") for line in checked.splitlines())


def repos_lines(order: list[str], count: int, mirrors: str) -> tuple[list[str], dict[str, str]]:
    """The first ``count`` fetched, complete repositories as ``name path commit`` lines, and why
    each one before them was skipped."""
    lines: list[str] = []
    skipped: dict[str, str] = {}
    for name in order:
        if len(lines) == count:
            break
        git_dir = mirror_of(mirrors, name)
        commit = newest_commit(git_dir) if os.path.isdir(git_dir) else None
        if commit is None:
            skipped[name] = f"not fetched: no mirror at {git_dir}"
        elif missing := missing_blobs(git_dir, commit):
            skipped[name] = f"incomplete: {missing} files of {commit[:12]} absent from the mirror"
        else:
            lines.append(f"{name.split('/')[1]} {git_dir} {commit}")
    return lines, skipped


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--list", required=True, help="EnvBench's list, saved outside the repo")
    parser.add_argument("--seed", type=int, default=SEED)
    parser.add_argument("--count", type=int, default=30)
    parser.add_argument("--mirrors", help="the folder of bare mirrors, owner+name/repo each")
    parser.add_argument("--repos-out", help="write environments.py's repos file here")
    args = parser.parse_args(argv)
    if args.repos_out and not args.mirrors:
        parser.error("--repos-out needs --mirrors, the folder the repositories were fetched to")
    try:
        order = draw(read_list(args.list), args.seed)
    except (OSError, ValueError, KeyError) as exc:
        print(
            f"envbench_sample: cannot read {args.list} ({exc.__class__.__name__}: {exc}); "
            "save EnvBench's list as JSON lines with a 'repository' key",
            file=sys.stderr,
        )
        return 2
    if not args.repos_out:
        for rank, name in enumerate(order):
            print(f"{'sample' if rank < args.count else 'spare'} {rank + 1} {name}")
        return 0
    lines, skipped = repos_lines(order, args.count, args.mirrors)  # the draw's first fetched
    with open(args.repos_out, "w", encoding="utf-8") as handle:
        handle.write(f"# EnvBench Python list, seed {args.seed}, first {args.count} fetched\n")
        handle.write("".join(f"{line}\n" for line in lines))
    for name, why in skipped.items():
        print(f"envbench_sample: {name} skipped, {why}", file=sys.stderr)
    print(f"{len(lines)} repositories to {args.repos_out}; {len(skipped)} skipped")
    return 0 if len(lines) == args.count else 1


if __name__ == "__main__":
    sys.exit(main())
