"""Benchmark JS/TS environments: how far real JavaScript/TypeScript repositories get, no LLM.

Each repository is set up twice in one run, with no hand-written spec:

  naive: the baseline a script would write: the newest Debian node, ``npm install`` with no lock
      file and no ``packageManager`` pin, the runner detection finds;
  layer: the language layer (``generators/languages/``): Node by .nvmrc/engines/commit era, the
      project's package manager from its lock file (``npm ci``, ``pnpm --frozen-lockfile``...).

Then the clean suite runs once in the image (no network, ``--timeout``). Levels, as the reach
issue counts them: installed (the image built), collected (the runner's report lists at least
one test and no file failed to load), clean_pass (and at least one test passed). A repository
that stops is counted under a reason with its one line. Images built are removed at the end.

Usage: .venv/bin/python benchmarks/js_environments.py --repo PATH [--repo PATH ...]
       [--modes naive,layer] [--timeout 600] [--out PATH]
A PATH may be a bare mirror (``git clone --bare``): it is cloned at HEAD first.
"""

from __future__ import annotations

import argparse
import collections
import dataclasses
import json
import os
import subprocess
import sys
import tempfile
import time

from trajforge.generators.languages.javascript.base_image import NODE_VERSIONS
from trajforge.generators.languages.javascript.environment import (
    prepare_js_environment,
    run_js_tests,
)
from trajforge.generators.languages.javascript.language import JavaScript
from trajforge.generators.languages.javascript.recipe import rung_ran
from trajforge.schemas.errors import UserError
from trajforge.schemas.params import EnvironmentParams
from trajforge.verifiers.sandbox.docker import DockerSandbox

MODES = ("naive", "layer")
LEVELS = ("installed", "collected", "clean_pass")
NEWEST = max(NODE_VERSIONS, key=int)


def checkout(path: str, work: str) -> str:
    """A working tree of ``path``: itself when it has one, else its HEAD's files (``git
    archive``: a mirror may lack objects outside HEAD's tree, which a clone would need) in a
    new repository of one commit carrying HEAD's commit date (Node's era choice reads it)."""
    if os.path.isfile(os.path.join(path, "package.json")):
        return path
    name = os.path.basename(os.path.dirname(path.rstrip("/"))).replace("+", "_")
    target = os.path.join(work, name)
    os.makedirs(target)
    date = _git(["--git-dir", path, "log", "-1", "--format=%cI"], work).strip()
    missing = [f":(exclude,literal){f}" for f in _absent_blobs(path)]  # a mirror's largest
    tree = subprocess.run(["git", "--git-dir", path, "archive", "HEAD", "--", ".", *missing],
                          capture_output=True, check=True).stdout  # fmt: skip
    subprocess.run(["tar", "-x", "-C", target], input=tree, check=True)
    env = {**os.environ, "GIT_COMMITTER_DATE": date, "GIT_AUTHOR_DATE": date}
    for args in (["init", "-q"], ["add", "-A"],
                 ["-c", "user.name=bench", "-c", "user.email=bench@localhost", "commit", "-qm",
                  f"HEAD of {name}"]):  # fmt: skip
        subprocess.run(["git", *args], cwd=target, env=env, check=True, capture_output=True)
    return target


def _absent_blobs(git_dir: str) -> list[str]:
    """HEAD's files whose blobs the mirror lacks (it may leave its largest files out)."""
    listing = _git(["--git-dir", git_dir, "ls-tree", "-r", "-z", "HEAD"], git_dir).split("\0")
    entries = [e.split("\t", 1) for e in listing if "\t" in e and " blob " in e]
    query = "".join(meta.split()[2] + "\n" for meta, _ in entries)
    out = subprocess.run(
        ["git", "--git-dir", git_dir, "cat-file", "--batch-check"],
        input=query, capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    lines = out.splitlines()
    return [
        name for (_, name), line in zip(entries, lines, strict=True) if line.endswith("missing")
    ]


def _git(args: list[str], cwd: str) -> str:
    return subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True,
                          check=True).stdout  # fmt: skip


def measure(box: DockerSandbox, repo: str, mode: str, timeout_s: float) -> dict:
    """The level one repository reaches in ``mode``, with the reason it stopped."""
    out: dict = {"repo": os.path.basename(repo), "mode": mode, "level": "", "reason": ""}
    started = time.monotonic()
    js = JavaScript()
    try:
        detection = js.detect(repo)
        if detection is None:
            out["reason"] = "no_package_json"
            return out
        if mode == "naive":
            detection = dataclasses.replace(
                detection, runtime=NEWEST, package_manager="npm", lockfile="", manager_spec=""
            )
        out["detection"] = dataclasses.asdict(detection)
        env = prepare_js_environment(
            box, repo, EnvironmentParams(build_timeout_s=int(timeout_s)), say=lambda _: None,
            detection=detection,
        )  # fmt: skip
        out["level"], out["image"] = "installed", env.image
        out["scripts_off_rung"] = rung_ran(env.log)  # installed only with scripts off
        run = run_js_tests(box, env, repo, timeout_s=timeout_s, per_test_timeout_s=30)
        statuses = run.statuses()
        out["tests"] = len(statuses)
        out["passed"] = sum(s == "PASSED" for s in statuses.values())
        if not run.suite_ran:
            out["reason"] = "suite_did_not_run"
            out["detail"] = "; ".join(run.collection_errors)[:300] or f"exit {run.exit_code}"
            return out
        out["level"] = "collected"
        if out["passed"]:
            out["level"] = "clean_pass"
        else:
            out["reason"] = "no_passing_tests"
    except UserError as exc:
        out["reason"], out["detail"] = exc.reason, str(exc)[:300]
    finally:
        out["minutes"] = round((time.monotonic() - started) / 60, 2)
    return out


def figures(rows: list[dict]) -> dict:
    reached = {level: sum(LEVELS.index(r["level"]) >= i for r in rows if r["level"])
               for i, level in enumerate(LEVELS)}  # fmt: skip
    reasons = collections.Counter(r["reason"] for r in rows if r["reason"])
    rung = sum(bool(r.get("scripts_off_rung")) for r in rows)
    return {"repos": len(rows), **reached, "scripts_off_rung": rung, "reasons": dict(reasons)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repo", action="append", required=True)
    parser.add_argument("--modes", default=",".join(MODES))
    parser.add_argument("--timeout", type=float, default=600)
    parser.add_argument("--out")
    args = parser.parse_args(argv)
    modes = [m for m in args.modes.split(",") if m in MODES]
    box = DockerSandbox()
    rows: list[dict] = []
    with tempfile.TemporaryDirectory(prefix="trajforge-jsbench-") as work:
        repos = []
        for path in args.repo:
            try:
                repos.append(checkout(path, work))
            except (OSError, subprocess.CalledProcessError) as exc:
                print(f"{path}: not checked out ({exc}); left out", flush=True)
        for repo in repos:
            for mode in modes:
                row = measure(box, repo, mode, args.timeout)
                rows.append(row)
                print(json.dumps({k: v for k, v in row.items() if k != "detection"}), flush=True)
        box.close()
        for image in {r["image"] for r in rows if r.get("image")}:
            box.remove_image(image)
    summary = {mode: figures([r for r in rows if r["mode"] == mode]) for mode in modes}
    for mode, fig in summary.items():
        print(f"{mode}: {fig}")
    if args.out:
        with open(args.out, "w") as handle:
            json.dump({"rows": rows, "summary": summary}, handle, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
