"""Which Python a project was written for, from its own evidence (pure functions over texts).

The rule (``choose``), in order:

1. candidates: the supported pythons every declared range allows (``requires-python`` or
   ``python_requires``, poetry's ``python`` dependency, a lock file's range); none: the project
   cannot run here (``no_supported_python``);
2. narrowed to those the project names explicitly (trove classifiers, the CI matrix, tox's
   envlist, nox's ``python=``, ``.python-version``, ``runtime.txt``), when any of them is named;
   (none of them supported, e.g. only 3.6 and 3.7: the supported one nearest to them);
3. less those released after the commit (a Python that did not exist cannot be the one it was
   written for), unless that leaves none;
4. the default Python when still a candidate, else the newest one left.

``Choice.why`` names the evidence that decided, for the build log.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import InvalidVersion, Version
from trajforge.schemas.errors import UserError

# The day each Python's first release came out.
RELEASED = {
    "3.8": "2019-10-14",
    "3.9": "2020-10-05",
    "3.10": "2021-10-04",
    "3.11": "2022-10-24",
    "3.12": "2023-10-02",
    "3.13": "2024-10-07",
    "3.14": "2025-10-07",
}
LOCK_FILES = ("uv.lock", "poetry.lock")
_MINOR = re.compile(r"(?<![\d.])3\.(\d{1,2})(?![\d])")
_CLASSIFIER = re.compile(r"Programming Language :: Python :: 3\.(\d{1,2})\b")
_TOX_ENV = re.compile(r"\bpy3(\d{1,2})\b")
_WORKFLOW_KEYS = re.compile(r"(?im)^\s*-?\s*python(?:-version|_version|-versions|)\s*:\s*(.*)$")
_NOX_PYTHON = re.compile(r"python\s*=\s*(\[[^\]]*\]|\([^)]*\)|[\"'][^\"']*[\"'])")


class NoSupportedPython(UserError):
    """The project's declared range allows none of the pythons trajforge has."""

    reason = "no_supported_python"


@dataclass(frozen=True)
class Choice:
    python: str
    why: str  # the evidence that decided, e.g. "requires-python >=3.12; classifiers 3.12,3.13"


def is_evidence_file(path: str) -> bool:
    """Files read only for the Python choice: CI workflows, version pins, lock files."""
    if path in (".python-version", "runtime.txt", *LOCK_FILES):
        return True
    return path.startswith(".github/workflows/") and path.endswith((".yml", ".yaml"))


def lock_head(path: str, text: str) -> str:
    """The part of a lock file that says the Python: uv.lock's header, poetry.lock's
    [metadata] table (at its end). The rest (thousands of package entries) is dropped."""
    if path == "uv.lock":
        end = text.find("[[package]]")
        return text if end < 0 else text[:end]
    start = text.rfind("[metadata]")
    return "" if start < 0 else text[start:]


def poetry_range(constraint: str) -> str:
    """A poetry Python constraint (``^3.8``, ``~3.9``, ``>=3.8,<3.12``, ``3.8.*``,
    ``>=3.8 || >=3.10``) as a PEP 440 specifier string (an ``||`` keeps its first branch)."""
    parts = []
    for raw in constraint.split("||")[0].replace(" ", ",").split(","):
        part = raw.strip()
        if not part:
            continue
        if part[0] in "^~" and not part.startswith("~="):
            numbers = part[1:].split(".")
            lower = ".".join(numbers)
            if part[0] == "^" or len(numbers) == 1:
                upper = f"{int(numbers[0]) + 1}.0" if numbers[0] != "0" else "1.0"
            else:
                upper = f"{numbers[0]}.{int(numbers[1]) + 1}"
            parts += [f">={lower}", f"<{upper}"]
        elif part[0].isdigit():
            parts.append(f"=={part}")
        else:
            parts.append(part)
    return ",".join(parts)


def declared_ranges(
    requires_python: str | None, poetry_python: str | None, texts: Mapping[str, str]
) -> list[tuple[str, str]]:
    """(where, PEP 440 range) for every range the project declares."""
    found: list[tuple[str, str]] = []
    if requires_python:
        found.append(("requires-python", requires_python.strip()))
    if poetry_python:
        found.append(("poetry python", poetry_range(poetry_python)))
    uv = re.search(r"(?m)^requires-python\s*=\s*\"([^\"]+)\"", texts.get("uv.lock", ""))
    if uv:
        found.append(("uv.lock", uv.group(1)))
    poetry = re.search(r"(?m)^python-versions\s*=\s*\"([^\"]+)\"", texts.get("poetry.lock", ""))
    if poetry and poetry.group(1).strip() != "*":
        found.append(("poetry.lock", poetry_range(poetry.group(1))))
    return found


def named_pythons(
    texts: Mapping[str, str], classifiers: Iterable[str] = ()
) -> list[tuple[str, list[str]]]:
    """(where, minors) for every place the project names Pythons outright."""
    found: list[tuple[str, list[str]]] = []

    def add(where: str, minors: Iterable[str]) -> None:
        kept = _dedupe(minors)
        if kept:
            found.append((where, kept))

    classified = [f"3.{m}" for c in classifiers for m in _CLASSIFIER.findall(c)]
    classified += [f"3.{m}" for m in _CLASSIFIER.findall(texts.get("setup.py", ""))]
    classified += [f"3.{m}" for m in _CLASSIFIER.findall(texts.get("setup.cfg", ""))]
    add("classifiers", classified)
    workflows = [p for p in sorted(texts) if p.startswith(".github/workflows/")]
    add("CI", [m for p in workflows for m in _workflow_pythons(texts[p])])
    add("tox", [f"3.{m}" for m in _TOX_ENV.findall(_tox_envlist(texts.get("tox.ini", "")))])
    nox = " ".join(_NOX_PYTHON.findall(texts.get("noxfile.py", "")))
    add("nox", [f"3.{m}" for m in _MINOR.findall(nox)])
    add(".python-version", [f"3.{m}" for m in _MINOR.findall(texts.get(".python-version", ""))[:1]])
    add("runtime.txt", [f"3.{m}" for m in _MINOR.findall(texts.get("runtime.txt", ""))[:1]])
    return found


def choose(
    ranges: Sequence[tuple[str, str]],
    named: Sequence[tuple[str, list[str]]],
    committed: str | None,
    default: str,
    pythons: Sequence[str],
    where: str,
) -> Choice:
    """The rule of this module's docstring over the evidence found."""
    specs = [(label, spec, _specifier(spec)) for label, spec in ranges]
    candidates = [p for p in pythons if all(_supports(s, p) for _, _, s in specs if s is not None)]
    said = [f"{label} {spec}" for label, spec, parsed in specs if parsed is not None]
    if not candidates:
        declared = "; ".join(said)
        raise NoSupportedPython(
            f"{where}: {declared} matches none of the supported pythons ({', '.join(pythons)}); "
            "add a matching version to environment.pythons or skip this repository",
            reason="no_supported_python",
        )
    named_minors = {m for _, minors in named for m in minors}
    narrowed = [p for p in candidates if p in named_minors] or _nearest(candidates, named_minors)
    if narrowed:
        candidates = narrowed
        said += [f"{label} {','.join(minors)}" for label, minors in named]
    released = [p for p in candidates if not committed or RELEASED.get(p, "") <= committed]
    if released and len(released) < len(candidates):
        candidates = released
        said.append(f"committed {committed}")
    python = default if default in candidates else max(candidates, key=Version)
    return Choice(python, "; ".join(said) or "no evidence: the default")


def _nearest(candidates: Sequence[str], named: set[str]) -> list[str]:
    """When the project names only Pythons trajforge lacks (3.6, 3.7): the candidate closest to
    them (3.8), the next best thing to what it was tested on; [] when it names none."""
    minors = [minor for minor in map(_minor, named) if minor is not None]
    if not minors:
        return []
    return [min(candidates, key=lambda p: min(abs((_minor(p) or 0) - m) for m in minors))]


def _minor(python: str) -> int | None:
    major, _, minor = python.partition(".")
    return int(minor) if major == "3" and minor.isdigit() else None


def _workflow_pythons(text: str) -> list[str]:
    """Minors on ``python-version:`` lines and the lists below them in a workflow."""
    minors: list[str] = []
    lines = text.splitlines()
    for index, line in enumerate(lines):
        match = _WORKFLOW_KEYS.match(line)
        if match is None:
            continue
        value = match.group(1).split("#")[0]
        if value.strip() in ("", "|", ">"):  # a block list below: "- '3.10'" lines
            for below in lines[index + 1 :]:
                item = below.strip()
                if not item.startswith("-"):
                    break
                value += " " + item
        minors += [f"3.{m}" for m in _MINOR.findall(value.replace("'", " ").replace('"', " "))]
    return minors


def _tox_envlist(text: str) -> str:
    """tox's envlist (ini), with brace groups like ``py{38,39}`` spelled out."""
    match = re.search(r"(?ms)^\s*env_?list\s*=\s*(.+?)(?=^\S|^\s*\w+\s*=|\Z)", text)
    if match is None:
        return ""
    envlist = match.group(1)
    for prefix, group in re.findall(r"py(\d*)\{([^}]*)\}", envlist):
        envlist += " " + " ".join(f"py{prefix}{item.strip()}" for item in group.split(","))
    return envlist


def _specifier(spec: str) -> SpecifierSet | None:
    try:
        return SpecifierSet(spec)
    except InvalidSpecifier:
        return None


def _supports(spec: SpecifierSet, python: str) -> bool:
    """Whether a minor fits the spec at its first or a late patch release (``>=3.8.1``)."""
    try:
        return any(spec.contains(Version(v)) for v in (python, f"{python}.99"))
    except InvalidVersion:
        return False


def _dedupe(items: Iterable[str]) -> list[str]:
    return sorted(dict.fromkeys(items), key=Version)
