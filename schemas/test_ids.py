"""Test ids are pytest node ids (``tests/t.py::TestX::test_a[1]``); the parts every stage reads."""

from __future__ import annotations


def short_test_name(test_id: str) -> str:
    """The function name inside a test id: ``tests/t.py::TestX::test_a[1]`` -> ``test_a``."""
    name = test_id.split("::")[-1].split("[")[0].split(" (")[0]
    return name.strip()


def test_file(test_id: str) -> str:
    """The file a test id lives in: ``tests/t.py::TestX::test_a[1]`` -> ``tests/t.py``."""
    return test_id.split("::")[0]


def test_scopes(test_id: str) -> list[str]:
    """Class and function names below the file, parameters dropped: ``["TestX", "test_a"]``."""
    return [part.split("[")[0] for part in test_id.split("::")[1:]]
