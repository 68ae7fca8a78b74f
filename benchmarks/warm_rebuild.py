"""Warm rebuild: a known repository's next release built after its last one, layered recipe
against the recipe before it (dockerfile-v4, rendered from git), in the same run.

    .venv/bin/python benchmarks/warm_rebuild.py --mirrors DIR [--case toolz] [--case arrow] \
        [--baseline dd04f98] [--previous 25cd6e2] [--fresh] [--repeat 3] [--json figures.json]

Cases (``CASES``): toolz 1.0.0 -> 1.1.0 (no dependencies: what is left is the tools and the
project's own build) and arrow 7225592 -> 403c29f (two commits of 2024 between which no
declaration changed; python-dateutil, dateparser, pre-commit, pytz, simplejson...). Each
repository (``DIR/<owner>+<name>/repo``, a git mirror) is cloned to a temporary folder and
both revisions get a commit of a new file on top (a nonce), so no layer another run built
stands in for this repository's own. Its profile is detected at the old revision and the same
install (what one profile's image serves) is rendered twice: by today's ``recipe.py`` and
by the ``recipe.py`` of ``--baseline`` (the commit before the layered recipe), loaded from git;
with ``--previous``, also by the ``recipe.py`` of that commit (an earlier layered recipe, for
the gain of a change to it in the same run). The layered recipe is built first, so whatever the
proxy or the index caches from one recipe's downloads helps the recipes compared with it.
Each recipe is built through trajforge's own builder (``build_recipe``) at the old one (cold: the
first build of this repository; layers every build on the machine shares, such as the base
image and uv, may already be there, as they would be on any working machine; so may the tools
and dependency layers an earlier run built from the same declarations), then at the new one
(warm). With ``--repeat N``, N warm builds per recipe, each at its own nonce commit of the new
revision, the recipes' order rotated each round so load that drifts falls on all of them:
``warm`` is their median, ``warm_first`` the first round's (the only one that also rebuilds
the dependency layer when the declarations changed between the revisions, as toolz's
build-system table did). ``--fresh`` makes cold a first build on this machine: the CA bundle,
the first file every recipe copies, gets a comment line naming the run, so no layer after it
is shared with another run; uv's layer, which every build on a machine shares, is built before
the timed builds (``prime_uv``), so no recipe's cold pays it; the warm builds use the same
bundle. The last lines are the seconds per recipe and each case's ``warm_speedup`` (baseline
warm / layered warm; ``previous_warm_speedup`` likewise against ``--previous``). Every image
built and the clone are removed at the end.
"""

from __future__ import annotations

import argparse
import importlib.util
import io
import json
import shutil
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
import uuid
from pathlib import Path
from types import ModuleType

from trajforge.generators.environments.image import build_recipe
from trajforge.generators.environments.recipe import (
    INSTALL_UV,
    build_context,
    marker,
    render_dockerfile,
)
from trajforge.generators.languages.python.profile import detect_profile
from trajforge.schemas.params import EnvironmentParams
from trajforge.verifiers.sandbox.base import ImageBuild, SessionSpec
from trajforge.verifiers.sandbox.docker import DockerSandbox
from trajforge.verifiers.sandbox.git_tree import archive

ROOT = Path(__file__).resolve().parent.parent
BASELINE = "dd04f98"  # the last commit whose recipe.py renders dockerfile-v4 (one install layer)
PREVIOUS = (
    "25cd6e2"  # the last commit whose recipe.py renders dockerfile-v5 (the project built twice)
)
CASES = {  # name: (mirror, old revision, new revision, package to import)
    "toolz": ("pytoolz+toolz/repo", "1.0.0", "1.1.0", "toolz"),
    "arrow": ("arrow-py+arrow/repo", "7225592", "403c29f", "arrow"),
}


def old_recipe_module(commit: str) -> ModuleType:
    """``recipe.py`` as it was at ``commit`` (its imports resolve to today's package)."""
    source = subprocess.run(
        ["git", "-C", str(ROOT), "show", f"{commit}:generators/environments/recipe.py"],
        capture_output=True, check=True,
    ).stdout  # fmt: skip
    spec = importlib.util.spec_from_loader("baseline_recipe", loader=None)
    assert spec is not None
    module = importlib.util.module_from_spec(spec)
    exec(compile(source, f"{commit}:recipe.py", "exec"), module.__dict__)
    return module


def timed_build(
    sandbox: DockerSandbox, tag: str, recipe: str, commit: str, repo: str, params: EnvironmentParams
) -> float:
    started = time.monotonic()
    result = build_recipe(sandbox, tag, recipe, "bench", commit, repo, params)
    seconds = time.monotonic() - started
    if not result.ok:
        sys.exit(f"{tag}: build failed\n{result.log[-3000:]}")
    return seconds


def prime_uv(sandbox: DockerSandbox, recipe: str, params: EnvironmentParams, tag: str) -> None:
    """Build ``recipe`` up to uv's layer (the first lines, whose cache every recipe's first
    stage shares), so the timed cold builds find it as a working machine would."""
    lines = recipe.split("\n")
    upto = next(i for i, line in enumerate(lines) if json.dumps(INSTALL_UV)[1:-1] in line)
    ca = Path(params.ca_bundle).read_bytes() if params.ca_bundle else b""
    empty = io.BytesIO()
    tarfile.open(fileobj=empty, mode="w").close()
    context = build_context(empty.getvalue(), ca, marker("bench", "prime"))
    result = sandbox.build_image(ImageBuild(tag, "\n".join(lines[: upto + 1]) + "\n", context))
    if not result.ok:
        sys.exit(f"{tag}: priming uv's layer failed\n{result.log[-3000:]}")


def imports_from_repo(sandbox: DockerSandbox, tag: str, repo: str, commit: str, name: str) -> str:
    """Where the image imports the package from with the commit's tree in /repo."""
    with sandbox.session(SessionSpec(image=tag)) as session:
        session.put_archive(archive(repo, commit, prefix="repo/"))
        out = session.exec(f"python -c 'import {name}; print({name}.__file__)'", timeout_s=60)
    return out.output.strip().splitlines()[-1] if out.output.strip() else ""


def nonce_commit(repo: str, revision: str, nonce: str) -> str:
    """``revision`` plus one new file: a tree no other run has built."""
    git = ["git", "-C", repo, "-c", "user.name=bench", "-c", "user.email=bench@example.invalid"]
    subprocess.run([*git, "checkout", "-q", "--detach", revision], check=True)
    Path(repo, ".trajforge-bench-nonce").write_text(nonce)
    subprocess.run([*git, "add", ".trajforge-bench-nonce"], check=True)
    subprocess.run([*git, "commit", "-q", "-m", "nonce"], check=True)
    return subprocess.run(
        [*git, "rev-parse", "HEAD"], capture_output=True, text=True, check=True
    ).stdout.strip()


def run_case(
    name: str,
    mirrors: str,
    baseline: str,
    previous: str | None,
    fresh: bool,
    repeat: int,
    figures: dict[str, float],
) -> None:
    mirror, old, new, package = CASES[name]
    mirror = str(Path(mirrors) / mirror)
    params = EnvironmentParams(build_timeout_s=1200)
    folder = Path(tempfile.mkdtemp(prefix="warm-rebuild-"))
    repo = str(folder / "repo")
    subprocess.run(["git", "clone", "-q", mirror, repo], check=True)
    run = uuid.uuid4().hex[:8]
    if fresh:
        bundle = Path(params.ca_bundle).read_bytes() if params.ca_bundle else b""
        (folder / "ca.crt").write_bytes(bundle + f"\n# trajforge bench {run}\n".encode())
        params = EnvironmentParams(build_timeout_s=1200, ca_bundle=str(folder / "ca.crt"))
    cold = nonce_commit(repo, old, run)
    warm = [nonce_commit(repo, new, f"{run}-{n}") for n in range(repeat)]
    profile = detect_profile(repo, cold, package)
    print(f"{name} at {old}: python {profile.python}, install {list(profile.install)}")
    recipes = {"layered": render_dockerfile(profile.python, profile.install)}
    for key, source in (("previous", previous), ("baseline", baseline)):
        if source:
            module = old_recipe_module(source)
            recipes[key] = module.render_dockerfile(profile.python, profile.install)
    tags: list[str] = []
    sandbox = DockerSandbox()
    try:
        if fresh:
            tags.append(f"trajforge-bench-warm:{run}-{name}-uv")
            prime_uv(sandbox, recipes["layered"], params, tags[-1])
        order = list(recipes)
        builds = [("cold", 0, recipe) for recipe in order]  # then warm rounds, order rotated
        builds += [
            ("warm", n, order[(i + n) % len(order)])
            for n in range(repeat)
            for i in range(len(order))
        ]
        seconds: dict[tuple[str, str], list[float]] = {}
        for when, n, recipe in builds:
            image = f"trajforge-bench-warm:{run}-{name}-{recipe}-{when}{n}"
            tags.append(image)
            commit, revision = (cold, old) if when == "cold" else (warm[n], new)
            took = timed_build(sandbox, image, recipes[recipe], commit, repo, params)
            where = imports_from_repo(sandbox, image, repo, commit, package)
            print(f"{name} {recipe} {when} ({revision}): {took:.1f} s; imports {where}")
            seconds.setdefault((recipe, when), []).append(took)
            if when == "warm" and n:
                subprocess.run(["docker", "rmi", "-f", tags.pop()], capture_output=True)
    finally:
        sandbox.close()
        subprocess.run(["docker", "rmi", "-f", *tags], capture_output=True, check=False)
        shutil.rmtree(folder, ignore_errors=True)
    for (recipe, when), values in seconds.items():
        figures[f"{name}_{recipe}_{when}_s"] = round(statistics.median(values), 1)
        if when == "warm" and repeat > 1:
            figures[f"{name}_{recipe}_warm_first_s"] = round(values[0], 1)
    warm_speedup = figures[f"{name}_baseline_warm_s"] / figures[f"{name}_layered_warm_s"]
    figures[f"{name}_warm_speedup"] = round(warm_speedup, 2)
    if previous:
        gain = figures[f"{name}_previous_warm_s"] / figures[f"{name}_layered_warm_s"]
        figures[f"{name}_previous_warm_speedup"] = round(gain, 2)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--case", action="append", choices=sorted(CASES))
    parser.add_argument("--mirrors", required=True, help="folder of owner+name/repo mirrors")
    parser.add_argument("--baseline", default=BASELINE)
    parser.add_argument("--previous", help=f"also an earlier layered recipe.py (e.g. {PREVIOUS})")
    parser.add_argument("--fresh", action="store_true", help="cold is a first build here")
    parser.add_argument("--repeat", type=int, default=1, help="warm builds per recipe (median)")
    parser.add_argument("--json")
    args = parser.parse_args()
    figures: dict[str, float] = {}
    for name in args.case or list(CASES):
        run_case(name, args.mirrors, args.baseline, args.previous, args.fresh, args.repeat, figures)
    for key, value in figures.items():
        print(f"{key}: {value}")
    if args.json:
        Path(args.json).write_text(json.dumps(figures, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
