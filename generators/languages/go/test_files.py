"""Which paths of a Go project are tests, sources, generated files and library code: mining's
split into patch and test_patch, and inject's choice of files. By path only, as the go tool
decides: a ``*_test.go`` file is a test wherever it sits, and a ``testdata/`` folder holds a
package's fixtures (the go tool never builds it). Folders whose name starts with ``_`` or ``.``
are ignored by ``go build ./...``, so a bug put there could never fail a test.
"""

from __future__ import annotations

import fnmatch
import posixpath

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


def is_library_source(path: str) -> bool:
    """A ``.go`` file inject may put a bug in: not a test, not generated, not vendored, not under
    testdata, not in a folder the go tool ignores (``_examples/``, ``.github/``); ``cmd/`` mains
    and internal helpers count."""
    if not path.endswith(GO_SUFFIX) or is_test_file(path) or is_generated(path):
        return False
    return not any(part.startswith(("_", ".")) for part in _folders(path))
