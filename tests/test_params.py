"""params.yaml is validated on load: a bad value is one line naming the key."""

from __future__ import annotations

from pathlib import Path

import pytest
from trajforge.schemas.errors import ParamsError
from trajforge.schemas.params import load_params

ROOT = Path(__file__).resolve().parents[1]


def test_project_params_load():
    params = load_params(str(ROOT / "params.yaml"))
    assert params.sandbox.kind == "docker"
    assert params.sources.pypi  # the default run mines real PyPI packages


@pytest.mark.parametrize(
    ("text", "key"),
    [
        ("mine:\n  max_files: lots\n", "mine.max_files"),
        ("mine:\n  max_filez: 3\n", "mine.max_filez"),
        ("sandbox:\n  kind: vm\n", "sandbox.kind"),
        ("validate:\n  workers: 0\n", "validate.workers"),
        ("sources:\n  pypi: toolz\n", "sources.pypi"),
    ],
)
def test_bad_values_name_the_key(tmp_path, text, key):
    path = tmp_path / "params.yaml"
    path.write_text(text)
    with pytest.raises(ParamsError) as info:
        load_params(str(path))
    message = str(info.value)
    assert key in message and "\n" not in message


def test_missing_file_is_one_line(tmp_path):
    with pytest.raises(ParamsError, match="does not exist"):
        load_params(str(tmp_path / "nope.yaml"))


def test_python_version_given_as_a_number_is_kept_as_text(tmp_path):
    path = tmp_path / "params.yaml"
    path.write_text("environment:\n  default_python: 3.11\n")
    assert load_params(str(path)).environment.default_python == "3.11"
