"""Installs that get through: the relaxation ladder, lock files, VCS requirements with a PyPI
release, system packages from a failed build's log; and the one line a build that still fails
ends with.

The first tests are the rules on strings and on real git repositories (no Docker). The last one
is the CLI as a user drives it on four test-built repositories (``inject`` then ``validate``, real
Docker and real installs from PyPI), each the shape a repository in the wild failed with.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import polars as pl
import pytest
from conftest import run_cli
from reach_repos import DatedRepo, package
from test_env_profile import REPO, commit
from trajforge.generators.environments.dependency_layer import RELINK
from trajforge.generators.languages.python.install_sets import decode_set
from trajforge.generators.languages.python.lockfiles import locked_pins
from trajforge.generators.languages.python.profile import detect_profile
from trajforge.generators.languages.python.relax import (
    compatible,
    project_requirements,
    pypi_release,
    relaxed,
    unpinned,
)

UPGRADE = "pip install --upgrade pip setuptools wheel"
RUNNER = "pip install pytest coverage"


# --- the rungs, on requirement strings and commands ----------------------------------------------


def test_an_exact_pin_becomes_a_compatible_range() -> None:
    assert compatible("requests==2.31.0") == "requests~=2.31"
    assert compatible("six==1") == "six<2,>=1"
    assert compatible("a[x]==1.2.3; python_version < '3.9'") == 'a[x]~=1.2; python_version < "3.9"'
    assert compatible("b>=1,<3,==1.4.2") == "b<3,>=1,~=1.4"  # sorted, so one recipe
    assert compatible("not a requirement ==") == "not a requirement =="


def test_unpinned_keeps_extras_and_markers() -> None:
    assert unpinned("a[x]==1.2.3; sys_platform == 'linux'") == 'a[x]; sys_platform == "linux"'
    assert unpinned("b>=2") == "b"


def test_a_vcs_requirement_falls_back_to_the_pypi_release_of_its_name() -> None:
    assert pypi_release("lightning @ git+https://github.com/Lightning-AI/lightning") == "lightning"
    assert pypi_release("git+https://github.com/org/foo.git#egg=foo") == "foo"
    assert pypi_release("git+https://gitlab.com/org/foo.git@v1#egg=foo[x]") == "foo[x]"
    # No name: the repository's name may be another project's on PyPI, so none is guessed.
    assert pypi_release("git+https://github.com/org/foo.git") is None
    # A private host's package: its name on PyPI may be anyone's.
    assert pypi_release("corp @ https://pypi.internal.example/corp-1.0.tar.gz") is None
    assert pypi_release("attrs>=22") == "attrs>=22"


FILES = {
    "requirements.txt": (
        "-r requirements/base.txt\n"
        "requests==2.31.0 \\\n    --hash=sha256:58cd2187c01e70e6e26505bca751777aa9f2ee0b7f4300988b709f44e013003f\n"  # noqa: E501
        "lightning @ git+https://github.com/Lightning-AI/lightning  # the dev version\n"
        "-c constraints.txt\n"
        "-e .\n"
    ),
    "requirements/base.txt": "urllib3==1.20\n",
    "pyproject.toml": '[project]\nname = "widget"\ndependencies = ["numpy==1.21.0", "attrs"]\n',
}
COMMANDS = (UPGRADE, "pip install -r requirements.txt", "pip install 'x==1.0.3'", RELINK, RUNNER)


def test_each_rung_rewrites_the_commands_and_inlines_the_files() -> None:
    own = project_requirements(FILES)
    assert own == ["numpy==1.21.0", "attrs"]
    assert relaxed(COMMANDS, "declared", FILES, own) == COMMANDS
    assert relaxed(COMMANDS, "era", FILES, own) == COMMANDS  # the era is the recipe's, not here
    assert relaxed(COMMANDS, "ranges", FILES, own) == (
        UPGRADE,
        "pip install 'urllib3~=1.20' 'requests~=2.31' lightning -e .",
        "pip install 'x~=1.0'",
        RELINK,
        RUNNER,
    )
    assert relaxed(COMMANDS, "unpinned", FILES, own) == (
        UPGRADE,
        "pip install urllib3 requests lightning -e .",
        "pip install x",
        RELINK,
        RUNNER,
    )
    assert relaxed(COMMANDS, "no-deps", FILES, own) == (
        UPGRADE,
        "pip install --no-deps numpy attrs",  # the project's own, unpinned, before it
        "pip install --no-deps urllib3 requests lightning -e .",
        "pip install --no-deps x",
        RELINK,
        RUNNER,
    )


# --- lock files and VCS requirements at detection ------------------------------------------------

UV_LOCK = """\
version = 1
requires-python = ">=3.9"
resolution-markers = ["python_full_version >= '3.10'", "python_full_version < '3.10'"]

[[package]]
name = "widget"
version = "0.1.0"
source = { editable = "." }
dependencies = [
    { name = "attrs" },
    { name = "colorama", marker = "sys_platform == 'win32'" },
    { name = "numpy", version = "2.0.2", source = { registry = "https://pypi.org/simple" }, marker = "python_full_version < '3.10'" },
    { name = "numpy", version = "2.2.1", source = { registry = "https://pypi.org/simple" }, marker = "python_full_version >= '3.10'" },
    { name = "tool", marker = "sys_platform == 'linux'" },
]

[[package]]
name = "attrs"
version = "24.2.0"
source = { registry = "https://pypi.org/simple" }

[[package]]
name = "colorama"
version = "0.4.6"
source = { registry = "https://pypi.org/simple" }

[[package]]
name = "numpy"
version = "2.0.2"
source = { registry = "https://pypi.org/simple" }
resolution-markers = ["python_full_version < '3.10'"]

[[package]]
name = "numpy"
version = "2.2.1"
source = { registry = "https://pypi.org/simple" }
resolution-markers = ["python_full_version >= '3.10'"]

[[package]]
name = "tool"
version = "1.0"
source = { git = "https://github.com/org/tool?rev=abc#abc" }
"""  # noqa: E501

POETRY_LOCK = """\
[[package]]
name = "Attrs"
version = "23.1.0"
description = ""
optional = false
python-versions = ">=3.7"

[[package]]
name = "pywin32"
version = "306"
optional = false
python-versions = "*"
markers = "sys_platform == \\"win32\\""

[[package]]
name = "inhouse"
version = "2.0"
optional = false
python-versions = "*"

[package.source]
type = "legacy"
url = "https://pypi.internal.example/simple"
reference = "corp"

[metadata]
lock-version = "2.0"
python-versions = "^3.9"
"""

PDM_LOCK = """\
[metadata]
groups = ["default", "test"]

[[package]]
name = "pluggy"
version = "1.5.0"
requires_python = ">=3.8"

[[package]]
name = "widget-tools"
version = "0.3"
git = "https://github.com/org/widget-tools.git"
revision = "abc"
"""


def test_locks_export_the_pins_the_project_resolved_to() -> None:
    """Markers hold for Linux and the chosen Python; the project, git and private-index
    packages and Windows-only ones are left out."""
    assert locked_pins("uv.lock", UV_LOCK, "3.11", "widget") == ["attrs==24.2.0", "numpy==2.2.1"]
    assert locked_pins("uv.lock", UV_LOCK, "3.9", "widget") == ["attrs==24.2.0", "numpy==2.0.2"]
    assert locked_pins("poetry.lock", POETRY_LOCK, "3.11", None) == ["Attrs==23.1.0"]
    assert locked_pins("pdm.lock", PDM_LOCK, "3.11", None) == ["pluggy==1.5.0"]
    assert locked_pins("uv.lock", "not = [toml", "3.11", None) == []


def test_a_lock_file_is_the_first_install_set(tmp_path: Path) -> None:
    pyproject = (
        '[build-system]\nrequires = ["setuptools"]\nbuild-backend = "setuptools.build_meta"\n'
        '[project]\nname = "widget"\nversion = "1"\ndependencies = ["attrs"]\n'
    )
    sha = commit(tmp_path, {"pyproject.toml": pyproject, "uv.lock": UV_LOCK})
    profile = detect_profile(str(tmp_path), sha, REPO)
    assert profile.install_set == "lock"
    assert profile.install[1:3] == ("pip install attrs==24.2.0 numpy==2.2.1", RELINK)
    assert decode_set(profile.alternatives[0]).name == "tests+tox/nox"


def test_a_requirements_file_with_hashes_installs_as_it_is(tmp_path: Path) -> None:
    digest = "8abb2f1d86890a2dfb989f9a77cfcfd3e47c2a354b01111771326f8aa26e0254"
    hashed = f"six==1.16.0 \\\n    --hash=sha256:{digest}\n"
    sha = commit(tmp_path, {"requirements.txt": hashed})
    profile = detect_profile(str(tmp_path), sha, REPO)
    assert "pip install -r requirements.txt" in profile.install  # pip checks every hash


def test_a_git_url_requirement_installs_its_pypi_release(tmp_path: Path) -> None:
    files = {
        "requirements.txt": "six @ git+https://github.com/benjaminp/six\n"
        "git+https://github.com/org/private-thing.git\n",
    }
    sha = commit(tmp_path, files)
    install = detect_profile(str(tmp_path), sha, REPO).install
    assert "pip install six" in install
    assert not any("git+" in c or "private-thing" in c for c in install)


# --- the CLI, end to end ------------------------------------------------------------------------

SIX_TESTS = """\
import six

from {pkg}.core import clamp


def test_six_text_type():
    assert six.text_type("a") == "a"


def test_clamp_with_six():
    assert clamp(six.MAXSIZE, 0, 3) == 3
"""

# requests 2.31.0 (May 2023) asks for urllib3>=1.21.1,<3; the project also pins urllib3==1.20
# (2017), as a requirements file that grew over the years does. The two exact pins never resolve
# together, at the commit's date or today; the compatible range urllib3~=1.20 does (1.26.x).
PINS = "requests==2.31.0\nurllib3==1.20\n"
REQUESTS_TESTS = """\
import requests
import urllib3

from {pkg}.core import total


def test_requests_has_its_urllib3():
    assert urllib3.__version__.startswith("1.26")
    assert requests.__version__ == "2.31.0"


def test_total_of_versions():
    assert total([1, 2]) == 3
"""

# A C extension that includes <yaml.h> and links libyaml: the base image has neither a compiler
# nor the header, and the log of each failed build says which one it lacks.
SETUP_PY = """\
from setuptools import Extension, setup

setup(
    name="yamlver",
    version="0.1",
    packages=["yamlver"],
    ext_modules=[Extension("yamlver._v", ["yamlver/v.c"], libraries=["yaml"])],
)
"""
C_SOURCE = """\
#include <Python.h>
#include <yaml.h>

static PyObject *version(PyObject *self, PyObject *args) {
    return PyUnicode_FromString(yaml_get_version_string());
}

static PyMethodDef methods[] = {{"version", version, METH_NOARGS, ""}, {NULL, NULL, 0, NULL}};
static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_v", NULL, -1, methods};

PyMODINIT_FUNC PyInit__v(void) { return PyModule_Create(&module); }
"""
YAML_TESTS = """\
from yamlver import _v
from yamlver.core import parse_pair


def test_libyaml_answers():
    assert _v.version().startswith("0.")


def test_parse_pair():
    assert parse_pair("1,2") == (1, 2)
"""

MISSING = "trajforge-h3-no-such-dist==1.0.0"  # on no index: nothing can make it install


def build_repos(root: Path) -> dict[str, Path]:
    """Four repositories, each with the core suite (bugs to inject) plus its own trouble."""
    made = {}
    git_dep = {
        "requirements.txt": "six @ git+https://github.com/benjaminp/six\n",
        "tests/test_six.py": SIX_TESTS,
    }
    c_header = {"setup.py": SETUP_PY, "yamlver/v.c": C_SOURCE, "tests/test_v.py": YAML_TESTS}
    for name, start, files in (
        (
            "old_pins",
            "2023-06-01",
            {"requirements.txt": PINS, "tests/test_deps.py": REQUESTS_TESTS},
        ),
        ("git_dep", "2026-06-01", git_dep),
        ("c_header", "2026-06-01", c_header),
        ("no_dist", "2026-06-01", {"requirements.txt": f"{MISSING}\n"}),
    ):
        pkg = "yamlver" if name == "c_header" else name.replace("_", "")
        body = {k: v.replace("{pkg}", pkg) for k, v in files.items()}
        repo = DatedRepo(root / name, start)
        repo.commit(f"{name}: clamps, totals and pairs", {**package(pkg), **body})
        made[name] = root / name
    return made


@pytest.mark.docker
@pytest.mark.usefixtures("docker_engine")
def test_installs_get_through_and_failures_say_why(tmp_path: Path) -> None:
    repos = build_repos(tmp_path / "repos")
    params = tmp_path / "params.yaml"
    params.write_text(
        f"cache_dir: {tmp_path / 'cache'}\n"
        "validate:\n  test_timeout_s: 60\n  workers: 2\n  gold_runs: 0\n"
        "environment:\n  pythons: ['3.11']\n"
        "inject:\n  combos: 0\n"  # installs are the point: no combinations of bugs
    )
    sources = [arg for path in repos.values() for arg in ("--repo", str(path))]
    inject = run_cli(
        "inject", *sources, "--max-candidates", "2", "--seed", "0",
        "--params", str(params), "--output", str(tmp_path / "inject"), cwd=tmp_path,
    )  # fmt: skip
    assert inject.returncode == 0, inject.stderr
    validate = run_cli(
        "validate", "--input", str(tmp_path / "inject"), "--output", str(tmp_path / "val"),
        "--params", str(params), cwd=tmp_path,
    )  # fmt: skip
    assert validate.returncode == 0, validate.stderr
    tasks = pl.read_parquet(tmp_path / "val" / "tasks" / "*.parquet")
    per_repo = tasks.group_by("repo").len().to_dicts()
    counts = {row["repo"]: row["len"] for row in per_repo}
    for name in ("old_pins", "git_dep", "c_header"):
        assert counts.get(f"local/{name}", 0) >= 1, (name, counts)

    profiles = {
        row["repo"]: row
        for row in pl.read_parquet(tmp_path / "val" / "profiles" / "*.parquet").to_dicts()
        if row["status"] == "built"
    }
    pins = profiles["local/old_pins"]
    assert pins["relaxation"] == "ranges" and pins["resolved_as_of"] == "2023-06-02", pins
    assert [a.split(": ", 1)[1] for a in pins["attempts"]] == [
        "ResolutionImpossible: requested urllib3==1.20 vs requests 2.31.0 depends on "
        "urllib3<3 and >=1.21.1"
    ] * 2  # as declared, then as of the commit's date
    assert profiles["local/git_dep"]["relaxation"] == "declared"
    assert "pip install six" in profiles["local/git_dep"]["install"]
    header = profiles["local/c_header"]
    assert {"build-essential", "libyaml-dev"} <= set(header["system_packages"]), header
    assert [a.split(": ", 1)[1] for a in header["attempts"]] == [
        "no C compiler in the image (x86_64-linux-gnu-gcc; build-essential, python3-dev)",
        "missing header yaml.h (libyaml-dev)",
    ]

    # What cannot install ends with one counted line naming the requirement and why; the raw
    # log (Docker's echo of the script and all) stays in the build log file.
    rejections = pl.read_parquet(tmp_path / "val" / "rejections" / "*.parquet").to_dicts()
    failed = [r for r in rejections if r["reason"] == "install_failed"]
    assert failed and all("no_dist" in r["detail"] for r in failed), failed
    line = failed[0]["detail"]
    assert re.fullmatch(
        r"local/no_dist: nothing installs for profile [0-9a-f]{16} \(tests\+tox/nox: No "
        rf"matching distribution found for {re.escape(MISSING)} \(the index has no release of "
        r"it for Python 3\.11\)\) \(raw log: <cache_dir>/build-logs/[0-9a-f]{16}\.log\)",
        line,
    ), line
    profile_id = re.search(r"profile ([0-9a-f]{16})", line).group(1)
    raw = (tmp_path / "cache" / "build-logs" / f"{profile_id}.log").read_text()
    assert "/bin/sh -ec" in raw and MISSING in raw
    summary = json.loads((tmp_path / "val" / "summary.json").read_text())
    assert summary["rejected"]["install_failed"] == len(failed)
