"""An environment image has a size cap (issue 43, item 3), on a real engine.

A CUDA torch writes several GB per image; a few such builds filled a 2-core machine's disk
mid-run. Every build measures its image: one over ``environment.max_image_size`` is removed and
its sites rejected ``image_too_large`` with one line. It is not a failed install, so it is never
cached as a verdict; its size is kept by recipe hash, so the next run refuses it without
building, and a higher cap builds it. The smallest cap a size may name (6 MiB) is below any
environment image, so the test's small project stands in for a big one.
"""

from __future__ import annotations

import dataclasses
import json
import subprocess
from pathlib import Path

import polars as pl
import pyarrow.parquet as pq
import pytest
from conftest import run_cli, write_params
from repo_factory import RepoBuilder, build_add_fix_repo
from trajforge.generators.environments.image import (
    ImageTooLarge,
    image_bytes,
    image_sizes,
    recipe_digest,
)
from trajforge.generators.languages.python.prepare import PREPARE_VERSION, prepare_environment
from trajforge.generators.languages.python.profile import detect_profile
from trajforge.pipelines.commands.measures import image_sizes as size_figures
from trajforge.schemas.env_profile import EnvProfile
from trajforge.schemas.params import Params, ParamsError, load_params
from trajforge.schemas.records import check_schema, content_id, to_table
from trajforge.schemas.storage import ContentCache
from trajforge.verifiers.sandbox.base import BuildResult, ImageBuild
from trajforge.verifiers.sandbox.docker import DockerSandbox

SETUP = "from setuptools import setup\nsetup(name='heavy', packages=['heavy'])\n"
TEST = "def test_one():\n    assert 1 + 1 == 2\n"


class CountingDocker(DockerSandbox):
    """The real engine; it only counts the builds it is asked for."""

    builds = 0

    def build_image(self, build: ImageBuild) -> BuildResult:
        self.builds += 1
        return super().build_image(build)


def _repo(root: Path) -> tuple[str, str]:
    builder = RepoBuilder(root / "heavy")
    files = {"heavy/__init__.py": "", "setup.py": SETUP, "tests/test_one.py": TEST}
    return str(root / "heavy"), builder.commit("heavy", files)


def _params(tmp_path: Path, cap: str | None) -> Params:
    params = load_params(None)
    params.cache_dir = str(tmp_path / "cache")
    params.environment.max_image_size = cap
    return params.check()


def test_the_cap_is_a_size_and_null_turns_it_off(tmp_path: Path) -> None:
    assert _params(tmp_path, None).environment.max_image_size is None
    with pytest.raises(ParamsError, match=r"environment\.max_image_size"):
        _params(tmp_path, "eight gigabytes")


@pytest.mark.docker
def test_an_image_over_the_cap_is_removed_remembered_and_built_under_a_higher_one(
    docker_engine, tmp_path: Path
) -> None:
    path, sha = _repo(tmp_path)
    profile = detect_profile(path, sha, "local/heavy")
    small = _params(tmp_path, "6m")
    verdicts = ContentCache(small.results_cache, "environments")
    sandbox = CountingDocker()
    try:
        with pytest.raises(ImageTooLarge) as caught:
            prepare_environment(sandbox, profile, path, small)
        line = str(caught.value)
        assert caught.value.reason == "image_too_large" and "\n" not in line
        assert "GiB, over environment.max_image_size (6m); removed" in line, line
        assert not sandbox.has_image(profile.image)  # the disk is given back
        assert verdicts.get(content_id(PREPARE_VERSION, profile.profile_id, False)) is None
        assert sandbox.builds == 1
        digest = recipe_digest(path, profile.recipe, profile.profile_id, sha)
        measured = image_sizes(small).get(digest)
        assert measured is not None and measured["bytes"] > 6 * 2**20

        with pytest.raises(ImageTooLarge, match="measured so before; not built again"):
            prepare_environment(sandbox, profile, path, small)
        assert sandbox.builds == 1  # refused from its size, with no second build

        roomy = _params(tmp_path, "8g")
        prepared = prepare_environment(sandbox, profile, path, roomy)
        assert prepared.reason == "" and prepared.profile.status == "built", prepared.detail
        assert sandbox.builds == 2 and image_bytes(sandbox, profile.image) == measured["bytes"]
    finally:
        sandbox.close()
        subprocess.run(["docker", "rmi", "-f", profile.image], capture_output=True, check=False)


def test_validate_reports_each_repositorys_largest_image(tmp_path: Path) -> None:
    """The profiles table's ``image_bytes`` becomes two summary figures: the median repository's
    largest image and the largest one, named; a table from before the column gives none."""
    base = EnvProfile(
        profile_id="p", repo="a", python="3.11", install=(), test_cmd="pytest", image="i",
        status="built", log="", setup_commit="c",
    )  # fmt: skip
    gib = 2**30
    rows = [
        dataclasses.replace(base, repo="a", image_bytes=gib),
        dataclasses.replace(base, repo="a", image_bytes=3 * gib),  # a's largest
        dataclasses.replace(base, repo="b", image_bytes=gib // 2),
        dataclasses.replace(base, repo="c", image_bytes=0),  # not measured: left out
    ]
    check_schema(EnvProfile)
    table = to_table(rows, EnvProfile.ARROW_SCHEMA)
    (tmp_path / "profiles").mkdir()
    pq.write_table(table, tmp_path / "profiles" / "part-0.parquet")
    figures = size_figures("profiles")(str(tmp_path))
    assert figures == {"image GiB per repository (median)": 1.75, "image GiB (largest)": "3.00 (a)"}
    old = tmp_path / "old"
    (old / "profiles").mkdir(parents=True)
    pq.write_table(table.drop(["image_bytes"]), old / "profiles" / "part-0.parquet")
    assert size_figures("profiles")(str(old)) == {}


@pytest.mark.docker
def test_validate_rejects_each_site_of_an_image_over_the_cap_and_goes_on(
    docker_engine, tmp_path: Path
) -> None:
    """As a user sees it: the repository's candidate rejected ``image_too_large`` with the one
    line, the summary counting the reason, no traceback."""
    build_add_fix_repo(tmp_path / "calc")
    write_params(tmp_path / "params.yaml", tmp_path / "cache", extra="  max_image_size: 6m\n")
    mined = run_cli("mine", "--repo", str(tmp_path / "calc"), "--output", "mine", cwd=tmp_path)
    assert mined.returncode == 0, mined.stderr
    done = run_cli("validate", "--input", "mine", "--output", "out", cwd=tmp_path)
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
    rejections = pl.read_parquet(tmp_path / "out" / "rejections" / "*.parquet")
    assert rejections["reason"].to_list() == ["image_too_large"]
    assert "over environment.max_image_size (6m); removed" in rejections["detail"][0]
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert summary["kept"] == 0 and summary["rejected"].get("image_too_large") == 1, summary
