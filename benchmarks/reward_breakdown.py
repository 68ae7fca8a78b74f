"""Where a fail-fast reward's time goes: one wrong patch per task, graded alone, in parts.

``evaluate.py`` gives the service's latency under load; this says what one request is made of
when nothing waits in a queue: the host's git work (the patch applied in a throwaway index, the
tree written), waiting for a container (a spare started ahead: near zero), copying the grader,
the tree and the sentinels in, the supervisor's run (its start, pytest's start and the tests),
reading the result back, and, off the request's path, starting the next spare and removing the
used container. Each part is the engine call or host step timed where the grader makes it.

Per task it also says where fail-fast's first run ended: its median reward, how many
FAIL_TO_PASS tests it has, and how many of them a stop at the first failure left ``NOT_RUN``
(read from one more, untimed verdict; 0 for a grader that runs them all), and how long
``import pytest`` takes the grader's unprivileged user in a grading container of the task's
image (median of 3, ``-X importtime``): compiled from source when the image has no bytecode.

Usage: ``python benchmarks/reward_breakdown.py --tasks <validate output> [--limit 4]
[--rounds 5]`` (run it under the benchmark lock; the first round of each task, which ships and
probes the image, is not counted).
"""

from __future__ import annotations

import argparse
import functools
import os
import statistics
import sys
import threading
import time
from collections import defaultdict

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from evaluate import wrong_patch  # noqa: E402
from trajforge.pipelines.evaluation.evaluator import Evaluator  # noqa: E402
from trajforge.pipelines.evaluation.task_rows import load_tasks  # noqa: E402
from trajforge.schemas.params import load_params  # noqa: E402
from trajforge.verifiers import patch_verifier  # noqa: E402
from trajforge.verifiers.grader.supervised import TEST_UID  # noqa: E402
from trajforge.verifiers.sandbox import docker  # noqa: E402
from trajforge.verifiers.sandbox.base import SessionSpec  # noqa: E402

# (owner, attribute, part): what is timed, under which name
PARTS = (
    (docker.DockerSandbox, "_fresh_container", "waiting for a container"),
    (docker.DockerSandbox, "_start", "starting a container (a spare: off the path)"),
    (docker.DockerSession, "put_archive", "copying grader, tree and sentinels in"),
    (docker.DockerSession, "exec", "the supervisor's run (python, pytest, tests)"),
    (docker.DockerSession, "read_file_checked", "reading the result back"),
    (docker, "_remove", "removing the used container (off the path)"),
    (patch_verifier, "apply_patches", "host: patches applied in a throwaway index"),
    (patch_verifier, "_overlay", "host: the tree written"),
    (patch_verifier, "archive", "host: the tree as a tar"),
)


class Timers:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.seconds: dict[str, float] = defaultdict(float)

    def wrap(self, owner: object, name: str, part: str) -> None:
        original = getattr(owner, name)

        @functools.wraps(original)
        def timed(*args, **kwargs):
            started = time.monotonic()
            try:
                return original(*args, **kwargs)
            finally:
                with self.lock:
                    self.seconds[part] += time.monotonic() - started

        setattr(owner, name, timed)

    def take(self) -> dict[str, float]:
        with self.lock:
            taken = dict(self.seconds)
            self.seconds.clear()
        return taken


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tasks", action="append", required=True)
    parser.add_argument("--params", default=os.path.join(ROOT, "params.yaml"))
    parser.add_argument("--limit", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=5, help="counted rewards per task")
    parser.add_argument("--settle", type=float, default=2.0, help="seconds between rewards")
    args = parser.parse_args()
    params = load_params(args.params)
    everything = load_tasks(args.tasks)
    tasks = [everything[i] for i in sorted(everything)][: args.limit]
    timers = Timers()
    for owner, name, part in PARTS:
        timers.wrap(owner, name, part)
    evaluator = Evaluator(params, use_cache=False, spares=1)
    totals: list[float] = []
    parts: dict[str, list[float]] = defaultdict(list)
    per_task: list[str] = []
    try:
        for task in tasks:
            repo = evaluator.prepare(task)
            wrong = wrong_patch(task, repo)
            for round_ in range(args.rounds + 1):
                timers.take()  # from here: the last reward's removal, and this one's parts
                time.sleep(args.settle)  # as between a trainer's requests: the spare is up
                started = time.monotonic()
                evaluation = evaluator.evaluate(task, wrong, fail_fast=True)
                seconds = time.monotonic() - started
                if evaluation.reward != 0.0 or evaluation.error:
                    raise SystemExit(f"{task.instance_id}: {evaluation.reason}: the run is void")
                if round_ == 0:
                    continue  # the image's first graded run ships and probes it
                totals.append(seconds)
                for part, spent in timers.take().items():
                    parts[part].append(spent)
            per_task.append(_where_it_stopped(evaluator, task, wrong, totals[-args.rounds :]))
            timers.take()
    finally:
        evaluator.close()
    count = len(totals)
    print(f"fail-fast wrong-patch rewards: {count} ({len(tasks)} tasks x {args.rounds})")
    print(f"  whole reward: median {statistics.median(totals):.3f}s, "
          f"max {max(totals):.3f}s")  # fmt: skip
    for part, each in sorted(parts.items(), key=lambda kv: -sum(kv[1])):
        padded = each + [0.0] * (count - len(each))  # a reward that never reached this part
        print(f"  {part}: median {statistics.median(padded):.3f}s")
    print("per task (median reward; FAIL_TO_PASS left NOT_RUN by the stop):")
    for line in per_task:
        print(f"  {line}")
    return 0


def _where_it_stopped(evaluator: Evaluator, task, wrong: str, seconds: list[float]) -> str:
    """One line for ``task``: its median fail-fast reward and what an untimed verdict ran."""
    verdict = evaluator.verdict(task, wrong, fail_fast=True)
    failing = task.FAIL_TO_PASS
    cut = sum(verdict.test_report.get(t) == patch_verifier.NOT_RUN for t in failing)
    said = getattr(patch_verifier, "STOPPED", None)  # absent from a grader without the stop
    stopped = [line[len(said) :] for line in verdict.log.splitlines() if said and said in line]
    at = f", stopped at {stopped[0].split('::')[-1]}" if stopped else ""
    return (
        f"{task.instance_id}: {statistics.median(seconds):.3f}s, "
        f"{len(failing)} FAIL_TO_PASS, {cut} not run{at}, "
        f"import pytest {_import_pytest_s(evaluator, task):.3f}s"
    )


def _import_pytest_s(evaluator: Evaluator, task) -> float:
    """``import pytest`` as the tests' user (who can write no ``__pycache__``), in a grading
    container of the task's image: the median of 3 cold imports, by ``-X importtime``."""
    _, running, _ = evaluator._prepared(task)
    as_user = (
        f"import os; os.setgroups([]); os.setgid({TEST_UID}); os.setuid({TEST_UID}); "
        "os.execv('/venv/bin/python', ['python', '-I', '-B', '-X', 'importtime', '-c', "
        "'import pytest'])"
    )
    assert evaluator.sandbox is not None
    times = []
    with evaluator.sandbox.session(SessionSpec(running.image_name, grading=True)) as session:
        for _ in range(3):
            said = session.exec(f'/venv/bin/python -I -c "{as_user}" 2>&1', 60, "/")
            last = [line for line in said.output.splitlines() if line.endswith("| pytest")]
            times.append(int(last[-1].split("|")[1]) / 1e6 if last else float("nan"))
    return statistics.median(times)


if __name__ == "__main__":
    sys.exit(main())
