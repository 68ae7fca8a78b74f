"""What a module's ``.go`` files ask of the Go that builds them, read from their heads.

A ``go`` line is the *oldest* Go a module supports, not the one its tests were written for: a
library that says ``go 1.18`` (samber/lo) still ships files behind ``//go:build go1.23`` that
use ``iter``, and their tests, more than half of the suite, build only with a Go that satisfies
the tag. So the Go a commit needs is the newest of its go line and what its files ask:

- a file whose ``//go:build`` constraint is false with Debian's Go and true with a newer
  release (on linux/amd64, cgo on, no experiment, no race: how the image builds) asks for the
  first such release; a constraint no known release satisfies (``go1.26 && goexperiment.simd``)
  asks nothing, since no toolchain alone builds it;
- a file built with Debian's Go that imports a standard package newer than it (``slices``,
  ``iter``) asks for the release that added the package.

Why this and not the other candidates: the files are in the commit's tree, so the choice is
exact (the same commit always gets the same Go) and needs no network; the release current at the
commit's date would fetch a toolchain for every recently touched old module that Debian's Go
builds (about a minute per image) and would change Go under code that asked for nothing; the
dependencies' own go lines are known only after the download, too late for the recipe, and a
go line of 1.21 or newer already covers them (the go command refuses a dependency newer than
the main module's go line). A file head also carries a pre-module package's import comment
(``package errors // import "github.com/pkg/errors"``), its module path.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from trajforge.generators.languages.go.toolchain import DEBIAN_GO, LATEST_PATCH

HEAD_BYTES = 64 * 1024  # a constraint and the imports sit above the first declaration
MAX_GO_FILES = 20000
# Standard packages newer than Debian's Go, by the minor that added them (go.dev/doc/go1.N).
NEW_STDLIB = {
    "crypto/ecdh": 20,
    "cmp": 21,
    "maps": 21,
    "slices": 21,
    "log/slog": 21,
    "testing/slogtest": 21,
    "math/rand/v2": 22,
    "go/version": 22,
    "iter": 23,
    "unique": 23,
    "structs": 23,
    "weak": 24,
    "crypto/hkdf": 24,
    "crypto/pbkdf2": 24,
    "crypto/sha3": 24,
    "crypto/mlkem": 24,
    "testing/synctest": 25,
}
# The tags the image's builds satisfy besides go1.N (GOOS, GOARCH, cgo; the compiler).
IMAGE_TAGS = frozenset({"linux", "amd64", "unix", "cgo", "gc"})
_BUILD_LINE = re.compile(r"^//go:build\s+(.+?)\s*$", re.MULTILINE)
_PACKAGE = re.compile(
    r'^package\s+(\w+)\s*(?://\s*import\s+"([^"]+)"|/\*\s*import\s+"([^"]+)"\s*\*/)?',
    re.MULTILINE,
)
_IMPORT_BLOCK = re.compile(r"^import\s*\((.*?)^\)", re.MULTILINE | re.DOTALL)
_IMPORT_LINE = re.compile(r'^import\s+(?:[\w.]+\s+)?"([^"]+)"', re.MULTILINE)
_QUOTED = re.compile(r'^\s*(?:[\w.]+\s+)?"([^"]+)"', re.MULTILINE)
_TOKEN = re.compile(r"\s*(\(|\)|!|&&|\|\||[A-Za-z0-9_.]+)")


def debian_minor() -> int:
    return int(DEBIAN_GO.split(".")[1])


def known_minors() -> list[int]:
    """Debian's minor and every minor of the toolchain table, oldest first."""
    return [debian_minor(), *sorted(int(m.split(".")[1]) for m in LATEST_PATCH)]


def file_needs(head: str) -> int:
    """The Go minor one file asks for (``debian_minor()`` when it asks nothing newer)."""
    floor = debian_minor()
    match = _BUILD_LINE.search(_before_package(head))
    if match is not None:
        enabled = [m for m in known_minors() if satisfied(match.group(1), m)]
        if not enabled:
            return floor  # no toolchain alone builds it (an experiment, another platform)
        floor = max(floor, enabled[0])
    wanted = [NEW_STDLIB.get(path, 0) for path in imports(head)]
    return max([floor, *wanted])


def needs(heads: Iterable[tuple[str, str]]) -> tuple[str, str]:
    """``(minor, path)``: the newest minor any file asks (``1.N``) and the first file asking
    it; ``("", "")`` when none asks past Debian's."""
    best, where = debian_minor(), ""
    for path, head in heads:
        minor = file_needs(head)
        if minor > best:
            best, where = minor, path
    return (f"1.{best}", where) if where else ("", "")


def import_comment(head: str) -> str:
    """The package clause's import comment's path, "" when it has none."""
    match = _PACKAGE.search(head)
    return (match.group(2) or match.group(3) or "") if match else ""


def package_name(head: str) -> str:
    """The package clause's name, "" when the head has none."""
    match = _PACKAGE.search(head)
    return match.group(1) if match else ""


def imports(head: str) -> list[str]:
    """The import paths in a file's head."""
    clause = _PACKAGE.search(head)
    body = head[clause.end() :] if clause else head
    found = _IMPORT_LINE.findall(body)
    for block in _IMPORT_BLOCK.finditer(body):
        found += _QUOTED.findall(block.group(1))
    return found


def satisfied(expression: str, minor: int) -> bool:
    """Whether a ``//go:build`` expression holds for the image's build with Go ``1.<minor>``;
    an expression that does not parse holds (the go command would refuse the file anyway)."""
    tokens = _TOKEN.findall(expression)
    if "".join(tokens) != re.sub(r"\s+", "", expression):
        return True
    try:
        value, rest = _or(tokens, minor)
    except IndexError:
        return True
    return value if not rest else True


def _tag(name: str, minor: int) -> bool:
    version = re.fullmatch(r"go1\.(\d+)", name)
    return int(version.group(1)) <= minor if version else name in IMAGE_TAGS


def _or(tokens: list[str], minor: int) -> tuple[bool, list[str]]:
    value, rest = _and(tokens, minor)
    while rest and rest[0] == "||":
        right, rest = _and(rest[1:], minor)
        value = value or right
    return value, rest


def _and(tokens: list[str], minor: int) -> tuple[bool, list[str]]:
    value, rest = _not(tokens, minor)
    while rest and rest[0] == "&&":
        right, rest = _not(rest[1:], minor)
        value = value and right
    return value, rest


def _not(tokens: list[str], minor: int) -> tuple[bool, list[str]]:
    if tokens[0] == "!":
        value, rest = _not(tokens[1:], minor)
        return not value, rest
    if tokens[0] == "(":
        value, rest = _or(tokens[1:], minor)
        if not rest or rest[0] != ")":
            raise IndexError("unclosed (")
        return value, rest[1:]
    if tokens[0] in (")", "&&", "||"):
        raise IndexError(tokens[0])
    return _tag(tokens[0], minor), tokens[1:]


def _before_package(head: str) -> str:
    match = _PACKAGE.search(head)
    return head[: match.start()] if match else head
