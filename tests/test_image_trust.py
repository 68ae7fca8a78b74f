"""Images trusted by content, not by name (issue 26, items 6-8), in real Docker.

A hostile tasks file names a victim's environment (``trajforge-env:<profile>``) with a recipe of
its own whose image makes the victim's bug look fixed (a ``.pth`` file that patches ``add``).
``evaluate`` builds that recipe only as ``trajforge-eval:<hash>`` and says so; ``validate`` of
the victim still proves its genuine task, and even when such an image does sit under the
victim's name (as an older trajforge left it), validate rebuilds instead of reusing it. ``images
prune`` leaves a user's image built on ours and a fresh image alone. Two imported rows with the
same content and different ids keep their own ids through the verdict cache.
"""

from __future__ import annotations

import base64
import io
import json
import subprocess
import tarfile
import uuid
from dataclasses import replace
from pathlib import Path

import datasets
import pyarrow.parquet as pq
import pytest
from conftest import hold_image, run_cli, write_params
from repo_factory import build_add_fix_repo
from test_import_tasks import UPSTREAM, Calc, smith_row, swe_bench_row, write_jsonl
from trajforge.generators.environments.base_image import base_image_tag
from trajforge.generators.environments.image import build_recipe, recipe_digest
from trajforge.generators.environments.recipe import (
    EVAL_KIND,
    KIND_LABEL,
    PROFILE_LABEL,
    RECIPE_LABEL,
    eval_image_name,
)
from trajforge.pipelines.evaluation.task_rows import load_tasks
from trajforge.pipelines.release.tables import tasks_schema, tasks_table
from trajforge.pipelines.runtime.sinks import MARKER
from trajforge.schemas.candidate import Candidate
from trajforge.schemas.params import load_params
from trajforge.schemas.storage import read_records
from trajforge.schemas.task_instance import TaskInstance
from trajforge.schemas.test_run import TestRun
from trajforge.verifiers.sandbox.base import ImageBuild
from trajforge.verifiers.sandbox.docker import DockerSandbox

pytestmark = [pytest.mark.docker, pytest.mark.usefixtures("docker_engine")]
RUN = uuid.uuid4().hex[:8]
ADD_F2P = "tests/test_ops.py::test_add"

# Makes calc's add correct on import, wherever the tests run: the victim's bug never shows.
FORGE = """\
import importlib.machinery
import sys


class _Fix:
    @staticmethod
    def find_spec(name, path=None, target=None):
        if name != "calc.ops":
            return None
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        if spec is None or spec.loader is None:
            return spec
        run = spec.loader.exec_module

        def exec_module(module):
            run(module)
            module.add = lambda a, b: a + b

        spec.loader.exec_module = exec_module
        return spec


sys.meta_path.insert(0, _Fix)
"""


def hostile_recipe(genuine: str) -> str:
    """The victim's own recipe (so it copies the marker in) plus the forgery, loaded at every
    interpreter start by a ``.pth`` file (Debian's own sitecustomize shadows one in the venv)."""
    code = (
        "import base64, site; where = site.getsitepackages()[0]; "
        "open(where + '/_forge.py', 'wb')"
        f".write(base64.b64decode('{base64.b64encode(FORGE.encode()).decode()}')); "
        "open(where + '/_forge.pth', 'w').write('import _forge\\n')"
    )
    return genuine + "RUN " + json.dumps(["/venv/bin/python", "-c", code]) + "\n"


def docker(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run(["docker", *args], capture_output=True, text=True, check=check)


def labels_of(image: str) -> dict[str, str] | None:
    done = docker("image", "inspect", "--format", "{{json .Config.Labels}}", image, check=False)
    return json.loads(done.stdout) if done.returncode == 0 else None


def image_id(image: str) -> str | None:
    done = docker("image", "inspect", "--format", "{{.Id}}", image, check=False)
    return done.stdout.strip() if done.returncode == 0 else None


def summary(out: Path) -> dict:
    return json.loads((out / "summary.json").read_text())


def tasks_of(out: Path) -> dict[str, TaskInstance]:
    return {
        t.instance_id: t
        for f in sorted((out / "tasks").glob("*.parquet"))
        for t in read_records(TaskInstance, str(f))
    }


@pytest.fixture(scope="module")
def victim(tmp_path_factory):
    """(work dir, repo path, the victim's one proven task) from the real CLI; every image the
    module made is removed at the end.

    The genuine image is held for the module's life (``hold_image``): its rebuilds below come
    from the build cache and carry the first build's creation time, so once the module had run
    longer than a machine cleanup's ``images prune --min-age`` (under load it did), the rebuilt
    tag could be pruned between ``validate`` and the assertions.
    """
    root = tmp_path_factory.mktemp("victim")
    repo = root / "calc"
    build_add_fix_repo(repo)
    work = root / "work"
    work.mkdir()
    write_params(work / "params.yaml", root / "cache-first")
    assert run_cli("mine", "--repo", str(repo), "--output", "mine", cwd=work).returncode == 0
    done = run_cli("validate", "--input", "mine", "--output", "first", cwd=work)
    assert done.returncode == 0, done.stderr
    [task] = tasks_of(work / "first").values()
    assert task.FAIL_TO_PASS == (ADD_F2P,) and task.image_name.startswith("trajforge-env:")
    with hold_image(task.image_name):
        yield work, repo, task
    found = docker("images", "--format", "{{.Repository}}:{{.Tag}}", check=False).stdout.split()
    made = [t for t in found if task.profile_id in t or RUN in t or t.startswith("trajforge-eval")]
    mine = [t for t in made if not t.startswith("trajforge-eval") or _ours(t, task)]
    docker("rmi", "-f", *mine, check=False)


def _ours(tag: str, task: TaskInstance) -> bool:
    """An evaluation image this module built (its profile label is the victim's)."""
    return (labels_of(tag) or {}).get(PROFILE_LABEL) == task.profile_id


def validate_again(work: Path, output: str, cache: str) -> subprocess.CompletedProcess:
    """The victim's validate in a results cache of its own (``cache``: a fresh name is a machine
    that never validated it)."""
    params = work / f"params-{cache}.yaml"
    write_params(params, work.parent / cache)
    done = run_cli(
        "validate", "--input", "mine", "--output", output, "--params", str(params), cwd=work
    )
    assert done.returncode == 0, done.stderr
    return done


def test_a_hostile_tasks_file_cannot_poison_the_victims_environment(victim, tmp_path):
    work, repo, genuine = victim
    named = genuine.image_name
    genuine_hash = labels_of(named)[RECIPE_LABEL]  # type: ignore[index]
    # The attack of issue 26: the victim's image is not built on this machine yet.
    docker("tag", named, f"kept-{RUN}:{genuine.profile_id}")
    docker("rmi", named)
    recipe = hostile_recipe(genuine.env_recipe)
    hostile = replace(genuine, instance_id="hostile-1", env_recipe=recipe, image_digest="")
    folder = tmp_path / "hostile" / "tasks"
    folder.mkdir(parents=True)
    pq.write_table(tasks_table([hostile], tasks_schema([])), folder / "train-00000.parquet")
    predictions = tmp_path / "predictions.jsonl"
    row = {"instance_id": "hostile-1", "model_name_or_path": "m", "model_patch": genuine.patch}
    predictions.write_text(json.dumps(row) + "\n")
    write_params(tmp_path / "params.yaml", tmp_path / "cache")
    done = run_cli(
        "evaluate", "--tasks", str(tmp_path / "hostile"), "--predictions", str(predictions),
        "--output", str(tmp_path / "out"), "--params", str(tmp_path / "params.yaml"), cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr

    expected = recipe_digest(
        str(repo), recipe, genuine.profile_id, genuine.environment_setup_commit
    )
    built = eval_image_name(expected)
    assert f"ran 1 prediction(s) in {built}" in done.stdout, done.stdout
    assert "images_rebuilt: 1" in done.stdout and built in done.stderr  # the one line saying so
    record = json.loads((tmp_path / "out" / "m" / "hostile-1" / "evaluation.json").read_text())
    assert record["image"] == built
    report = json.loads((tmp_path / "out" / "m.evaluate.json").read_text())
    assert report["trajforge"]["images"] == {built: 1}
    labels = labels_of(built)
    assert labels is not None and labels[KIND_LABEL] == EVAL_KIND
    assert labels[RECIPE_LABEL] == expected != genuine_hash
    assert image_id(named) is None  # never built under the name the row chose

    # The victim validates on this machine later: its genuine task, in its genuine image.
    validate_again(work, "after-hostile", "cache-after-hostile")
    [task] = tasks_of(work / "after-hostile").values()
    assert task.FAIL_TO_PASS == (ADD_F2P,) and task.instance_id == genuine.instance_id
    assert labels_of(named)[RECIPE_LABEL] == genuine_hash  # type: ignore[index]


def test_an_image_from_another_recipe_under_the_profiles_name_is_rebuilt(victim):
    """What an older trajforge could leave under the victim's name: the forging recipe's image
    (labelled with its own recipe hash, or with none). Validate refuses it by its recipe label,
    on a fresh machine (the build step) and from its cached profile alike, and rebuilds."""
    work, repo, genuine = victim
    named = genuine.image_name
    if image_id(named) is None:  # alone (the test before rebuilt it otherwise)
        validate_again(work, "rebuilt", "cache-rebuilt")
    genuine_hash = labels_of(named)[RECIPE_LABEL]  # type: ignore[index]
    forged, unlabelled = f"forged-{RUN}:hash", f"forged-{RUN}:none"
    env = load_params(str(work / "params.yaml")).environment
    sandbox = DockerSandbox()
    try:
        made = build_recipe(
            sandbox, forged, hostile_recipe(genuine.env_recipe), genuine.profile_id,
            genuine.environment_setup_commit, str(repo), env, EVAL_KIND,
        )  # fmt: skip
        assert made.ok, made.log
        empty = io.BytesIO()
        tarfile.open(fileobj=empty, mode="w").close()
        dockerfile = f'FROM {forged}\nLABEL {RECIPE_LABEL}=""\n'  # as trajforge once built
        made = sandbox.build_image(ImageBuild(unlabelled, dockerfile, empty.getvalue()))
        assert made.ok, made.log
    finally:
        sandbox.close()
    cases = ((forged, "it was built from another recipe"), (unlabelled, "carries no"))
    for n, (image, why) in enumerate(cases):  # a fresh results cache, then the profile cached
        docker("tag", image, named)
        assert labels_of(named)[RECIPE_LABEL] != genuine_hash  # type: ignore[index]
        forged_id = image_id(named)
        done = validate_again(work, f"untrusted-{n}", "cache-untrusted")
        assert image_id(named) != forged_id, done.stderr
        assert labels_of(named)[RECIPE_LABEL] == genuine_hash  # type: ignore[index]
        [task] = tasks_of(work / f"untrusted-{n}").values()
        assert task.FAIL_TO_PASS == (ADD_F2P,), done.stderr
        assert summary(work / f"untrusted-{n}")["images_untrusted"] == 1
        assert f"{named} here is rebuilt, not reused: " in done.stderr and why in done.stderr


def test_prune_leaves_a_users_derived_image_and_a_fresh_one_alone(tmp_path):
    """Only images trajforge built (labels under the name they imply), never one another image
    is built on, never one younger than --min-age."""
    scope = f"localhost:5999/prune{RUN}"
    base = base_image_tag("3.11")
    sandbox = DockerSandbox()
    empty = io.BytesIO()
    tarfile.open(fileobj=empty, mode="w").close()

    def build(tag: str, dockerfile: str, profile: str = "") -> None:
        labels = {KIND_LABEL: "env", RECIPE_LABEL: "0" * 64, PROFILE_LABEL: profile}
        labels = labels if profile else {}  # a user's image: only what it inherits
        made = sandbox.build_image(ImageBuild(tag, dockerfile, empty.getvalue(), labels=labels))
        assert made.ok, made.log

    alone, under = f"{scope}/env:alone{RUN}", f"{scope}/env:under{RUN}"
    derived, lookalike = f"{scope}/user:{RUN}", f"{scope}/env:lookalike{RUN}"
    try:
        build(alone, f"FROM {base}\nRUN echo alone > /a\n", f"alone{RUN}")
        build(under, f"FROM {base}\nRUN echo under > /u\n", f"under{RUN}")
        build(derived, f"FROM {under}\nRUN echo mine > /mine\n")  # a user's, FROM ours
        build(lookalike, f"FROM {under}\nLABEL user=1\n")  # named like ours, labels inherited
        out = tmp_path / "out"
        (out / "tasks").mkdir(parents=True)
        (out / MARKER).write_text("written by a test\n")
        pq.write_table(
            tasks_table([], tasks_schema([])), out / "tasks" / "part-00000-of-00001.parquet"
        )

        def prune(*extra: str) -> str:
            done = run_cli(
                "images", "prune", "--outputs", str(out), "--repository", scope, *extra,
                cwd=tmp_path,
            )  # fmt: skip
            assert done.returncode == 0, done.stderr
            return done.stdout

        fresh = prune()  # the default --min-age: all of them were made just now
        assert f"keep    {alone}: made within --min-age" in fresh, fresh
        assert "removed 0 image(s)" in fresh
        pruned = prune("--min-age", "0")
        assert f"removed {alone}" in pruned, pruned
        assert f"keep    {under}: 2 other image(s) are built on it" in pruned
        assert f"keep    {derived}: not trajforge's" in pruned
        assert f"keep    {lookalike}: not trajforge's" in pruned
        assert pruned.splitlines()[-1].startswith("removed 1 image(s)")
        assert not sandbox.has_image(alone)
        assert all(sandbox.has_image(t) for t in (under, derived, lookalike, base))
        said = " ".join(run_cli("images", "prune", "--help", cwd=tmp_path).stdout.split())
        assert "--min-age" in said and "never a user's image built FROM one" in said
    finally:
        docker("rmi", "-f", lookalike, derived, under, alone, check=False)
        sandbox.close()


def test_rows_of_the_same_content_keep_their_own_ids_through_the_verdict_cache(tmp_path):
    """A dataset listing one fix (and one bug) under several ids: the second validate finds
    every verdict cached and still names each task by its own row."""
    calc = Calc(tmp_path)
    params = write_params(tmp_path / "params.yaml", tmp_path / "cache")
    first = [swe_bench_row(calc, instance_id="calc-org__calc-1")]
    second = [swe_bench_row(calc, instance_id=f"calc-org__calc-{n}") for n in (2, 3)]
    smith = calc.smith_id.rpartition("__")[0]
    bugs_first = [smith_row(calc, instance_id=f"{smith}__aaaa1111")]
    bugs_second = [smith_row(calc, instance_id=f"{smith}__bbbb2222")]
    for name, fixes, bugs in (("first", first, bugs_first), ("second", second, bugs_second)):
        write_jsonl(tmp_path / f"{name}.jsonl", fixes)
        datasets.Dataset.from_list(bugs).save_to_disk(str(tmp_path / f"{name}-smith"))
        for fmt, path, out in (
            ("swe-bench", f"{name}.jsonl", f"{name}-fixes"),
            ("swe-smith", f"{name}-smith", f"{name}-bugs"),
        ):
            proc = run_cli(
                "import-tasks", "--format", fmt, path, "--source", f"{UPSTREAM}={calc.path}",
                "--output", out, "--params", str(params), cwd=tmp_path, timeout=300,
            )  # fmt: skip
            assert proc.returncode == 0, proc.stderr
        done = run_cli(
            "validate", "--input", f"{name}-fixes", "--input", f"{name}-bugs",
            "--output", f"{name}-val", "--params", str(params), cwd=tmp_path,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
    assert summary(tmp_path / "second-val")["cache_hits"] == 3  # every verdict was cached
    candidates = {
        c.labels.instance_id: c  # type: ignore[union-attr]
        for out in ("second-fixes", "second-bugs")
        for f in sorted((tmp_path / out / "candidates").glob("*.parquet"))
        for c in read_records(Candidate, str(f))
    }
    tasks = tasks_of(tmp_path / "second-val")
    assert set(tasks) == set(candidates) == {
        "calc-org__calc-2", "calc-org__calc-3", f"{smith}__bbbb2222"
    }  # fmt: skip
    for instance_id, task in tasks.items():
        candidate = candidates[instance_id]
        assert task.candidate_id == candidate.candidate_id
        assert task.provenance["dataset"] == candidate.labels.dataset  # type: ignore[union-attr]
        assert task.FAIL_TO_PASS == (ADD_F2P,)
    runs = [
        r
        for f in sorted((tmp_path / "second-val" / "runs").glob("*.parquet"))
        for r in read_records(TestRun, str(f))
    ]
    ids = {c.candidate_id for c in candidates.values()}
    mutant_runs = {r.candidate_id for r in runs if not r.candidate_id.startswith("snapshot-")}
    assert mutant_runs == ids
    first_tasks = tasks_of(tmp_path / "first-val")
    assert not {t.candidate_id for t in first_tasks.values()} & ids
    assert load_tasks([str(tmp_path / "second-val")]).keys() == tasks.keys()
