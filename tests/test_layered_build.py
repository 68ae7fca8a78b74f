"""Builds that reuse everything: a new commit of a known repository reuses the dependency layer
(the same layer id in both images' history) and pays only for its own; a commit that changes a
declared dependency rebuilds it. Real Docker builds of one tiny package through trajforge's own
builder (``build_recipe``), with a real dependency from PyPI."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
import uuid

import pyarrow.parquet as pq
import pytest
from repo_factory import RepoBuilder
from trajforge.generators.environments.dependency_layer import (
    RELINK,
    dependency_files,
    dependency_steps,
    project_file,
)
from trajforge.generators.environments.image import build_recipe
from trajforge.generators.environments.recipe import (
    DELTA,
    EDITABLE_FROM_REPO,
    ENV_MARKER,
    MARKER_SOURCE,
    PIP_THROUGH_UV,
    RECIPE_FORMAT,
    add_step,
    recipe_install,
    render_dockerfile,
)
from trajforge.pipelines.commands.measures import build_seconds
from trajforge.schemas.env_profile import EnvProfile
from trajforge.schemas.params import EnvironmentParams
from trajforge.schemas.records import check_schema, from_table, to_table
from trajforge.verifiers.sandbox.base import SessionSpec
from trajforge.verifiers.sandbox.docker import DockerSandbox
from trajforge.verifiers.sandbox.git_tree import archive

PARAMS = EnvironmentParams(build_timeout_s=600)
INSTALL = (
    "pip install --upgrade pip setuptools wheel",
    "pip install -r requirements-test.txt",
    "pip install -e '.[test]'",
    "pip install 'pytest<9' coverage pytest-timeout",
    RELINK,
)


def _pyproject(deps: str, nonce: str) -> str:
    return (
        '[build-system]\nrequires = ["setuptools>=64"]\nbuild-backend = "setuptools.build_meta"\n'
        f'[project]\nname = "layered-{nonce}"\nversion = "0.1"\ndependencies = [{deps}]\n'
        '[project.optional-dependencies]\ntest = ["iniconfig"]\n'
        '[tool.setuptools]\npackages = ["layered"]\n'
    )


def test_the_dependency_layer_is_derived_from_declarations_alone(tmp_path):
    """The layer's inputs are the requirements files and the project's declared requirements
    (its own extras expanded, itself left out); the tools and --no-deps steps stay out."""
    builder = RepoBuilder(tmp_path / "repo")
    pyproject = (
        '[project]\nname = "widget"\nversion = "1.0"\ndependencies = ["attrs>=22"]\n'
        '[project.optional-dependencies]\ntest = ["widget[fast]", "iniconfig"]\nfast = ["six"]\n'
    )
    pyproject = '[build-system]\nrequires = ["setuptools>=64", "wheel"]\n' + pyproject
    files = {"pyproject.toml": pyproject, "requirements-test.txt": "-r base.txt\n", "w.py": ""}
    first = builder.commit("widget", {**files, "base.txt": "packaging==24.1\n"})
    install = [*INSTALL, "pip install --no-deps -e ."]
    found = dependency_files(str(builder.path), first, install)
    assert found == {
        "requirements-test.txt": b"-r base.txt\n",
        "base.txt": b"packaging==24.1\n",
        project_file(["test"]): b"attrs>=22\niniconfig\nsix\n",
        "trajforge-build-requires.txt": b"setuptools>=64\nwheel\n",
    }
    steps = dependency_steps(install, "/uv")
    assert not any("pytest" in step or "--no-deps" in step or "--upgrade" in step for step in steps)
    # a source-only commit leaves the inputs as they were; a changed pin changes them
    source = builder.commit("source", {"w.py": "x = 1\n"})
    assert dependency_files(str(builder.path), source, install) == found
    pinned = builder.commit("pin", {"base.txt": "packaging==24.2\n"})
    assert dependency_files(str(builder.path), pinned, install)["base.txt"] == b"packaging==24.2\n"
    # the recipe says which install the layer derives from, and its format is the new one
    recipe = render_dockerfile("3.11", install)
    assert recipe_install(recipe) == install
    assert f"({RECIPE_FORMAT})" in recipe and RECIPE_FORMAT == "dockerfile-v6"
    assert recipe.index("trajforge/dep[s]") < recipe.index("COPY repo/ /repo/")
    # the final image takes the commit in one COPY (the venv's delta, the generated files and
    # the marker, which the build stage put in /venv), after the shared dependency venv
    final = recipe.split("\nFROM ${BASE}\n")[1]
    assert [line for line in final.split("\n") if line.startswith("COPY")] == [
        "COPY --from=deps /venv /venv",
        "COPY --from=build /tmp/trajforge-removed /tmp/trajforge-removed",
        f"COPY --from=build {DELTA}/ /",
    ]
    assert f"COPY {MARKER_SOURCE} {ENV_MARKER}" in recipe.split("FROM deps AS build")[1]
    # a repair still goes after the main install, before the delta, with the same prelude
    repaired = add_step(recipe, ["pip install attrs"])
    assert repaired.index("pip install attrs") < repaired.index("python3 - delta")
    prelude = json.dumps(PIP_THROUGH_UV)[1:-1]  # as the RUN's exec form writes it
    assert repaired.count(prelude) == recipe.count(prelude) + 1


@pytest.mark.parametrize(
    ("record", "skipped"),
    [
        ('{"url": "file:///repo", "dir_info": {"editable": true}}', True),  # uv's and pip's
        ('{"dir_info": {"editable": true}, "url": "file:///repo"}', True),
        ('{"url": "file:///repo", "dir_info": {}}', False),  # a plain install of the tree
        ('{"url": "file:///repo/sub", "dir_info": {"editable": true}}', False),  # another tree
        ('{"url": "https://example.invalid/w.whl", "archive_info": {}}', False),
        ("not json", False),  # an unreadable record: the relink runs
        (None, False),  # no record at all (PyPI's copy replaced the project)
    ],
)
def test_the_relink_is_skipped_only_while_repo_is_installed_editable(tmp_path, record, skipped):
    """The recipe's check (run by /venv's python in the build) reads every installed
    distribution's direct_url.json: only an editable install of /repo itself skips the relink;
    anything else, an unreadable record included, runs it."""
    dist = tmp_path / "layered-0.1.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: layered\nVersion: 0.1\n")
    if record is not None:
        (dist / "direct_url.json").write_text(record)
    check = subprocess.run(
        [
            sys.executable,
            "-c",
            f"import sys; sys.path.insert(0, {str(tmp_path)!r}); " + EDITABLE_FROM_REPO,
        ],
        capture_output=True,
        check=False,
    )
    assert (check.returncode == 0) is skipped, check.stderr


def _layers(sandbox: DockerSandbox, tag: str) -> tuple[str, ...]:
    info = sandbox.image_info(tag)
    assert info is not None
    assert sandbox.image_layers()[info.image_id] == tuple(layer for layer, _ in info.layers)
    return tuple(layer for layer, _ in info.layers)


def _run(sandbox: DockerSandbox, tag: str, repo: str, commit: str, command: str) -> str:
    with sandbox.session(SessionSpec(image=tag)) as session:
        session.put_archive(archive(repo, commit, prefix="repo/"))
        result = session.exec(command, timeout_s=120)
    assert result.exit_code == 0, result.output
    return result.output


@pytest.mark.docker
def test_a_new_commit_reuses_the_dependency_layer_and_a_new_dependency_rebuilds_it(
    docker_engine, tmp_path
):
    """Three commits of one repository, each built as its own image from the same recipe: a
    source-only change shares every layer up to the dependency venv with the first image; a
    changed declaration shares the base but not the dependency layer; each image works; the
    project is built once (the relink is skipped while /repo is installed editable)."""
    nonce = uuid.uuid4().hex[:12]  # a package of its own: no other run's layers stand in
    builder = RepoBuilder(tmp_path / "repo")
    test = "import layered\n\n\ndef test_answer():\n    assert layered.ANSWER == {0}\n"
    files = {
        "pyproject.toml": _pyproject('"six"', nonce),
        "requirements-test.txt": "packaging\n",
        "layered/__init__.py": "ANSWER = 1\n",
        "tests/test_layered.py": test.format(1),
    }
    commits = [builder.commit("first", files)]
    commits.append(
        builder.commit(
            "source only",
            {"layered/__init__.py": "ANSWER = 2\n", "tests/test_layered.py": test.format(2)},
        )
    )
    commits.append(
        builder.commit(
            "a new dependency",
            {
                "pyproject.toml": _pyproject('"six", "attrs"', nonce),
                "layered/__init__.py": "import attrs\nANSWER = 2\n",
            },
        )
    )
    recipe = render_dockerfile("3.11", INSTALL)
    tags = [f"trajforge-test-layered:{nonce}-{n}" for n in range(3)]
    sandbox = DockerSandbox()
    try:
        for tag, commit in zip(tags, commits, strict=True):
            result = build_recipe(sandbox, tag, recipe, "test", commit, str(builder.path), PARAMS)
            assert result.ok, result.log[-3000:]
            # the project is built once: /repo is still installed editable at the relink
            assert "trajforge: relink skipped, /repo is installed editable" in result.log
        first, source, dependency = (_layers(sandbox, tag) for tag in tags)
        base = len(_layers(sandbox, "trajforge-base:py3.11"))
        deps_layer = base + 1  # over the base: WORKDIR /repo, then COPY --from=deps /venv
        assert source[: deps_layer + 1] == first[: deps_layer + 1]
        assert source[deps_layer + 1 :] != first[deps_layer + 1 :]
        assert dependency[: base + 1] == first[: base + 1]
        assert dependency[deps_layer] != first[deps_layer]
        # the images are whole: the commit's own code, its dependencies, the runner
        out = _run(sandbox, tags[1], str(builder.path), commits[1], "python -m pytest -q")
        assert "1 passed" in out
        out = _run(sandbox, tags[2], str(builder.path), commits[2], "python -c 'import attrs, six'")
        out = _run(sandbox, tags[0], str(builder.path), commits[0], "pip list --format=freeze")
        assert "six==" in out and "packaging==" in out and "iniconfig==" in out
        assert "attrs==" not in out
        # the relink runs when /repo is no longer installed editable (a step replaced it)
        relink = f"{PIP_THROUGH_UV}\n{RELINK} || true"
        out = _run(sandbox, tags[0], str(builder.path), commits[0], relink)
        assert "relink skipped" in out and "Obtaining" not in out
        replaced = "rm /venv/lib/python3.11/site-packages/layered_*.dist-info/direct_url.json"
        out = _run(sandbox, tags[0], str(builder.path), commits[0], f"{replaced}\n{relink}")
        assert "relink skipped" not in out and "Obtaining file:///repo" in out
    finally:
        sandbox.close()
        subprocess.run(["docker", "rmi", "-f", *tags], capture_output=True, check=False)


def test_build_seconds_reach_the_profiles_table_and_the_summary(tmp_path):
    """``build_s`` is a profiles column; validate's summary gives seconds per image built, the
    images reused (0 s) left out, and nothing for a table from before the column."""
    profile = EnvProfile(
        profile_id="p", repo="r", python="3.11", install=(), test_cmd="pytest", image="i",
        status="built", log="", setup_commit="c",
    )  # fmt: skip
    check_schema(EnvProfile)
    rows = [dataclasses.replace(profile, build_s=s) for s in (12.0, 0.0, 4.0)]
    table = to_table(rows, EnvProfile.ARROW_SCHEMA)
    assert [p.build_s for p in from_table(EnvProfile, table)] == [12.0, 0.0, 4.0]
    (tmp_path / "profiles").mkdir()
    pq.write_table(table, tmp_path / "profiles" / "part-0.parquet")
    figures = build_seconds("profiles")(str(tmp_path))
    assert figures == {"build s per image": 8.0, "build s (slowest image)": 12.0}
    old = tmp_path / "old"
    (old / "profiles").mkdir(parents=True)
    pq.write_table(table.drop(["build_s"]), old / "profiles" / "part-0.parquet")
    assert build_seconds("profiles")(str(old)) == {}
