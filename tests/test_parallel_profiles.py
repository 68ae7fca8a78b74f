"""A stage's environment profiles are prepared at once (``environment.build_workers``), with the
same outputs as one at a time.

A tiny repository whose two commits declare different dependencies (two profiles, both built),
plus an item whose repository is missing (a rejection). The stage runs cold with two build
workers, then with one and a fresh cache (the images reused, each collection probed again). That
the builds overlapped is the stage's own count (``profiles_built_concurrently``: each profile
whose preparation ran while another's did), never a wall time; the counts made in the pool's
threads (``images_built``) reach Beam's metrics. The Dask runner gives the same outputs.
"""

from __future__ import annotations

import json
import subprocess
import uuid
from pathlib import Path
from typing import Any

import apache_beam as beam
import pytest
from apache_beam.metrics.metric import MetricsFilter
from apache_beam.runners.portability.fn_api_runner import FnApiRunner
from repo_factory import RepoBuilder, pyproject
from trajforge.pipelines.runtime.runner import make_pipeline
from trajforge.pipelines.stages.environment import BuildEnvironments, Site
from trajforge.schemas.params import Params

pytestmark = pytest.mark.docker

STAGE = "validate"
TESTS = "from calc.core import one\n\n\ndef test_one():\n    assert one() == 1\n"


def _site(item: tuple[str, str, str, int]) -> Site:
    name, source, commit, position = item
    return Site(name, source, commit, "local/two", order=(position,))


def _params(cache_dir: Path, build_workers: int) -> Params:
    params = Params(cache_dir=str(cache_dir))
    params.validate.test_timeout_s = 60
    params.validate.gold_runs = 0  # the gold patch graded again: tests/test_gold_runs.py
    params.environment.pythons = ["3.11"]
    params.environment.build_workers = build_workers
    params.environment.reuse = False  # two builds to overlap (reuse: test_environment_reuse.py)
    return params.check()


def _seen(tag: str, value: Any) -> dict[str, Any]:
    """What decides an output: the profile's identity, image, commit and command; the item."""
    if tag == "ready":
        profile, item = value
        return {"item": item[0], "profile": profile.profile_id, "status": profile.status}
    if tag == "profiles":
        keep = ("profile_id", "status", "image", "setup_commit", "python", "test_cmd", "language")
        return {name: getattr(value, name) for name in keep}
    return {
        "input": value.input,
        "stage": value.stage,
        "reason": value.reason,
        "detail": value.detail,
    }


def _keep(value: Any, folder: str, tag: str) -> None:
    """One output as a JSON file (the runner may be another process: Dask's workers)."""
    target = Path(folder) / tag
    target.mkdir(parents=True, exist_ok=True)
    (target / f"{uuid.uuid4().hex}.json").write_text(json.dumps(_seen(tag, value)))


def _run(pipeline: beam.Pipeline, params: Params, items: list, folder: Path) -> dict[str, Any]:
    """The stage's outputs (sorted) and its counters."""
    out = pipeline | beam.Create(items) | BuildEnvironments(params, STAGE, _site)
    for tag in ("ready", "profiles", "rejections"):
        _ = out[tag] | f"Keep{tag}" >> beam.Map(_keep, str(folder), tag)
    result = pipeline.run()
    result.wait_until_finish()
    counters = result.metrics().query(MetricsFilter().with_namespace(STAGE))["counters"]
    counts: dict[str, int] = {}
    for counter in counters:
        counts[counter.key.metric.name] = counts.get(counter.key.metric.name, 0) + counter.committed
    seen = {}
    for tag in ("ready", "profiles", "rejections"):
        rows = [json.loads(f.read_text()) for f in sorted((folder / tag).glob("*.json"))]
        seen[tag] = sorted(rows, key=lambda row: json.dumps(row, sort_keys=True))
    return {"outputs": seen, "counts": counts}


@pytest.fixture(scope="module")
def two_profiles(tmp_path_factory, docker_engine):
    """The repository's items, and the stage run cold with 2 build workers then with 1."""
    root = tmp_path_factory.mktemp("parallel-profiles")
    repo = RepoBuilder(root / "two")
    files = {"calc/__init__.py": "", "calc/core.py": "def one():\n    return 1\n"}
    first = repo.commit(
        "Initial", {**files, "pyproject.toml": pyproject(), "tests/test_one.py": TESTS}
    )
    second = repo.commit("Depend on six", {"pyproject.toml": pyproject("six==1.16.0")})
    items = [
        ("at_first", str(root / "two"), first, 0),
        ("at_second", str(root / "two"), second, 1),
        ("ghost", str(root / "missing"), "0" * 40, 2),
    ]
    runs = {}
    for workers in (2, 1):
        params = _params(root / f"cache-{workers}", workers)
        pipeline = beam.Pipeline(runner=FnApiRunner())
        runs[workers] = _run(pipeline, params, items, root / f"out-{workers}")
    yield root, items, runs
    images = {p["image"] for p in runs[2]["outputs"]["profiles"]}
    subprocess.run(["docker", "rmi", "-f", *images], capture_output=True, check=False)


def test_profiles_build_at_once_with_the_serial_outputs(two_profiles):
    _, _, runs = two_profiles
    parallel, serial = runs[2], runs[1]
    profiles = parallel["outputs"]["profiles"]
    assert [p["status"] for p in profiles] == ["built", "built"]
    assert len({p["profile_id"] for p in profiles}) == 2  # two declarations: two profiles
    ready = parallel["outputs"]["ready"]
    assert sorted(r["item"] for r in ready) == ["at_first", "at_second"]
    (ghost,) = parallel["outputs"]["rejections"]
    assert (ghost["input"], ghost["reason"]) == ("ghost", "repo_missing")
    # Both profiles were being prepared at the same time, by the stage's own count.
    assert parallel["counts"].get("profiles_built_concurrently") == 2
    # Counts made in the pool's threads reach the metrics: both images were built here.
    assert parallel["counts"].get("images_built", 0) >= 2
    # One at a time: nothing overlapped, and every output is what the parallel run gave.
    assert serial["counts"].get("profiles_built_concurrently", 0) == 0
    assert serial["outputs"] == parallel["outputs"]


@pytest.mark.dask
def test_profiles_on_the_dask_runner_give_the_same_outputs(two_profiles, tmp_path):
    _, items, runs = two_profiles
    params = _params(tmp_path / "cache", 2)
    pipeline = make_pipeline("dask", [], workers=2)
    got = _run(pipeline, params, items, tmp_path / "out")
    assert got["outputs"] == runs[2]["outputs"]
