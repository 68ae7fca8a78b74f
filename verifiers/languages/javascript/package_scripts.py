"""The words a project's own ``test`` script gives its runner, read from its package.json.

The grader never runs a task's ``test_cmd`` text; the options a runner needs (spec paths,
loaders) come from the ``test`` script of the task's own package.json (reset to the task's, so a
patch cannot change it), found as validate's detection finds the runner: the first command
segment that runs it, in ``test`` or in a script it calls (``npm run test-ci``), three deep.
``mocha_args.py`` and ``node_args.py`` then keep only the options they trust.
"""

from __future__ import annotations

import json
import re
import shlex

_SEGMENTS = re.compile(r"&&|\|\||;|\|")
_CALLS = re.compile(r"\b(?:npm run|yarn run|yarn|pnpm run|pnpm)\s+([\w:.-]+)")
DEPTH = 3  # scripts followed through ``npm run NAME`` (as validate's detection follows them)


def runner_words(package_json: bytes | None, runner: re.Pattern[str]) -> list[str]:
    """The words ``runner`` (a pattern whose group 1 is what follows the runner's name) finds
    in the ``test`` script or a script it calls; none when nothing can be read."""
    try:
        scripts = json.loads(package_json or b"")["scripts"]
        return shlex.split(_words(scripts, scripts["test"], runner))
    except (ValueError, KeyError, TypeError):
        return []


def _words(scripts: dict, script: object, runner: re.Pattern[str]) -> str:
    for _ in range(DEPTH + 1):
        if not isinstance(script, str):
            return ""
        for segment in _SEGMENTS.split(script):
            if found := runner.search(segment):
                return found.group(1)
        said = (scripts.get(name) for name in _CALLS.findall(script))
        called: list[str] = [c for c in said if isinstance(c, str)]
        script = next((c for c in called if runner.search(c)), called[-1] if called else None)
    return ""
