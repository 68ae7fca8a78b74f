"""The environment a project's CI gives its suite for the services it starts (issue 43).

A workflow that runs PostgreSQL beside its tests usually tells both sides where to meet:
``POSTGRES_DB: app_test`` in the service's ``env:`` (the database its image creates) and
``DATABASE_URL: postgresql://postgres:postgres@localhost:5432/app_test`` in the job's ``env:``
(where the suite connects). Without them a suite finds no database of that name, or no URL,
and gives no task. This module reads those variables from the files that name services
(``services.declaration_files``) and writes them as the image's ``ENV``, so every session of
it (validate's runs, the grader's, ``TaskEnv``'s) has them; a service's build reads its own
(``POSTGRES_USER``, ``POSTGRES_DB``) from the same lines.

Only connection settings are taken: a variable whose name has a part that starts with a
service's word (``DATABASE_URL``, ``PGHOST``, ``REDIS_URL``, ``TEST_DB_NAME``), whose value is a
literal (a ``${{ job.services.<name>.ports[N] }}`` expression becomes ``N``, since a service
listens on its usual port; any other expression drops the variable) and one line of printable
text. So the image never takes ``PATH``, ``PYTHONPATH``, ``LD_PRELOAD`` or ``NODE_OPTIONS``
from a project's CI: nothing read here changes how a program is found or loaded.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

# A part of the name (split at "_") starts with one of these: a service's connection setting.
WORDS = ("POSTGRES", "PG", "DATABASE", "DB", "MYSQL", "MARIADB", "REDIS", "MEMCACHE", "CACHE")
# Read by a service's build into SQL (services.py): names must be identifiers and passwords
# plain words, or the variable is dropped (no quote, backslash or ``$`` reaches the SQL).
IDENTIFIERS = frozenset(
    (
        "POSTGRES_USER",
        "POSTGRES_DB",
        "MYSQL_DATABASE",
        "MYSQL_USER",
        "MARIADB_DATABASE",
        "MARIADB_USER",
    )
)
PASSWORDS = frozenset(
    {"MYSQL_ROOT_PASSWORD", "MYSQL_PASSWORD", "MARIADB_ROOT_PASSWORD", "MARIADB_PASSWORD"}
)
MAX_VALUE_CHARS = 512
_NAME = re.compile(r"[A-Z][A-Z0-9_]{0,63}")
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,62}")
_PORT_EXPRESSION = re.compile(
    r"\$\{\{\s*job\.services\.[\w-]+\.ports\[\s*['\"]?(\d+)['\"]?\s*\]\s*\}\}"
)
_PRINTABLE = re.compile(r"[\x20-\x7e]*")
_PASSWORD = re.compile(r"[A-Za-z0-9_.,:;!@#%^*+=/?~-]{0,128}")


def suite_environment(blocks: Iterable[Any]) -> tuple[str, ...]:
    """``NAME=value`` of the connection settings in ``blocks`` (``env:`` mappings, compose's
    ``environment:`` lists, GitLab's ``variables:``), sorted by name; the first block to set
    a name wins."""
    chosen: dict[str, str] = {}
    for block in blocks:
        for name, value in _pairs(block):
            setting = _setting(name, value)
            if setting is not None and name not in chosen:
                chosen[name] = setting
    return tuple(f"{name}={chosen[name]}" for name in sorted(chosen))


def env_lines(environment: Iterable[str]) -> list[str]:
    """Dockerfile ``ENV`` lines of ``NAME=value`` settings (quoted: ``$`` and ``"`` stay
    literal, the builder substitutes nothing)."""
    lines = []
    for setting in environment:
        name, value = setting.split("=", 1)
        quoted = value.replace("\\", "\\\\").replace('"', '\\"').replace("$", "\\$")
        lines.append(f'ENV {name}="{quoted}"')
    return lines


def as_mapping(environment: Iterable[str]) -> dict[str, str]:
    """``NAME=value`` settings as a mapping."""
    return dict(setting.split("=", 1) for setting in environment)


def _pairs(block: Any) -> list[tuple[str, Any]]:
    """(name, value) of a mapping, or of a compose list of ``NAME=value`` strings."""
    if isinstance(block, Mapping):
        return [(name, value) for name, value in block.items() if isinstance(name, str)]
    if isinstance(block, list):
        items = [item for item in block if isinstance(item, str) and "=" in item]
        return [tuple(item.split("=", 1)) for item in items]  # type: ignore[misc]
    return []


def _setting(name: str, value: Any) -> str | None:
    """The value to set for ``name``, or None when it is no connection setting."""
    if not _NAME.fullmatch(name) or not any(
        part.startswith(WORDS) for part in name.split("_") if part
    ):
        return None
    if isinstance(value, bool):
        value = str(value).lower()
    elif isinstance(value, int | float):
        value = str(value)
    if not isinstance(value, str):
        return None
    value = _PORT_EXPRESSION.sub(r"\1", value)
    if "${{" in value or len(value) > MAX_VALUE_CHARS or not _PRINTABLE.fullmatch(value):
        return None
    if name in IDENTIFIERS and not _IDENTIFIER.fullmatch(value):
        return None
    if name in PASSWORDS and not _PASSWORD.fullmatch(value):
        return None
    return value
