"""Go's path rules: tests, sources, generated files and the files inject may put a bug in."""

from __future__ import annotations

import pytest
from trajforge.generators.languages.go.test_files import (
    built_on_target,
    excluding_constraint,
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


def test_files_the_go_tool_leaves_out_of_a_linux_amd64_build() -> None:
    for path in (
        "a_windows.go",
        "a_darwin.go",
        "a_linux_arm64.go",
        "a_386.go",
        "z_windows_test.go",
    ):
        assert not built_on_target(path), path
        assert not is_library_source(path)
    for path in ("a_linux.go", "a_linux_amd64.go", "a_amd64.go", "linux_amd64.go", "my_file.go"):
        assert built_on_target(path), path
    assert is_library_source("sys/a_linux.go") and is_library_source("windows.go")


@pytest.mark.parametrize(
    ("header", "excluded"),
    [
        ("//go:build ignore", True),
        ("//go:build windows || darwin", True),
        ("//go:build integration", True),  # a custom tag: not set by go test
        ("// +build windows", True),
        ("// +build !linux", True),
        ("//go:build linux && amd64", False),
        ("//go:build !windows", False),
        ("//go:build (linux || darwin) && !appengine", False),
        ("//go:build go1.18", False),
        ("//go:build cgo", False),
        ("// +build linux,cgo darwin", False),
        ("//go:build &&", False),  # not an expression: the go tool's error, not ours
        ("// just a comment", False),
    ],
)
def test_build_constraints(header: str, excluded: bool) -> None:
    source = f"// Copyright\n\n{header}\n\npackage x\n"
    assert (excluding_constraint(source) == header) is excluded
    # only the comments before the package clause count
    assert excluding_constraint(f"package x\n\n{header}\n") is None
