"""What evaluating a model costs: ``trajforge evaluate`` against SWE-bench's harness protocol, and
the reward service under load.

Both approaches grade the same predictions (each task's gold patch, so every one must resolve)
with the same parallelism (``--workers``), in the same run, on the same Docker engine:

- ``swebench_harness``: SWE-bench's ``run_evaluation`` way. Per instance an instance image is
  built on top of the environment image, with the network, as its setup script does: clone the
  repository (from a git bundle here, from GitHub there), reset to the commit, apply the bug,
  ``pip install --no-deps -e .`` (the dependencies are in the environment image), commit. A
  fresh container of it then ``git apply``s the model patch and the test patch and runs the test
  command on the test files the task's tests live in; the log is graded by SWE-bench's rules
  (``trajforge grade``'s code) and the instance image is removed (its default
  ``cache_level=env`` keeps environment images, not instance images).
- ``trajforge_unsupervised``: trajforge's grader before the supervisor (verify-v3), as a baseline
  for what the unforgeable design costs: the same tree in a fresh container of the environment
  image, ``python -m pytest`` on the graded tests as the container's root, reporting through its
  own JUnit XML.
- ``trajforge``: ``Evaluator.evaluate``, what ``trajforge evaluate`` runs: a fresh grading
  container of the shared environment image (the editable install picks up the tree), the graded
  tests and their sentinels run by the supervisor as an unprivileged user.

Then the reward service (``serve-rewards``' code, over HTTP on 127.0.0.1) with 1, 2 and 4
concurrent clients, each sending gold and wrong patches in turn: p50/p95 latency, rewards per
minute, and whether every request got its answer; then 2 clients sending wrong patches only, graded
in full and with ``fail_fast`` (FAIL_TO_PASS first, stop when one fails): ``fail_fast_p50_speedup``.

Usage: ``python benchmarks/evaluate.py --tasks data/export [--limit 12] [--workers 2]``
(``--tasks``: any stage output from validate on, or an exported dataset). The last line is
``speedup_vs_swebench_harness: X``; the line before it ``grader_cost_vs_unsupervised: Y``
(the supervised grader's time over the unsupervised one's).
"""

from __future__ import annotations

import argparse
import difflib
import io
import json
import os
import shlex
import statistics
import sys
import tarfile
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from trajforge.generators.environments.image import build_session_spec  # noqa: E402
from trajforge.generators.environments.recipe import CA_FILE  # noqa: E402
from trajforge.generators.languages.python.profile import JUNIT_PATH  # noqa: E402
from trajforge.generators.sources.specs import SourceOptions, open_source  # noqa: E402
from trajforge.pipelines.evaluation.evaluator import Evaluator  # noqa: E402
from trajforge.pipelines.evaluation.rewards import RewardClient, RewardServiceError  # noqa: E402
from trajforge.pipelines.evaluation.service import RewardService, serve  # noqa: E402
from trajforge.pipelines.evaluation.task_rows import load_tasks  # noqa: E402
from trajforge.schemas.diff import parse_patch  # noqa: E402
from trajforge.schemas.params import EnvironmentParams, load_params  # noqa: E402
from trajforge.schemas.task_instance import TaskInstance  # noqa: E402
from trajforge.schemas.test_ids import is_grading_path, test_file  # noqa: E402
from trajforge.verifiers.grader.rules import MAX_SELECTED  # noqa: E402
from trajforge.verifiers.grading import grade_log  # noqa: E402
from trajforge.verifiers.sandbox.base import SessionSpec  # noqa: E402
from trajforge.verifiers.sandbox.docker import DockerSandbox  # noqa: E402
from trajforge.verifiers.sandbox.git_tree import (  # noqa: E402
    apply_patches,
    archive,
    git,
    scratch_objects,
)
from trajforge.verifiers.test_runner import RunContext, run_tests  # noqa: E402

INSTALL = "pip install -q --no-deps -e ."  # the instance image's install (deps are in the env)
GIT_ID = "-c user.name=swebench -c user.email=setup@swebench.config"


def harness_one(
    sandbox: DockerSandbox,
    task: TaskInstance,
    bundle: bytes,
    env: EnvironmentParams,
    timeout_s: float,
) -> bool:
    """SWE-bench's way for one prediction: build the instance image, then grade in a fresh
    container of it. Returns resolved.

    The instance image, with the network as SWE-bench builds it: clone the repository (from a
    git bundle of it, where SWE-bench clones from GitHub), reset to the task's commit, drop the
    remote, apply and commit the bug (SWE-smith's bug branch), ``pip install -e .`` (the
    dependencies are in the environment image), undo what the install wrote into tracked files
    (a generated ``_version.py``, so the patches apply; SWE-bench falls back to ``patch --fuzz``
    there), commit. The evaluation: ``git apply`` the model patch and the test patch, run the test
    command on the test files, grade the log by SWE-bench's rules."""
    tag = f"trajforge-bench-instance:{task.instance_id.lower()[:100]}"
    files = {"tmp/repo.bundle": bundle, "tmp/bug.diff": task.bug_patch.encode()}
    if env.ca_bundle and os.path.exists(env.ca_bundle):
        with open(env.ca_bundle, "rb") as handle:
            files[CA_FILE.lstrip("/")] = handle.read()
    setup = (
        "git clone -q /tmp/repo.bundle /repo && cd /repo"
        f" && git reset -q --hard {task.base_commit} && git remote remove origin"
        " && { [ ! -s /tmp/bug.diff ] || "
        f"{{ git apply /tmp/bug.diff && git {GIT_ID} commit -qam bug; }}; }}"
        f" && {INSTALL} && git checkout -q -- ."
        f" && git {GIT_ID} commit -q --allow-empty -am SWE-bench"
    )
    with sandbox.session(build_session_spec(task.image_name, env)) as session:
        session.put_archive(files_tar(files), "/")
        installed = session.exec(f"rm -rf /repo && {setup}", timeout_s=600, workdir="/")
        if installed.exit_code != 0:
            raise SystemExit(f"{task.instance_id}: instance image failed: {installed.output}")
        session.commit(tag)
    try:
        tests = sorted({test_file(t) for t in (*task.FAIL_TO_PASS, *task.PASS_TO_PASS)})
        evaluation = (
            "git apply /tmp/model.diff"
            " && { [ ! -s /tmp/test.diff ] || git apply /tmp/test.diff; } && "
            f"{task.test_cmd} {' '.join(shlex.quote(f) for f in tests)}"
        )
        patches = {"tmp/model.diff": task.patch.encode(), "tmp/test.diff": task.test_patch.encode()}
        with sandbox.session(SessionSpec(tag)) as session:
            session.put_archive(files_tar(patches), "/")
            result = session.exec(evaluation, timeout_s=timeout_s)
        graded = grade_log(task.FAIL_TO_PASS, task.PASS_TO_PASS, result.output.encode())
        if not graded.report["resolved"]:
            print(f"{task.instance_id}: not resolved by the harness: {result.output[-600:]}")
        return bool(graded.report["resolved"])
    finally:
        remove_instance_image(sandbox, tag)


def remove_instance_image(sandbox: DockerSandbox, tag: str, wait_s: float = 30.0) -> None:
    """The instance image removed once its container is (as SWE-bench's cleanup does, container
    first): the sandbox removes used containers in the background, and a forced removal while
    one remains only untags the image, leaving it on disk."""
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline:
        if not sandbox.client.containers.list(all=True, filters={"ancestor": tag}):
            break
        time.sleep(0.1)
    sandbox.client.images.remove(tag, force=True)


def unsupervised_one(
    sandbox: DockerSandbox, task: TaskInstance, repo: str, timeout_s: float
) -> bool:
    """trajforge's grader before the supervisor: the tree (start, patch, test patch) in a fresh
    container of the environment image, the graded tests run by ``python -m pytest`` as root,
    read from its JUnit XML. Returns resolved."""
    graded = (*task.FAIL_TO_PASS, *task.PASS_TO_PASS)
    with scratch_objects(repo) as objects:
        patches = [task.bug_patch, task.patch, task.test_patch]
        tree = apply_patches(repo, task.base_commit, patches, env=objects)
        files = archive(repo, tree, prefix="repo/", env=objects)
    context = RunContext(task.candidate_id, task.profile_id, task.test_cmd, JUNIT_PATH, timeout_s)
    with sandbox.session(SessionSpec(task.image_name)) as session:
        session.put_archive(files, "/")
        selection = graded if len(graded) <= MAX_SELECTED else ()
        statuses = run_tests(session, context, "model", 0, selection).statuses()
    return all(statuses.get(test_id) == "PASSED" for test_id in graded)


def git_bundle(repo: str) -> bytes:
    """The repository's whole history as one file, what a clone reads."""
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "repo.bundle")
        git(repo, "bundle", "create", path, "--all")
        with open(path, "rb") as handle:
            return handle.read()


def files_tar(files: dict[str, bytes]) -> bytes:
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w") as tar:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size, info.mode = len(data), 0o644
            tar.addfile(info, io.BytesIO(data))
    return out.getvalue()


def wrong_patch(task: TaskInstance, repo: str) -> str:
    """A patch that applies and fixes nothing: a comment atop a source file the fix changes (the
    tests run, FAIL_TO_PASS still fails), or a new module of one comment when none exists yet."""
    start = apply_patches(repo, task.base_commit, [task.bug_patch])
    present = set(git(repo, "ls-tree", "-r", "--name-only", start).decode().splitlines())
    sources = sorted(
        p for p in parse_patch(task.patch).files
        if p in present and p.endswith(".py") and not is_grading_path(p)
    )  # fmt: skip
    if not sources:
        return "".join(difflib.unified_diff([], ["# reviewed\n"], "/dev/null", "b/noop_note.py"))
    path = sources[0]
    old = git(repo, "show", f"{start}:{path}").decode().splitlines(keepends=True)
    return "".join(difflib.unified_diff(old, ["# reviewed\n", *old], f"a/{path}", f"b/{path}"))


def timed(label: str, work, items: list, workers: int) -> tuple[float, list]:
    started = time.monotonic()
    with ThreadPoolExecutor(max_workers=workers) as pool:
        results = list(pool.map(work, items))
    seconds = time.monotonic() - started
    per_hour = len(items) / seconds * 3600
    print(f"{label}: {len(items)} predictions in {seconds:.1f}s ({per_hour:.0f}/hour), "
          f"{sum(results)} resolved")  # fmt: skip
    return seconds, results


def load(
    url: str,
    tasks: list[TaskInstance],
    wrong: dict[str, str],
    clients: int,
    per_client: int,
    only_wrong: bool = False,
    fail_fast: bool | None = None,
) -> dict:
    """``clients`` threads, each sending ``per_client`` requests (gold, then a wrong patch; or
    wrong patches only)."""
    client = RewardClient(url)
    latencies: list[float] = []
    answers: list[dict] = []
    lock = threading.Lock()

    def one_client(index: int) -> None:
        for k in range(per_client):
            task = tasks[(index + k) % len(tasks)]
            gold = k % 2 == 0 and not only_wrong
            patch = task.patch if gold else wrong[task.instance_id]
            started = time.monotonic()
            try:  # refusals are retried by the client; one that outlasts its tries is no answer
                answer = client.score(task.instance_id, patch, fail_fast=fail_fast)
            except RewardServiceError as exc:
                answer = {"error": True, "reason": exc.reason}
            with lock:
                latencies.append(time.monotonic() - started)
                answers.append(answer)

    started = time.monotonic()
    threads = [threading.Thread(target=one_client, args=(i,)) for i in range(clients)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    seconds = time.monotonic() - started
    ordered = sorted(latencies)
    answered = [a for a in answers if not a.get("error")]
    return {
        "clients": clients,
        "sent": clients * per_client,
        "answered": len(answered),
        "p50_s": round(statistics.median(ordered), 2),
        "p95_s": round(ordered[min(len(ordered) - 1, int(0.95 * len(ordered)))], 2),
        "rewards_per_minute": round(len(answered) / seconds * 60, 1),
        "gold_resolved": sum(1 for a in answered if a["reward"] == 1.0),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tasks", action="append", required=True)
    parser.add_argument("--params", default=os.path.join(ROOT, "params.yaml"))
    parser.add_argument("--limit", type=int, default=12, help="tasks (one prediction each)")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--requests", type=int, default=4, help="requests per load client")
    parser.add_argument("--json", help="write the figures here")
    args = parser.parse_args()
    params = load_params(args.params)
    everything = load_tasks(args.tasks)
    tasks = [everything[i] for i in sorted(everything)][: args.limit]
    if not tasks:
        raise SystemExit("no tasks in --tasks")
    options = SourceOptions.from_params(params)
    repos = {t.instance_id: open_source(t.source, options).path for t in tasks}
    bundles = {path: git_bundle(path) for path in set(repos.values())}
    wrong = {t.instance_id: wrong_patch(t, repos[t.instance_id]) for t in tasks}
    timeout = params.validate.test_timeout_s
    sandbox = DockerSandbox(spares=args.workers)
    evaluator = Evaluator(params, sandbox=sandbox, use_cache=False, spares=args.workers)
    # Images ready (pulled, present or rebuilt from the row's recipe) before any side is timed;
    # the baselines run in the image the evaluator chose (a rebuilt one when the row's is gone).
    running = {task.instance_id: evaluator.prepared(task)[1] for task in tasks}

    def harness(task: TaskInstance) -> bool:
        bundle = bundles[repos[task.instance_id]]
        return harness_one(sandbox, running[task.instance_id], bundle, params.environment, timeout)

    def unsupervised(task: TaskInstance) -> bool:
        repo = repos[task.instance_id]
        return unsupervised_one(sandbox, running[task.instance_id], repo, timeout)

    def ours(task: TaskInstance) -> bool:
        evaluation = evaluator.evaluate(task, task.patch)
        if not evaluation.resolved:
            print(f"{task.instance_id}: {evaluation.reason}: {evaluation.log[-300:]}")
        return evaluation.resolved

    base_s, base = timed("swebench_harness", harness, tasks, args.workers)
    before_s, before = timed("trajforge_unsupervised", unsupervised, tasks, args.workers)
    ours_s, mine = timed("trajforge", ours, tasks, args.workers)
    if not all(mine):
        raise SystemExit("trajforge left a gold patch unresolved: the benchmark is void")
    figures: dict = {
        "tasks": len(tasks),
        "workers": args.workers,
        "swebench_harness_s": round(base_s, 1),
        "trajforge_unsupervised_s": round(before_s, 1),
        "trajforge_s": round(ours_s, 1),
        "trajforge_unsupervised_resolved": sum(before),
        "swebench_harness_resolved": sum(base),
        "trajforge_resolved": sum(mine),
        "speedup_vs_swebench_harness": round(base_s / ours_s, 2),
        "grader_cost_vs_unsupervised": round(ours_s / before_s, 2),
    }
    service = RewardService(evaluator, {t.instance_id: t for t in tasks}, workers=args.workers)
    server = serve(service, port=0)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}"
    figures["service"] = []
    try:
        for clients in (1, 2, 4):
            row = load(url, tasks, wrong, clients, args.requests)
            figures["service"].append(row)
            lost = row["sent"] - row["answered"]
            print(f"serve-rewards, {clients} client(s): p50 {row['p50_s']}s, p95 {row['p95_s']}s, "
                  f"{row['rewards_per_minute']} rewards/min, {lost} lost")  # fmt: skip
        # RL batches are mostly wrong patches: the full graded run against fail-fast, 2 clients
        for fail_fast in (False, True):
            row = load(url, tasks, wrong, 2, args.requests, only_wrong=True, fail_fast=fail_fast)
            row["fail_fast"] = fail_fast
            figures["service"].append(row)
            lost = row["sent"] - row["answered"]
            mode = "fail-fast" if fail_fast else "full run"
            print(f"serve-rewards, wrong patches, 2 clients, {mode}: p50 {row['p50_s']}s, "
                  f"p95 {row['p95_s']}s, {lost} lost")  # fmt: skip
        full, quick = figures["service"][-2:]
        figures["fail_fast_p50_speedup"] = round(full["p50_s"] / max(quick["p50_s"], 0.01), 2)
        print(f"fail_fast_p50_speedup: {figures['fail_fast_p50_speedup']}")
    finally:
        server.shutdown()
        service.close()
        evaluator.close()
    if args.json:
        with open(args.json, "w") as handle:
            json.dump(figures, handle, indent=2)
    print(f"grader_cost_vs_unsupervised: {figures['grader_cost_vs_unsupervised']}")
    print(f"speedup_vs_swebench_harness: {figures['speedup_vs_swebench_harness']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
