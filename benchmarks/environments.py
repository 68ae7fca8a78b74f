"""Benchmark environment setup: the share of real repositories that build and run their suite.

Every repository is taken at its commit and set up twice in one run, with no hand-written spec:

  legacy: the detector before ranking: ``detect_profile(legacy=True)`` on the default Python only
      (the one base image it had), and ``prepare_environment(legacy=True)``: everything installed
      at once, the newest pytest, no fallback, no repair, no exclusion;
  new: the ranked install sets (``detect_profile``), the Python that fits ``requires-python``
      among ``environment.pythons``, repairs from the collection's evidence and the exclusion of
      the test modules that still cannot collect (``prepare_environment``).

Then the clean suite runs once in the prepared image at that commit, as validation runs a base
suite (the tree copied to /repo, ``profile.test_cmd``, no network, a time limit). A repository
counts as reached when its environment built, its suite collected tests and ran, and at least
one test passed; every other one is counted under a reason: detection's (``no_supported_python``),
preparation's (``install_failed``, ``no_tests``, ``collection_failed``...), or the run's
(``collection_error_at_clean``, ``timeout_at_clean``, ``suite_did_not_run_at_clean``,
``no_passing_tests``).

Every run starts from a fresh cache directory (so nothing prepared earlier is reused) and removes
the environment images it built at the end, so the next run builds them again; ``--reuse`` keeps
both (``--cache-dir``). Docker's build cache is the machine's and is left alone: a recipe whose
install step was built before (by either mode) reuses that layer.

With ``--tasks`` the "new" mode goes one level further where the clean run passed: `trajforge
inject --max-candidates 3` then `trajforge validate`, as a new user would, in the same cache (the
environment is reused). Reach is then reported in four levels (issue 30): installed -> collected
(or no tests, Repo2Run's test of success) -> a clean run with at least one pass -> at least one
task. The script uses only detect_profile, prepare_environment and the CLI, so a checkout of an
older trajforge can run it too (the "before" of a before/after comparison).

Prints one block per repository, then per mode the share reached, the reasons for the rest and
minutes per repository, and last ``reach_gain: X`` = new share / legacy share. Everything goes to
``--out`` as JSON (while it runs, the repositories finished so far to ``OUT.partial``, which
benchmarks/envbench_report.py reads too). It builds about two images per repository: on a
shared machine the minutes are a ceiling, the shares are not affected.

Usage: .venv/bin/python benchmarks/environments.py (--repos FILE | --repo PATH ...)
       [--only NAME ...] [--modes legacy,new] [--timeout 600] [--workers 1] [--params PATH]
       [--cache-dir DIR] [--reuse] [--keep-cache] [--keep-images] [--tasks] [--out PATH]
A repos FILE has one ``name path [commit]`` per line (no commit: HEAD; ``#`` starts a comment).
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import dataclasses
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from typing import Any

from trajforge.generators.environments.recipe import PROFILE_LABEL
from trajforge.generators.languages.python.prepare import prepare_environment
from trajforge.generators.languages.python.profile import JUNIT_PATH, detect_profile
from trajforge.schemas.env_profile import EnvProfile
from trajforge.schemas.errors import UserError
from trajforge.schemas.params import Params, load_params
from trajforge.schemas.test_run import TestRun
from trajforge.verifiers.sandbox.base import ImageStore, Sandbox, SessionSpec
from trajforge.verifiers.sandbox.factory import make_sandbox
from trajforge.verifiers.sandbox.git_tree import archive, resolve_commit
from trajforge.verifiers.test_runner import RunContext, run_tests
from trajforge.verifiers.validation.rule import suite_failure

try:  # validate's own rule (issue 43); an older trajforge measured as "before" has none
    from trajforge.verifiers.languages.python.clean_exclusions import (
        failed_modules,
        without_modules,
    )
except ImportError:  # pragma: no cover - the older venv
    failed_modules = without_modules = None  # type: ignore[assignment]

MODES = ("legacy", "new")
LEVELS = ("installed", "collected", "clean_pass", "task")
NO_TESTS = ("no_tests", "no_tests_at_commit")  # "collected" in Repo2Run's sense: nothing to run
STATE = "clean"
DETAIL_CHARS = 300
_PRINT = threading.Lock()
_DONE: list[dict] = []  # the rows finished so far, for --out's partial file (under _PRINT)


@dataclass(frozen=True)
class Repo:
    name: str
    path: str
    commit: str


@dataclass
class Outcome:
    """One repository set up by one mode, and what its clean suite did."""

    mode: str
    reached: bool = False  # built, collected, ran, and at least one test passed
    reason: str = ""  # "" when reached
    detail: str = ""  # one line saying why not
    built: bool = False
    collected: int = 0  # tests collected at the setup commit, exclusions applied
    ran: bool = False  # the clean run's suite ran (pytest exit 0 or 1, no collection error)
    tests: int = 0
    passed: int = 0
    failed: int = 0  # FAILED + ERROR
    exit_code: int | None = None
    python: str = ""
    install_set: str = ""
    install: list[str] = field(default_factory=list)
    attempts: list[str] = field(default_factory=list)
    repairs: list[str] = field(default_factory=list)
    excluded: list[str] = field(default_factory=list)
    origin: str = ""
    test_cmd: str = ""
    profile_id: str = ""
    image: str = ""
    counters: dict[str, int] = field(default_factory=dict)
    prepare_s: float = 0.0  # detection, builds, collections and repairs
    run_s: float = 0.0  # the clean suite
    seconds: float = 0.0
    tasks: int = 0  # tasks `trajforge inject` + `validate` kept (--tasks), the fourth level
    task_detail: str = ""  # why none, in one line (the most common rejection)
    task_s: float = 0.0

    @property
    def levels(self) -> dict[str, bool]:
        """Reach in levels (issue 30): installed -> collected (or no tests: Repo2Run's test of
        success) -> a clean run with at least one pass -> at least one task."""
        no_tests = self.reason in NO_TESTS
        return {
            "installed": self.built,
            "collected": self.built and (self.collected > 0 or no_tests),
            "clean_pass": self.reached,
            "task": self.tasks > 0,
        }

    @property
    def minutes(self) -> float:
        return self.seconds / 60

    def summary(self) -> str:
        """``ok`` with the counts, or the reason and its detail; then the minutes."""
        if self.reached:
            what = f"ok: {self.passed}/{self.tests} passed ({self.collected} collected)"
        else:
            counts = f", {self.collected} collected" if self.collected else ""
            what = f"{self.reason}{counts}: {self.detail}"
        return f"{what} [{self.minutes:.1f} min]"


# --- the repositories --------------------------------------------------------------------------


def read_repos(path: str) -> list[Repo]:
    """``name path [commit]`` per line; a missing commit is HEAD."""
    repos = []
    with open(path, encoding="utf-8") as handle:
        for number, raw in enumerate(handle, 1):
            parts = raw.split("#", 1)[0].split()
            if not parts:
                continue
            if len(parts) not in (2, 3):
                raise SystemExit(f"{path}:{number}: expected `name path [commit]`, got {raw!r}")
            repos.append(resolved(parts[0], parts[1], parts[2] if len(parts) == 3 else "HEAD"))
    return repos


def resolved(name: str, path: str, rev: str) -> Repo:
    path = os.path.abspath(os.path.expanduser(path))
    commit = resolve_commit(path, rev) if os.path.isdir(path) else None
    if commit is None:
        raise SystemExit(f"{name}: {rev} is not a commit of a git repository at {path}")
    return Repo(name, path, commit)


def select_repos(args: argparse.Namespace) -> list[Repo]:
    repos = read_repos(args.repos) if args.repos else []
    repos += [resolved(os.path.basename(os.path.normpath(p)), p, "HEAD") for p in args.repo]
    if args.only:
        unknown = set(args.only) - {r.name for r in repos}
        if unknown:
            raise SystemExit(f"--only names no listed repository: {', '.join(sorted(unknown))}")
        repos = [r for r in repos if r.name in args.only]
    names = collections.Counter(r.name for r in repos)
    if dupes := [n for n, k in names.items() if k > 1]:
        raise SystemExit(f"repository names must be unique: {', '.join(sorted(dupes))}")
    if not repos:
        raise SystemExit("no repositories: give --repos FILE or --repo PATH")
    return repos


# --- one repository, one mode ------------------------------------------------------------------


def one_line(text: str) -> str:
    lines = [line.strip() for line in str(text).strip().splitlines() if line.strip()]
    return (lines[0] if lines else "")[:DETAIL_CHARS]


def detect(repo: Repo, params: Params, legacy: bool) -> EnvProfile:
    """The profile at the repository's commit. Legacy chooses among the default Python only:
    the one base image the detector before ranking had (``environment.pythons`` was
    ``[default_python]``), so a repository that needs another one fails as it did then."""
    env = params.environment
    pythons = (env.default_python,) if legacy else tuple(env.pythons)
    return detect_profile(
        repo.path, repo.commit, repo.name,
        default_python=env.default_python, pythons=pythons, registry=env.registry, legacy=legacy,
    )  # fmt: skip


def clean_run(sandbox: Sandbox, profile: EnvProfile, repo: Repo, timeout_s: float) -> TestRun:
    """The clean suite once in a fresh session of the profile's image: the tree at the commit
    in /repo, the profile's test command (its exclusions included), no network."""
    ctx = RunContext(
        f"envbench-{repo.name}", profile.profile_id, profile.test_cmd, JUNIT_PATH, timeout_s
    )
    with sandbox.session(SessionSpec(image=profile.image)) as session:
        session.put_archive(archive(repo.path, repo.commit, prefix="repo/"))
        return run_tests(session, ctx, STATE, attempt=0)


def task_level(repo: Repo, params: Params, out: Outcome, timeout_s: float) -> None:
    """The fourth level as a new user meets it: `trajforge inject --max-candidates 3` at the
    repository's newest commit, then `trajforge validate`, in the benchmark's cache (so the
    environment just prepared is reused, not built again). Each step may take twice the clean
    suite's limit; one that takes longer is the repository's detail, not the run's end."""
    started = time.monotonic()
    cli = os.path.join(os.path.dirname(sys.executable), "trajforge")
    with tempfile.TemporaryDirectory(prefix=f"envbench-{repo.name}-") as work:
        params_file = os.path.join(work, "params.yaml")
        with open(params_file, "w", encoding="utf-8") as handle:
            handle.write(
                f"cache_dir: {params.cache_dir}\ninject:\n  combos: 0\nvalidate:\n  workers: 1\n"
            )
        steps = [
            ["inject", "--repo", repo.path, "--max-candidates", "3", "--seed", "0"],
            ["validate", "--input", os.path.join(work, "inject")],
        ]
        for step, output in zip(steps, ("inject", "validate"), strict=True):
            command = [cli, *step, "--output", os.path.join(work, output), "--params", params_file]
            try:
                done = subprocess.run(
                    command,
                    cwd=work,
                    capture_output=True,
                    text=True,
                    check=False,
                    timeout=2 * timeout_s,
                )
            except subprocess.TimeoutExpired:
                out.task_detail = f"{output} took over {2 * timeout_s:.0f} s and was stopped"
                break
            if done.returncode != 0:
                out.task_detail = one_line(f"{output} failed: {done.stderr.strip()[-300:]}")
                break
        summary_path = os.path.join(work, "validate", "summary.json")
        if os.path.exists(summary_path):
            with open(summary_path, encoding="utf-8") as handle:
                summary = json.load(handle)
            out.tasks = int(summary.get("kept", 0))
            rejected = summary.get("rejected") or {}
            if not out.tasks:
                top = max(rejected.items(), key=lambda item: item[1], default=("none", 0))
                out.task_detail = f"0 of {summary.get('inputs', 0)} bugs kept (most: {top[0]})"
        elif not out.task_detail:
            out.task_detail = "inject made no candidates"
    out.task_s = time.monotonic() - started


def measure(
    repo: Repo, mode: str, params: Params, sandbox: Sandbox, timeout_s: float, tasks: bool = False
) -> Outcome:
    """Detect, prepare, run the clean suite; every failure is a reason, nothing raises."""
    legacy = mode == "legacy"
    out = Outcome(mode)
    counters: collections.Counter[str] = collections.Counter()

    def count(name: str, value: int = 1) -> None:
        counters[name] += value

    started = time.monotonic()
    try:
        profile = detect(repo, params, legacy)
        out.python, out.install_set = profile.python, profile.install_set
        prepared = prepare_environment(
            sandbox, profile, repo.path, params, legacy=legacy, count=count
        )
        built = prepared.profile
        out.built = built.status == "built"
        out.collected = prepared.collected
        out.python, out.install_set = built.python, built.install_set
        out.install = list(built.install)
        out.attempts, out.repairs = list(built.attempts), list(built.repairs)
        out.excluded, out.origin, out.test_cmd = list(built.excluded), built.origin, built.test_cmd
        out.profile_id, out.image = built.profile_id, built.image
        if prepared.reason:
            out.reason, out.detail = prepared.reason, one_line(prepared.detail)
            if tasks and out.reason in NO_TESTS:  # inject may find an older commit with tests
                task_level(repo, params, out, timeout_s)
            return out
        out.prepare_s = time.monotonic() - started
        run = clean_run(sandbox, built, repo, timeout_s)
        if not legacy and failed_modules is not None and (modules := failed_modules(run)):
            # as validate's clean run does (clean_exclusions.py): the modules that fail to import
            # there are left out, named, and the rest of the suite decides
            built = without_modules(built, modules)
            out.excluded, out.test_cmd = list(built.excluded), built.test_cmd
            count("excluded_at_clean", len(modules))
            run = clean_run(sandbox, built, repo, timeout_s)
        out.run_s = run.duration_s
        statuses = collections.Counter(t.status for t in run.tests)
        out.tests, out.passed = len(run.tests), statuses["PASSED"]
        out.failed, out.exit_code = statuses["FAILED"] + statuses["ERROR"], run.exit_code
        out.ran = run.suite_ran
        if (failure := suite_failure(run)) is not None:
            out.reason, out.detail = failure.reason, one_line(failure.detail)
        elif out.passed == 0:
            out.reason = "no_passing_tests"
            out.detail = f"{out.tests} tests ran, none passed ({out.failed} failed or errored)"
        else:
            out.reached = True
        if tasks and out.reached:
            task_level(repo, params, out, timeout_s)
        return out
    except UserError as exc:  # detection's (no_supported_python), no base image, a broken sandbox
        out.reason, out.detail = exc.reason, one_line(str(exc))
        return out
    except Exception as exc:  # a bug or the engine: counted, and the other repositories go on
        out.reason = "benchmark_error"
        out.detail = one_line(f"{exc.__class__.__name__}: {exc}")
        return out
    finally:
        out.seconds = time.monotonic() - started
        if not out.prepare_s:
            out.prepare_s = out.seconds
        out.counters = dict(sorted(counters.items()))


def bench_repo(
    repo: Repo,
    modes: Sequence[str],
    params: Params,
    timeout_s: float,
    tasks: bool = False,
    partial: str | None = None,
) -> dict[str, Outcome]:
    """Every mode on one repository, in one sandbox (its spare containers removed after). With
    ``partial``, the outcomes so far go to that JSON file too, so a long run that is stopped
    still leaves the repositories it finished (the same ``repositories`` rows as ``--out``)."""
    sandbox = make_sandbox(params, quiet=True)
    try:
        outcomes = {
            mode: measure(repo, mode, params, sandbox, timeout_s, tasks and mode == "new")
            for mode in modes
        }
    finally:
        sandbox.close()
    with _PRINT:
        print_repo(repo, outcomes)
        if partial:
            _DONE.append({**asdict(repo), **{mode: asdict(o) for mode, o in outcomes.items()}})
            with open(partial, "w", encoding="utf-8") as handle:
                json.dump({"repositories": _DONE, "partial": True}, handle, indent=2)
    return outcomes


# --- images and caches -------------------------------------------------------------------------


def env_images(params: Params) -> set[str] | None:
    """The environment images here (None where the sandbox cannot list them)."""
    sandbox = make_sandbox(params, quiet=True)
    try:
        return set(sandbox.list_images(PROFILE_LABEL)) if isinstance(sandbox, ImageStore) else None
    finally:
        sandbox.close()


def remove_images(params: Params, images: set[str]) -> int:
    sandbox = make_sandbox(params, quiet=True)
    removed = 0
    try:
        if isinstance(sandbox, ImageStore):
            for image in sorted(images):
                with contextlib.suppress(Exception):
                    sandbox.remove_image(image)
                    removed += 1
    finally:
        sandbox.close()
    return removed


@contextlib.contextmanager
def cache_dir(args: argparse.Namespace, params: Params) -> Iterator[str]:
    """--reuse: the given (or params') cache dir, kept; else a fresh one, removed after."""
    if args.reuse:
        path = os.path.abspath(args.cache_dir or params.cache_dir)
        os.makedirs(path, exist_ok=True)
        yield path
        return
    parent = args.cache_dir
    if parent:
        os.makedirs(parent, exist_ok=True)
    path = tempfile.mkdtemp(prefix="trajforge-envbench-", dir=parent)
    try:
        yield path
    finally:
        if not args.keep_cache:
            shutil.rmtree(path, ignore_errors=True)


# --- reporting ---------------------------------------------------------------------------------


def print_repo(repo: Repo, outcomes: dict[str, Outcome]) -> None:
    print(f"{repo.name} @ {repo.commit[:12]}")
    for mode, out in outcomes.items():
        print(f"  {mode:>6}: {out.summary()}")
        if out.install_set or out.python:
            images = out.counters.get("images_built", 0)
            plural = "" if images == 1 else "s"
            built = (
                f", {images} image{plural} built" if images or not out.built else ", image reused"
            )
            where = f"install set {out.install_set or '-'} on Python {out.python or '-'}"
            print(f"          {where}{built}")
        for attempt in out.attempts:
            print(f"          tried first: {attempt[:DETAIL_CHARS]}")
        for repair in out.repairs:
            print(f"          repair: {repair}")
        for excluded in out.excluded:
            print(f"          excluded: {excluded[:DETAIL_CHARS]}")
        if out.tasks or out.task_detail:
            print(f"          tasks: {out.tasks} {out.task_detail} [{out.task_s / 60:.1f} min]")
    sys.stdout.flush()


def mode_figures(outcomes: list[Outcome]) -> dict:
    """Share reached, the stage counts, reasons and minutes of one mode over every repository."""
    total = len(outcomes)
    reached = sum(o.reached for o in outcomes)
    minutes = [o.minutes for o in outcomes]
    return {
        "repositories": total,
        "reached": reached,
        "share": reached / total if total else 0.0,
        "built": sum(o.built for o in outcomes),
        "collected": sum(o.collected > 0 for o in outcomes),
        "ran": sum(o.ran for o in outcomes),
        "passed_any": sum(o.passed > 0 for o in outcomes),
        "reasons": dict(collections.Counter(o.reason for o in outcomes if not o.reached)),
        "minutes_per_repository": statistics.fmean(minutes) if minutes else 0.0,
        "median_minutes": statistics.median(minutes) if minutes else 0.0,
        "install_fallbacks": sum(bool(o.attempts) for o in outcomes),
        "repaired": sum(bool(o.repairs) for o in outcomes),
        "with_exclusions": sum(bool(o.excluded) for o in outcomes),
        "excluded_modules": sum(len(o.excluded) for o in outcomes),
        "levels": {level: sum(o.levels[level] for o in outcomes) for level in LEVELS},
        "no_tests": sum(o.reason in NO_TESTS for o in outcomes),
    }


def report(
    repos: list[Repo], results: list[dict[str, Outcome]], modes: Sequence[str], total_s: float
) -> dict:
    """Print the figures of every mode and ``reach_gain`` last; return them."""
    figures: dict[str, Any] = {m: mode_figures([r[m] for r in results]) for m in modes}
    print()
    for mode in modes:
        f = figures[mode]
        print(
            f"{mode:>6}: {f['reached']}/{f['repositories']} build and run their suite "
            f"({f['share']:.0%}); built {f['built']}, collected {f['collected']}, ran "
            f"{f['ran']}, passed >= 1: {f['passed_any']}; {f['minutes_per_repository']:.1f} "
            f"min per repository (median {f['median_minutes']:.1f})"
        )
        levels = ", ".join(f"{name} {k}" for name, k in f["levels"].items())
        print(f"        levels: {levels} (of {f['repositories']}; no tests: {f['no_tests']})")
        if mode != "legacy":
            print(
                f"        install fallbacks {f['install_fallbacks']}, repaired {f['repaired']}, "
                f"with exclusions {f['with_exclusions']} ({f['excluded_modules']} modules)"
            )
        for reason, k in sorted(f["reasons"].items(), key=lambda item: (-item[1], item[0])):
            names = [
                repo.name
                for repo, r in zip(repos, results, strict=True)
                if r[mode].reason == reason
            ]
            print(f"        {reason}: {k} ({', '.join(names)})")
    print(f"benchmark wall time: {total_s / 60:.1f} min")
    if "legacy" in figures and "new" in figures:
        changed = [
            f"{repo.name} ({'gained' if r['new'].reached else 'lost'})"
            for repo, r in zip(repos, results, strict=True)
            if r["legacy"].reached != r["new"].reached
        ]
        print(f"changed: {', '.join(changed) or 'none'}")
        legacy, new = figures["legacy"]["share"], figures["new"]["share"]
        gain = new / legacy if legacy else None  # undefined when legacy reached none
        figures["reach_gain"] = gain
        print(f"reach_gain: {'n/a (legacy reached none)' if gain is None else f'{gain:.2f}'}")
    return figures


# --- main --------------------------------------------------------------------------------------


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repos", help="a file of `name path [commit]` lines")
    parser.add_argument(
        "--repo", action="append", default=[], help="a repository at HEAD (repeatable)"
    )
    parser.add_argument("--only", action="append", default=[], help="only this name (repeatable)")
    parser.add_argument(
        "--modes", default=",".join(MODES), help="comma-separated: legacy, new (default both)"
    )
    parser.add_argument(
        "--timeout", type=float, default=600.0, help="seconds the clean suite may run"
    )
    parser.add_argument("--workers", type=int, default=1, help="repositories at a time")
    parser.add_argument("--params", help="params YAML (default: the defaults)")
    parser.add_argument(
        "--cache-dir", help="with --reuse the cache used and kept; else where the fresh one goes"
    )
    parser.add_argument(
        "--reuse", action="store_true", help="reuse --cache-dir and keep the images built"
    )
    parser.add_argument("--keep-cache", action="store_true", help="keep the fresh cache dir")
    parser.add_argument("--keep-images", action="store_true", help="keep the images built")
    parser.add_argument(
        "--out", help="write every figure and outcome here as JSON (OUT.partial while it runs)"
    )
    parser.add_argument(
        "--tasks",
        action="store_true",
        help="the fourth level: inject 3 bugs and validate them where the clean run passed "
        "(or found no tests: inject may take an older commit)",
    )
    args = parser.parse_args(argv)
    args.modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    if not args.modes or set(args.modes) - set(MODES):
        parser.error(f"--modes takes a comma-separated subset of {', '.join(MODES)}")
    if args.workers < 1 or args.timeout <= 0:
        parser.error("--workers must be at least 1 and --timeout positive")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    repos = select_repos(args)
    base = load_params(args.params)
    started = time.monotonic()
    partial = f"{args.out}.partial" if args.out else None
    with cache_dir(args, base) as cache:
        params = dataclasses.replace(base, cache_dir=cache)
        before = env_images(params)
        print(
            f"{len(repos)} repositories, modes {', '.join(args.modes)}, workers {args.workers}, "
            f"cache {cache}{' (reused)' if args.reuse else ' (fresh)'}; measure on a quiet "
            "machine: another Docker user skews the minutes (not the shares)"
        )
        print()
        try:
            with ThreadPoolExecutor(max_workers=args.workers) as pool:
                results = list(
                    pool.map(
                        lambda r: bench_repo(
                            r, args.modes, params, args.timeout, args.tasks, partial
                        ),
                        repos,
                    )
                )
        finally:
            after = env_images(params)
            built = (after or set()) - (before or set())
            if built and not (args.reuse or args.keep_images):
                removed = remove_images(params, built)
                print(f"(removed the {removed} environment images this run built)")
    total = time.monotonic() - started
    figures = report(repos, results, args.modes, total)
    if args.out:
        document = {
            "repositories": [
                {**asdict(repo), **{mode: asdict(r[mode]) for mode in args.modes}}
                for repo, r in zip(repos, results, strict=True)
            ],
            "figures": figures,
            "modes": args.modes,
            "timeout_s": args.timeout,
            "pythons": {
                "legacy": [base.environment.default_python],
                "new": base.environment.pythons,
            },
            "cold": not args.reuse,
            "total_s": total,
        }
        with open(args.out, "w", encoding="utf-8") as handle:
            json.dump(document, handle, indent=2)
        if partial and os.path.exists(partial):
            os.remove(partial)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
