"""Multi-SWE-bench rows (ByteDance-Seed/Multi-SWE-bench), as its harness writes them.

A row is a pull request (``multi_swe_bench/harness/pull_request.py``, ``report.py``): ``org``,
``repo``, ``number``, ``base.sha``, ``fix_patch``, ``test_patch``, and its tests by transition,
each ``{test_name: {"run", "test", "fix"}}`` (the statuses with no patch, with the test patch, with
both): ``p2p_tests``, ``f2p_tests``, ``s2p_tests`` (skipped, then passes) and ``n2p_tests`` (absent,
then passes). The harness's ``fixed_tests`` is every test that does not pass with the test patch
and passes with the fix (f2p, s2p and n2p together): that is our FAIL_TO_PASS; p2p is our
PASS_TO_PASS. The instance id is ``<org>__<repo>-<number>`` where the row has none.

Which language a row is: its ``language`` column where it has one, else the folder or file the
dataset publishes it under (``js/``, ``ts/``, ``go/``... or ``js.jsonl``); where neither says, the
repository decides at validate. Test names stay as published (``file:title``, ``file``, a bare
title: each repository's log parser makes its own); the label check reads them against ours
(``verifiers/validation/label_names.py``).
"""

from __future__ import annotations

import posixpath
import re
from typing import Any

from trajforge.generators.imports.rows import (
    BadRow,
    ImportRow,
    check_language,
    check_patch,
    shape,
    text_field,
)

DATASET = "multi-swe-bench"
# The dataset's folders (and file names) per language, as published on the Hub
FOLDERS = {
    "c": "c", "cpp": "c++", "go": "go", "java": "java", "js": "javascript", "python": "python",
    "rust": "rust", "ts": "typescript",
}  # fmt: skip
FIXED = ("f2p_tests", "s2p_tests", "n2p_tests")  # the harness's fixed_tests, in this order
_PLACE = re.compile(r"(?::\d+|#row=\d+)$")
_NAME = re.compile(r"[A-Za-z0-9_.-]+")


def parse_multi_swe_bench(where: str, raw: Any) -> ImportRow:
    """One Multi-SWE-bench row as an ``ImportRow``, or ``BadRow`` saying what is wrong."""
    if not isinstance(raw, dict):
        raise BadRow(f"{where}: a row must be an object, got {type(raw).__name__}; check the file")
    org, name = text_field(raw, "org", where).strip(), text_field(raw, "repo", where).strip()
    number = _number(raw.get("number"), where)
    instance_id = text_field(raw, "instance_id", where) or f"{org}__{name}-{number}"
    label = f"{where} ({instance_id})"
    if not _NAME.fullmatch(org) or not _NAME.fullmatch(name):
        raise BadRow(f"{label}: org {org[:40]!r} and repo {name[:40]!r} must name a GitHub repo")
    language = text_field(raw, "language", label) or language_of_file(where)
    if language:
        check_language(language, label)
    base = raw.get("base")
    sha = base.get("sha") if isinstance(base, dict) else None
    if not isinstance(sha, str) or not sha.strip():
        raise BadRow(
            f"{label}: no base.sha; the fix has nothing to apply to (fill it in or leave the "
            "row out)",
            "no_base_commit",
        )
    patch = text_field(raw, "fix_patch", label)
    check_patch(patch, "fix_patch", label)
    test_patch = text_field(raw, "test_patch", label)
    if test_patch.strip():
        check_patch(test_patch, "test_patch", label)
    fixed: dict[str, None] = {}
    for column in FIXED:
        fixed.update(dict.fromkeys(_tests(raw.get(column), column, label)))
    return ImportRow(
        dataset=DATASET,
        where=where,
        instance_id=instance_id,
        repo=f"{org}/{name}",
        base_commit=sha.strip(),
        patch=patch,
        test_patch=test_patch,
        fail_to_pass=tuple(fixed),
        pass_to_pass=_tests(raw.get("p2p_tests"), "p2p_tests", label),
        image_name="",
        created_at="",
        problem_statement=_problem(raw, label),
        environment_setup_commit="",
    )


def language_of_file(where: str) -> str:
    """The language the dataset's layout gives a file (``ts/darkreader__darkreader_dataset.jsonl``,
    ``js.jsonl``), or "" where it gives none."""
    path = _PLACE.sub("", where)
    folder = posixpath.basename(posixpath.dirname(path)).lower()
    stem = posixpath.basename(path).split(".", 1)[0].lower()
    return FOLDERS.get(folder) or FOLDERS.get(stem, "")


def _number(value: Any, where: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int | str):
        raise BadRow(f"{where}: number must be the pull request's number, got {shape(value)}")
    if isinstance(value, str) and not value.strip().isdigit():
        raise BadRow(f"{where}: number {value[:40]!r} is not a pull request number")
    return int(value)


def _tests(value: Any, column: str, label: str) -> tuple[str, ...]:
    """A ``{test_name: {"run", "test", "fix"}}`` column's names, in the row's order."""
    if value is None:
        return ()
    if not isinstance(value, dict) or not all(
        isinstance(k, str) and isinstance(v, dict | type(None)) for k, v in value.items()
    ):
        raise BadRow(
            f"{label}: {column} must map test names to their statuses "
            f'({{"name": {{"run": ..., "test": ..., "fix": ...}}}}), got {shape(value)}'
        )
    return tuple(value)


def _problem(raw: dict[str, Any], label: str) -> str:
    """The issue text: the resolved issues' titles and bodies, else the pull request's."""
    issues = raw.get("resolved_issues")
    parts: list[str] = []
    if isinstance(issues, list):
        for issue in issues:
            if isinstance(issue, dict):
                parts += [text_field(issue, "title", label), text_field(issue, "body", label)]
    if not any(p.strip() for p in parts):
        parts = [text_field(raw, "title", label), text_field(raw, "body", label)]
    return "\n\n".join(p.strip() for p in parts if p.strip())
