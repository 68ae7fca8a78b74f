"""Which Node a JavaScript project gets: Debian's nodejs of one release (``NODE_VERSIONS``).

The project's own word first: ``.nvmrc`` / ``.node-version`` (a version or a major: the
first Debian node at least that), then ``engines.node`` in package.json (a semver range: of the
nodes it allows, the one nearest the commit's era), else the commit's date alone (``ERA``),
since an older lock file's native modules and old jest expect the Node of their day.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from trajforge.generators.languages.javascript.base_image import NODE_VERSIONS

Version = tuple[int, int, int]
# The newest Node a commit before each date gets: the era ladder (first date that is later wins).
ERA = (("2021-01-01", "12"), ("2024-06-01", "18"))
NEWEST = max(NODE_VERSIONS, key=int)
_PART = re.compile(r"^\s*(?P<op><=|>=|<|>|=|\^|~)?\s*v?(?P<ver>[0-9xX*]+(?:\.[0-9xX*]+){0,2})")
_LTS = {"argon": 4, "boron": 6, "carbon": 8, "dubnium": 10, "erbium": 12, "fermium": 14,
        "gallium": 16, "hydrogen": 18, "iron": 20, "jod": 22}  # fmt: skip


@dataclass(frozen=True)
class NodeChoice:
    major: str  # a key of NODE_VERSIONS
    why: str


def choose_node(engines: str | None, nvmrc: str | None, committed: str | None) -> NodeChoice:
    """The Node for a project from its ``.nvmrc``, its ``engines.node`` range, its commit date."""
    majors = sorted(NODE_VERSIONS, key=int, reverse=True)
    if nvmrc and nvmrc.strip():
        wanted = _nvmrc_major(nvmrc.strip())
        if wanted is not None:
            at_least = [m for m in sorted(majors, key=int) if int(m) >= wanted]
            major = at_least[0] if at_least else majors[0]
            return NodeChoice(major, f".nvmrc asks node {nvmrc.strip()[:20]}: node {major}")
    era, era_why = _era(committed)
    if engines and engines.strip():
        fits = [m for m in majors if satisfies(NODE_VERSIONS[m], engines)]
        if fits:
            major = min(fits, key=lambda m: (abs(int(m) - int(era)), -int(m)))
            return NodeChoice(
                major, f"engines.node {engines[:40]!r}, nearest the era ({era_why}): node {major}"
            )
        named = [int(n) for n in re.findall(r"(?<![.\d])(\d+)", engines)]
        above = [m for m in sorted(majors, key=int) if named and int(m) > max(named)]
        major = above[0] if above else majors[0]
        return NodeChoice(major, f"engines.node {engines[:40]!r} fits no Debian node: node {major}")
    return NodeChoice(era, era_why)


def _era(committed: str | None) -> tuple[str, str]:
    """The Node of the commit's day: the first rung of ``ERA`` whose date is later."""
    for date, major in ERA:
        if committed and committed < date:
            return major, f"committed {committed[:10]}, before {date}: node {major}"
    return NEWEST, f"the newest node, {NEWEST}"


def _nvmrc_major(text: str) -> int | None:
    word = text.splitlines()[0].strip().lower()
    if word.startswith("lts/"):
        return _LTS.get(word[4:], int(NEWEST))
    if word in ("node", "stable", "latest", "current"):
        return int(NEWEST)
    match = re.match(r"v?(\d+)", word)
    return int(match.group(1)) if match else None


def satisfies(version: Version, spec: str) -> bool:
    """Whether ``version`` is in the npm semver range ``spec`` (``||`` of space-joined
    comparators, hyphen ranges, ``^``, ``~``, ``x`` wildcards); a range this cannot read
    matches nothing."""
    return any(_in_set(version, part.strip()) for part in spec.split("||"))


def _in_set(version: Version, spec: str) -> bool:
    if spec in ("", "*", "x", "latest"):
        return True
    hyphen = re.fullmatch(r"(\S+)\s+-\s+(\S+)", spec)
    if hyphen:
        return _compare(version, ">=", hyphen.group(1)) and _upper(version, hyphen.group(2))
    tokens = re.findall(r"(?:<=|>=|<|>|=|\^|~)?\s*v?[0-9xX*][0-9xX*.]*", spec)
    if not tokens or "".join(tokens).replace(" ", "") != spec.replace(" ", ""):
        return False
    return all(_comparator(version, token) for token in tokens)


def _comparator(version: Version, token: str) -> bool:
    match = _PART.match(token)
    if match is None:
        return False
    op, ver = match.group("op") or "=", match.group("ver")
    return _compare(version, op, ver)


def _parts(ver: str) -> list[int | None]:
    out: list[int | None] = [None if p in ("x", "X", "*") else int(p) for p in ver.split(".")]
    return out + [None] * (3 - len(out))


def _compare(version: Version, op: str, ver: str) -> bool:
    parts = _parts(ver)
    known = [p for p in parts if p is not None]
    low = tuple(p or 0 for p in parts)
    if op == "^":
        first = next((i for i, p in enumerate(parts) if p), len(known) - 1 if known else 0)
        return version >= low and version[: first + 1] == low[: first + 1]
    if op == "~":
        keep = max(1, min(2, len(known)))
        return version >= low and version[:keep] == low[:keep]
    if op == "=":
        return version[: len(known)] == tuple(known) if len(known) < 3 else version == low
    if op == ">=":
        return version >= low
    if op == ">":
        return version[: len(known)] > tuple(known)
    if op == "<":
        return version < low
    return _upper(version, ver)  # "<="


def _upper(version: Version, ver: str) -> bool:
    known = tuple(p for p in _parts(ver) if p is not None)
    return version[: len(known)] <= known
