"""The Python a commit gets: its evidence read from the commit (packaging files, CI workflows,
``.python-version``, lock heads) and ``python_choice``'s rule applied to it.
"""

from __future__ import annotations

import configparser
import re
from collections.abc import Sequence
from typing import Any

from trajforge.generators.environments.commit_files import ProfileError, decode_all, read_paths
from trajforge.generators.languages.python.declarations import _ini_get, _table
from trajforge.generators.languages.python.python_choice import (
    LOCK_FILES,
    Choice,
    NoSupportedPython,
    choose,
    declared_ranges,
    is_evidence_file,
    lock_head,
    named_pythons,
)


def _python_spec(
    pyproject: dict[str, Any] | None, setup_cfg: configparser.ConfigParser | None, setup_py: str
) -> str | None:
    """The declared Python range: pyproject first, then setup.cfg, then setup.py."""
    declared = _table(pyproject, "project").get("requires-python")
    if isinstance(declared, str):
        return declared
    declared = _ini_get(setup_cfg, "options", "python_requires")
    if declared:
        return declared.strip()
    match = re.search(r"python_requires\s*=\s*([\"'])(.+?)\1", setup_py)
    return match.group(2) if match else None


def choose_python(
    texts: dict[str, str],
    pyproject: dict[str, Any] | None,
    setup_cfg: configparser.ConfigParser | None,
    committed: str | None,
    default: str,
    pythons: Sequence[str],
    where: str,
    legacy: bool = False,
) -> Choice:
    """The Python the project was written for, by ``python_choice``'s rule over its own
    evidence (``texts`` holds the evidence files too). ``legacy``: the detector before it,
    which read ``requires-python`` alone."""
    spec = _python_spec(pyproject, setup_cfg, texts.get("setup.py", ""))
    if legacy:
        ranges, named, committed = ([("requires-python", spec)] if spec else []), [], None
    else:
        poetry = _table(pyproject, "tool", "poetry", "dependencies").get("python")
        ranges = declared_ranges(spec, poetry if isinstance(poetry, str) else None, texts)
        classifiers = _table(pyproject, "project").get("classifiers")
        named = named_pythons(texts, classifiers if isinstance(classifiers, list) else ())
    try:
        return choose(ranges, named, committed, default, pythons, where)
    except NoSupportedPython as exc:
        raise ProfileError(str(exc), reason="no_supported_python") from None


def _python_evidence(
    repo_path: str, commit: str, tree: dict[str, tuple[str, str]]
) -> dict[str, str]:
    """The files read only to choose the Python (CI workflows, .python-version, runtime.txt),
    with lock files cut to the lines that say it."""
    paths = [p for p in tree if is_evidence_file(p)]
    texts = decode_all(read_paths(repo_path, commit, tree, paths))
    return {p: lock_head(p, t) if p in LOCK_FILES else t for p, t in texts.items()}
