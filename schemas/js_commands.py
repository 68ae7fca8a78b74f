"""The shape of a JS task's test command that the grader reads back: a monorepo's tested package.

validate runs a workspace package's suite from the package's folder
(``generators/languages/javascript/runners.py`` ``_in_package``: ``sh -c 'cd DIR || exit 2;
...' workspace``); the grader never runs a task's ``test_cmd`` text, but it must run the runner
in the same folder, or the package's own configuration and binaries are not the ones the labels
were made with. Both read the form here.
"""

from __future__ import annotations

import posixpath
import shlex

WORKSPACE = "workspace"  # the name the compound command gives itself ($0)
_CD = "cd "
_CD_END = " || exit 2; "


def in_package(package_dir: str, script: str) -> list[str]:
    """The words of ``script`` run from ``package_dir`` (as ``sh -c``, its arguments after)."""
    return ["sh", "-c", f"{_CD}{shlex.quote(package_dir)}{_CD_END}{script}", WORKSPACE]


def package_dir(test_cmd: str) -> str:
    """The workspace package ``test_cmd`` runs in, "" for the root or a command of another form;
    a folder that leaves the repository (absolute, ``..``) is never one."""
    try:
        words = shlex.split(test_cmd)
    except ValueError:
        return ""
    if len(words) < 4 or words[:2] != ["sh", "-c"] or words[3] != WORKSPACE:
        return ""
    script = words[2]
    if not script.startswith(_CD) or _CD_END not in script:
        return ""
    try:
        named = shlex.split(script[len(_CD) : script.index(_CD_END)])
    except ValueError:
        return ""
    if len(named) != 1:
        return ""
    folder = posixpath.normpath(named[0])
    if folder.startswith(("/", "..")) or folder == "." or any(c < " " for c in folder):
        return ""
    return folder
