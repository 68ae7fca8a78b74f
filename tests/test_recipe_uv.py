"""The recipe's install: uv for every step with pip as the fallback, versions without git, the
era, system packages, and repair steps that reuse the main install's layer. Real Docker builds
of tiny packages through trajforge's own builder (``build_recipe``)."""

from __future__ import annotations

import json
import os
import subprocess
import uuid
from pathlib import Path

import pytest
from repo_factory import RepoBuilder
from trajforge.generators.environments.image import build_recipe
from trajforge.generators.environments.recipe import (
    add_step,
    build_context,
    marker,
    render_dockerfile,
)
from trajforge.schemas.params import EnvironmentParams
from trajforge.verifiers.sandbox.base import SessionSpec
from trajforge.verifiers.sandbox.docker import DockerSandbox
from trajforge.verifiers.sandbox.git_tree import archive

pytestmark = [pytest.mark.docker, pytest.mark.podman]

PARAMS = EnvironmentParams(build_timeout_s=600)
TEST = "def test_version():\n    import importlib.metadata as m\n    assert m.version('{0}')\n"


def _project(name: str, build_system: str, tool: str = "", version: str = "dynamic") -> str:
    declared = 'dynamic = ["version"]' if version == "dynamic" else f'version = "{version}"'
    return f'{build_system}\n[project]\nname = "{name}"\n{declared}\n{tool}'


# One package per VCS-version backend, each taking its version from git, in a tree with no .git.
VERSIONED = {
    "pyproject.toml": _project(
        "by-versioningit",
        '[build-system]\nrequires = ["setuptools>=64", "versioningit>=3"]\n'
        'build-backend = "setuptools.build_meta"\n',
        '[tool.versioningit]\n[tool.versioningit.write]\nfile = "by_vit/_version.py"\n'
        '[tool.setuptools]\npackages = ["by_vit"]\n',
    ),
    # the package imports the file versioningit's write step would make (EnvBench's improv)
    "by_vit/__init__.py": "from ._version import __version__\n",
    "scm/pyproject.toml": _project(
        "by-scm",
        '[build-system]\nrequires = ["setuptools>=64", "setuptools-scm>=8"]\n'
        'build-backend = "setuptools.build_meta"\n',
        '[tool.setuptools_scm]\nversion_file = "by_scm/_version.py"\n',
    ),
    "scm/by_scm/__init__.py": "",
    "hatch/pyproject.toml": _project(
        "by-hatch-vcs",
        '[build-system]\nrequires = ["hatchling", "hatch-vcs"]\n'
        'build-backend = "hatchling.build"\n',
        '[tool.hatch.version]\nsource = "vcs"\n[tool.hatch.build.targets.wheel]\n'
        'packages = ["by_hatch"]\n',
    ),
    "hatch/by_hatch/__init__.py": "",
    "pdm/pyproject.toml": _project(
        "by-pdm",
        '[build-system]\nrequires = ["pdm-backend"]\nbuild-backend = "pdm.backend"\n',
        '[tool.pdm.version]\nsource = "scm"\n',
    ),
    "pdm/src/by_pdm/__init__.py": "",
    "versioneer/setup.py": (
        "import versioneer\nfrom setuptools import setup\n"
        "setup(name='by-versioneer', version=versioneer.get_version(), "
        "cmdclass=versioneer.get_cmdclass(), packages=['by_versioneer'])\n"
    ),
    "versioneer/pyproject.toml": (
        '[build-system]\nrequires = ["setuptools>=64", "versioneer[toml]"]\n'
        'build-backend = "setuptools.build_meta"\n[tool.versioneer]\nVCS = "git"\n'
        'style = "pep440"\nversionfile_source = "by_versioneer/_version.py"\n'
        'versionfile_build = "by_versioneer/_version.py"\ntag_prefix = ""\n'
    ),
    "versioneer/by_versioneer/__init__.py": "",
    "tests/test_versions.py": "".join(
        TEST.format(name).replace("test_version", f"test_{name.replace('-', '_')}")
        for name in ("by-scm", "by-hatch-vcs", "by-pdm", "by-versioneer", "by-versioningit")
    )
    + "def test_by_vit_imports():\n    import by_vit\n\n    assert by_vit.__version__\n",
}
VERSIONED_INSTALL = (
    "pip install -e .",
    "pip install -e ./scm",
    "pip install ./hatch",
    "pip install ./pdm",
    "pip install ./versioneer",
    "pip install --prefer-binary iniconfig",  # an option uv does not know: pip installs it
    "pip install 'pytest<9'",
)


def _build(repo: Path, commit: str, tag: str, recipe: str) -> tuple[bool, str]:
    sandbox = DockerSandbox()
    try:
        result = build_recipe(sandbox, tag, recipe, "test", commit, str(repo), PARAMS)
    finally:
        sandbox.close()
    return result.ok, result.log


def _run(tag: str, repo: Path, commit: str, command: str) -> tuple[int, str]:
    """``command`` in the image, with the repository's git tree at /repo, no network."""
    sandbox = DockerSandbox()
    try:
        with sandbox.session(SessionSpec(image=tag)) as session:
            session.put_archive(archive(str(repo), commit, prefix="repo/"))
            result = session.exec(command, timeout_s=120)
    finally:
        sandbox.close()
    return result.exit_code, result.output


@pytest.fixture(scope="module")
def versioned(docker_engine, tmp_path_factory):
    """One image of a tree with five VCS-versioned packages and no .git (one build for all)."""
    path = tmp_path_factory.mktemp("versioned") / "repo"
    builder = RepoBuilder(path)
    # a tree of its own, so this build installs (no other run's cached layers stand in for it)
    files = {**VERSIONED, "NONCE": uuid.uuid4().hex}
    commit = builder.commit("five backends that read a version from git", files)
    recipe = render_dockerfile("3.11", VERSIONED_INSTALL)
    tag = "trajforge-test-uv:versioned"
    ok, log = _build(path, commit, tag, recipe)
    assert ok, log[-3000:]
    yield path, commit, tag, recipe, log
    subprocess.run(["docker", "rmi", "-f", tag], capture_output=True, check=False)


def test_vcs_versioned_packages_build_without_git_and_their_tests_pass(versioned):
    path, commit, tag, _, _ = versioned
    code, output = _run(tag, path, commit, "python -m pytest -q -p no:cacheprovider tests")
    assert code == 0, output[-2000:]
    assert "6 passed" in output
    versions = "import importlib.metadata as m; print(*(m.version(n) for n in {names}))".format(
        names=("by-scm", "by-hatch-vcs", "by-pdm", "by-versioneer", "by-versioningit")
    )
    code, output = _run(tag, path, commit, f'python -c "{versions}"')
    assert code == 0, output
    # the fixed pretend version everywhere; versioneer falls back to its own "no version"
    assert output.split() == ["0.0.0", "0.0.0", "0.0.0", "0+unknown", "0.0.0"]


def test_uv_installs_and_pip_takes_over_a_step_uv_refuses(versioned):
    *_, build_log = versioned
    # The step's own stream: the shell's trace (`+ echo 'trajforge: uv installed: ...'`) is on
    # stderr, which the engine interleaves with stdout in the load's order, so a trace line can
    # land after the uv error it preceded (CI, stop 50) and be taken for the marker.
    log = "\n".join(line for line in build_log.splitlines() if not line.startswith("+"))
    assert "trajforge: uv installed: -e ./scm" in log
    assert "trajforge: uv installed: pytest<9" in log
    assert "trajforge: uv failed, pip installs: --prefer-binary iniconfig" in log
    assert "trajforge: pip installed: --prefer-binary iniconfig" in log
    # In the order the step ran, whatever the load: uv's refusal, the marker, pip's install.
    # Both installers write into the markers' stream; across the two streams the engine's order
    # is the load's, and a cause read after the marker was uv's in one run and pip's in another.
    marker = log.index("trajforge: uv failed, pip installs: --prefer-binary iniconfig")
    done = log.index("trajforge: pip installed: --prefer-binary iniconfig")
    uv_said = log[:marker].rsplit("trajforge: uv installed", 1)[-1]
    assert "error: unexpected argument '--prefer-binary'" in uv_said
    assert "Requirement already satisfied: iniconfig" in log[marker:done]


def test_the_scm_version_file_is_carried_and_pkg_info_is_not(versioned):
    """setuptools-scm's generated file reaches the image's /repo; versioningit's PKG-INFO, a
    build input trajforge wrote, does not."""
    *_, tag, _, _ = versioned
    files = subprocess.run(
        ["docker", "run", "--rm", "--network", "none", tag, "sh", "-c", "find /repo -type f"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    assert "/repo/scm/by_scm/_version.py" in files
    assert "/repo/by_vit/_version.py" in files  # versioningit's write file, made if missing
    assert "/repo/PKG-INFO" not in files


def _build_stage(recipe: str, repo: Path, commit: str, tag: str, context: Path) -> list[str]:
    """The recipe's build stage built by the same (classic) builder; its layers' diff ids."""
    context.mkdir(parents=True, exist_ok=True)
    ca = Path(PARAMS.ca_bundle or os.devnull).read_bytes()  # what build_recipe gives the build
    tar = build_context(archive(str(repo), commit, prefix="repo/"), ca, marker("test", commit))
    subprocess.run(["tar", "-x", "-C", str(context)], input=tar, check=True)
    (context / "Dockerfile").write_text(recipe)
    env = {**os.environ, "DOCKER_BUILDKIT": "0"}
    done = subprocess.run(
        ["docker", "build", "-q", "--target", "build", "-t", tag, str(context)],
        capture_output=True, text=True, check=False, env=env,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    inspect = subprocess.run(
        ["docker", "image", "inspect", tag], capture_output=True, text=True, check=True
    )
    return json.loads(inspect.stdout)[0]["RootFS"]["Layers"]


def test_a_repair_step_reuses_the_main_install_layer(versioned, tmp_path):
    """A repair round's recipe is the last good one plus one RUN: the builder reuses every
    layer before it (the same diff ids: a rebuilt install would write new bytes), so the round
    pays only for its own step."""
    path, commit, tag, recipe, _ = versioned
    repaired = add_step(recipe, ["pip install six", "pip install 'pytest<9'"])
    delta = next(line for line in recipe.split("\n") if "python3 - delta <<" in line)
    assert repaired.startswith(recipe.split(delta)[0])  # the step goes before the delta
    try:
        ok, log = _build(path, commit, f"{tag}-repaired", repaired)
        assert ok, log[-2000:]
        assert "trajforge: uv installed: six" in log
        assert "trajforge: uv installed: -e ./scm" not in log  # the main install ran no more
        main = _build_stage(recipe, path, commit, f"{tag}-stage", tmp_path / "a")
        step = _build_stage(repaired, path, commit, f"{tag}-repaired-stage", tmp_path / "b")
        # every layer up to the main install is shared; the delta after the step is its own
        assert step[: len(main) - 1] == main[:-1]
        assert len(step) == len(main) + 1
    finally:
        for name in (f"{tag}-stage", f"{tag}-repaired-stage", f"{tag}-repaired"):
            subprocess.run(["docker", "rmi", "-f", name], capture_output=True, check=False)


def test_the_era_and_system_packages(docker_engine, tmp_path):
    """``exclude_newer`` resolves as of its date: iniconfig 2.0.0 came out in January 2023, so
    2022 gets 1.1.1. ``apt`` installs libyaml-dev in the build stage and its shared library
    (libyaml-0-2, Debian section libs) in the final image, not the headers."""
    path = tmp_path / "repo"
    commit = RepoBuilder(path).commit("an empty project", {"NONCE": uuid.uuid4().hex})
    recipe = render_dockerfile(
        "3.11", ["pip install iniconfig"], exclude_newer="2022-06-01", apt=["libyaml-dev"]
    )
    assert "UV_EXCLUDE_NEWER=2022-06-01T00:00:00Z" in recipe
    tag = "trajforge-test-uv:era"
    try:
        ok, log = _build(path, commit, tag, recipe)
        assert ok, log[-3000:]
        check = (
            "python -c 'import importlib.metadata as m; print(m.version(\"iniconfig\"))'; "
            "dpkg -s libyaml-0-2 | grep -c 'Status: install ok installed'; "
            "dpkg -s libyaml-dev >/dev/null 2>&1 && echo headers || echo no-headers"
        )
        code, output = _run(tag, path, commit, check)
        assert code == 0, output
        assert output.split() == ["1.1.1", "1", "no-headers"]
    finally:
        subprocess.run(["docker", "rmi", "-f", tag], capture_output=True, check=False)


def test_recipe_options_change_the_recipe_and_bad_ones_are_refused():
    plain = render_dockerfile("3.11", ["pip install -e ."])
    assert plain == render_dockerfile("3.11", ["pip install -e ."], exclude_newer=None, apt=())
    assert "UV_EXCLUDE_NEWER" not in plain and "apt-get" not in plain
    assert render_dockerfile("3.11", [], apt=["b", "a", "a"]) == render_dockerfile(
        "3.11", [], apt=["a", "b"]
    )
    with pytest.raises(ValueError, match="not an ISO date"):
        render_dockerfile("3.11", [], exclude_newer="last week")
    with pytest.raises(ValueError, match="not Debian package names"):
        render_dockerfile("3.11", [], apt=["libfoo; rm -rf /"])
