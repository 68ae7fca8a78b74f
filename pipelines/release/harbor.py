"""``trajforge export --format harbor``: every task as a Harbor task folder (task schema 1.4).

Harbor (``pip install harbor``; its ``harbor.models.task``) reads a task as a folder::

    OUTPUT/README.md                          what the folders are, and the warning below
    OUTPUT/dataset.toml                       the dataset manifest (schema 1.0): every task by
                                              name and content digest (Harbor's own algorithm)
    OUTPUT/<task>/task.toml                   schema 1.4: [task] name, [metadata] (trajforge's
                                              fields), [verifier] (separate container, its
                                              timeout, the collect hook), [agent] timeout,
                                              [environment] cpus, memory, storage, no network
    OUTPUT/<task>/instruction.md              the problem statement
    OUTPUT/<task>/environment/Dockerfile      the task's recipe (or, with image="digest", its
                                              image by registry digest), then its starting tree
    OUTPUT/<task>/environment/trajforge/      setup.tar (the repository at the setup commit, the
                                              recipe's repo/), start.tar (base_commit + bug_patch:
                                              no history, no path to the fix), ca.crt (empty: put
                                              a CA bundle there to build behind a proxy),
                                              env.json (the recipe's marker)
    OUTPUT/<task>/solution/solve.sh           applies gold.patch (the task's patch) in /repo
    OUTPUT/<task>/tests/test.sh               runs trajforge's grader in the container
    OUTPUT/<task>/tests/trajforge/            the grader (``harbor_grade.py`` and the verdict's
                                              modules; programs/: the graded run's files, as a
                                              graded container has them), task.json and
                                              clean.tar (the task's own test files)

Inputs are what the Hugging Face export reads (``tasks/*.parquet`` of curated or validated
outputs, read the same way: ``scan.check_inputs``); each task's repository is opened from its
``source`` like ``evaluate`` does. A task that cannot become a folder is left out with its reason
(no recipe, no problem statement, a test command the grader cannot run, a patch that does not
apply, a source that cannot be opened). The output is written to a staging folder and swapped in
whole, like every stage's.

The grade is only as good as the container it runs in: with ``environment_mode = "shared"`` the
verifier runs where the agent ran, and what the agent left there (a ``.pth`` file that Python
runs at start-up) can write ``reward.txt`` 1 while ``grading.json`` says ``tests_failed``. Every
task.toml says ``"separate"``; the README and each task.toml say, loudly, not to change it.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import re
import shutil
import sys
import tarfile
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from importlib import metadata, resources

from trajforge.generators.environments.recipe import MARKER_SOURCE, marker
from trajforge.generators.sources.specs import SourceOptions, open_source
from trajforge.pipelines.release.scan import check_inputs, table_files
from trajforge.pipelines.release.shards import batches
from trajforge.pipelines.runtime import progress
from trajforge.pipelines.runtime.sinks import check_output, publish, staging_dir
from trajforge.schemas.diff import parse_patch
from trajforge.schemas.errors import UserError
from trajforge.schemas.params import Params, size_bytes
from trajforge.schemas.records import from_table
from trajforge.schemas.task_instance import TaskInstance
from trajforge.schemas.test_ids import is_grading_path, test_file
from trajforge.verifiers.grader import supervised
from trajforge.verifiers.grader.rules import MAX_SELECTED
from trajforge.verifiers.grader.supervised import UnsupportedTestCommand
from trajforge.verifiers.languages.python import pytest_run
from trajforge.verifiers.languages.python.in_container import harbor_grade
from trajforge.verifiers.languages.python.pytest_run import ImageFacts
from trajforge.verifiers.patch_verifier import VERSION as GRADER_VERSION
from trajforge.verifiers.sandbox.base import BASE_ENV, REPO_DIR
from trajforge.verifiers.sandbox.git_tree import apply_patches, archive, scratch_objects
from trajforge.verifiers.sandbox.ready import (
    HOSTS_LABEL,
    READY_FILE,
    SERVICES_ENTRYPOINT,
    WAIT_S,
    host_names,
)

STAGE = "export"
TASK_SCHEMA = "1.4"  # harbor.models.task.config.TaskConfig.schema_version
DATASET_SCHEMA = "1.0"  # harbor.models.dataset.manifest.DatasetManifest.schema_version
IMAGES = ("recipe", "digest")
ORG = "trajforge"
AGENT_TREE = "/logs/artifacts/trajforge-repo.tar"  # the collect hook's tar of the agent's /repo
COLLECT = f"tar -C {REPO_DIR} -cf {AGENT_TREE} . || true"
RECIPE_REPO_LINE = "COPY repo/ /repo/"
GRADER_ROOT = supervised.ROOT
MAX_TREE_BYTES = 1024**3
MAX_LOG_BYTES = 1_000_000
VERIFIER_SETUP_S = 120  # beyond the probe, the tests and the supervisor's grace: copies, sentinels
NAME_CHARS = re.compile(r"[^A-Za-z0-9._-]")
# The modules harbor_grade.py imports beside it (package, file): what decides a verdict on the
# host, copied. The graded run's own files (``supervised.grader_files``) go under
# the task folder's tests/trajforge/programs/, laid out as under the grader's folder in a
# container.
VERDICT_MODULES = (
    (pytest_run.HERE, "harbor_grade.py"),
    ("trajforge.verifiers.grader", "channel.py"),
    ("trajforge.verifiers.grader", "rules.py"),
    ("trajforge.verifiers.grader", "sentinels.py"),
    ("trajforge.verifiers.languages.python", "patch_policy.py"),
    ("trajforge.schemas", "test_ids.py"),
)


def shipped_programs() -> dict[str, bytes]:
    """Every program a task folder ships, by its path under tests/trajforge/."""
    modules = {
        name: resources.files(pkg).joinpath(name).read_bytes() for pkg, name in VERDICT_MODULES
    }
    graded = supervised.grader_files(pytest_run.programs())
    return {
        **modules,
        **{f"{harbor_grade.GRADER_FILES}/{path}": data for path, data in graded.items()},
    }


TEST_SH = """\
#!/bin/sh
# trajforge's grader for {instance_id}, as root (Harbor's verifier user): the agent's tree (the
# collect hook's tar, or /repo), its test files reset to the task's own, the graded tests run by
# the supervisor as an unprivileged user with sentinels planted; 1 only for "resolved".
# /logs/verifier/grading.json says why; tests.log holds the run's output.
mkdir -p /logs/verifier
echo 0 > /logs/verifier/reward.txt
here="$(cd "$(dirname "$0")" && pwd)"
if [ ! -x /venv/bin/python ]; then
    echo "trajforge: this image has no /venv/bin/python: reward 0" >&2
    exit 0
fi
{services}exec /venv/bin/python -I -B "$here/trajforge/harbor_grade.py" "$here/trajforge/task.json"
"""

# An image that starts services for its suite (``services.py``: its entrypoint) marks when they
# answer, and names the hosts its suite reaches them by. Harbor runs the entrypoint but neither
# waits for the mark nor maps the names, as trajforge's sandboxes do (``sandbox/ready.py``), so
# the grader's script does both first, as root.
SERVICES_SH = """\
i=0
while [ ! -e {ready} ] && [ "$i" -lt {tenths} ]; do i=$((i+1)); sleep 0.1; done
[ -e {ready} ] || echo "trajforge: the services did not mark {ready} ready" >&2
"""
HOST_SH = """\
awk '{{ for (i = 2; i <= NF; i++) if ($i == "{name}") found = 1 }} END {{ exit !found }}' \\
    /etc/hosts 2>/dev/null \\
    || echo "127.0.0.1 {name}" >> /etc/hosts || true
"""
_HOSTS = re.compile(re.escape(HOSTS_LABEL) + r'="([^"]*)"')

SOLVE_SH = """\
#!/bin/sh
# The gold patch of {instance_id}, applied in /repo (the task's starting tree).
set -eu
here="$(cd "$(dirname "$0")" && pwd)"
cd /repo
if command -v git >/dev/null 2>&1; then
    git apply --whitespace=nowarn "$here/gold.patch"
else
    patch -p1 < "$here/gold.patch"
fi
"""


@dataclass
class HarborResult:
    output: str
    tasks: list[str]  # the task folders written, in order
    left_out: Counter  # reason -> tasks
    summary: progress.Summary
    details: dict[str, str] = field(default_factory=dict)  # instance id -> why it was left out
    digests: int = 0  # tasks whose environment is their image by registry digest


class LeftOut(Exception):
    def __init__(self, reason: str, detail: str) -> None:
        super().__init__(detail)
        self.reason = reason
        self.detail = detail


def export_harbor(
    inputs: Sequence[str],
    output: str,
    params: Params,
    *,
    image: str = "recipe",
    say: Callable[[str], None] = lambda line: print(line, file=sys.stderr),
) -> HarborResult:
    """Write every task of ``inputs`` as a Harbor task folder under ``output`` (module doc)."""
    timer = progress.Timer()
    if image not in IMAGES:
        raise UserError(f"export: --harbor-image must be one of {', '.join(IMAGES)}, got {image}")
    if not inputs:
        raise UserError("export: no inputs; pass --input with a curated or validated output")
    check_output(STAGE, output, inputs)
    set_aside = check_inputs(inputs, ("tasks",))
    files = table_files(inputs, ("tasks",))["tasks"]
    staging = staging_dir(output)
    written: dict[str, str] = {}  # folder -> Harbor digest
    left_out: Counter = Counter()
    details: dict[str, str] = {}
    seen: set[str] = set()
    read = digests = 0
    try:
        for task in _tasks(files):
            read += 1
            if task.instance_id in seen:
                left_out["duplicate_task"] += 1
                continue
            seen.add(task.instance_id)
            try:
                folder, by_digest = write_task(task, staging, params, image)
            except LeftOut as why:
                left_out[why.reason] += 1
                details[task.instance_id] = why.detail
                say(f"export: left out {task.instance_id}: {why.reason}: {why.detail}")
                continue
            digests += by_digest
            written[folder] = content_digest(os.path.join(staging, folder))
        _write_dataset(staging, written, params)
        _write_readme(staging, list(written))
        publish(staging, output)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    summary = progress.Summary(STAGE, read, len(written), left_out, timer.elapsed())
    summary.extra["format"] = f"harbor (task schema {TASK_SCHEMA})"
    if image == "digest":
        summary.extra["environments by digest"] = digests
    if set_aside:
        summary.extra["bad input files"] = len(set_aside)
    return HarborResult(os.path.abspath(output), list(written), left_out, summary, details, digests)


def _tasks(files: list[str]) -> Iterator[TaskInstance]:
    for batch in batches(files, TaskInstance.ARROW_SCHEMA, 256):
        yield from from_table(TaskInstance, batch)


def folder_name(instance_id: str) -> str:
    """A task's folder and short name: one safe path component."""
    name = NAME_CHARS.sub("-", instance_id).lstrip(".-_") or "task"
    if name != instance_id:
        name = f"{name}~{hashlib.sha256(instance_id.encode()).hexdigest()[:8]}"
    return name


def write_task(task: TaskInstance, root: str, params: Params, image: str) -> tuple[str, bool]:
    """The task's folder under ``root``; (its name, whether its image is named by digest)."""
    if not task.problem_statement.strip():
        raise LeftOut("no_problem_statement", "describe the tasks first (trajforge describe)")
    by_digest = image == "digest" and "@" in task.image_digest
    if not by_digest and not task.env_recipe:
        raise LeftOut("no_recipe", "the task has no env_recipe (curated before recipes)")
    if not by_digest and RECIPE_REPO_LINE not in task.env_recipe.splitlines():
        raise LeftOut("recipe_format", f"the recipe has no line {RECIPE_REPO_LINE!r}")
    try:
        args = pytest_run.pytest_args(task.test_cmd, ImageFacts(()), ())
    except UnsupportedTestCommand as exc:
        raise LeftOut("unsupported_test_cmd", str(exc)) from None
    own_len = len(pytest_run.pytest_args("pytest", ImageFacts(()), ()))
    options, own = args[: len(args) - own_len], args[len(args) - own_len :]
    try:
        repo = open_source(task.source, SourceOptions.from_params(params)).path
        with scratch_objects(repo) as objects:
            start = apply_patches(repo, task.base_commit, [task.bug_patch], env=objects)
            apply_patches(repo, task.base_commit, [task.bug_patch, task.patch], env=objects)
            patches = [task.bug_patch, task.test_patch]
            clean = apply_patches(repo, task.base_commit, patches, env=objects)
            start_tar = _normalized(archive(repo, start, prefix="", env=objects))
            clean_tar = archive(repo, clean, prefix="", env=objects)
            setup_tar = b"" if by_digest else _normalized(
                archive(repo, task.environment_setup_commit, prefix="")
            )  # fmt: skip
    except UserError as exc:
        raise LeftOut(getattr(exc, "reason", "bad_source"), str(exc).splitlines()[0]) from None

    name = folder_name(task.instance_id)
    folder = os.path.join(root, name)
    graded = (*task.FAIL_TO_PASS, *task.PASS_TO_PASS)
    test_patch_paths = sorted(parse_patch(task.test_patch).files)
    task_tests = sorted(set(test_patch_paths) | {test_file(t) for t in graded})
    keep_clean = set(task_tests)
    clean_bytes = _normalized(clean_tar, lambda p: p in keep_clean or is_grading_path(p))

    env_dir = os.path.join(folder, "environment")
    _write(os.path.join(env_dir, "trajforge", "start.tar"), start_tar)
    if by_digest:
        dockerfile = "\n".join(
            [
                f"# trajforge task {task.instance_id}: its environment, by registry digest,",
                "# then its starting tree (base_commit + bug_patch, no history) in /repo.",
                f"FROM {task.image_digest}",
                "ADD trajforge/start.tar /repo/",
                "WORKDIR /repo",
                "",
            ]
        )
    else:
        recipe = task.env_recipe.replace(RECIPE_REPO_LINE, "ADD trajforge/setup.tar /repo/", 1)
        dockerfile = "\n".join(
            [
                recipe.rstrip("\n"),
                "",
                "# trajforge (Harbor export): the recipe's repo/ is trajforge/setup.tar (the",
                "# repository at the setup commit); then the task's starting tree (base_commit +",
                "# bug_patch, no history) in /repo. trajforge/ca.crt is empty: to build behind a",
                "# TLS-intercepting proxy, put your CA bundle there.",
                "ADD trajforge/start.tar /repo/",
                "WORKDIR /repo",
                "",
            ]
        )
        _write(os.path.join(env_dir, "trajforge", "setup.tar"), setup_tar)
        _write(os.path.join(env_dir, "trajforge", "ca.crt"), b"")
        _write(
            os.path.join(env_dir, MARKER_SOURCE),
            marker(task.profile_id, task.environment_setup_commit),
        )
    _write(os.path.join(env_dir, "Dockerfile"), dockerfile.encode())

    _write(os.path.join(folder, "instruction.md"), _instruction(task).encode())
    _write(os.path.join(folder, "solution", "gold.patch"), task.patch.encode())
    _write(
        os.path.join(folder, "solution", "solve.sh"),
        SOLVE_SH.format(instance_id=task.instance_id).encode(),
        0o755,
    )

    tests = os.path.join(folder, "tests")
    grader = os.path.join(tests, "trajforge")
    _write(os.path.join(grader, "clean.tar"), clean_bytes)
    for path, data in shipped_programs().items():
        _write(os.path.join(grader, path), data)
    start_index = harbor_grade.tar_index(os.path.join(env_dir, "trajforge", "start.tar"), 2**62)
    config = {
        "instance_id": task.instance_id,
        "FAIL_TO_PASS": list(task.FAIL_TO_PASS),
        "PASS_TO_PASS": list(task.PASS_TO_PASS),
        "selection": list(graded) if len(graded) <= MAX_SELECTED else [],
        "graded_files": sorted(
            {test_file(t) for t in task.FAIL_TO_PASS} or {test_file(t) for t in graded}
        ),
        "task_tests": task_tests,
        "test_patch_paths": test_patch_paths,
        "start": {path: list(entry) for path, entry in sorted(start_index.items())},
        "options": options,
        "own": own,
        "blocked_plugins": list(pytest_run.BLOCKED_PLUGINS),
        "timeout_s": params.validate.test_timeout_s,
        "probe_timeout_s": supervised.PROBE_TIMEOUT_S,
        "grace_s": supervised.GRACE_S,
        "env": dict(BASE_ENV),
        "root": GRADER_ROOT,
        "uid": supervised.TEST_UID,
        "interpreter": pytest_run.PYTHON,
        "repo": REPO_DIR,
        "generated": "/venv/trajforge-generated",
        "agent_tree": AGENT_TREE,
        "max_tree_bytes": MAX_TREE_BYTES,
        "max_log_bytes": MAX_LOG_BYTES,
        "grader": GRADER_VERSION,
    }
    data = (json.dumps(config, indent=1, sort_keys=True) + "\n").encode()
    _write(os.path.join(grader, "task.json"), data)
    test_sh = TEST_SH.format(instance_id=task.instance_id, services=services_sh(task.env_recipe))
    _write(os.path.join(tests, "test.sh"), test_sh.encode(), 0o755)
    _write(os.path.join(folder, "task.toml"), task_toml(task, name, params, by_digest).encode())
    return name, by_digest


def services_sh(recipe: str) -> str:
    """``test.sh``'s lines for an image whose entrypoint starts services (none for others, so
    their folders stay as they were): wait for the mark, map the hosts (``host_names`` only)."""
    if f'ENTRYPOINT ["{SERVICES_ENTRYPOINT}"]' not in recipe.splitlines():
        return ""
    lines = SERVICES_SH.format(ready=READY_FILE, tenths=WAIT_S * 10)
    named = _HOSTS.search(recipe)
    for name in host_names(named.group(1).split() if named else ()):
        lines += HOST_SH.format(name=name)
    return lines


def _instruction(task: TaskInstance) -> str:
    text = task.problem_statement.strip()
    return (
        f"{text}\n\n---\n\nThe repository is in `/repo`. Change its source so the issue above "
        "is fixed; the tests that check it are not shown to you.\n"
    )


def task_toml(task: TaskInstance, name: str, params: Params, by_digest: bool) -> str:
    """``task.toml`` in Harbor's task schema 1.4, written by hand (TOML basic strings)."""
    box = params.sandbox
    verifier_s = (
        params.validate.test_timeout_s
        + supervised.PROBE_TIMEOUT_S
        + supervised.GRACE_S
        + VERIFIER_SETUP_S
    )
    first = task.problem_statement.strip().splitlines()[0][:200]
    disk = size_bytes("sandbox.writable_layer_size", box.writable_layer_size)
    meta: dict[str, object] = {
        "instance_id": task.instance_id,
        "repo": task.repo,
        "base_commit": task.base_commit,
        "environment_setup_commit": task.environment_setup_commit,
        "origin": task.origin,
        "profile_id": task.profile_id,
        "image_name": task.image_name,
        "image_digest": task.image_digest,
        "environment": "image by digest" if by_digest else "recipe",
        "test_cmd": task.test_cmd,
        "FAIL_TO_PASS": list(task.FAIL_TO_PASS),
        "PASS_TO_PASS": list(task.PASS_TO_PASS),
        "grader": f"trajforge {GRADER_VERSION}",
        "sandbox_pids": box.pids,
        "sandbox_tmp_size": box.tmp_size,
        "trajforge_version": _trajforge_version(),
    }
    if task.difficulty is not None:
        meta["difficulty"] = task.difficulty
    lines = [
        f"# A trajforge task ({task.instance_id}) in Harbor's task schema {TASK_SCHEMA}.",
        f"schema_version = {_toml(TASK_SCHEMA)}",
        'source = "trajforge"',
        "",
        "[task]",
        f"name = {_toml(f'{ORG}/{name}')}",
        f"description = {_toml(first)}",
        f"keywords = {_toml(['trajforge', 'swe', task.origin])}",
        "",
        "[metadata]",
        *(f"{key} = {_toml(value)}" for key, value in meta.items()),
        "",
        "# The verifier runs in a fresh container of the same environment: the agent's /repo",
        "# arrives as a tar (the collect hook), never its processes or its changes elsewhere.",
        *(f"# {line}" for line in SHARED_MODE_WARNING),
        "[verifier]",
        f"timeout_sec = {float(verifier_s)}",
        'environment_mode = "separate"',
        'user = "root"',
        "",
        "[[verifier.collect]]",
        f"command = {_toml(COLLECT)}",
        'user = "root"',
        "timeout_sec = 300.0",
        "",
        "[agent]",
        f"timeout_sec = {float(params.rollout.max_time_s)}",
        "",
        "# trajforge's sandbox: no network, its CPU, memory and disk.",
        "[environment]",
        f"build_timeout_sec = {float(params.environment.build_timeout_s)}",
        f"cpus = {_toml(box.cpus)}",
        f"memory_mb = {size_bytes('sandbox.memory', box.memory) // 2**20}",
        f"storage_mb = {disk // 2**20}",
        'network_mode = "no-network"',
        f"workdir = {_toml(REPO_DIR)}",
        "",
    ]
    return "\n".join(lines)


def _toml(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, list | tuple):
        return "[" + ", ".join(_toml(v) for v in value) + "]"
    text = json.dumps(str(value), ensure_ascii=False)
    return text.replace("\x7f", "\\u007f")


def _normalized(data: bytes, keep: Callable[[str], bool] | None = None) -> bytes:
    """A git archive's tar, byte for byte the same on every run (no times, owners or the
    archive's comment), with only the files ``keep`` says."""
    out = io.BytesIO()
    with (
        tarfile.open(fileobj=io.BytesIO(data), mode="r:") as tar,
        tarfile.open(fileobj=out, mode="w", format=tarfile.PAX_FORMAT) as made,
    ):
        for member in tar:
            name = member.name.rstrip("/")
            if member.type == tarfile.XGLTYPE or not name or name == ".":
                continue
            if keep is not None and (member.isdir() or not keep(name)):
                continue
            info = tarfile.TarInfo(name)
            info.mtime, info.uid, info.gid, info.uname, info.gname = 0, 0, 0, "", ""
            if member.isdir():
                info.type, info.mode = tarfile.DIRTYPE, 0o755
                made.addfile(info)
            elif member.issym():
                info.type, info.linkname, info.mode = tarfile.SYMTYPE, member.linkname, 0o777
                made.addfile(info)
            elif member.isfile():
                content = tar.extractfile(member)
                info.size = member.size
                info.mode = 0o755 if member.mode & 0o111 else 0o644
                made.addfile(info, content)
    return out.getvalue()


def content_digest(task_dir: str) -> str:
    """``sha256:<hex>`` of a task folder as Harbor's Packager hashes it (``harbor sync``): every
    file of task.toml, instruction.md, environment/, tests/ and solution/, by relative path."""
    paths = [
        p for p in ("task.toml", "instruction.md") if os.path.isfile(os.path.join(task_dir, p))
    ]
    for sub in ("environment", "tests", "solution"):
        for folder, _, files in os.walk(os.path.join(task_dir, sub)):
            paths += [os.path.relpath(os.path.join(folder, f), task_dir) for f in files]
    outer = hashlib.sha256()
    for rel in sorted(p.replace(os.sep, "/") for p in paths):
        with open(os.path.join(task_dir, rel), "rb") as handle:
            inner = hashlib.sha256(handle.read()).hexdigest()
        outer.update(f"{rel}\0{inner}\n".encode())
    return f"sha256:{outer.hexdigest()}"


# Said in the README and in every task.toml: a Harbor user may flip the mode without reading code.
SHARED_MODE_WARNING = (
    'WARNING: keep environment_mode = "separate". In Harbor\'s "shared" verifier mode the',
    "grader runs in the agent's own container, where the agent can plant code that runs first",
    "(a .pth file in site-packages): reward.txt then says 1 while grading.json says",
    "tests_failed. A shared-mode reward from these tasks is forgeable; do not train on one.",
)


def _write_readme(root: str, tasks: Sequence[str]) -> None:
    """``README.md``: what the folders are, and the warning no user of them may miss."""
    lines = [
        "# trajforge tasks for Harbor",
        "",
        f"{len(tasks)} task folders in Harbor's task schema {TASK_SCHEMA}, listed with their",
        "content digests in `dataset.toml`. Each grades the agent's `/repo` with trajforge's",
        "grader in a fresh container of the task's environment (`tests/test.sh`).",
        "",
        "## " + SHARED_MODE_WARNING[0].split(".")[0],
        "",
        *(f"> {line}" for line in SHARED_MODE_WARNING),
        "",
    ]
    _write(os.path.join(root, "README.md"), "\n".join(lines).encode())


def _write_dataset(root: str, tasks: dict[str, str], params: Params) -> None:
    """``dataset.toml``: Harbor's dataset manifest (schema 1.0), every task pinned by digest."""
    version = hashlib.sha256(
        ",".join(sorted(d.removeprefix("sha256:") for d in tasks.values())).encode()
    ).hexdigest()[:16]
    lines = [
        f"# trajforge tasks in Harbor's dataset manifest schema {DATASET_SCHEMA}; each task",
        "# folder beside this file is one [[tasks]] entry, pinned by its content digest.",
        f"schema_version = {_toml(DATASET_SCHEMA)}",
        "",
        "[dataset]",
        f"name = {_toml(f'{ORG}/{folder_name(params.export.name)}')}",
        f"version = {_toml(version)}",
        'description = "Verified software-engineering tasks made by trajforge"',
        'keywords = ["trajforge", "swe"]',
        "",
    ]
    for name, digest in tasks.items():
        lines += ["[[tasks]]", f"name = {_toml(f'{ORG}/{name}')}", f"digest = {_toml(digest)}", ""]
    lines += [
        "[metadata]",
        f"trajforge_version = {_toml(_trajforge_version())}",
        f"license = {_toml(params.export.license)}",
        f"tasks = {len(tasks)}",
        "",
    ]
    _write(os.path.join(root, "dataset.toml"), "\n".join(lines).encode())


def _write(path: str, data: bytes, mode: int = 0o644) -> None:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as handle:
        handle.write(data)
    os.chmod(path, mode)


def _trajforge_version() -> str:
    try:
        return metadata.version("trajforge")
    except metadata.PackageNotFoundError:
        return "unknown"
