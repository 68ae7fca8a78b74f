"""Which Go runs a module's tests: Debian's 1.19, or the toolchain go.mod names, fetched.

Debian bookworm's ``golang-go`` (1.19) is the era ladder's floor: a module whose ``go`` line is 1.19
or older (or that has none), and whose files ask for nothing newer (``sources.py``: a ``//go:build
go1.23`` file, an ``iter`` import), is built with it. Otherwise it gets the newest of what its
go.mods and files ask: a module's ``toolchain`` line, else its ``go`` line, and the files' need
(``1.21`` as that minor's latest patch in ``LATEST_PATCH``, ``1.21.3`` as written). A toolchain is a
Go module (``golang.org/toolchain@v0.0.1-go1.22.12.linux-amd64``): the recipe's networked build
stage downloads it into the module cache with Debian's go (which predates ``GOTOOLCHAIN``) and puts
its ``bin`` first on ``PATH``; the final image keeps ``GOTOOLCHAIN=go<ver>`` so the go command never
looks for another one, and ``GOPROXY=off``, so it never reaches the network.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

DEBIAN_GO = "1.19"  # bookworm's golang-go: the floor
# Each minor's newest patch release on the module proxy (golang.org/toolchain), checked 2026-11;
# a go line naming only a minor gets it (Go's own rule for "go 1.21" is 1.21.0, which has bugs
# its patches fixed; a project tested on that minor was tested on some patch of it).
LATEST_PATCH = {
    "1.20": "1.20.14",
    "1.21": "1.21.13",
    "1.22": "1.22.12",
    "1.23": "1.23.12",
    "1.24": "1.24.13",
    "1.25": "1.25.14",
    "1.26": "1.26.11",
    "1.27": "1.27.4",
}
_GO_LINE = re.compile(r"^go\s+(\d+\.\d+(?:\.\d+)?(?:(?:rc|beta)\d+)?)\s*(?://.*)?$", re.MULTILINE)
_TOOLCHAIN_LINE = re.compile(
    r"^toolchain\s+go(\d+\.\d+(?:\.\d+)?(?:(?:rc|beta)\d+)?)\s*(?://.*)?$", re.MULTILINE
)
_VERSION = re.compile(r"(\d+)\.(\d+)(?:\.(\d+))?(?:(rc|beta)(\d+))?")


@dataclass(frozen=True)
class Toolchain:
    """The Go a project's tests run with: ``version`` is ``DEBIAN_GO`` for Debian's, else the
    exact release fetched (``1.22.12``); ``why`` is one line for ``Detection.why``."""

    version: str
    why: str

    @property
    def fetched(self) -> bool:
        return self.version != DEBIAN_GO

    @property
    def module(self) -> str:
        """The toolchain's module version, without the platform (``v0.0.1-go1.22.12``)."""
        return f"v0.0.1-go{self.version}"


def go_line(go_mod: str) -> str:
    """go.mod's ``go`` directive (``1.21``, ``1.22.3``), "" when it has none."""
    match = _GO_LINE.search(go_mod)
    return match.group(1) if match else ""


def toolchain_line(go_mod: str) -> str:
    """go.mod's (or go.work's) ``toolchain`` directive without its ``go`` prefix, "" if none."""
    match = _TOOLCHAIN_LINE.search(go_mod)
    return match.group(1) if match else ""


def version_key(version: str) -> tuple[int, int, int, int, int]:
    """A version's order: ``1.21`` < ``1.21rc1`` < ``1.21.0`` (Go's order); unreadable is 0."""
    match = _VERSION.fullmatch(version)
    if match is None:
        return (0, 0, 0, 0, 0)
    major, minor, patch, pre, pre_n = match.groups()
    if patch is not None:
        return (int(major), int(minor), 1, int(patch), 0)
    if pre:  # 1.21rc1 comes after the language version 1.21 and before 1.21.0
        return (int(major), int(minor), 0, 0, (1 if pre == "beta" else 2) * 100 + int(pre_n))
    return (int(major), int(minor), 0, 0, 0)


def choose_toolchain(
    go_mods: Iterable[tuple[str, str]], files_need: tuple[str, str] = ("", "")
) -> Toolchain:
    """The Go for every module of the project (``(path, text)`` of each go.mod or go.work):
    the newest any of them asks for, so no module's go line is newer than the toolchain, nor
    is what its ``.go`` files need (``files_need``: ``(minor, file)`` from ``sources.needs``; a
    go line says the oldest Go a module supports, its files may ask more; a go line of the
    files' minor already satisfies them, its patch kept)."""
    best: tuple[str, str, str] | None = None  # (version, path, what)
    for path, text in go_mods:
        pinned, language = toolchain_line(text), go_line(text)
        if pinned:
            wanted = (pinned, path, f"toolchain go{pinned}")
        elif language:
            wanted = (_release(language), path, f"go {language}")
        else:
            continue
        if best is None or version_key(wanted[0]) > version_key(best[0]):
            best = wanted
    minor, file = files_need
    if minor and (best is None or version_key(minor)[:2] > version_key(best[0])[:2]):
        best = (_release(minor), file, f"go{minor} (a build constraint or a newer std import)")
    if best is None:
        return Toolchain(DEBIAN_GO, f"go {DEBIAN_GO} (Debian's): no go line")
    version, path, what = best
    if version_key(version) <= version_key(f"{DEBIAN_GO}.99"):
        return Toolchain(DEBIAN_GO, f"go {DEBIAN_GO} (Debian's): {path} says {what}")
    return Toolchain(version, f"go {version} (fetched toolchain): {path} says {what}")


def _release(language: str) -> str:
    """A ``go`` line as a release: a minor alone is its latest known patch (a minor newer than
    the table: its ``.0``), a patch or a pre-release as written."""
    minor = language.count(".") == 1 and not any(pre in language for pre in ("rc", "beta"))
    if minor and _VERSION.fullmatch(language):
        return LATEST_PATCH.get(language, f"{language}.0")
    return language
