"""detect_profile on real git repositories built in tmp_path (no mocks)."""

from __future__ import annotations

import os
import subprocess
import textwrap
from pathlib import Path

import pytest
from trajforge.generators.environments.commit_files import ProfileError
from trajforge.generators.environments.dependency_layer import RELINK
from trajforge.generators.languages.python.install_sets import INSTALL_PYTEST, UPGRADE_PIP
from trajforge.generators.languages.python.profile import TEST_CMD, detect_profile
from trajforge.schemas.errors import UserError

pytestmark = [pytest.mark.docker, pytest.mark.podman]

REPO = "acme/widget"


def _git(repo: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@example.com", *args],
        cwd=repo,
        check=True,
        capture_output=True,
        text=True,
        env={**os.environ, "GIT_CONFIG_NOSYSTEM": "1", "HOME": str(repo)},
    )
    return done.stdout.strip()


def commit(repo: Path, files: dict[str, str | None], message: str = "change") -> str:
    """Write (or delete, for None) files and commit them; returns the commit id."""
    if not (repo / ".git").exists():
        repo.mkdir(parents=True, exist_ok=True)
        _git(repo, "init", "-q")
    for name, text in files.items():
        path = repo / name
        if text is None:
            path.unlink()
            continue
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))
    _git(repo, "add", "-A")
    _git(repo, "commit", "-q", "--allow-empty", "-m", message)
    return _git(repo, "rev-parse", "HEAD")


def detect(repo: Path, sha: str, **kwargs: object) -> tuple[str, ...]:
    return detect_profile(str(repo), sha, REPO, **kwargs).install  # type: ignore[arg-type]


PYPROJECT_TEST_EXTRA = """\
    [build-system]
    requires = ["setuptools>=68"]
    build-backend = "setuptools.build_meta"

    [project]
    name = "widget"
    version = "1.0.0"
    requires-python = ">=3.9"
    dependencies = ["requests>=2"]

    [project.optional-dependencies]
    test = ["pytest>=7", "hypothesis"]
    docs = ["sphinx"]
    """


def test_pyproject_with_test_extra(tmp_path: Path) -> None:
    sha = commit(tmp_path, {"pyproject.toml": PYPROJECT_TEST_EXTRA, "widget/__init__.py": ""})
    profile = detect_profile(str(tmp_path), sha, REPO)
    assert profile.install == (UPGRADE_PIP, "pip install -e '.[test]'", INSTALL_PYTEST)
    assert profile.python == "3.11"
    assert profile.test_cmd == TEST_CMD
    assert TEST_CMD.endswith("--junitxml=/tmp/trajforge-junit.xml")
    assert len(profile.profile_id) == 16
    int(profile.profile_id, 16)
    assert profile.image == f"trajforge-env:{profile.profile_id}"
    assert (profile.status, profile.log, profile.setup_commit, profile.repo) == (
        "detected",
        "python 3.11: requires-python >=3.9",  # the evidence that chose the Python
        sha,
        REPO,
    )


def test_several_extras_keep_test_names_order(tmp_path: Path) -> None:
    pyproject = """\
        [project]
        name = "widget"
        version = "1"
        [project.optional-dependencies]
        Dev = ["ruff"]
        testing = ["pytest"]
        """
    sha = commit(tmp_path, {"pyproject.toml": pyproject})
    assert detect(tmp_path, sha)[1] == "pip install -e '.[testing,Dev]'"


def test_setup_py_only(tmp_path: Path) -> None:
    setup_py = """\
        from setuptools import setup
        setup(
            name="widget",
            version="0.3",
            python_requires=">=3.7",
            install_requires=["six"],
            extras_require={"testing": ["pytest", "mock"], "docs": ["sphinx"]},
        )
        """
    sha = commit(tmp_path, {"setup.py": setup_py, "widget.py": ""})
    profile = detect_profile(str(tmp_path), sha, REPO)
    assert profile.install == (UPGRADE_PIP, "pip install -e '.[testing]'", INSTALL_PYTEST)
    assert profile.python == "3.11"


def test_setup_py_extras_through_a_variable(tmp_path: Path) -> None:
    setup_py = """\
        import setuptools
        EXTRAS = dict(tests=["pytest"], lint=["flake8"])
        EXTRAS["dev"] = EXTRAS["tests"] + ["tox"]
        setuptools.setup(name="widget", extras_require=EXTRAS)
        """
    sha = commit(tmp_path, {"setup.py": setup_py})
    assert detect(tmp_path, sha) == (UPGRADE_PIP, "pip install -e '.[tests,dev]'", INSTALL_PYTEST)


def test_setup_py_without_extras_installs_plain(tmp_path: Path) -> None:
    sha = commit(tmp_path, {"setup.py": "from setuptools import setup\nsetup(name='w')\n"})
    assert detect(tmp_path, sha) == (UPGRADE_PIP, "pip install -e .", INSTALL_PYTEST)


def test_setup_cfg_extras_and_python_requires(tmp_path: Path) -> None:
    setup_cfg = """\
        [metadata]
        name = widget
        version = 2.0
        [options]
        python_requires = >=3.12
        install_requires =
            attrs
        [options.extras_require]
        test =
            pytest
        """
    files = {"setup.cfg": setup_cfg, "pyproject.toml": "[tool.black]\nline-length = 90\n"}
    sha = commit(tmp_path, files)
    profile = detect_profile(str(tmp_path), sha, REPO, pythons=("3.11", "3.12", "3.13"))
    assert profile.python == "3.13"
    assert profile.install == (UPGRADE_PIP, "pip install -e '.[test]'", INSTALL_PYTEST)


def test_requirements_tox_and_nox(tmp_path: Path) -> None:
    tox_ini = """\
        [tox]
        envlist = py38,py311,django32
        [testenv]
        deps =
            -r{toxinidir}/requirements-dev.txt
            -cconstraints.txt
            mock>=4  # comment
            py38: importlib-metadata
            py311: tomli-w
            !py38: exceptiongroup
            django32: Django<3.3
            django40: Django<4.1
            {[base]deps}
            .
        commands = pytest
        """
    noxfile = """\
        import nox
        TEST_DEPS = ["pytest-cov", "coverage[toml]"]

        @nox.session(python=["3.11"])
        def tests(session):
            session.install("-r", "requirements/test.txt")
            session.install("-e", ".", "freezegun==1.2", *TEST_DEPS)
            session.run("pytest")

        @nox.session
        def lint(session):
            session.install("ruff==0.1")
        """
    files = {
        "requirements.txt": "requests\n",
        "requirements-dev.txt": "-r requirements.txt\npytest-xdist\n",
        "requirements-docs.txt": "sphinx\n",
        "requirements/test.txt": "pytest>=7\n",
        "constraints.txt": "urllib3<3\n",
        "tox.ini": tox_ini,
        "noxfile.py": noxfile,
        "widget.py": "",
    }
    sha = commit(tmp_path, files)
    assert detect(tmp_path, sha) == (
        UPGRADE_PIP,
        "pip install -r requirements.txt",
        "pip install -r requirements-dev.txt",
        "pip install -r requirements/test.txt",
        "pip install 'mock>=4' tomli-w exceptiongroup 'Django<3.3'",
        "pip install freezegun==1.2 pytest-cov 'coverage[toml]'",
        INSTALL_PYTEST,
    )


def test_tox_factor_for_chosen_python(tmp_path: Path) -> None:
    tox_ini = "[testenv]\ndeps =\n    py3.13: numpy>=2\n    py311: numpy<2\n"
    files = {"tox.ini": tox_ini, "pyproject.toml": '[project]\nrequires-python=">=3.12"\n'}
    sha = commit(tmp_path, files)
    install = detect(tmp_path, sha, pythons=("3.11", "3.13"))
    assert "pip install 'numpy>=2'" in install
    assert not any("numpy<2" in c for c in install)


def test_dependency_groups_with_include_group(tmp_path: Path) -> None:
    pyproject = """\
        [project]
        name = "widget"
        version = "1"

        [dependency-groups]
        test = ["pytest>=8", {include-group = "typing"}, "coverage"]
        typing = ["mypy", {include-group = "test"}]
        dev = [{include-group = "test"}, "ruff"]
        lint = ["black"]
        """
    sha = commit(tmp_path, {"pyproject.toml": pyproject})
    assert detect(tmp_path, sha) == (
        UPGRADE_PIP,
        "pip install -e .",
        "pip install 'pytest>=8' coverage",  # test alone: typing's mypy and dev's ruff are tools
        RELINK,
        INSTALL_PYTEST,
    )


def test_no_packaging_at_all(tmp_path: Path) -> None:
    files = {"widget/__init__.py": "X = 1\n", "tests/test_widget.py": "def test_x(): pass\n"}
    sha = commit(tmp_path, files)
    profile = detect_profile(str(tmp_path), sha, REPO)
    assert profile.install == (UPGRADE_PIP, INSTALL_PYTEST)
    assert profile.python == "3.11"


def test_no_supported_python_raises(tmp_path: Path) -> None:
    sha = commit(tmp_path, {"pyproject.toml": '[project]\nname="w"\nrequires-python = "<3.10"\n'})
    with pytest.raises(ProfileError) as caught:
        detect_profile(str(tmp_path), sha, REPO, pythons=("3.11",))
    message = str(caught.value)
    assert isinstance(caught.value, UserError)
    assert caught.value.reason == "no_supported_python"
    assert f"{REPO}@{sha}" in message
    assert "<3.10" in message
    assert "3.11" in message


def test_highest_supported_python_when_default_excluded(tmp_path: Path) -> None:
    sha = commit(tmp_path, {"pyproject.toml": '[project]\nname="w"\nrequires-python = ">=3.12"\n'})
    profile = detect_profile(str(tmp_path), sha, REPO, pythons=("3.11", "3.13"))
    assert profile.python == "3.13"
    wide = commit(tmp_path, {"pyproject.toml": '[project]\nname="w"\nrequires-python = ">=3.9"\n'})
    assert detect_profile(str(tmp_path), wide, REPO, pythons=("3.11", "3.13")).python == "3.11"


def test_python_requires_regex_and_unparseable_spec(tmp_path: Path) -> None:
    setup_py = "from setuptools import setup\nsetup(name='w', python_requires='>=3.12')\n"
    sha = commit(tmp_path, {"setup.py": setup_py})
    assert detect_profile(str(tmp_path), sha, REPO, pythons=("3.12",)).python == "3.12"
    odd = commit(tmp_path, {"pyproject.toml": '[project]\nname="w"\nrequires-python = "3 or so"\n'})
    assert detect_profile(str(tmp_path), odd, REPO).python == "3.11"


def test_profile_id_ignores_version_bumps(tmp_path: Path) -> None:
    setup_py = """\
        from setuptools import setup
        __version__ = "{v}"
        setup(name="widget", version=__version__, install_requires=["six"])
        """
    first = commit(
        tmp_path,
        {
            "pyproject.toml": PYPROJECT_TEST_EXTRA,
            "setup.py": setup_py.format(v="1.0.0"),
            "widget/__init__.py": "",
        },
    )
    bumped = commit(
        tmp_path,
        {
            "pyproject.toml": PYPROJECT_TEST_EXTRA.replace('"1.0.0"', '"1.0.1"'),
            "setup.py": setup_py.format(v="1.0.1"),
            "CHANGELOG.md": "1.0.1\n",
        },
        "release 1.0.1",
    )
    with_dep = commit(
        tmp_path,
        {"pyproject.toml": PYPROJECT_TEST_EXTRA.replace('"requests>=2"', '"requests>=2", "rich"')},
    )
    new_setup_dep = commit(
        tmp_path,
        {"setup.py": setup_py.format(v="1.0.1").replace('["six"]', '["six", "attrs"]')},
    )
    ids = [detect_profile(str(tmp_path), c, REPO).profile_id for c in (first, bumped)]
    assert ids[0] == ids[1]
    assert detect_profile(str(tmp_path), with_dep, REPO).profile_id != ids[0]
    later = [detect_profile(str(tmp_path), c, REPO).profile_id for c in (with_dep, new_setup_dep)]
    assert later[0] != later[1]
    assert detect_profile(str(tmp_path), first, "other/repo").profile_id != ids[0]


def test_profile_id_follows_included_requirements(tmp_path: Path) -> None:
    files = {
        "requirements-test.txt": "-r ci/base.txt\npytest\n",
        "ci/base.txt": "requests\n",
    }
    first = commit(tmp_path, files)
    changed = commit(tmp_path, {"ci/base.txt": "requests\nurllib3<2\n"})
    docs_only = commit(tmp_path, {"requirements-docs.txt": "sphinx\n"})
    assert detect(tmp_path, first) == (
        UPGRADE_PIP,
        "pip install -r requirements-test.txt",
        INSTALL_PYTEST,
    )
    ids = [detect_profile(str(tmp_path), c, REPO).profile_id for c in (first, changed, docs_only)]
    assert ids[0] != ids[1]
    assert ids[1] == ids[2]


def test_malformed_files_do_not_crash(tmp_path: Path) -> None:
    files = {
        "pyproject.toml": "[project\nname = \n",
        "setup.cfg": "[options\npython_requires = >=3.99\n",
        "tox.ini": "deps = before any section\n",
        "noxfile.py": "def broken(:\n",
        "requirements.txt": "requests\n",
    }
    sha = commit(tmp_path, files)
    profile = detect_profile(str(tmp_path), sha, REPO)
    assert profile.python == "3.11"
    assert profile.install == (UPGRADE_PIP, "pip install -r requirements.txt", INSTALL_PYTEST)


def test_wrongly_typed_pyproject_does_not_crash(tmp_path: Path) -> None:
    pyproject = """\
        project = "oops"
        dependency-groups = {test = "pytest", dev = [1, {include-group = 2}, "ruff"]}
        [build-system]
        requires = "setuptools"
        """
    sha = commit(tmp_path, {"pyproject.toml": pyproject})
    assert detect(tmp_path, sha) == (
        UPGRADE_PIP,
        "pip install -e .",  # "test" is not a list, and dev is only used when no test group is
        INSTALL_PYTEST,
    )


def test_unknown_commit_is_a_user_error(tmp_path: Path) -> None:
    commit(tmp_path, {"a.py": ""})
    with pytest.raises(ProfileError) as caught:
        detect_profile(str(tmp_path), "0" * 40, REPO)
    assert caught.value.reason == "unreadable_commit"


def test_profile_id_ignores_tox_and_nox_edits_outside_installs(tmp_path: Path) -> None:
    tox_ini = (
        "[tox]\nenvlist = {envs}\n[testenv]\ndeps =\n    mock\ncommands = pytest {{posargs}}\n"
    )
    noxfile = 'import nox\n@nox.session\ndef tests(session):\n    session.install("{dep}")\n'
    first = commit(
        tmp_path,
        {"tox.ini": tox_ini.format(envs="py311"), "noxfile.py": noxfile.format(dep="attrs")},
    )
    edited = commit(
        tmp_path,
        {
            "tox.ini": tox_ini.format(envs="py311,py312"),
            "noxfile.py": noxfile.format(dep="attrs") + "\n@nox.session\ndef lint(s):\n    pass\n",
        },
    )
    new_dep = commit(tmp_path, {"noxfile.py": noxfile.format(dep="cattrs")})
    ids = [detect_profile(str(tmp_path), c, REPO).profile_id for c in (first, edited, new_dep)]
    assert ids[0] == ids[1] != ids[2]


def test_profile_id_sees_dependency_on_a_line_that_mentions_version(tmp_path: Path) -> None:
    setup_py = (
        'from setuptools import setup\nsetup(name="w", version="{v}", install_requires={deps})\n'
    )
    marker = "\"tomli; python_version < '3.11'\""
    first = commit(tmp_path, {"setup.py": setup_py.format(v="1", deps=f"[{marker}]")})
    bumped = commit(tmp_path, {"setup.py": setup_py.format(v="2", deps=f"[{marker}]")})
    more = commit(tmp_path, {"setup.py": setup_py.format(v="2", deps=f'[{marker}, "six"]')})
    ids = [detect_profile(str(tmp_path), c, REPO).profile_id for c in (first, bumped, more)]
    assert ids[0] == ids[1] != ids[2]
