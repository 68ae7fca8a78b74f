"""Which paths of a Go project are tests, sources, generated files and library code: mining's
split into patch and test_patch, and inject's choice of files. By path only, as the go tool
decides: a ``*_test.go`` file is a test wherever it sits, and a ``testdata/`` folder holds a
package's fixtures (the go tool never builds it). Folders whose name starts with ``_`` or ``.``
are ignored by ``go build ./...``, and a file named for another platform (``x_windows.go``) is
not built on linux/amd64, so a bug put there could never fail a test. ``excluding_constraint``
reads a file's ``//go:build`` line the same way, for the sampler (content, not path).
"""

from __future__ import annotations

import fnmatch
import posixpath
import re

GO_SUFFIX = ".go"
# cgo and assembly: compiled into the package with its .go files
GO_OTHER_SOURCES = (".s", ".c", ".h")

# Files that tools write (protoc, stringer, controller-gen, go generate) and the module checksum
# and vendored dependencies: a commit's change to them is no part of a task.
GO_GENERATED = (
    "go.sum",
    "go.work.sum",
    "*.pb.go",
    "*.pb.*.go",  # grpc-gateway's .pb.gw.go, validators' .pb.validate.go
    "*_gen.go",
    "*.gen.go",
    "*_generated.go",
    "zz_generated*.go",
    "*_string.go",  # stringer
)
GO_GENERATED_DIRS = frozenset({"vendor"})
# The platform the environments build and test on: a file the go tool leaves out there (by its
# name, ``x_windows.go``, ``x_darwin_arm64.go``, or its ``//go:build`` line) is never compiled
# by a task's tests, so a bug in it could never fail one.
TARGET_OS, TARGET_ARCH = "linux", "amd64"
KNOWN_OS = frozenset(
    {
        "aix", "android", "darwin", "dragonfly", "freebsd", "hurd", "illumos", "ios", "js",
        "linux", "nacl", "netbsd", "openbsd", "plan9", "solaris", "wasip1", "windows", "zos",
    }
)  # fmt: skip
KNOWN_ARCH = frozenset(
    {
        "386", "amd64", "amd64p32", "arm", "armbe", "arm64", "arm64be", "loong64", "mips",
        "mipsle", "mips64", "mips64le", "mips64p32", "mips64p32le", "ppc", "ppc64", "ppc64le",
        "riscv", "riscv64", "s390", "s390x", "sparc", "sparc64", "wasm",
    }
)  # fmt: skip
GO_TEST_DIRS = frozenset({"testdata"})


def _folders(path: str) -> list[str]:
    return path.split("/")[:-1]


def is_test_file(path: str) -> bool:
    """``calc/add_test.go``, ``parser/testdata/in.txt``: yes; ``calc/add.go``: no."""
    if any(part in GO_TEST_DIRS for part in _folders(path)):
        return True
    return posixpath.basename(path).endswith("_test.go")


def is_suite_file(path: str) -> bool:
    """A Go test file (``*_test.go``) outside testdata and vendor: what ``go test`` runs."""
    folders = _folders(path)
    return posixpath.basename(path).endswith("_test.go") and not any(
        part in GO_TEST_DIRS or part in GO_GENERATED_DIRS for part in folders
    )


def is_source_file(path: str) -> bool:
    """Code the go tool compiles: ``.go`` files that are not tests, and a cgo package's ``.c``,
    ``.h`` and assembly ``.s`` files (go.mod and docs are not code)."""
    if is_test_file(path):
        return False
    return path.endswith(GO_SUFFIX) or path.endswith(GO_OTHER_SOURCES)


def is_generated(path: str) -> bool:
    """``go.sum``, ``vendor/x/y.go``, ``api/v1/user.pb.go``, ``zz_generated.deepcopy.go``,
    ``color_string.go``: yes; ``calc/add.go``: no."""
    if any(part in GO_GENERATED_DIRS for part in _folders(path)):
        return True
    name = posixpath.basename(path)
    return any(fnmatch.fnmatchcase(name, pattern) for pattern in GO_GENERATED)


def built_on_target(path: str) -> bool:
    """Whether the go tool builds the file on linux/amd64 by its name (``_windows.go``,
    ``_linux_arm64.go``, ``_386.go``: no; ``_linux.go``, ``reader.go``: yes)."""
    parts = posixpath.basename(path).removesuffix(GO_SUFFIX).removesuffix("_test").split("_")
    if len(parts) < 2:
        return True
    last, before = parts[-1], parts[-2] if len(parts) > 2 else ""
    if last in KNOWN_ARCH:
        return last == TARGET_ARCH and (before not in KNOWN_OS or before == TARGET_OS)
    return last not in KNOWN_OS or last == TARGET_OS


def is_library_source(path: str) -> bool:
    """A ``.go`` file inject may put a bug in: not a test, not generated, not vendored, not under
    testdata, not in a folder the go tool ignores (``_examples/``, ``.github/``), built on
    linux/amd64 by its name; ``cmd/`` mains and internal helpers count."""
    if not path.endswith(GO_SUFFIX) or is_test_file(path) or is_generated(path):
        return False
    if not built_on_target(path):
        return False
    return not any(part.startswith(("_", ".")) for part in _folders(path))


_TAG = re.compile(r"!|&&|\|\||\(|\)|[\w.]+")
_GO_BUILD = re.compile(r"^//go:build\s+(.+?)\s*$")
_PLUS_BUILD = re.compile(r"^//\s*\+build\s+(.+?)\s*$")


def _satisfied(tag: str) -> bool:
    """The build tags true when ``go test`` runs in a task's environment (linux/amd64, gc, cgo;
    every ``go1.N`` release tag); custom tags (``integration``, ``ignore``) are not set."""
    return tag in (TARGET_OS, TARGET_ARCH, "unix", "gc", "cgo") or bool(
        re.fullmatch(r"go1\.\d+", tag)
    )


def _evaluate(expression: str) -> bool | None:
    """A ``//go:build`` expression's value, None when it does not read as one."""
    tokens = _TAG.findall(expression)
    position = 0

    def peek() -> str | None:
        return tokens[position] if position < len(tokens) else None

    def take() -> str:
        nonlocal position
        position += 1
        return tokens[position - 1]

    def either() -> bool:
        value = both()
        while peek() == "||":
            take()
            value = both() | value
        return value

    def both() -> bool:
        value = single()
        while peek() == "&&":
            take()
            value = single() & value
        return value

    def single() -> bool:
        token = take()
        if token == "!":
            return not single()
        if token == "(":
            value = either()
            if take() != ")":
                raise ValueError(expression)
            return value
        if token in ("&&", "||", ")"):
            raise ValueError(expression)
        return _satisfied(token)

    try:
        value = either()
    except (IndexError, ValueError):
        return None
    return value if position == len(tokens) else None


def excluding_constraint(source: str) -> str | None:
    """The build constraint line that keeps the file out of a linux/amd64 build (``//go:build
    ignore``, ``// +build windows``), or None when the go tool builds it. Only the comments
    before the ``package`` clause count, as for the go tool."""
    plus: list[tuple[str, str]] = []
    for line in source.lstrip("\ufeff").splitlines():
        line = line.strip()
        if line.startswith("package ") or line == "package":
            break
        if match := _GO_BUILD.match(line):
            return None if _evaluate(match.group(1)) is not False else line
        if match := _PLUS_BUILD.match(line):
            plus.append((line, match.group(1)))
    for line, options in plus:  # lines AND'd; on a line, options (spaces) OR'd, commas AND'd
        if not any(all(_term(t) for t in option.split(",")) for option in options.split()):
            return line
    return None


def _term(term: str) -> bool:
    return not _satisfied(term[1:]) if term.startswith("!") else _satisfied(term)
