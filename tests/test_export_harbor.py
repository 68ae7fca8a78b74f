"""``trajforge export --format harbor``, checked with Harbor itself.

Three tasks are mined, validated and described through the real CLI from the repository
``test_evaluate`` builds (add subtracts, sub and neg are missing) and exported as Harbor task
folders. The folders load with Harbor's own loader (``Task``, ``TaskConfig``, the dataset
manifest, its content digests); Harbor's CLI runs its oracle agent (every gold solution scores 1),
its ``nop`` agent (0), and forged solutions through the same oracle: a root ``conftest.py`` that
forces every test to pass (0, and a real fix beside it still 1), a ``*.dist-info`` pytest plugin
(refused), and two that bend pytest's reports from source or after it exits (caught by the
sentinels and the supervisor inside Harbor's container). Real Docker, no mocks.

Harbor needs Python >= 3.12: ``scripts/setup_harbor.sh`` puts it in a virtual environment of its
own under the user's cache, ``~/.cache/trajforge/harbor-*`` (or set ``TRAJFORGE_HARBOR`` to a
``harbor`` executable). Where it cannot (no Python >= 3.12 here), the same runs go through docker
alone, as Harbor runs them: build ``environment/``, run ``solve.sh`` in one container, tar
``/repo`` (the collect hook), and run ``tests/test.sh`` in a fresh container of the image; the
loader checks are then skipped.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import shutil
import subprocess
import tarfile
import tomllib
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from conftest import ROOT, run_cli, run_stages, write_params
from forge_routes import ALWAYS_PASS, FIX, NOISE, ROUTES
from test_evaluate import build_three_fixes
from trajforge.pipelines.evaluation.task_rows import load_tasks
from trajforge.pipelines.release.harbor import (
    AGENT_TREE,
    COLLECT,
    TASK_SCHEMA,
    content_digest,
    write_task,
)
from trajforge.schemas.params import load_params

pytestmark = pytest.mark.docker

CA_BUNDLE = Path("/etc/ssl/certs/ca-certificates.crt")
ADD_TASK_TEST = "tests/test_ops.py::test_add"
# name -> (files the forged solve.sh writes over /repo, the reward, the grader's reason)
FORGERIES = {
    "root_conftest": ({**NOISE, "conftest.py": ALWAYS_PASS}, 0, "tests_failed"),
    "dist_info_plugin": (ROUTES["dist_info_plugin"][0], 0, "forbidden_file"),
    "monkeypatch_testreport": (ROUTES["monkeypatch_testreport"][0], 0, "forged_result"),
    "daemon_after_exit": (ROUTES["daemon_after_exit"][0], 0, "forged_result"),
    "org_namespace": (ROUTES["org_namespace"][0], 0, "forbidden_file"),
    "wrap_call_and_report": (ROUTES["wrap_call_and_report"][0], 0, "forged_result"),
    "right_only_for_the_graded_id": (ROUTES["right_only_for_the_graded_id"][0], 0, "forged_result"),
    "fix_beside_a_forger": ({**FIX, "conftest.py": ALWAYS_PASS}, 1, "resolved"),
}


@pytest.fixture(scope="module")
def exported(docker_engine, tmp_path_factory) -> Path:
    """The three tasks as Harbor task folders (``export --format harbor``)."""
    root = tmp_path_factory.mktemp("harbor")
    build_three_fixes(root / "calc")
    work = root / "work"
    work.mkdir()
    write_params(work / "params.yaml", root / "cache")
    done = run_stages(
        work,
        ("mine", "--repo", str(root / "calc"), "--output", "mine"),
        ("validate", "--input", "mine", "--output", "validate"),
        ("describe", "--input", "validate", "--output", "describe"),
        ("export", "--format", "harbor", "--input", "describe", "--output", "harbor"),
    )
    assert "3 Harbor tasks (task schema 1.4)" in done.stderr
    return work / "harbor"


def harbor_cache() -> Path:
    """Where Harbor's virtual environment lives: the user's cache, not the checkout, so a fresh
    clone (CI's) reuses it instead of installing Harbor again (55 s in CI); one folder per
    version of the setup script, so a new pin installs afresh."""
    script = (ROOT / "scripts" / "setup_harbor.sh").read_bytes()
    home = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return home / "trajforge" / f"harbor-{hashlib.sha256(script).hexdigest()[:12]}"


@pytest.fixture(scope="module")
def harbor() -> tuple[str, dict[str, str]] | None:
    """(the harbor executable, the environment it runs with), or None: docker alone."""
    given = os.environ.get("TRAJFORGE_HARBOR")
    if given == "none":
        return None
    cache = harbor_cache()
    if given:
        executable = given
    else:
        made = subprocess.run(
            ["bash", str(ROOT / "scripts" / "setup_harbor.sh"), str(cache)],
            capture_output=True, text=True, timeout=900, check=False,
        )  # fmt: skip
        if made.returncode != 0:
            print(f"harbor unavailable, checking with docker alone: {made.stderr.strip()[-300:]}")
            return None
        executable = made.stdout.strip().splitlines()[-1]
    env = {**os.environ, "PYTHONPATH": str(ROOT / "tests")}
    compose = subprocess.run(["docker", "compose", "version"], capture_output=True, check=False)
    if compose.returncode != 0:  # Debian's docker.io: compose v2 as a plugin of its own
        env["DOCKER_CONFIG"] = str(cache / "docker")
    return executable, env


def runnable(exported: Path, where: Path) -> Path:
    """A copy of the export that builds here: this machine's CA bundle in each environment's
    ``trajforge/ca.crt`` (the export leaves it empty), as a user behind a proxy would."""
    shutil.copytree(exported, where)
    for ca in where.glob("*/environment/trajforge/ca.crt"):
        ca.write_bytes(CA_BUNDLE.read_bytes() if CA_BUNDLE.exists() else b"")
    return where


def forged(task: Path, name: str, files: dict[str, str]) -> Path:
    """A copy of ``task`` whose solution writes ``files`` over /repo instead of the gold patch."""
    copy = task.parent / f"{task.name}-{name}"
    shutil.copytree(task, copy)
    lines = ["#!/bin/sh", "set -eu", "cd /repo"]
    for path, text in files.items():
        assert "TRAJFORGE_EOF" not in text
        lines += [f"mkdir -p \"$(dirname '{path}')\"", f"cat > '{path}' <<'TRAJFORGE_EOF'"]
        lines += [text.rstrip("\n"), "TRAJFORGE_EOF"]
    (copy / "solution" / "solve.sh").write_text("\n".join(lines) + "\n")
    toml = copy / "task.toml"
    toml.write_text(toml.read_text().replace(f'/{task.name}"', f'/{task.name}-{name}"', 1))
    return copy


def run_with_harbor(harbor, dataset: Path, agent: str, jobs: Path) -> dict[str, tuple]:
    """task folder -> (reward, grading.json) of one Harbor job over every folder of ``dataset``."""
    executable, env = harbor
    command = [
        executable, "run", "-p", str(dataset), "-a", agent, "-e", "harbor_nonet:NoNetworkDocker",
        "-o", str(jobs), "--job-name", agent, "-n", "4", "-y", "-q",
    ]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=1500)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    found = {}
    for result in (jobs / agent).glob("*/result.json"):
        said = json.loads(result.read_text())
        assert said["exception_info"] is None, said["exception_info"]
        grading = result.parent / "verifier" / "grading.json"
        reward = said["verifier_result"]["rewards"]["reward"]
        folder = said["task_name"].split("/", 1)[1]
        found[folder] = (reward, json.loads(grading.read_text()))
    return found


def docker(*args: str, input: bytes | None = None, check: bool = True) -> bytes:
    done = subprocess.run(["docker", *args], input=input, capture_output=True, timeout=900)
    assert not check or done.returncode == 0, done.stderr.decode()[-2000:]
    return done.stdout


def run_with_docker(dataset: Path, agent: str) -> dict[str, tuple]:
    """What Harbor does with a separate verifier, by hand: build ``environment/``; the agent's
    container (oracle: ``solve.sh``; nop: nothing), its /repo tarred by the collect hook; a fresh
    container of the image with that tar in /logs/artifacts and ``tests/`` in /tests, runs
    ``test.sh`` as root with Docker's default capabilities and no network."""
    found = {}
    for task in sorted(p for p in dataset.iterdir() if (p / "task.toml").exists()):
        tag = f"trajforge-harbor-check:{task.name.lower()[:100]}"
        docker("build", "-q", "-t", tag, str(task / "environment"))
        agent_box = docker("run", "-d", "--network", "none", tag, "sleep", "600").decode().strip()
        judge_box = ""
        try:
            docker("exec", agent_box, "mkdir", "-p", "/logs/artifacts", "/solution")
            if agent == "oracle":
                docker("cp", f"{task / 'solution'}/.", f"{agent_box}:/solution")
                docker("exec", agent_box, "sh", "/solution/solve.sh")
            docker("exec", agent_box, "sh", "-c", COLLECT)
            tree = docker("exec", agent_box, "cat", AGENT_TREE)
            judge_box = docker("run", "-d", "--network", "none", tag, "sleep", "600").decode()
            judge_box = judge_box.strip()
            docker("exec", judge_box, "mkdir", "-p", "/logs/artifacts", "/logs/verifier", "/tests")
            docker("exec", "-i", judge_box, "sh", "-c", f"cat > {AGENT_TREE}", input=tree)
            docker("cp", f"{task / 'tests'}/.", f"{judge_box}:/tests")
            docker("exec", judge_box, "sh", "/tests/test.sh")
            reward = float(docker("exec", judge_box, "cat", "/logs/verifier/reward.txt"))
            grading = json.loads(docker("exec", judge_box, "cat", "/logs/verifier/grading.json"))
        finally:
            docker("rm", "-f", agent_box, *([judge_box] if judge_box else []), check=False)
        found[task.name] = (reward, grading)
    return found


def run(harbor, dataset: Path, agent: str, jobs: Path) -> dict[str, tuple]:
    if harbor is None:
        return run_with_docker(dataset, agent)
    return run_with_harbor(harbor, dataset, agent, jobs)


# ---- the folders ----


def test_the_folders_are_harbor_tasks_with_no_path_to_the_fix(exported):
    tasks = sorted(p for p in exported.iterdir() if p.is_dir())
    assert len(tasks) == 3
    manifest = tomllib.loads((exported / "dataset.toml").read_text())
    assert manifest["schema_version"] == "1.0"
    assert {t["name"]: t["digest"] for t in manifest["tasks"]} == {
        f"trajforge/{t.name}": content_digest(str(t)) for t in tasks
    }
    readme = (exported / "README.md").read_text()
    # The shared verifier mode is forgeable (a planted .pth writes reward.txt 1): said loudly.
    assert '## WARNING: keep environment_mode = "separate"' in readme
    assert ".pth" in readme and "tests_failed" in readme and "forgeable" in readme
    for task in tasks:
        text = (task / "task.toml").read_text()
        assert '# WARNING: keep environment_mode = "separate"' in text
        assert "forgeable" in text and ".pth" in text
        config = tomllib.loads(text)
        assert config["schema_version"] == TASK_SCHEMA
        assert config["environment"]["network_mode"] == "no-network"
        assert (config["environment"]["cpus"], config["environment"]["memory_mb"]) == (1.0, 2048)
        assert config["verifier"]["environment_mode"] == "separate"
        assert config["verifier"]["collect"] == [
            {"command": COLLECT, "user": "root", "timeout_sec": 300.0}
        ]
        assert (task / "instruction.md").read_text().strip()
        assert os.access(task / "tests" / "test.sh", os.X_OK)
        assert os.access(task / "solution" / "solve.sh", os.X_OK)
        assert (task / "environment" / "trajforge" / "ca.crt").read_bytes() == b""
        gold = (task / "solution" / "gold.patch").read_text()
        fix_lines = [
            line[1:] for line in gold.splitlines() if line.startswith("+") and line[1:].strip()
        ]
        fix_lines = [line for line in fix_lines if not line.startswith("++")]
        assert fix_lines
        # The environment the agent gets holds the starting tree and nothing of the fix.
        for archive in ("start.tar", "setup.tar"):
            with tarfile.open(task / "environment" / "trajforge" / archive) as tar:
                names = tar.getnames()
                assert not any(n == ".git" or n.startswith(".git/") for n in names)
                if archive == "start.tar":
                    text = b"".join(
                        tar.extractfile(m).read() for m in tar.getmembers() if m.isfile()
                    ).decode()
                    assert not any(line in text for line in fix_lines)
        dockerfile = (task / "environment" / "Dockerfile").read_text()
        assert "ADD trajforge/start.tar /repo/" in dockerfile
        assert "COPY repo/ /repo/" not in dockerfile


def test_an_image_by_digest_replaces_the_recipe_where_the_task_has_one(exported, tmp_path):
    """``--harbor-image digest``: a task whose image has a registry digest starts FROM it (no
    build, no setup tree); one with a local image id only keeps its recipe (the CLI says so)."""
    work = exported.parent
    params = load_params(str(work / "params.yaml"))
    task = next(iter(load_tasks([str(work / "describe")]).values()))
    pushed = "registry.example:5000/trajforge/env@sha256:" + "a" * 64
    name, by_digest = write_task(
        dataclasses.replace(task, image_digest=pushed), str(tmp_path), params, "digest"
    )
    assert by_digest
    environment = tmp_path / name / "environment"
    assert (environment / "Dockerfile").read_text().splitlines()[2:4] == [
        f"FROM {pushed}",
        "ADD trajforge/start.tar /repo/",
    ]
    assert sorted(p.name for p in (environment / "trajforge").iterdir()) == ["start.tar"]
    config = tomllib.loads((tmp_path / name / "task.toml").read_text())
    assert config["metadata"]["environment"] == "image by digest"
    done = run_cli(
        "export", "--format", "harbor", "--harbor-image", "digest", "--input", "describe",
        "--output", str(tmp_path / "local"), cwd=work,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "environments by digest: 0" in done.stderr
    assert len(list((tmp_path / "local").glob("*/environment/trajforge/setup.tar"))) == 3


def test_the_folders_load_with_harbors_own_loader(exported, harbor):
    if harbor is None:
        pytest.skip("harbor is not available here: the runs were checked with docker alone")
    python = str(Path(harbor[0]).parent / "python")
    script = """
import json, sys
from pathlib import Path
from harbor.models.dataset.manifest import DatasetManifest
from harbor.models.task.config import NetworkMode
from harbor.models.task.task import Task
from harbor.models.task.verifier_mode import resolve_task_verifier_mode
from harbor.publisher.packager import Packager

root = Path(sys.argv[1])
manifest = DatasetManifest.from_toml_file(root / "dataset.toml")
said = {}
for ref in manifest.tasks:
    folder = root / ref.short_name
    assert Task.is_valid_dir(folder), folder
    task = Task(folder)
    digest = "sha256:" + Packager.compute_content_hash(folder)[0]
    said[ref.name] = {
        "name": task.name, "digest_matches": digest == ref.digest,
        "network": task.config.environment.network_mode.value,
        "mode": resolve_task_verifier_mode(task.config).value,
        "timeout": task.config.verifier.timeout_sec, "instruction": bool(task.instruction),
        "schema": task.config.schema_version,
    }
print(json.dumps({"dataset": manifest.dataset.name, "tasks": said}))
"""
    done = subprocess.run(
        [python, "-c", script, str(exported)], capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr
    said = json.loads(done.stdout.splitlines()[-1])
    assert said["dataset"] == "trajforge/trajforge"
    assert len(said["tasks"]) == 3
    for name, task in said["tasks"].items():
        assert task == {
            "name": name, "digest_matches": True, "network": "no-network", "mode": "separate",
            "timeout": task["timeout"], "instruction": True, "schema": TASK_SCHEMA,
        }  # fmt: skip


# ---- the rules test.sh runs are the host's ----


def test_test_sh_runs_the_hosts_own_rule_files(exported):
    """The verdict rule, the channel, the sentinels and the patch policy are the host's files,
    copied byte for byte (one rule written once, run on both sides)."""
    from importlib import resources

    folders = [p.parent for p in exported.rglob("task.toml")]
    assert folders
    for package, name in (
        ("trajforge.verifiers.grader", "rules.py"),
        ("trajforge.verifiers.grader", "channel.py"),
        ("trajforge.verifiers.grader", "sentinels.py"),
        ("trajforge.verifiers.languages.python", "patch_policy.py"),
    ):
        host = resources.files(package).joinpath(name).read_bytes()
        for folder in folders:
            (shipped,) = folder.rglob(f"tests/**/{name}")
            assert shipped.read_bytes() == host, (folder.name, name)


# ---- Harbor runs them ----


def test_oracle_scores_one_nop_zero_and_forgeries_zero(exported, harbor, tmp_path):
    """The oracle's job (the tasks and the forgeries) and the nop agent's (the tasks alone) run
    side by side: every trial mostly waits on Docker, and one after the other they took two
    rounds of Harbor's start-up and teardown."""
    dataset = runnable(exported, tmp_path / "dataset")
    untouched = runnable(exported, tmp_path / "nop-dataset")
    tasks = sorted(p.name for p in dataset.iterdir() if p.is_dir())
    add = next(
        dataset / t
        for t in tasks
        if ADD_TASK_TEST
        in json.loads((dataset / t / "tests/trajforge/task.json").read_text())["FAIL_TO_PASS"]
    )
    for name, (files, _, _) in FORGERIES.items():
        forged(add, name, files)
    jobs = tmp_path / f"jobs-{uuid.uuid4().hex[:6]}"
    with ThreadPoolExecutor(max_workers=2) as pool:
        nop_job = pool.submit(run, harbor, untouched, "nop", jobs)
        oracle = run(harbor, dataset, "oracle", jobs)
        nop = nop_job.result()
    assert {t: oracle[t][0] for t in tasks} == dict.fromkeys(tasks, 1.0), oracle
    for task in tasks:
        assert oracle[task][1]["reason"] == "resolved"
        assert oracle[task][1]["no_new_privileges"] is True
        assert oracle[task][1]["privileged"] is True  # pytest ran as uid 10001, not as root
    for name, (_, reward, reason) in FORGERIES.items():
        got, grading = oracle[f"{add.name}-{name}"]
        assert (got, grading["reason"]) == (reward, reason), (name, grading)
    assert oracle[f"{add.name}-fix_beside_a_forger"][1]["dropped"] == ["conftest.py"]

    assert {t: nop[t][0] for t in tasks} == dict.fromkeys(tasks, 0.0), nop
    assert {nop[t][1]["reason"] for t in tasks} == {"empty_patch"}
