"""The package scripts a script starts: ``npm run x``/``yarn x``/``pnpm x``, and the fan-outs.

A ``test`` script often runs no runner itself but starts others: npm-run-all's ``run-p``,
``run-s`` and ``npm-run-all`` with script globs (``test:*`` one ``:`` segment, ``test:**`` any),
concurrently's ``npm:test:*`` commands, pnpm's ``pnpm run /^test:/`` (a regular expression over
the script names). Each is expanded to the scripts it starts, in ``package.json``'s order, so
detection reads their runner commands as it reads a single ``test`` script.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping

_DIRECT = re.compile(r"\b(?:npm run|npm run-script|yarn run|yarn|pnpm run|pnpm)\s+([\w:.@/-]+)")
_RUN_ALL = re.compile(r"(?:^|[\s;&|(])(?:npx\s+)?(run-p|run-s|npm-run-all)\s+([^;&|]*)")
_CONCURRENTLY = re.compile(r"\b(?:npm|yarn|pnpm|bun):([\w:.*/-]+)")
_PNPM_REGEX = re.compile(r"\bpnpm\s+(?:run\s+)?(?:--\S+\s+)*/(.+?)/(?=\s|$)")
# npm-run-all's options that take a value: the next word is no pattern
_RUN_ALL_WITH_VALUE = ("--max-parallel", "--npm-path", "--race-timeout")


def called_scripts(command: str, scripts: Mapping[str, object]) -> list[str]:
    """The names of the package scripts ``command`` starts, each once, in the order found
    (a glob's or a regular expression's matches in ``scripts``' order)."""
    names = [name for name in scripts if isinstance(name, str)]
    found: list[str] = []
    for match in _RUN_ALL.finditer(command):
        for pattern in _run_all_patterns(match.group(2)):
            found += _glob(pattern, names)
    if re.search(r"\bconcurrently\b", command):
        for pattern in _CONCURRENTLY.findall(command):
            found += _concurrently_glob(pattern, names)
    for match in _PNPM_REGEX.finditer(command):
        try:
            regex = re.compile(match.group(1))
        except re.error:
            continue
        found += [name for name in names if regex.search(name)]
    found += [name for name in _DIRECT.findall(command) if name in scripts]
    return list(dict.fromkeys(found))


def _run_all_patterns(words: str) -> list[str]:
    """npm-run-all's script patterns: its words that are no option nor an option's value, up
    to ``--`` (the arguments passed on to the scripts)."""
    try:
        parts = shlex.split(words)
    except ValueError:
        parts = words.split()
    patterns: list[str] = []
    skip = False
    for part in parts:
        if part == "--":
            break
        if skip:
            skip = False
        elif part.startswith("-"):
            skip = part in _RUN_ALL_WITH_VALUE
        else:
            patterns.append(part.split(" ", 1)[0])  # "test:* --flag" passes the flag on
    return patterns


def _glob(pattern: str, names: list[str]) -> list[str]:
    """npm-run-all's glob: ``*`` within one ``:`` segment, ``**`` across them."""
    if "*" not in pattern:
        return [pattern] if pattern in names else []
    regex = re.escape(pattern).replace(r"\*\*", ".*").replace(r"\*", "[^:]*")
    return [name for name in names if re.fullmatch(regex, name)]


def _concurrently_glob(pattern: str, names: list[str]) -> list[str]:
    """concurrently's ``npm:<pattern>``: ``*`` matches anything (``test:*``, ``watch-*``)."""
    if "*" not in pattern:
        return [pattern] if pattern in names else []
    regex = re.escape(pattern).replace(r"\*", ".*")
    return [name for name in names if re.fullmatch(regex, name)]
