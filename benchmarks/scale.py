"""Benchmark how ``trajforge validate`` scales: the local runner against Dask with 1 and 2 workers.

The same validate workload runs through the real CLI three ways on this machine:

  (a) ``--runner local``: Beam's in-process FnApiRunner (the baseline);
  (b) ``--runner dask --dask_workers 1``: a Dask LocalCluster of one worker process;
  (c) ``--runner dask --dask_workers 2``: the same with two worker processes.

The workload is a library the benchmark writes as a git repository: N small modules, each with a
real bug, a base suite, then one commit per module that fixes it and adds its test file (a test
that fails before the fix, plus a passing test with some CPU work). ``trajforge mine`` turns the
N fix commits into N candidates that share one environment profile. A first ``trajforge
validate`` of the oldest candidate alone (untimed) builds the profile's image and prepares the
environment. Every timed run then gets a fresh output directory and a fresh ``cache_dir`` (no
``shared_cache``, so every result cache lives under it) that holds only that environment record
(the ``environments`` namespace), never verdicts (the ``validate`` namespace, keyed by the
candidate's trees and the image), so no run reuses another's verdicts or pays for the image.
``--cold-env`` leaves the environment record out too (each run then probes the suite's
collection again; the image stays). Every run has the same params (``validate.workers`` = W
sandboxes per Beam worker) and must keep the same task ids: if not, the benchmark says which
and exits 1.

On a shared machine, ``--rounds R`` repeats (a), (b), (c) in turns, R times; the seconds are the
medians and each ratio is the median of the R rounds' ratios. Per run it also prints the stage's
own seconds (the summary's, without the CLI's start-up), how many of this machine's cores were
busy on average (``/proc/stat``: every process, another user's load included), and how many
processes started containers of the profile's image (their owner labels): on Dask, how many
worker processes actually validated.

Usage: .venv/bin/python benchmarks/scale.py [--candidates N] [--rounds R] [--validate-workers W]
       [--cold-env] [--keep-image] [--json PATH]
Prints seconds and tasks/hour per runner, ``dask1_over_local``, ``dask2_over_local`` (seconds
ratios; below 1 is faster than local), and last ``scaling_efficiency: X`` = t(dask, 1 worker) /
(2 x t(dask, 2 workers)): 1.0 when a second worker process halves the time, 0.5 when it does
not help at all.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import asdict, dataclass

from trajforge.schemas.candidate import Candidate
from trajforge.schemas.env_profile import EnvProfile
from trajforge.schemas.rejection import Rejection
from trajforge.schemas.storage import parquet_files, read_records, write_records
from trajforge.schemas.task_instance import TaskInstance

TRAJFORGE = os.path.join(os.path.dirname(sys.executable), "trajforge")
RUNNERS = {
    "local": ("--runner", "local"),
    "dask1": ("--runner", "dask", "--dask_workers", "1"),
    "dask2": ("--runner", "dask", "--dask_workers", "2"),
}
LABELS = {
    "local": "(a) local runner (baseline)",
    "dask1": "(b) dask, 1 worker process",
    "dask2": "(c) dask, 2 worker processes",
}
ENV_NAMESPACE = "environments"  # prepare_environment's ContentCache: profile id -> prepared env
GIT_ENV = {
    "GIT_AUTHOR_NAME": "Bench Author",
    "GIT_AUTHOR_EMAIL": "bench@example.invalid",
    "GIT_COMMITTER_NAME": "Bench Author",
    "GIT_COMMITTER_EMAIL": "bench@example.invalid",
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_CONFIG_GLOBAL": os.devnull,
}

# --- the workload: a library with N real bugs, fixed one commit at a time ------------------------

PYPROJECT = """\
[build-system]
requires = ["setuptools>=61"]
build-backend = "setuptools.build_meta"

[project]
name = "scalelib"
version = "0.1.0"
requires-python = ">=3.9"
dependencies = []

[project.optional-dependencies]
test = ["pytest"]

[tool.setuptools]
packages = ["scalelib"]
"""

CORE = '''\
def primes_below(n):
    """Primes below ``n`` by trial division (slow on purpose: the suite does real work)."""
    found = []
    for k in range(2, n):
        if all(k % p for p in found if p * p <= k):
            found.append(k)
    return found
'''

BASE_TESTS = """\
from scalelib.core import primes_below


def test_small_primes():
    assert primes_below(20) == [2, 3, 5, 7, 11, 13, 17, 19]


def test_prime_count():
    assert len(primes_below(5000)) == 669
"""

# (buggy body, fixed body, the test that fails before the fix); {k} a constant per module
KINDS = [
    (
        "def total(n):\n    return sum(range(n))\n",
        "def total(n):\n    return sum(range(n + 1))\n",
        "def test_total():\n    assert total({k}) == {k} * ({k} + 1) // 2\n",
    ),
    (
        "def clamp(x, lo, hi):\n    return max(lo, min(x, lo))\n",
        "def clamp(x, lo, hi):\n    return max(lo, min(x, hi))\n",
        "def test_clamp():\n    assert clamp({k} + 5, 0, {k}) == {k}\n",
    ),
    (
        "def last(items):\n    return items[-2]\n",
        "def last(items):\n    return items[-1]\n",
        "def test_last():\n    assert last(list(range({k}))) == {k} - 1\n",
    ),
    (
        "def scale(xs):\n    return [x * {k} for x in xs[1:]]\n",
        "def scale(xs):\n    return [x * {k} for x in xs]\n",
        "def test_scale():\n    assert scale([1, 2]) == [{k}, 2 * {k}]\n",
    ),
    (
        "def is_multiple(n):\n    return n % {k} == 1\n",
        "def is_multiple(n):\n    return n % {k} == 0\n",
        "def test_is_multiple():\n    assert is_multiple(3 * {k})\n",
    ),
]


def module_of(i: int, fixed: bool) -> str:
    buggy, good, _ = KINDS[i % len(KINDS)]
    return (good if fixed else buggy).format(k=i + 2)


def tests_of(i: int) -> str:
    """The module's test file: the test its fix makes pass, and passing tests with CPU work."""
    _, _, failing = KINDS[i % len(KINDS)]
    name = failing.split("(")[0].removeprefix("def test_")
    return (
        f"from scalelib.core import primes_below\nfrom scalelib.mod{i:02d} import {name}\n\n\n"
        f"{failing.format(k=i + 2)}\n\n"
        f"def test_primes_{i:02d}():\n    assert len(primes_below({3000 + 100 * i})) > {i}\n"
    )


def git(path: str, *args: str, day: int = 0, stdin: bytes | None = None) -> str:
    date = f"2024-{1 + day // 28:02d}-{1 + day % 28:02d}T12:00:00+00:00"
    env = {**os.environ, **GIT_ENV, "GIT_AUTHOR_DATE": date, "GIT_COMMITTER_DATE": date}
    proc = subprocess.run(
        ["git", "-C", path, *args], input=stdin, env=env, capture_output=True, check=True
    )
    return proc.stdout.decode().strip()


def commit(path: str, message: str, files: dict[str, str], day: int) -> None:
    for name, text in files.items():
        target = os.path.join(path, name)
        os.makedirs(os.path.dirname(target), exist_ok=True)
        with open(target, "w", encoding="utf-8") as handle:
            handle.write(text)
    git(path, "add", "-A", day=day)
    git(path, "commit", "-q", "-F", "-", day=day, stdin=message.encode())


def write_library(path: str, n: int) -> None:
    """The initial commit (every module buggy), then one fix commit per module with its tests."""
    os.makedirs(path)
    git(path, "init", "-q", "-b", "main")
    files = {"pyproject.toml": PYPROJECT, "scalelib/__init__.py": "", "scalelib/core.py": CORE,
             "tests/test_core.py": BASE_TESTS}  # fmt: skip
    files.update({f"scalelib/mod{i:02d}.py": module_of(i, fixed=False) for i in range(n)})
    commit(path, "Initial scalelib", files, day=0)
    for i in range(n):
        fix = {
            f"scalelib/mod{i:02d}.py": module_of(i, True),
            f"tests/test_mod{i:02d}.py": tests_of(i),
        }
        commit(path, f"Fix mod{i:02d}: wrong result\n\nAdds a regression test.", fix, day=i + 1)


# --- running the CLI -----------------------------------------------------------------------------


def cli(*args: str, cwd: str) -> str:
    """Run the real ``trajforge`` console script; its stderr, or exit with its tail."""
    proc = subprocess.run([TRAJFORGE, *args], cwd=cwd, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        tail = "\n".join(proc.stderr.strip().splitlines()[-15:])
        raise SystemExit(f"trajforge {args[0]} failed (exit {proc.returncode}):\n{tail}")
    return proc.stderr


def params_file(root: str, name: str, workers: int, seed_cache: str | None) -> str:
    """A params file on a fresh cache dir; ``seed_cache``'s environment records copied in."""
    cache = os.path.join(root, f"{name}-cache")
    if seed_cache is not None:
        shutil.copytree(os.path.join(seed_cache, ENV_NAMESPACE), os.path.join(cache, ENV_NAMESPACE))
    path = os.path.join(root, f"{name}.yaml")
    with open(path, "w", encoding="utf-8") as handle:
        handle.write(f"cache_dir: {cache}\nvalidate:\n  workers: {workers}\n")
    return path


def read_dir(cls: type, directory: str) -> list:
    return [r for f in parquet_files(directory) for r in read_records(cls, f)]


def busy_jiffies() -> tuple[int, int] | None:
    """(busy, total) CPU jiffies of the whole machine since boot; None off Linux."""
    try:
        with open("/proc/stat", encoding="ascii") as handle:
            fields = [int(v) for v in handle.readline().split()[1:]]
    except (OSError, ValueError):
        return None
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)  # idle + iowait
    return sum(fields) - idle, sum(fields)


class ContainerWatch:
    """Which processes start containers of ``image`` while it runs: every half second it lists
    them with their owner label (``trajforge.owner``, "<host>:<pid>" of the process that started
    each). On Dask, how many worker processes validated; the peak of containers at once."""

    def __init__(self, image: str) -> None:
        self.image = image
        self.owners: dict[str, set[str]] = collections.defaultdict(set)  # owner -> container ids
        self.peak = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, daemon=True)

    def __enter__(self) -> ContainerWatch:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _watch(self) -> None:
        from trajforge.verifiers.sandbox.containers import OWNER_LABEL
        from trajforge.verifiers.sandbox.docker import connect

        client = connect()
        while not self._stop.wait(0.5):
            with contextlib.suppress(Exception):  # a container gone between list and read
                found = client.containers.list(filters={"ancestor": self.image})
                self.peak = max(self.peak, len(found))
                for container in found:
                    self.owners[container.labels.get(OWNER_LABEL, "?")].add(container.id)


@dataclass(frozen=True)
class Workload:
    """The mined candidates, the image they share, and the cache every timed run starts from."""

    root: str
    mine_dir: str
    image: str
    seed: str | None  # a cache dir whose environment record each run copies; None: none


@dataclass(frozen=True)
class Run:
    """One timed ``trajforge validate``."""

    runner: str
    round: int
    seconds: float  # wall clock of the CLI process
    stage_seconds: float  # the summary's: the stage run, without the CLI's start-up
    busy_cores: float | None  # machine-wide average over the run
    candidates: int
    kept: list[str]
    reasons: dict[str, int]
    container_processes: int  # processes that started containers of the profile's image
    peak_containers: int  # the most of its containers alive at once (started ahead included)

    @property
    def tasks_per_hour(self) -> float:
        return len(self.kept) / self.seconds * 3600 if self.seconds else 0.0


def validate(work: Workload, runner: str, round_: int, args: argparse.Namespace) -> Run:
    name = f"{runner}-r{round_}"
    out = os.path.join(work.root, name)
    params = params_file(work.root, name, args.validate_workers, work.seed)
    with ContainerWatch(work.image) as watch:
        before, started = busy_jiffies(), time.monotonic()
        cli("validate", "--input", work.mine_dir, "--output", out, "--params", params,
            *RUNNERS[runner], cwd=work.root)  # fmt: skip
        seconds = time.monotonic() - started
        after = busy_jiffies()
    busy = None
    if before and after and after[1] > before[1]:
        busy = (after[0] - before[0]) / (after[1] - before[1]) * (os.cpu_count() or 1)
    with open(os.path.join(out, "summary.json"), encoding="utf-8") as handle:
        summary = json.load(handle)
    kept = sorted(t.candidate_id for t in read_dir(TaskInstance, os.path.join(out, "tasks")))
    rejections = read_dir(Rejection, os.path.join(out, "rejections"))
    reasons = dict(sorted(collections.Counter(r.reason for r in rejections).items()))
    return Run(runner, round_, seconds, float(summary.get("seconds", 0.0)), busy,
               int(summary.get("inputs", 0)), kept, reasons, len(watch.owners),
               watch.peak)  # fmt: skip


def oldest_only(mine_dir: str, root: str) -> str:
    """A mine output of the oldest candidate alone: the warm-up builds the profile's image where
    every run builds it (at the oldest candidate of the profile) and validates just that one."""
    candidates = read_dir(Candidate, os.path.join(mine_dir, "candidates"))
    if not candidates:
        raise SystemExit("trajforge mine found no candidates in the generated library")
    oldest = min(candidates, key=lambda c: (c.created_at, c.base_commit))
    out = os.path.join(root, "warm-input")
    part = os.path.join(out, "candidates", "part-00000-of-00001.parquet")
    write_records(part, [oldest], Candidate.ARROW_SCHEMA)
    return out


# --- the image -----------------------------------------------------------------------------------


def remove_images(images: list[str]) -> list[str]:
    """Remove the images the warm-up built for the benchmark's own library; what was removed."""
    import docker.errors
    from trajforge.verifiers.sandbox.docker import connect

    client, removed = connect(), []
    for image in images:
        with contextlib.suppress(docker.errors.ImageNotFound, docker.errors.APIError):
            client.images.remove(image)
            removed.append(image)
    return removed


# --- the report ----------------------------------------------------------------------------------


def describe(run: Run) -> str:
    busy = f", {run.busy_cores:.2f} cores busy" if run.busy_cores is not None else ""
    reasons = ", ".join(f"{r} {n}" for r, n in run.reasons.items()) or "none"
    return (
        f"{run.runner} round {run.round}: {run.seconds:.1f}s wall ({run.stage_seconds:.1f}s in "
        f"the stage{busy}); containers started by {run.container_processes} process(es), "
        f"at most {run.peak_containers} at once; kept {len(run.kept)} of {run.candidates} "
        f"(rejected: {reasons})"
    )


def same_tasks(runs: list[Run]) -> str | None:
    """None when every run kept the same task ids, else what differs from the first run."""
    first = set(runs[0].kept)
    for run in runs[1:]:
        if set(run.kept) != first:
            return (
                f"{run.runner} round {run.round} kept other tasks than {runs[0].runner} round "
                f"{runs[0].round}: only there {sorted(set(run.kept) - first)}, missing "
                f"{sorted(first - set(run.kept))}"
            )
    return None


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--candidates", type=int, default=24, help="fix commits = candidates (N)")
    parser.add_argument("--rounds", type=int, default=1, help="(a), (b), (c) in turns, R times")
    parser.add_argument(
        "--validate-workers", type=int, default=1,
        help="validate.workers: sandboxes per Beam worker, the same for every run (W)",
    )  # fmt: skip
    parser.add_argument(
        "--cold-env", action="store_true",
        help="no environment record in the timed runs' caches (each probes collection again)",
    )  # fmt: skip
    parser.add_argument(
        "--keep-image", action="store_true", help="leave the library's environment image"
    )
    parser.add_argument("--json", help="also write the figures here")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="trajforge-scale-", ignore_cleanup_errors=True) as root:
        repo = os.path.join(root, "scalelib")
        write_library(repo, args.candidates)
        mine_dir = os.path.join(root, "mine")
        cli("mine", "--repo", repo, "--max-commits", str(args.candidates + 1), "--output",
            mine_dir, "--params", params_file(root, "mine", 1, None), cwd=root)  # fmt: skip
        warm, oldest = os.path.join(root, "warm"), oldest_only(mine_dir, root)
        warm_params = params_file(root, "warm", args.validate_workers, None)
        warm_started = time.monotonic()
        cli("validate", "--input", oldest, "--output", warm, "--params", warm_params, cwd=root)
        warm_s = time.monotonic() - warm_started
        profiles = read_dir(EnvProfile, os.path.join(warm, "profiles"))
        images = sorted({p.image for p in profiles})
        try:
            if len(profiles) != 1 or profiles[0].status != "built":
                shown = [(p.profile_id, p.status) for p in profiles]
                raise SystemExit(f"the workload needs one built profile, got {shown}")
            seed = None if args.cold_env else os.path.join(root, "warm-cache")
            work = Workload(root, mine_dir, profiles[0].image, seed)
            runs = []
            for round_ in range(1, args.rounds + 1):
                for runner in RUNNERS:
                    runs.append(validate(work, runner, round_, args))
                    print(describe(runs[-1]), flush=True)
        finally:
            removed = [] if args.keep_image else remove_images(images)
    total = time.monotonic() - started
    return report(args, profiles[0], warm_s, runs, removed, total)


def report(
    args: argparse.Namespace,
    profile: EnvProfile,
    warm_s: float,
    runs: list[Run],
    removed: list[str],
    total: float,
) -> int:
    """Print the figures (the last line is ``scaling_efficiency``); 1 when the kept sets differ."""
    print(
        f"workload: {runs[0].candidates} candidates mined from a generated library, one profile "
        f"{profile.profile_id} (image {profile.image}; warm-up validate with its build: "
        f"{warm_s:.1f}s, untimed); validate.workers {args.validate_workers}; "
        f"environment record {'not ' if args.cold_env else ''}seeded; {args.rounds} round(s)"
    )
    if (differs := same_tasks(runs)) is not None:
        print(f"ERROR: {differs}", file=sys.stderr)
        return 1
    by_runner = {name: [r for r in runs if r.runner == name] for name in RUNNERS}
    median = {name: statistics.median(r.seconds for r in rs) for name, rs in by_runner.items()}
    kept = len(runs[0].kept)
    print(f"every run kept the same {kept} task ids of {runs[0].candidates} candidates")
    for name, rs in by_runner.items():
        busy = [r.busy_cores for r in rs if r.busy_cores is not None]
        cores = f", {statistics.median(busy):.2f} cores busy" if busy else ""
        print(
            f"{LABELS[name]}: {median[name]:.1f}s (median of {len(rs)}; stage "
            f"{statistics.median(r.stage_seconds for r in rs):.1f}s{cores}) = "
            f"{kept / median[name] * 3600:.0f} tasks/hour, "
            f"{median[name] / runs[0].candidates:.2f}s per candidate"
        )
    lone = [r for r in by_runner["dask2"] if r.container_processes < 2]
    if lone:
        print(
            f"NOTE: in {len(lone)} of {len(by_runner['dask2'])} runs with 2 Dask workers, one "
            "process started every container: the candidates did not reach both workers"
        )
    rounds = list(zip(by_runner["local"], by_runner["dask1"], by_runner["dask2"], strict=True))
    ratios = {
        "dask1_over_local": [b.seconds / a.seconds for a, b, _ in rounds],
        "dask2_over_local": [c.seconds / a.seconds for a, _, c in rounds],
        "dask2_speedup_over_dask1": [b.seconds / c.seconds for _, b, c in rounds],
        "scaling_efficiency": [b.seconds / (2 * c.seconds) for _, b, c in rounds],
    }
    figures = {key: statistics.median(values) for key, values in ratios.items()}
    if args.rounds > 1:
        for key, values in ratios.items():
            print(f"{key} per round: {', '.join(f'{v:.3f}' for v in values)} (median below)")
    print(f"benchmark wall time: {total:.0f}s; images removed: {', '.join(removed) or 'none'}")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as handle:
            json.dump(
                {
                    "candidates": runs[0].candidates,
                    "kept": kept,
                    "profile_id": profile.profile_id,
                    "validate_workers": args.validate_workers,
                    "cold_env": args.cold_env,
                    "warm_up_s": warm_s,
                    "median_seconds": median,
                    "runs": [{**asdict(r), "tasks_per_hour": r.tasks_per_hour} for r in runs],
                    "ratios": ratios,
                    **figures,
                    "total_s": total,
                },
                handle,
                indent=2,
            )
    for key, value in figures.items():
        print(f"{key}: {value:.3f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
