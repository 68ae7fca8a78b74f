"""Go's path rules: tests, sources, generated files and the files inject may put a bug in."""

from __future__ import annotations

import pytest
from trajforge.generators.languages.go.test_files import (
    is_generated,
    is_library_source,
    is_source_file,
    is_suite_file,
    is_test_file,
)


@pytest.mark.parametrize(
    "path",
    [
        "calc_test.go",
        "internal/calc/add_test.go",
        "parser/testdata/input.go",
        "parser/testdata/golden/out.txt",
        "cmd/tool/main_test.go",
    ],
)
def test_tests(path: str) -> None:
    assert is_test_file(path)
    assert not is_source_file(path)
    assert not is_library_source(path)


@pytest.mark.parametrize(
    "path", ["calc.go", "internal/calc/add.go", "cmd/tool/main.go", "contest.go", "test.go"]
)
def test_library_sources(path: str) -> None:
    assert not is_test_file(path)
    assert is_source_file(path)
    assert is_library_source(path)
    assert not is_generated(path)
    assert not is_suite_file(path)


def test_suite_files_are_test_modules_go_test_runs() -> None:
    assert is_suite_file("calc_test.go") and is_suite_file("a/b/c_test.go")
    assert not is_suite_file("parser/testdata/x_test.go")  # a fixture, never built
    assert not is_suite_file("vendor/github.com/x/y/y_test.go")
    assert not is_suite_file("parser/testdata/input.txt")


@pytest.mark.parametrize(
    "path",
    [
        "go.sum",
        "tools/go.sum",
        "go.work.sum",
        "vendor/github.com/pkg/errors/errors.go",
        "api/v1/user.pb.go",
        "api/v1/user_grpc.pb.go",
        "api/v1/user.pb.gw.go",
        "api/v1/zz_generated.deepcopy.go",
        "color_string.go",
        "internal/tables_gen.go",
        "internal/tables.gen.go",
        "internal/mock_generated.go",
    ],
)
def test_generated(path: str) -> None:
    assert is_generated(path)
    assert not is_library_source(path)


def test_other_sources_and_not_code() -> None:
    for path in ("internal/asm_amd64.s", "cgo/helper.c", "cgo/helper.h"):
        assert is_source_file(path) and not is_library_source(path)
    for path in ("go.mod", "README.md", "docs/guide.md", "Makefile", "config.yaml"):
        assert not is_source_file(path) and not is_library_source(path)
    # folders the go tool ignores: a bug there never reaches a test
    assert not is_library_source("_examples/demo/main.go")
    assert not is_library_source(".github/tools/x.go")
    assert is_source_file("_examples/demo/main.go")
    assert not is_generated("calc/strings.go")  # `_string.go` is stringer's, `strings.go` not
