"""End to end ``tasks_per_core_hour``: environments + validation of one PyPI release history from a
cold cache, trajforge against a SWE-smith-style baseline, on the same candidates, same run.

  mine:      ``trajforge mine --pypi NAME --max-commits N`` (one commit per release sdist), timed
             on its own and counted by neither side: both sides take the same candidates.
  cold:      a fresh ``cache_dir`` (sdists, clones, build logs, prepared profiles, verdicts), and
             every profile image the stage would reuse for these candidates removed first. Docker's
             build cache stays (the classic builder's intermediate layers; trajforge keeps no uv or
             pip cache of its own outside its layers): the build logs say which RUN steps ran.
  trajforge: ``trajforge validate --workers W`` on the mine output: each environment its layered
             image (uv), then every candidate validated by the stage's rule (reruns included).
  baseline:  SWE-smith's way (``swesmith_repo.py``): ONE image per repository at the newest
             candidate's commit (pip), then per candidate two full suite runs, each in a fresh
             container, with W candidates at a time; a candidate whose suite does not run there
             is lost.

Each side prints candidates, tasks kept, wall, build and test seconds and ``tasks_per_core_hour``
= tasks / (wall hours x W); then whether FAIL_TO_PASS agree on the candidates both kept, and last
``tasks_per_core_hour_ratio: X`` (trajforge / baseline), or ``void`` with the reason in one line
when the baseline kept nothing or the machine stopped either side (a full disk, a sandbox that
failed every candidate): exit status 1 then.

Usage: .venv/bin/python benchmarks/end_to_end.py --pypi NAME [--max-commits N] [--workers W]
       [--json PATH] [--reuse]

trajforge runs as a user's run does, with the default params: ``environment.reuse`` off, every
profile its own image. ``--reuse`` turns it on (a profile first tries an image already built for
the repository, and the trajforge side says how many profiles were reused).
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import copy
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from typing import TypeVar

from trajforge.generators.languages.python.profile import detect_profile
from trajforge.generators.sources.specs import SourceOptions, open_source
from trajforge.schemas.candidate import Candidate
from trajforge.schemas.env_profile import EnvProfile
from trajforge.schemas.errors import UserError
from trajforge.schemas.params import Params
from trajforge.schemas.rejection import Rejection
from trajforge.schemas.storage import parquet_files, read_records
from trajforge.schemas.task_instance import TaskInstance
from trajforge.schemas.test_run import TestRun
from trajforge.verifiers.sandbox.docker import connect
from trajforge.verifiers.sandbox.factory import make_sandbox
from trajforge.verifiers.sandbox.faults import machine_fault

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from swesmith_repo import TIMEOUT_S, Outcome, build_repo_image, validate_candidate

T = TypeVar("T")
TRAJFORGE = os.path.join(os.path.dirname(sys.executable), "trajforge")
LOG_CAP = 64 << 20  # the baseline's verbose log: the sandbox keeps only head and tail past this
STEP = re.compile(r"^Step \d+/\d+ : (.*)$", re.M)


# Rejections that say the sandbox failed, not the repository: a side with only these kept
# nothing because of the machine (a run whose grader files moved under it printed 0.00).
SANDBOX_FAULTS = frozenset(("sandbox_error", "machine_fault"))


@dataclass
class Side:
    """One side's figures over the same candidates with the same W."""

    name: str
    candidates: int
    wall_s: float
    build_s: float
    test_s: float
    kept: dict[str, tuple[str, ...]]  # candidate id -> FAIL_TO_PASS
    reasons: dict[str, int]
    workers: int
    notes: list[str] = field(default_factory=list)
    images: list[str] = field(default_factory=list)  # what it built, removed after the run
    why_not: dict[str, str] = field(default_factory=dict)  # candidate id -> why it was not kept

    @property
    def per_core_hour(self) -> float:
        return len(self.kept) / (self.wall_s / 3600 * self.workers) if self.wall_s else 0.0

    def lines(self) -> list[str]:
        other = self.wall_s * self.workers - self.build_s - self.test_s
        reasons = ", ".join(f"{r} {n}" for r, n in sorted(self.reasons.items())) or "none"
        return [
            f"{self.name}: {self.candidates} candidates, {len(self.kept)} tasks kept "
            f"(rejected: {reasons})",
            f"  wall {self.wall_s:.1f} s x {self.workers} cores = "
            f"{self.wall_s * self.workers:.1f} core-s: build {self.build_s:.1f} s, "
            f"test {self.test_s:.1f} s, other {other:.1f} s",
            f"  tasks_per_core_hour: {self.per_core_hour:.1f}",
            *(f"  {note}" for note in self.notes),
        ]


def cli(*args: str, cwd: str) -> None:
    """The real ``trajforge`` console script; an error with its tail when it fails."""
    proc = subprocess.run([TRAJFORGE, *args], cwd=cwd, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        tail = "\n".join(proc.stderr.strip().splitlines()[-10:])
        raise SystemExit(f"trajforge {args[0]} failed (exit {proc.returncode}):\n{tail}")


def read_dir(cls: type[T], directory: str) -> list[T]:
    return [r for f in parquet_files(directory) for r in read_records(cls, f)]


def params_file(root: str, max_releases: int, reuse: bool = False) -> tuple[str, Params]:
    """A params file with a fresh cache_dir and enough releases for ``--max-commits``;
    ``reuse``: environment.reuse (an image reused across profiles, environments.md)."""
    cache = os.path.join(root, "cache")
    path = os.path.join(root, "params.yaml")
    with open(path, "w", encoding="utf-8") as handle:
        handle.write(f"cache_dir: {cache}\nsources:\n  max_releases: {max_releases}\n")
        handle.write(f"environment:\n  reuse: {str(reuse).lower()}\n")
    params = Params()
    params.cache_dir, params.sources.max_releases = cache, max_releases
    params.environment.reuse = reuse
    return path, params


def stage_profile(params: Params, candidate: Candidate) -> EnvProfile | None:
    """The profile the validate stage detects for ``candidate`` (environment.py's call)."""
    env = params.environment
    repo = open_source(candidate.source, SourceOptions.from_params(params))
    try:
        return detect_profile(
            repo.path, candidate.base_commit, candidate.repo,
            default_python=env.default_python, pythons=tuple(env.pythons),
            source=repo.identity, registry=env.registry,
        )  # fmt: skip
    except UserError:
        return None


def remove_images(images: set[str]) -> int:
    """Remove each image present (never a base image); how many were there."""
    import docker.errors

    client, removed = connect(), 0
    for image in sorted(images):
        if image.startswith("trajforge-base:"):
            continue
        with contextlib.suppress(docker.errors.ImageNotFound):
            client.images.remove(image, force=True)
            removed += 1
    return removed


def steps_run(cache_dir: str) -> tuple[int, int, int, int]:
    """From the build logs: (RUN steps that ran, RUN steps, the same for the build stage, from
    ``FROM deps AS build`` to the final stage: the commit's own install). A step taken from
    Docker's build cache prints nothing, so a build-stage step without output is a warm one."""
    counts = [0, 0, 0, 0]
    logs = os.path.join(cache_dir, "build-logs")
    for name in sorted(os.listdir(logs)) if os.path.isdir(logs) else []:
        with open(os.path.join(logs, name), encoding="utf-8", errors="replace") as handle:
            parts = STEP.split(handle.read())[1:]  # command, output, command, output ...
        in_build = False
        for command, output in zip(parts[::2], parts[1::2], strict=False):
            if command.startswith("FROM"):  # the build stage ends where the final one starts
                in_build = command.startswith("FROM deps AS build")
            if command.startswith("RUN"):
                ran = bool(output.strip())
                counts[0] += ran
                counts[1] += 1
                if in_build:
                    counts[2] += ran
                    counts[3] += 1
    return counts[0], counts[1], counts[2], counts[3]


def trajforge_side(root: str, params_path: str, cache_dir: str, mine_dir: str, w: int) -> Side:
    """``trajforge validate`` on the mine output, timed; ``root``'s name keeps runs apart."""
    out = os.path.join(root, "validate")
    started = time.monotonic()
    cli("validate", "--input", mine_dir, "--output", out, "--workers", str(w),
        "--params", params_path, cwd=root)  # fmt: skip
    wall = time.monotonic() - started
    tasks = read_dir(TaskInstance, os.path.join(out, "tasks"))
    profiles = read_dir(EnvProfile, os.path.join(out, "profiles"))
    runs = read_dir(TestRun, os.path.join(out, "runs"))
    rejections = read_dir(Rejection, os.path.join(out, "rejections"))
    built = [p.build_s for p in profiles if p.build_s]
    ran, total, ran_build, total_build = steps_run(cache_dir)
    cold = "" if ran_build == total_build else " NOT COLD: this repository's layers were cached"
    return Side(
        "trajforge", 0, wall, sum(built), sum(r.duration_s for r in runs),
        {t.candidate_id: tuple(sorted(t.FAIL_TO_PASS)) for t in tasks},
        dict(collections.Counter(r.reason for r in rejections)), w,
        [f"images built: {len(built)} ({', '.join(f'{s:.1f}' for s in built)} s); "
         f"RUN steps that ran: {ran} of {total}, of the commits' own steps {ran_build} of "
         f"{total_build} (a step that did not run came from Docker's build cache){cold}",
         f"profiles reused (no build): {sum(p.status == 'reused' for p in profiles)}",
         f"test runs: {len(runs)}"],
        sorted({p.image for p in profiles if p.image}),
        {r.input: f"{r.reason}: {r.detail.splitlines()[0] if r.detail else ''}"
         for r in rejections},
    )  # fmt: skip


def steady_state(
    root: str, cache_dir: str, mine_dir: str, max_releases: int, w: int, reuse: bool
) -> float:
    """The same validate again with every image present and another fresh cache_dir (with the
    release history mine made): the wall seconds of everything but the builds."""
    again = os.path.join(root, "steady")
    os.makedirs(again)
    path, params = params_file(again, max_releases, reuse)
    for folder in ("pypi", "pypi-sdists"):
        shutil.copytree(os.path.join(cache_dir, folder), os.path.join(params.cache_dir, folder))
    return trajforge_side(again, path, params.cache_dir, mine_dir, w).wall_s


def baseline_side(params: Params, candidates: list[Candidate], w: int, tag: str) -> Side:
    """One image at the newest candidate (its stage profile's Python), then W candidates at once."""
    newest = max(candidates, key=lambda c: (c.created_at, c.candidate_id))
    profile = stage_profile(params, newest)
    python = profile.python if profile else params.environment.default_python
    repo_path = open_source(newest.source, SourceOptions.from_params(params)).path
    whole_logs = copy.deepcopy(params)  # SWE-smith reads the whole log from a file: no cap here
    whole_logs.validate.max_log_bytes = LOG_CAP
    sandbox = make_sandbox(whole_logs, quiet=True)
    timeout = min(TIMEOUT_S, params.validate.test_timeout_s)
    started = time.monotonic()
    image = build_repo_image(sandbox, params.environment, repo_path, newest, python, tag)
    outcomes: list[Outcome] = []
    if image.ok:
        with ThreadPoolExecutor(max_workers=w) as pool:
            outcomes = list(pool.map(
                lambda c: validate_candidate(sandbox, tag, repo_path, c, timeout), candidates
            ))  # fmt: skip
    else:
        outcomes = [
            Outcome(c.candidate_id, False, "install_failed", (), (), 0.0) for c in candidates
        ]
    wall = time.monotonic() - started
    sandbox.close()
    reasons = collections.Counter(o.reason for o in outcomes if not o.kept)
    status = "built" if image.ok else f"FAILED ({image.detail})"
    return Side(
        "baseline (SWE-smith style)", len(candidates), wall, image.build_s,
        sum(o.test_s for o in outcomes),
        {o.candidate_id: o.fail_to_pass for o in outcomes if o.kept}, dict(reasons), w,
        [f"one image {tag}, Python {python}, at release commit {image.commit[:12]}: "
         f"{status} in {image.build_s:.1f} s", f"test runs: {2 * len(outcomes)}"],
        [], {o.candidate_id: o.reason for o in outcomes if not o.kept},
    )  # fmt: skip


def comparison(ours: Side, theirs: Side) -> tuple[float | None, str]:
    """The ratio (trajforge / baseline), or None with the reason the comparison is void: a
    baseline that kept nothing has no cost per task to divide by (it is not an infinitely
    cheaper trajforge), and a side stopped by the machine (a full disk, a sandbox that failed
    every candidate) measured nothing."""
    for side in (theirs, ours):
        fault = machine_fault("\n".join(side.notes + list(side.why_not.values())))
        if not fault and not side.kept and side.reasons and set(side.reasons) <= SANDBOX_FAULTS:
            fault = ", ".join(f"{r} {n}" for r, n in sorted(side.reasons.items()))
        if fault:
            why = f"{side.name} was stopped by the machine ({fault}), not by the repository"
            return None, f"tasks_per_core_hour_ratio: void: {why}; free the machine and rerun"
    if not theirs.kept:
        reasons = ", ".join(f"{r} {n}" for r, n in sorted(theirs.reasons.items())) or "none"
        why = f"the baseline kept 0 of {theirs.candidates} candidates (rejected: {reasons})"
        return None, f"tasks_per_core_hour_ratio: void: {why}; there is no cost per task to compare"
    ratio = ours.per_core_hour / theirs.per_core_hour
    return ratio, f"tasks_per_core_hour_ratio: {ratio:.2f}"


def baseline_or_fault(params: Params, candidates: list[Candidate], w: int, tag: str) -> Side:
    """The baseline's side; one that dies of the machine (a full disk, no memory) is a side
    with nothing kept and the cause in its notes, so the run still prints trajforge's figures
    and says in one line why there is no ratio, instead of a traceback."""
    import docker.errors

    started = time.monotonic()
    try:
        return baseline_side(params, candidates, w, tag)
    except (OSError, docker.errors.DockerException) as exc:
        cause = str(exc).strip().splitlines()[-1:] or [type(exc).__name__]
        return Side(
            "baseline (SWE-smith style)", len(candidates), time.monotonic() - started, 0.0, 0.0,
            {}, {"machine_fault": len(candidates)}, w, [f"did not finish: {cause[0][:300]}"],
        )  # fmt: skip


def agreement(ours: Side, theirs: Side) -> list[str]:
    both = sorted(set(ours.kept) & set(theirs.kept))
    lines = [
        f"kept by both: {len(both)}; trajforge only: {sorted(set(ours.kept) - set(theirs.kept))}; "
        f"baseline only: {sorted(set(theirs.kept) - set(ours.kept))}"
    ]
    for name, side, other in (("trajforge", ours, theirs), ("baseline", theirs, ours)):
        for cid in sorted(set(side.kept) - set(other.kept)):
            lines.append(f"  {name} only {cid}: FAIL_TO_PASS {list(side.kept[cid])}; "
                         f"the other side: {other.why_not.get(cid, '?')}")  # fmt: skip
    differ = [c for c in both if ours.kept[c] != theirs.kept[c]]
    lines.append(f"FAIL_TO_PASS agree on {len(both) - len(differ)} of {len(both)} kept by both")
    for cid in differ:
        a, b = set(ours.kept[cid]), set(theirs.kept[cid])
        lines.append(f"  {cid}: trajforge only {sorted(a - b)}; baseline only {sorted(b - a)}")
    return lines


@contextlib.contextmanager
def work_folder(keep: str | None) -> Iterator[str]:
    """``keep`` (made, must be new or empty) or a temporary folder removed afterwards."""
    if keep:
        os.makedirs(keep, exist_ok=True)
        if os.listdir(keep):
            raise SystemExit(f"--keep {keep}: the folder is not empty; name a new one")
        yield os.path.abspath(keep)
        return
    with tempfile.TemporaryDirectory(prefix="trajforge-e2e-", ignore_cleanup_errors=True) as root:
        yield root


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--pypi", required=True, help="the PyPI project whose releases to mine")
    parser.add_argument("--max-commits", type=int, default=8, help="newest N releases mined")
    parser.add_argument("--workers", type=int, default=2, help="W, the cores of both sides")
    parser.add_argument("--json", help="also write the figures here")
    parser.add_argument("--keep", help="keep the work folder (outputs, caches, logs) here")
    parser.add_argument(
        "--reuse", action="store_true",
        help="environment.reuse on (off by default, as in a user's run): a profile first "
        "tries an image already built for the repository",
    )  # fmt: skip
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    with work_folder(args.keep) as root:
        params_path, params = params_file(root, args.max_commits + 1, args.reuse)
        mine_dir = os.path.join(root, "mine")
        started = time.monotonic()
        cli("mine", "--pypi", args.pypi, "--max-commits", str(args.max_commits),
            "--output", mine_dir, "--params", params_path, cwd=root)  # fmt: skip
        mine_s = time.monotonic() - started
        candidates = read_dir(Candidate, os.path.join(mine_dir, "candidates"))
        if not candidates:
            raise SystemExit(f"pypi:{args.pypi}: no candidates in the newest {args.max_commits} "
                             "releases; raise --max-commits")  # fmt: skip
        detected = {p.image for c in candidates if (p := stage_profile(params, c))}
        removed = remove_images(detected)
        print(f"pypi:{args.pypi}, newest {args.max_commits} releases: {len(candidates)} candidates "
              f"(mine {mine_s:.1f} s, counted by neither side), W = {args.workers}")  # fmt: skip
        print(f"cold: fresh cache_dir; {removed} of {len(detected)} profile images were present "
              "and removed; Docker's build cache kept (see RUN steps below)")  # fmt: skip
        ours = trajforge_side(root, params_path, params.cache_dir, mine_dir, args.workers)
        ours.candidates = len(candidates)
        tag = f"trajforge-e2e-baseline:{os.getpid()}"
        try:
            steady = steady_state(
                root,
                params.cache_dir,
                mine_dir,
                args.max_commits + 1,
                args.workers,
                args.reuse,
            )
            ours.notes.append(
                f"validate again with the images present: {steady:.1f} s wall, so the builds "
                f"cost {ours.wall_s - steady:.1f} s of the wall (not counted in the ratio)"
            )
            theirs = baseline_or_fault(params, candidates, args.workers, tag)
        finally:
            remove_images({tag, *ours.images})
    for side in (ours, theirs):
        print("\n".join(side.lines()))
    print("\n".join(agreement(ours, theirs)))
    ratio, ratio_line = comparison(ours, theirs)
    if args.json:
        figures = {
            "pypi": args.pypi, "max_commits": args.max_commits, "workers": args.workers,
            "mine_s": mine_s, "profile_images_removed": removed,
            "trajforge": {**asdict(ours), "tasks_per_core_hour": ours.per_core_hour},
            "baseline": {**asdict(theirs), "tasks_per_core_hour": theirs.per_core_hour},
            "tasks_per_core_hour_ratio": ratio, "comparison": ratio_line,
            "load": os.getloadavg(),
        }  # fmt: skip
        with open(args.json, "w", encoding="utf-8") as handle:
            json.dump(figures, handle, indent=2)
    print(ratio_line)
    return 0 if ratio is not None else 1


if __name__ == "__main__":
    raise SystemExit(main())
