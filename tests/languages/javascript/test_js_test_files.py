"""JS/TS test-file conventions for mining's split, and Python's rule left as it was."""

from __future__ import annotations

import pytest
from trajforge.generators.languages.javascript.test_files import is_js_source_path, is_js_test_path
from trajforge.schemas.test_ids import is_test_path

SUFFIXES = (".js", ".jsx", ".mjs", ".cjs", ".ts", ".tsx", ".mts", ".cts")


@pytest.mark.parametrize("suffix", SUFFIXES)
def test_every_suffix_follows_the_conventions(suffix: str) -> None:
    assert is_js_source_path(f"src/a{suffix}")
    for path in (
        f"src/__tests__/sum{suffix}",
        f"src/sum.test{suffix}",
        f"src/sum.spec{suffix}",
        f"test/sum{suffix}",
        f"tests/unit/sum{suffix}",
        f"packages/core/test/sum{suffix}",
        f"packages/core/src/__tests__/deep/sum{suffix}",
        f"e2e/login.spec{suffix}",
        f"test{suffix}",  # at the root: ava's default, many small packages' (is-number)
        f"tests{suffix}",
    ):
        assert is_js_test_path(path), path
    for path in (
        f"src/sum{suffix}",
        f"src/contest{suffix}",
        f"src/testing-utils{suffix}",
        f"lib/test{suffix}",
        f"testing{suffix}",
        f"src/latest.spectrum{suffix}",
        f"packages/test-utils/src/index{suffix}",
    ):
        assert not is_js_test_path(path), path


def test_test_folders_count_whole_whatever_the_suffix() -> None:
    assert is_js_test_path("test/fixtures/input.json")
    assert is_js_test_path("src/__snapshots__/sum.test.js.snap")
    assert is_js_test_path("src/__mocks__/fs.js")
    assert not is_js_test_path("src/sum.test.json")  # not a module: only folders count whole
    assert not is_js_source_path("README.md")


def test_python_rule_is_unchanged() -> None:
    assert is_test_path("tests/test_a.py") and is_test_path("pkg/test_x.py")
    assert not is_test_path("src/sum.test.js")  # Python's rule never learned JS names
    assert is_test_path("test/sum.js")  # a test folder counts whole, as before
