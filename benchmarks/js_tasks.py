"""Benchmark JS/TS tasks: `trajforge inject` then `trajforge validate` on public JS/TS libraries.

Issue 28's target: five public JS/TS libraries with at least 10 tasks each, no LLM. For each
library the real CLI runs twice, as a user runs it: ``inject --repo PATH --max-candidates K
--seed 0`` (K procedural bugs sampled by the JS operators), then ``validate`` on that output
(the library's JS environment built from its lock file, the clean suite once, one full run per
bug in a fresh container, the failures rerun, FAIL_TO_PASS confirmed at clean). The params file
is written into the library's temp folder (its own cache, ``validate.workers``), so nothing is
read from an earlier run's cache.

Prints per library: bugs injected, tasks kept (single bugs, and combos: 2-3 kept bugs combined,
``inject.combos``), rejections by reason, the clean run's tests passing / run, wall seconds of
each stage; then the totals and how many libraries reached ``--target`` tasks. Where a library
gives fewer, its reasons say why (``not_covered``: no test fails on the bug; ``breaks_collection``:
the suite no longer loads; ``mutant_timeout``); raise its K (``--k NAME=K``) rather than
replacing it. Images the runs built are removed at the end (``--keep-images`` keeps them).

Usage: .venv/bin/python benchmarks/js_tasks.py --repo PATH [--repo PATH ...]
       [--max-candidates 20] [--k NAME=K ...] [--workers 2] [--target 10] [--json PATH]
A PATH may be a bare mirror (``fetch``'s $MIRRORS/owner+name/repo): its HEAD is checked out
into a temp folder first (``js_environments.checkout``), never into the repository.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import subprocess
import sys
import tempfile
import time

from trajforge.schemas.candidate import Candidate
from trajforge.schemas.env_profile import EnvProfile
from trajforge.schemas.rejection import Rejection
from trajforge.schemas.storage import parquet_files, read_records
from trajforge.schemas.task_instance import TaskInstance
from trajforge.schemas.test_run import TestRun

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from js_environments import checkout

CLI = os.path.join(os.path.dirname(sys.executable), "trajforge")
PARAMS = """\
cache_dir: {cache}
validate:
  workers: {workers}
  test_timeout_s: {timeout}
"""


def rows(directory: str, table: str, record: type) -> list:
    return [
        r for f in parquet_files(os.path.join(directory, table)) for r in read_records(record, f)
    ]


def stage(args: list[str], log: str) -> float:
    """One CLI run, its output kept in ``log``; wall seconds. A failed run raises with its tail."""
    started = time.monotonic()
    with open(log, "w") as handle:
        done = subprocess.run([CLI, *args], stdout=handle, stderr=subprocess.STDOUT, check=False)
    if done.returncode != 0:
        with open(log) as handle:
            tail = handle.read()[-800:]
        raise RuntimeError(f"trajforge {args[0]} exited {done.returncode}: {tail}")
    return time.monotonic() - started


def measure(repo: str, k: int, work: str, cli: argparse.Namespace) -> dict:
    """inject + validate on one checked-out library, and what each left in its tables."""
    name = os.path.basename(repo)
    folder = os.path.join(work, f"run-{name}")
    os.makedirs(folder)
    params = os.path.join(folder, "params.yaml")
    with open(params, "w") as handle:
        handle.write(PARAMS.format(cache=os.path.join(folder, "cache"), workers=cli.workers,
                                   timeout=cli.timeout))  # fmt: skip
    injected, validated = os.path.join(folder, "inject"), os.path.join(folder, "validate")
    out: dict = {"repo": name, "k": k}
    common = ["--params", params]
    try:
        out["inject_s"] = round(stage(["inject", "--repo", repo, "--max-candidates", str(k),
                                       "--seed", "0", "--output", injected, *common],
                                      os.path.join(folder, "inject.log")), 1)  # fmt: skip
        bugs = rows(injected, "candidates", Candidate)
        out["bugs"] = len(bugs)
        out["inject_rejected"] = dict(
            collections.Counter(r.reason for r in rows(injected, "rejections", Rejection))
        )
        if not bugs:
            return out
        out["validate_s"] = round(stage(["validate", "--input", injected, "--output", validated,
                                         "--workers", str(cli.workers), *common],
                                        os.path.join(folder, "validate.log")), 1)  # fmt: skip
    except RuntimeError as exc:
        out["error"] = str(exc)
        return out
    tasks = rows(validated, "tasks", TaskInstance)
    combos = [t for t in tasks if t.origin == "bug/combo"]
    out["tasks"] = len(tasks) - len(combos)
    out["combos"] = len(combos)
    out["rejected"] = dict(
        collections.Counter(r.reason for r in rows(validated, "rejections", Rejection))
    )
    profiles = rows(validated, "profiles", EnvProfile)
    out["images"] = sorted({p.image for p in profiles if p.image})
    out["runner"] = ",".join(sorted({p.runner for p in profiles if p.runner}))
    out["node"] = ",".join(sorted({p.runtime for p in profiles if p.runtime}))
    clean = [r for r in rows(validated, "runs", TestRun) if r.state == "clean" and not r.selection]
    statuses = clean[0].statuses() if clean else {}
    out["clean_passed"] = sum(s == "PASSED" for s in statuses.values())
    out["clean_tests"] = len(statuses)
    out["f2p_median"] = _median([len(t.FAIL_TO_PASS) for t in tasks if t.origin != "bug/combo"])
    return out


def _median(values: list[int]) -> float | None:
    ordered = sorted(values)
    if not ordered:
        return None
    mid = len(ordered) // 2
    return float(ordered[mid]) if len(ordered) % 2 else (ordered[mid - 1] + ordered[mid]) / 2


def line(row: dict) -> str:
    if "error" in row:
        return f"{row['repo']:>24}: K={row['k']} failed: {row['error']}"
    return (
        f"{row['repo']:>24}: K={row['k']} bugs {row.get('bugs', 0)}, tasks {row.get('tasks', 0)}"
        f" (+{row.get('combos', 0)} combos), rejected {row.get('rejected', {})}"
        f"{' inject ' + str(row['inject_rejected']) if row.get('inject_rejected') else ''}; "
        f"clean {row.get('clean_passed', 0)}/{row.get('clean_tests', 0)} passing "
        f"({row.get('runner', '')}, node {row.get('node', '')}); F2P median "
        f"{row.get('f2p_median')}; inject {row.get('inject_s', 0)} s, validate "
        f"{row.get('validate_s', 0)} s"
    )


def totals(rows_: list[dict], target: int) -> dict:
    reasons: collections.Counter[str] = collections.Counter()
    for row in rows_:
        reasons.update(row.get("rejected", {}))
    return {
        "libraries": len(rows_),
        "bugs": sum(r.get("bugs", 0) for r in rows_),
        "tasks": sum(r.get("tasks", 0) for r in rows_),
        "combos": sum(r.get("combos", 0) for r in rows_),
        "at_target": sum(r.get("tasks", 0) >= target for r in rows_),
        "rejected": dict(reasons.most_common()),
        "seconds": round(sum(r.get("inject_s", 0) + r.get("validate_s", 0) for r in rows_), 1),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repo", action="append", required=True)
    parser.add_argument("--max-candidates", type=int, default=20)
    parser.add_argument("--k", action="append", default=[], help="NAME=K: K for one library")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--timeout", type=int, default=300, help="validate.test_timeout_s")
    parser.add_argument("--target", type=int, default=10)
    parser.add_argument("--keep-images", action="store_true")
    parser.add_argument("--json")
    parser.add_argument("--work", help="keep the checkouts and outputs here (default: a temp dir)")
    args = parser.parse_args(argv)
    per_repo = dict(item.split("=", 1) for item in args.k)
    results: list[dict] = []
    with tempfile.TemporaryDirectory(prefix="trajforge-jstasks-") as temp:
        work = args.work or temp
        os.makedirs(work, exist_ok=True)
        for path in args.repo:
            try:
                repo = checkout(path, work)
            except (OSError, subprocess.CalledProcessError) as exc:
                print(f"{path}: not checked out ({exc}); left out", flush=True)
                continue
            k = int(per_repo.get(os.path.basename(repo), args.max_candidates))
            results.append(measure(repo, k, work, args))
            print(line(results[-1]), flush=True)
    summary = totals(results, args.target)
    print(f"totals: {summary}")
    if not args.keep_images:
        for image in sorted({i for r in results for i in r.get("images", [])}):
            subprocess.run(["docker", "rmi", image], capture_output=True, check=False)
    if args.json:
        with open(args.json, "w") as handle:
            json.dump({"rows": results, "totals": summary}, handle, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
