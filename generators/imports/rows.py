"""One published row, checked: the columns a format needs, its labels read as published.

The four formats share SWE-bench's columns (``swebench/harness/constants.py``:
``SWEbenchInstance``): ``instance_id, repo, base_commit, patch, test_patch, problem_statement,
created_at, FAIL_TO_PASS, PASS_TO_PASS, environment_setup_commit``. SWE-bench publishes the two
test lists as JSON-encoded strings, SWE-Gym, SWE-smith and nebius as lists; both are read (as the
harness's ``_from_json_or_obj`` does). SWE-smith rows carry ``image_name`` and no ``test_patch``;
their ``patch`` is the bug, and their base is named by ``repo`` (``swesmith.py``), so
``base_commit`` (the bug commit on a mirror's branch) is optional. nebius' image is
``docker_image`` where it has one.

Nothing here touches a repository: a row that cannot become a candidate for what it says alone
is a ``BadRow`` with its reason (``bad_row``, ``no_base_commit``).
"""

from __future__ import annotations

import datetime as dt
import json
from dataclasses import dataclass
from typing import Any

from trajforge.generators.imports.swesmith import parse_instance_id, parse_repo
from trajforge.schemas.errors import UserError
from trajforge.schemas.json_rows import lone_surrogate

FORMATS = ("swe-bench", "swe-smith", "swe-gym", "nebius")
BUGS = ("swe-smith",)  # rows whose patch makes the bug; the others' patch is the fix
STAGE = "import-tasks"


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
    instance_id = _text(raw, "instance_id", where)
    label = f"{where} ({instance_id})" if instance_id else where
    if not instance_id:
        raise BadRow(f"{where}: no instance_id; every row needs one")
    repo = _text(raw, "repo", label)
    if not repo:
        raise BadRow(f"{label}: no repo; every row names its repository (owner/name)")
    patch = _text(raw, "patch", label)
    if not patch.strip():
        raise BadRow(f"{label}: empty patch; nothing to validate")
    base_commit = _text(raw, "base_commit", label).strip()
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
    image = _text(raw, "image_name", label) or _text(raw, "docker_image", label)
    return ImportRow(
        dataset=fmt,
        where=where,
        instance_id=instance_id,
        repo=repo.strip(),
        base_commit=base_commit,
        patch=patch,
        test_patch="" if fmt in BUGS else _text(raw, "test_patch", label),
        fail_to_pass=label_list(raw.get("FAIL_TO_PASS"), "FAIL_TO_PASS", label),
        pass_to_pass=label_list(raw.get("PASS_TO_PASS"), "PASS_TO_PASS", label),
        image_name=image,
        created_at=_date(raw.get("created_at"), label),
        problem_statement=_text(raw, "problem_statement", label),
        environment_setup_commit=_text(raw, "environment_setup_commit", label),
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
        raise BadRow(f"{label}: {name} must be a list of test ids, got {_shape(value)}")
    return tuple(value)


def _text(raw: dict[str, Any], name: str, label: str) -> str:
    value = raw.get(name)
    if value is None:
        return ""
    if not isinstance(value, str):
        raise BadRow(f"{label}: {name} must be text, got {_shape(value)}")
    return value


def _date(value: Any, label: str) -> str:
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
    raise BadRow(f"{label}: created_at must be a date, got {_shape(value)}")


def _shape(value: Any) -> str:
    if isinstance(value, list | tuple):
        kinds = sorted({type(v).__name__ for v in value})
        return f"a list of {', '.join(kinds)}" if kinds else "an empty list"
    return type(value).__name__
