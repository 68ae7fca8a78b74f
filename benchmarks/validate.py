"""Benchmark ``trajforge validate`` against a floor and a fresh environment per candidate.

All three approaches see the same candidates, all of one environment profile (so one environment
serves them all), with the same parallelism W:

  (a) floor: the two test runs per candidate (base + test_patch, then base + patch + test_patch)
      on this host in ONE venv prepared beforehand (not timed), made by the interpreter build the
      base image runs. Each tree is extracted to a temporary directory and imported from there
      (PYTHONPATH), not from the editable install (the project's LocalSession maps the paths).
  (b) fresh environment per candidate, as SWE-bench / R2E-Gym do: a new networked container from
      the base image, a venv and the install commands, then the base and the gold tree are tested.
      Slow, so only a sample of M candidates is run; its candidates/hour is an estimate.
  (c) the real ``trajforge validate`` CLI with a fresh verdict cache, once including the build of
      the profile image (removed first) and once steady-state (image present).

On a shared machine, ``--rounds R`` times (a) and (c) steady state R times, back to back in
turns, so each pair sees about the same load; the ratio is then the median of the R pairs'.
``--fresh-sample 0`` skips (b), ``--no-build`` skips (c) with the build (an absent image is built
first, untimed).

Usage: .venv/bin/python benchmarks/validate.py --repo PATH [--max-commits N] [--limit K]
       [--fresh-sample M] [--workers W] [--rounds R] [--no-build] [--json PATH]
The last line is ``ratio_to_floor: X`` = (c, steady state) seconds / (a) seconds (the median over
the rounds); lower is better. (c) also says what grading each kept task's gold through the grader
cost (``gold_runs``: seconds per task and share of validate's lane time, from its summary).
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import io
import json
import os
import shlex
import shutil
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from typing import TypeVar

from trajforge.generators.environments.base_image import base_image_tag
from trajforge.generators.environments.image import build_session_spec, install_profile
from trajforge.generators.environments.recipe import PRETEND_VERSION
from trajforge.generators.languages.python.profile import JUNIT_PATH, detect_profile
from trajforge.generators.sources.specs import SourceOptions, open_source
from trajforge.schemas.candidate import Candidate
from trajforge.schemas.env_profile import EnvProfile
from trajforge.schemas.errors import UserError
from trajforge.schemas.params import Params
from trajforge.schemas.rejection import Rejection
from trajforge.schemas.storage import parquet_files, read_records, write_records
from trajforge.schemas.task_instance import TaskInstance
from trajforge.schemas.test_run import TestRun
from trajforge.verifiers.sandbox.base import Limits, Session
from trajforge.verifiers.sandbox.docker import connect
from trajforge.verifiers.sandbox.factory import make_sandbox
from trajforge.verifiers.sandbox.git_tree import apply_patches, archive
from trajforge.verifiers.sandbox.local import LocalSession
from trajforge.verifiers.test_runner import RunContext, run_tests
from trajforge.verifiers.validation.rule import Verdict, judge

CLEAR_REPO = "find /repo -mindepth 1 -delete"
TRAJFORGE = os.path.join(os.path.dirname(sys.executable), "trajforge")
T = TypeVar("T")
R = TypeVar("R")


@dataclass(frozen=True)
class Workload:
    """The candidates under test, their shared profile, and the same set as a mine output."""

    params: Params
    repo_path: str
    profile: EnvProfile
    candidates: list[Candidate]
    mine_dir: str


@dataclass(frozen=True)
class Measure:
    """One approach's wall time over ``candidates`` and the verdicts it reached."""

    name: str
    seconds: float
    candidates: int
    kept: list[str]  # candidate ids of the tasks kept
    reasons: dict[str, int]  # rejection reason -> count
    gold_s: float = 0.0  # (c): seconds its lanes spent grading kept tasks' gold (gold_runs)
    gold_graded: int = 0  # (c): kept tasks whose gold was graded (gold_not_gradable included)

    @property
    def per_hour(self) -> float:
        return self.candidates / self.seconds * 3600 if self.seconds else 0.0


# --- the candidates ----------------------------------------------------------------------------


def cli(*args: str, cwd: str) -> str:
    """Run the real ``trajforge`` console script; its stderr, or an error with the tail."""
    proc = subprocess.run([TRAJFORGE, *args], cwd=cwd, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        tail = "\n".join(proc.stderr.strip().splitlines()[-10:])
        raise SystemExit(f"trajforge {args[0]} failed (exit {proc.returncode}):\n{tail}")
    return proc.stderr


def params_file(work: str, name: str) -> str:
    """A params file whose cache_dir is a fresh directory (no verdict or build cache hits)."""
    path = os.path.join(work, f"{name}.yaml")
    with open(path, "w", encoding="utf-8") as handle:
        handle.write(f"cache_dir: {os.path.join(work, name + '-cache')}\n")
    return path


def read_dir(cls: type[T], directory: str) -> list[T]:
    """Every record of a Parquet table directory (none when it is absent)."""
    return [r for f in parquet_files(directory) for r in read_records(cls, f)]


def mine(repo: str, max_commits: int, work: str) -> list[Candidate]:
    out = os.path.join(work, "mine")
    cli("mine", "--repo", repo, "--max-commits", str(max_commits), "--output", out,
        "--params", params_file(work, "mine"), cwd=work)  # fmt: skip
    return read_dir(Candidate, os.path.join(out, "candidates"))


def detect(params: Params, repo_path: str, candidate: Candidate) -> EnvProfile | None:
    """The candidate's profile, detected as the validate stage does (None: no environment)."""
    try:
        return detect_profile(
            repo_path,
            candidate.base_commit,
            candidate.repo,
            default_python=params.environment.default_python,
            pythons=tuple(params.environment.pythons),
        )
    except UserError:
        return None


def select(
    params: Params, candidates: list[Candidate], limit: int
) -> tuple[EnvProfile, list[Candidate], int]:
    """The most common profile, its first ``limit`` candidates by id, and how many were dropped.

    The profile returned is the one detected at the oldest selected candidate: the validate
    stage builds the image there, so the floor and (b) install at the same setup commit.
    """
    repo_path = repo_of(params, candidates[0])
    profiles = {c.candidate_id: detect(params, repo_path, c) for c in candidates}
    counts = collections.Counter(p.profile_id for p in profiles.values() if p is not None)
    top = counts.most_common(1)[0][0]
    members = [c for c in candidates if (p := profiles[c.candidate_id]) and p.profile_id == top]
    chosen = sorted(members, key=lambda c: c.candidate_id)[:limit]
    oldest = min(chosen, key=lambda c: (c.created_at, c.base_commit))
    profile = profiles[oldest.candidate_id]
    assert profile is not None
    return profile, chosen, len(candidates) - len(members)


def repo_of(params: Params, candidate: Candidate) -> str:
    return open_source(candidate.source, SourceOptions.from_params(params)).path


def prepare(args: argparse.Namespace, work: str) -> tuple[Workload, int, int]:
    """Mine, keep one profile's candidates, write them as a mine output.

    Returns the workload, how many candidates were mined and how many were dropped.
    """
    params = Params()
    params.cache_dir = os.path.join(work, "bench-cache")
    mined = mine(args.repo, args.max_commits, work)
    if not mined:
        raise SystemExit(f"no candidates mined from {args.repo}")
    profile, chosen, dropped = select(params, mined, args.limit)
    mine_dir = os.path.join(work, "subset")
    write_records(
        os.path.join(mine_dir, "candidates", "part-00000-of-00001.parquet"),
        chosen,
        Candidate.ARROW_SCHEMA,
    )
    workload = Workload(params, repo_of(params, chosen[0]), profile, chosen, mine_dir)
    return workload, len(mined), dropped


# --- running tests -----------------------------------------------------------------------------


def timed_map(fn: Callable[[T], R], items: Iterable[T], workers: int) -> tuple[float, list[R]]:
    """``fn`` over ``items`` with ``workers`` threads: (wall seconds, results in order)."""
    started = time.monotonic()
    with ThreadPoolExecutor(max_workers=workers) as pool:
        results = list(pool.map(fn, items))
    return time.monotonic() - started, results


def trees(repo_path: str, candidate: Candidate) -> list[tuple[str, str]]:
    """(state, tree) for base + test_patch and base + test_patch + patch."""
    base = apply_patches(repo_path, candidate.base_commit, [candidate.test_patch])
    gold = apply_patches(repo_path, candidate.base_commit, [candidate.test_patch, candidate.patch])
    return [("base", base), ("gold", gold)]


def run_tree(session: Session, work: Workload, tree: str, ctx: RunContext, state: str) -> TestRun:
    """Put ``tree`` at /repo and run the test command once."""
    session.put_archive(archive(work.repo_path, tree, prefix="repo/"))
    return run_tests(session, ctx, state, attempt=0)


def context(work: Workload, candidate: Candidate) -> RunContext:
    profile = work.profile
    timeout = work.params.validate.test_timeout_s
    return RunContext(
        candidate.candidate_id, profile.profile_id, profile.test_cmd, JUNIT_PATH, timeout
    )


def judged(one: Callable[[Candidate], Verdict]) -> Callable[[Candidate], tuple[str, Verdict]]:
    """``one`` keyed by candidate id; a candidate whose patches do not apply is rejected."""

    def run(candidate: Candidate) -> tuple[str, Verdict]:
        try:
            return candidate.candidate_id, one(candidate)
        except UserError as exc:
            return candidate.candidate_id, Verdict(False, exc.reason, str(exc))

    return run


def measure(name: str, seconds: float, verdicts: list[tuple[str, Verdict]]) -> Measure:
    kept = sorted(cid for cid, v in verdicts if v.kept)
    reasons = collections.Counter(v.reason for _, v in verdicts if not v.kept)
    return Measure(name, seconds, len(verdicts), kept, dict(sorted(reasons.items())))


# --- (a) the floor -------------------------------------------------------------------------------


def host_python(version: str) -> str:
    """The system interpreter when it has ``version``: the build the Debian base image runs.

    Another build (pyenv's, without PGO) runs the same tests markedly slower and would inflate
    the floor; any ``pythonX.Y`` on PATH is the fallback.
    """
    system = f"/usr/bin/python{version}"
    return system if os.path.exists(system) else shutil.which(f"python{version}") or "python3"


def prepare_floor(work: Workload, root: str) -> tuple[str, str, str | None]:
    """The one host venv, made outside the timing: (venv, interpreter, why it failed or None).

    ``python -m venv``, then the profile's install commands in a host checkout of its setup
    commit, with pip run as ``python -m pip`` by the venv's python.
    """
    python = host_python(work.profile.python)
    venv, checkout = os.path.join(root, "floor-venv"), os.path.join(root, "floor-checkout")
    tar = archive(work.repo_path, work.profile.setup_commit, prefix="")
    with tarfile.open(fileobj=io.BytesIO(tar)) as files:
        files.extractall(checkout, filter="data")
    env = {**os.environ, **PRETEND_VERSION, "VIRTUAL_ENV": venv}
    env["PATH"] = f"{os.path.join(venv, 'bin')}{os.pathsep}{env.get('PATH', '')}"
    venv_python = shlex.quote(os.path.join(venv, "bin", "python"))
    commands = [f"{shlex.quote(python)} -m venv {shlex.quote(venv)}"] + [
        f"{venv_python} -m {c}" if c.startswith("pip ") else c for c in work.profile.install
    ]
    for command in commands:
        try:
            proc = subprocess.run(
                command,
                shell=True,
                cwd=checkout,
                env=env,
                capture_output=True,
                timeout=work.params.environment.build_timeout_s,
            )
        except subprocess.TimeoutExpired:
            return venv, python, f"install step timed out: {command}"
        if proc.returncode != 0:
            return venv, python, f"install step failed (exit {proc.returncode}): {command}"
    return venv, python, None


@contextlib.contextmanager
def host_session(venv: str) -> Iterator[LocalSession]:
    """A temporary directory as /repo and /tmp with ``venv`` on PATH: LocalSandbox's session.

    PYTHONPATH points at the tree (and its src/), so its code is imported, not the editable
    install's. Only the test command, which names no path but the JUnit file, runs in it.
    """
    with tempfile.TemporaryDirectory(prefix="trajforge-floor-") as workdir:
        for sub in ("repo", "tmp"):
            os.makedirs(os.path.join(workdir, sub))
        yield LocalSession(workdir, venv, workdir, Limits(), {})


def floor(work: Workload, venv: str, workers: int) -> Measure:
    """Each tree extracted to its own temporary directory and tested with the one venv."""

    def one(candidate: Candidate) -> Verdict:
        ctx = context(work, candidate)
        runs = []
        for state, tree in trees(work.repo_path, candidate):
            with host_session(venv) as session:
                runs.append(run_tree(session, work, tree, ctx, state))
        return judge(runs[:1], runs[1:])

    seconds, verdicts = timed_map(judged(one), work.candidates, workers)
    return measure("floor", seconds, verdicts)


# --- (b) a fresh environment per candidate ------------------------------------------------------


def fresh_env(work: Workload, sample: list[Candidate], workers: int) -> Measure:
    """Per candidate: a new networked container, install, then the base and the gold tree."""
    sandbox = make_sandbox(work.params, quiet=True)
    environment = work.params.environment
    spec = build_session_spec(base_image_tag(work.profile.python), environment)

    def one(candidate: Candidate) -> Verdict:
        ctx = context(work, candidate)
        runs = []
        with sandbox.session(spec) as session:
            log: list[str] = []  # the image recipe, so every approach tests the same environment
            if not install_profile(session, work.profile, work.repo_path, environment, log):
                return Verdict(False, "install_failed", log[-1])
            for state, tree in trees(work.repo_path, candidate):
                session.exec(CLEAR_REPO, timeout_s=120, workdir="/")
                runs.append(run_tree(session, work, tree, ctx, state))
        return judge(runs[:1], runs[1:])

    seconds, verdicts = timed_map(judged(one), sample, workers)
    return measure("fresh_env", seconds, verdicts)


# --- (c) trajforge validate ---------------------------------------------------------------------


def has_image(image: str) -> bool:
    import docker.errors  # the SDK the project's DockerSandbox uses

    try:
        connect().images.get(image)
    except docker.errors.ImageNotFound:
        return False
    return True


def remove_image(image: str) -> bool:
    """Remove a profile image so the next run builds it; whether it was there."""
    import docker.errors

    if not has_image(image):
        return False
    try:
        connect().images.remove(image)
    except docker.errors.APIError as exc:  # e.g. a container of another run uses it
        raise SystemExit(f"cannot remove {image}: {exc.explanation}; rerun later") from None
    return True


def trajforge_validate(work: Workload, root: str, name: str, workers: int) -> Measure:
    """The real CLI on the workload's mine output, with a fresh cache dir."""
    out = os.path.join(root, name)
    args = ("--input", work.mine_dir, "--output", out, "--workers", str(workers))
    started = time.monotonic()
    cli("validate", *args, "--params", params_file(root, name), cwd=root)
    seconds = time.monotonic() - started
    kept = sorted(t.candidate_id for t in read_dir(TaskInstance, os.path.join(out, "tasks")))
    rejections = read_dir(Rejection, os.path.join(out, "rejections"))
    reasons = collections.Counter(r.reason for r in rejections)
    with open(os.path.join(out, "summary.json"), encoding="utf-8") as handle:
        summary = json.load(handle)
    return Measure(
        name, seconds, len(work.candidates), kept, dict(sorted(reasons.items())),
        summary.get("gold_runs_ms", 0) / 1000, summary.get("gold_graded", 0),
    )  # fmt: skip


# --- the report ---------------------------------------------------------------------------------


def line(label: str, m: Measure, note: str = "") -> str:
    reasons = ", ".join(f"{r} {n}" for r, n in m.reasons.items()) or "none"
    return (
        f"{label}: {m.candidates} candidates in {m.seconds:.1f}s = {m.per_hour:.0f} candidates/hour"
        f"{note}; kept {len(m.kept)} (rejected: {reasons})"
    )


def gold_line(m: Measure, workers: int) -> str:
    """What grading each kept task's gold through the grader cost (c): seconds per graded task,
    and the share of validate's lane time (wall seconds x workers) it took."""
    per_task = m.gold_s / m.gold_graded if m.gold_graded else 0.0
    share = m.gold_s / (m.seconds * workers) if m.seconds else 0.0
    return (
        f"    gold_runs ({m.name}): {m.gold_graded} tasks graded in {m.gold_s:.1f}s = "
        f"{per_task:.1f}s per task, {share:.1%} of validate's lane time"
    )


def agree(a: Measure, b: Measure, only: set[str] | None = None) -> str:
    """'yes', or which kept candidates differ (compared on ``only`` when given)."""
    left, right = set(a.kept), set(b.kept)
    if only is not None:
        left, right = left & only, right & only
    if left == right:
        return "yes"
    return f"no ({a.name} only: {sorted(left - right)}; {b.name} only: {sorted(right - left)})"


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--repo", required=True, help="git repository to mine (path or URL)")
    parser.add_argument("--max-commits", type=int, default=150)
    parser.add_argument("--limit", type=int, default=20, help="candidates to validate (K)")
    parser.add_argument("--fresh-sample", type=int, default=3, help="candidates run by (b) (M)")
    parser.add_argument("--workers", type=int, default=2, help="parallelism W of every approach")
    parser.add_argument(
        "--rounds", type=int, default=1, help="times (a) and (c) steady state, in turns (R)"
    )
    parser.add_argument(
        "--no-build", action="store_true", help="skip (c) with the image build (it stays)"
    )
    parser.add_argument("--json", help="also write the figures here")
    return parser.parse_args(argv)


@dataclass(frozen=True)
class Figures:
    """Every measure of one benchmark run; (a) and steady (c) once per round."""

    floors: list[Measure]
    steadies: list[Measure]
    fresh: Measure | None  # None: --fresh-sample 0
    with_build: Measure | None  # None: --no-build

    def ratios(self) -> list[float]:
        return [
            s.seconds / a.seconds if a.seconds else float("inf")
            for a, s in zip(self.floors, self.steadies, strict=True)
        ]


def measure_all(args: argparse.Namespace, work: Workload, root: str) -> Figures:
    """(a), (b), (c) with the image build, then (c) steady state and (a) again per round."""
    venv, python, failure = prepare_floor(work, root)
    print(f"floor environment (host venv from {python}, not timed): {failure or 'installed'}")
    if failure:
        print("  WARNING: the profile does not install here; every approach measures that")
    floors = [floor(work, venv, args.workers)]
    sample = work.candidates[: args.fresh_sample]
    fresh = fresh_env(work, sample, args.workers) if sample else None
    image = work.profile.image
    existed = has_image(image) if args.no_build else remove_image(image)
    with_build, steadies = None, []
    try:
        if args.no_build:
            if not existed:
                trajforge_validate(work, root, "validate_warmup", args.workers)  # builds it
        else:
            with_build = trajforge_validate(work, root, "validate_with_build", args.workers)
            present = "present" if has_image(image) else "ABSENT"
            print(f"image {image} after (c) with build: {present}")
        for round_ in range(args.rounds):
            name = "validate_steady" if round_ == 0 else f"validate_steady_{round_ + 1}"
            steadies.append(trajforge_validate(work, root, name, args.workers))
            if round_ + 1 < args.rounds:
                floors.append(floor(work, venv, args.workers))
    finally:
        if not existed:
            with contextlib.suppress(Exception):
                remove_image(image)  # leave Docker's images as we found them
    return Figures(floors, steadies, fresh, with_build)


def report(
    figures: Figures, sample: set[str], total: float, json_path: str | None, info: dict
) -> None:
    """Print the figures (the last line is ``ratio_to_floor``); write them and ``info`` as JSON."""
    a, steady = figures.floors[0], figures.steadies[0]
    b, with_build = figures.fresh, figures.with_build
    ratios = figures.ratios()
    rounds = list(zip(figures.floors, figures.steadies, strict=True))
    for index, (floor_m, steady_m) in enumerate(rounds):
        label = "" if len(rounds) == 1 else f" [round {index + 1}]"
        print(line(f"(a) floor, host, one venv{label}", floor_m))
        if index == 0 and b is not None:
            note = f" (estimated from a sample of {b.candidates})"
            print(line("(b) fresh env per candidate", b, note))
            print(f"    floor on the same sample agrees with (b): {agree(a, b, sample)}")
        if index == 0 and with_build is not None:
            print(line("(c) trajforge validate, incl. image build", with_build))
        print(line(f"(c) trajforge validate, steady state{label}", steady_m))
        print(gold_line(steady_m, info["workers"]))
    print(f"kept sets agree, floor vs (c) steady state: {agree(a, steady)}")
    if with_build is not None:
        print(f"kept sets agree, (c) with build vs steady state: {agree(with_build, steady)}")
    for other in [*figures.floors[1:], *figures.steadies[1:]]:
        if (agreed := agree(steady, other)) != "yes":
            print(f"kept sets differ, (c) steady state vs {other.name}: {agreed}")
    print(f"benchmark wall time: {total:.0f}s")
    speedup = steady.per_hour / b.per_hour if b is not None and b.per_hour else 0.0
    ratio = statistics.median(ratios)
    if json_path:
        measures = [*figures.floors, *figures.steadies, *(m for m in (b, with_build) if m)]
        named: dict[str, object] = {}
        for index, m in enumerate(measures):
            key = m.name if m.name != "floor" or index == 0 else f"floor_{index + 1}"
            named[key] = {**asdict(m), "per_hour": m.per_hour}
        summary = {
            "speedup_vs_fresh_env": speedup if b is not None else None,
            "ratio_to_floor": ratio,
            "ratios": ratios,
            "total_s": total,
        }
        with open(json_path, "w", encoding="utf-8") as handle:
            json.dump({**info, **named, **summary}, handle, indent=2)
    if b is not None:
        print(f"speedup_vs_fresh_env: {speedup:.2f}")
    if len(ratios) > 1:
        print(f"ratio_to_floor per round: {', '.join(f'{r:.3f}' for r in ratios)} (median below)")
    print(f"ratio_to_floor: {ratio:.3f}")


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="trajforge-bench-", ignore_cleanup_errors=True) as root:
        work, mined, dropped = prepare(args, root)
        print(f"repo: {args.repo} (newest {args.max_commits} commits), workers: {args.workers}")
        print(
            f"candidates: {mined} mined; {dropped} dropped (profile other than the most common, "
            f"{work.profile.profile_id}); {len(work.candidates)} validated by every approach"
        )
        figures = measure_all(args, work, root)
    sample = {c.candidate_id for c in work.candidates[: args.fresh_sample]}
    info = {
        "profile_id": work.profile.profile_id, "mined": mined, "dropped": dropped,
        "workers": args.workers,
    }  # fmt: skip
    report(figures, sample, time.monotonic() - started, args.json, info)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
