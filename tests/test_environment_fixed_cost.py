"""What a profile costs beyond its install, on real Docker: the environment stage probes each
image once and starts no spare container for it (validate's runs use a sandbox of their own), the
probe copies the tree and trajforge's origin plugin in one archive, and a profile whose image is
already here (trusted by its recipe label) is prepared again with no ``docker build``: the image
keeps its id and creation time, and nothing counts ``images_built``.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from trajforge.generators.languages.python.prepare import prepare_environment
from trajforge.generators.languages.python.profile import detect_profile
from trajforge.pipelines.stages.environment import BuildEnvironmentFn, Site
from trajforge.schemas.params import Params, load_params

pytestmark = pytest.mark.docker


def _params(cache: Path) -> Params:
    params = load_params(None)
    params.cache_dir = str(cache)
    params.environment.pythons = ["3.11"]
    return params


def test_one_probe_no_spare_and_no_second_build(docker_engine, calc_repo, tmp_path: Path) -> None:
    path, shas = calc_repo
    commit = shas["initial"]
    profile = detect_profile(str(path), commit, "local/calc", pythons=("3.11",))
    site = Site("calc-initial", str(path), commit, "local/calc")
    fn = BuildEnvironmentFn(_params(tmp_path / "first"), "validate", lambda item: item)
    fn.setup()
    try:
        out = list(fn.process([(profile.profile_id, [(profile, site)])]))
        ready = [o for o in out if isinstance(o, tuple)]
        assert len(ready) == 1, out
        built, item = ready[0]
        assert item == site and built.status == "built"
        assert (
            "collected: 1 tests" in built.log
        )  # pytest -p trajforge_origin: the plugin came with the tree
        sandbox = fn.sandbox
        assert sandbox is not None
        assert sandbox.spares_per_image == 0
        assert all(not queue for queue in sandbox.spares.values())  # nothing started ahead
        first = sandbox.image_info(built.image)
        assert first is not None

        counts: dict[str, int] = {}

        def count(name: str, value: int = 1) -> None:
            counts[name] = counts.get(name, 0) + value

        # a fresh cache (no prepared profile to reuse): the image here is trusted, not rebuilt
        again = prepare_environment(
            sandbox, profile, str(path), _params(tmp_path / "second"), count=count
        )
        assert again.reason == "" and again.collected == 1
        assert counts.get("images_built", 0) == 0
        second = sandbox.image_info(built.image)
        assert second is not None
        assert (second.image_id, second.created) == (first.image_id, first.created)
        assert again.profile.build_s == 0  # no build timed: the one here was taken as it is
        # the stage measures the image it prepared (environment.py); the language does not
        assert built.image_bytes == sum(size for _, size in first.layers) > 0
        assert again.profile.image_bytes == 0
        same = {
            "log": "", "build_s": 0.0, "image_digest": again.profile.image_digest, "image_bytes": 0
        }  # fmt: skip
        assert dataclasses.replace(built, **same) == dataclasses.replace(again.profile, log="")
    finally:
        fn.teardown()
