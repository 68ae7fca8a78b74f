"""SWE-PolyBench rows (AmazonScience/SWE-PolyBench), as its evaluation reads them.

Columns (``poly_bench_evaluation/polybench_data.py``): ``instance_id``, ``repo``, ``base_commit``,
``patch``, ``test_patch``, ``language`` (Java, JavaScript, TypeScript, Python), ``F2P`` and ``P2P``
(published as the text of a Python list, read by ``ast.literal_eval``; JSON text and real lists
read too), ``test_command``, ``Dockerfile``, ``problem_statement``, ``created_at``. Java rows are
``language_not_supported``. Test names stay as published (jest ``<container path>-><full name>``,
mocha's full title, a TAP line's ``<n> <title>``); the label check reads them against ours
(``verifiers/validation/label_names.py``).
"""

from __future__ import annotations

import json
from typing import Any

from trajforge.generators.imports.rows import (
    BadRow,
    ImportRow,
    check_language,
    check_patch,
    date_field,
    label_list,
    text_field,
)
from trajforge.schemas import python_ast

DATASET = "swe-polybench"


def parse_polybench(where: str, raw: Any) -> ImportRow:
    """One SWE-PolyBench row as an ``ImportRow``, or ``BadRow`` saying what is wrong."""
    if not isinstance(raw, dict):
        raise BadRow(f"{where}: a row must be an object, got {type(raw).__name__}; check the file")
    instance_id = text_field(raw, "instance_id", where)
    if not instance_id:
        raise BadRow(f"{where}: no instance_id; every row needs one")
    label = f"{where} ({instance_id})"
    repo = text_field(raw, "repo", label).strip()
    if repo.count("/") != 1:
        raise BadRow(f"{label}: repo {repo[:60]!r} must be owner/name")
    language = text_field(raw, "language", label)
    if language:
        check_language(language, label)
    base_commit = text_field(raw, "base_commit", label).strip()
    if not base_commit:
        raise BadRow(
            f"{label}: no base_commit; the fix has nothing to apply to (fill it in or leave the "
            "row out)",
            "no_base_commit",
        )
    patch = text_field(raw, "patch", label)
    check_patch(patch, "patch", label)
    test_patch = text_field(raw, "test_patch", label)
    if test_patch.strip():
        check_patch(test_patch, "test_patch", label)
    return ImportRow(
        dataset=DATASET,
        where=where,
        instance_id=instance_id,
        repo=repo,
        base_commit=base_commit,
        patch=patch,
        test_patch=test_patch,
        fail_to_pass=python_list(raw.get("F2P"), "F2P", label),
        pass_to_pass=python_list(raw.get("P2P"), "P2P", label),
        image_name="",
        created_at=date_field(raw.get("created_at"), label),
        problem_statement=text_field(raw, "problem_statement", label),
        environment_setup_commit="",
    )


def python_list(value: Any, name: str, label: str) -> tuple[str, ...]:
    """A test list as SWE-PolyBench publishes it: ``"['a', 'b']"`` (a Python literal), JSON text
    or a list. ``ast.literal_eval`` builds literals only, so hostile text runs nothing."""
    if isinstance(value, str) and value.strip():
        try:
            value = json.loads(value)
        except (ValueError, RecursionError):
            try:
                value = python_ast.literal_eval(value.strip())
            except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
                raise BadRow(
                    f"{label}: {name} is text but not a list literal; SWE-PolyBench writes it "
                    "as a Python list of test names"
                ) from None
    return label_list(value, name, label)
