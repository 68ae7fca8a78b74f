"""One published row, checked: the columns a format needs, its labels read as published.

The four formats share SWE-bench's columns (``swebench/harness/constants.py``:
``SWEbenchInstance``): ``instance_id, repo, base_commit, patch, test_patch, problem_statement,
created_at, FAIL_TO_PASS, PASS_TO_PASS, environment_setup_commit``. SWE-bench publishes the two
test lists as JSON-encoded strings, SWE-Gym, SWE-smith and nebius as lists; both are read (as the
harness's ``_from_json_or_obj`` does). SWE-smith rows carry ``image_name`` and no ``test_patch``;
their ``patch`` is the bug, and their base is named by ``repo`` (``swesmith.py``), so
``base_commit`` (the bug commit on a mirror's branch) is optional. nebius' image is
``docker_image`` where it has one.

Multi-SWE-bench and SWE-PolyBench rows have their own columns (``multiswebench.py``,
``polybench.py``; ``formats.py`` picks the reader); they share ``ImportRow``, the field checks
here, and ``check_language``: a row in a language trajforge has no layer for is
``language_not_supported``.

Nothing here touches a repository: a row that cannot become a candidate for what it says alone
is a ``BadRow`` with its reason (``bad_row``, ``no_base_commit``, ``language_not_supported``).
"""

from __future__ import annotations

import datetime as dt
import json
from dataclasses import dataclass
from typing import Any

from trajforge.generators.imports.swesmith import parse_instance_id, parse_repo
from trajforge.schemas.diff import parse_patch
from trajforge.schemas.errors import UserError
from trajforge.schemas.json_rows import lone_surrogate

SWE_BENCH_SHAPED = ("swe-bench", "swe-smith", "swe-gym", "nebius")  # SWE-bench's columns
BUGS = ("swe-smith",)  # rows whose patch makes the bug; the others' patch is the fix
STAGE = "import-tasks"


LANGUAGE_NOT_SUPPORTED = "language_not_supported"


class BadRow(UserError):
    reason = "bad_row"


@dataclass(frozen=True)
class ImportRow:
    """A row that passed its format's checks (every text field a ``str``)."""

    dataset: str
    where: str  # the file and place it was read from: "path:LINE", "path#row=N"
    instance_id: str
    repo: str
    base_commit: str  # "" for a SWE-smith row without one (its base is named by repo)
    patch: str
    test_patch: str
    fail_to_pass: tuple[str, ...]
    pass_to_pass: tuple[str, ...]
    image_name: str
    created_at: str
    problem_statement: str
    environment_setup_commit: str

    @property
    def is_bug(self) -> bool:
        return self.dataset in BUGS


def parse_row(fmt: str, where: str, raw: Any) -> ImportRow:
    """``raw`` (a dict read from a file) as an ``ImportRow`` of format ``fmt``, or ``BadRow``."""
    if not isinstance(raw, dict):
        raise BadRow(f"{where}: a row must be an object, got {type(raw).__name__}; check the file")
    instance_id = text_field(raw, "instance_id", where)
    label = f"{where} ({instance_id})" if instance_id else where
    if not instance_id:
        raise BadRow(f"{where}: no instance_id; every row needs one")
    repo = text_field(raw, "repo", label)
    if not repo:
        raise BadRow(f"{label}: no repo; every row names its repository (owner/name)")
    patch = text_field(raw, "patch", label)
    if not patch.strip():
        raise BadRow(f"{label}: empty patch; nothing to validate")
    base_commit = text_field(raw, "base_commit", label).strip()
    if fmt in BUGS:
        if not base_commit and parse_repo(repo) is None and parse_instance_id(instance_id) is None:
            raise BadRow(
                f"{label}: no base_commit, and neither repo {repo!r} nor the instance id names "
                "a commit (swesmith/<owner>__<name>.<commit8>); fix the row or leave it out",
                "no_base_commit",
            )
    elif not base_commit:
        raise BadRow(
            f"{label}: no base_commit; the fix has nothing to apply to (fill it in or leave the "
            "row out)",
            "no_base_commit",
        )
    image = text_field(raw, "image_name", label) or text_field(raw, "docker_image", label)
    return ImportRow(
        dataset=fmt,
        where=where,
        instance_id=instance_id,
        repo=repo.strip(),
        base_commit=base_commit,
        patch=patch,
        test_patch="" if fmt in BUGS else text_field(raw, "test_patch", label),
        fail_to_pass=label_list(raw.get("FAIL_TO_PASS"), "FAIL_TO_PASS", label),
        pass_to_pass=label_list(raw.get("PASS_TO_PASS"), "PASS_TO_PASS", label),
        image_name=image,
        created_at=date_field(raw.get("created_at"), label),
        problem_statement=text_field(raw, "problem_statement", label),
        environment_setup_commit=text_field(raw, "environment_setup_commit", label),
    )


def check_language(language: str, label: str) -> None:
    """A row in a language with no layer here (``generators/languages/registry.py``) is refused
    before its repository is opened: ``language_not_supported``."""
    from trajforge.generators.languages.registry import LANGUAGES, spelled

    if spelled(language) is None:
        known = "; ".join(
            f"{lang.name}" + (f" (also {', '.join(lang.aliases)})" if lang.aliases else "")
            for lang in LANGUAGES
        )
        raise BadRow(
            f"{label}: language {language.strip()[:40]!r} is not supported (the languages run "
            f"here: {known}); the row is left out",
            LANGUAGE_NOT_SUPPORTED,
        )


def check_patch(patch: str, name: str, label: str) -> None:
    """A patch must be a unified diff that names a file; text that is not is refused here, not
    left for git to misread."""
    if not patch.strip():
        raise BadRow(f"{label}: empty {name}; nothing to validate")
    if not parse_patch(patch).files:
        raise BadRow(
            f"{label}: {name} is not a unified diff (no 'diff --git' or '---/+++' file header); "
            "fix the row"
        )


def label_list(value: Any, name: str, label: str) -> tuple[str, ...]:
    """A test-id list as published: a list (a NumPy array from pandas) or its JSON text."""
    if value is None or value == "":
        return ()
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except json.JSONDecodeError as exc:
            raise BadRow(
                f"{label}: {name} is text but not JSON ({exc.msg} at column {exc.colno}); "
                "SWE-bench writes it as a JSON list of test ids"
            ) from None
        except (RecursionError, ValueError):  # nested past the parser; a number too long
            raise BadRow(
                f"{label}: {name} is text but not a readable JSON list; SWE-bench writes it as "
                "a JSON list of test ids"
            ) from None
        lone = lone_surrogate(value)
        if lone is not None:
            raise BadRow(
                f"{label}: {name} holds a lone surrogate (\\u{ord(lone):04x}), not valid Unicode; "
                "fix the row"
            )
    if hasattr(value, "tolist") and not isinstance(value, list | tuple):
        value = value.tolist()
    if not isinstance(value, list | tuple) or not all(isinstance(v, str) for v in value):
        raise BadRow(f"{label}: {name} must be a list of test ids, got {shape(value)}")
    return tuple(value)


def text_field(raw: dict[str, Any], name: str, label: str) -> str:
    """A text column, \"\" when absent; anything but text is a BadRow."""
    value = raw.get(name)
    if value is None:
        return ""
    if not isinstance(value, str):
        raise BadRow(f"{label}: {name} must be text, got {shape(value)}")
    return value


def date_field(value: Any, label: str) -> str:
    """``created_at`` as text: ISO text as published, a Parquet timestamp in ISO form."""
    if value is None:
        return ""
    if isinstance(value, dt.datetime | dt.date):
        return value.isoformat()
    if isinstance(value, str):
        return value
    if isinstance(value, int | float) and not isinstance(value, bool):  # epoch milliseconds
        try:
            return dt.datetime.fromtimestamp(value / 1000, dt.UTC).isoformat()
        except (OverflowError, ValueError, OSError):  # out of any calendar, NaN
            raise BadRow(f"{label}: created_at {value!r:.40} is not a date; fix the row") from None
    raise BadRow(f"{label}: created_at must be a date, got {shape(value)}")


def shape(value: Any) -> str:
    if isinstance(value, list | tuple):
        kinds = sorted({type(v).__name__ for v in value})
        return f"a list of {', '.join(kinds)}" if kinds else "an empty list"
    return type(value).__name__
