"""Benchmark Go environments: how far real Go modules get with no hand-written spec, no LLM.

Each repository, at its HEAD, is set up twice in one run:

  swesmith: SWE-smith's Go protocol (``swesmith/profiles/golang.py``'s GoProfile): one Go for
      every repository (its image is ``golang:1.24``; here that minor's newest patch, fetched as a
      toolchain module, since no image registry is reachable), the root module only, its modules
      downloaded, ``go test -count=1 ./...`` at the root;
  layer: trajforge's Go (``generators/languages/go/``): the Go each go.mod and its files' build
      constraints and imports ask (Debian's 1.19 for old modules), every module of a go.work or a
      monorepo, vendored modules as vendored, a pre-module tree with the go.mod its build makes.

Both build through the same recipe renderer and run the same clean suite in the image (no
network, ``--timeout``), so the difference is the choices, not the machinery. Levels, as issue
42 counts them: installed (the image built: modules downloaded), compiled (the run reported tests:
at least one package's test binary built and ran), clean_pass (at least one test passed). A
repository that stops is counted under a reason with its one line. Images built are removed at
the end. Last line: ``reach_gain: X`` = layer's clean-pass share / swesmith's.

Usage: .venv/bin/python benchmarks/go_environments.py --repo PATH [--repo PATH ...]
       [--modes swesmith,layer] [--timeout 600] [--out PATH]
A PATH may be a bare mirror: its HEAD's files are checked out first (``js_environments.checkout``).
"""

from __future__ import annotations

import argparse
import collections
import dataclasses
import json
import statistics
import subprocess
import sys
import tempfile
import time

from js_environments import checkout
from trajforge.generators.languages.go.detection import PRE_MODULE, Module, modules
from trajforge.generators.languages.go.recipe import render_go_dockerfile
from trajforge.generators.languages.go.runners import module_command
from trajforge.generators.languages.go.toolchain import LATEST_PATCH, Toolchain
from trajforge.generators.languages.registry import language_named
from trajforge.schemas.errors import UserError
from trajforge.schemas.params import Params
from trajforge.verifiers.sandbox.base import SessionSpec
from trajforge.verifiers.sandbox.docker import DockerSandbox
from trajforge.verifiers.sandbox.git_tree import archive, git
from trajforge.verifiers.test_runner import Reading, RunContext, run_tests

MODES = ("swesmith", "layer")
LEVELS = ("installed", "compiled", "clean_pass")
SWESMITH_GO = LATEST_PATCH["1.24"]  # golang:1.24, SWE-smith's one image for every Go repository
GO = "go"  # the registry's name of the language this benchmark measures


def root_module(found: list[Module]) -> list[Module]:
    """SWE-smith tests the root module alone (``./...`` at the root)."""
    return [m for m in found if m.folder == "."] or found[:1]


def measure(box: DockerSandbox, repo: str, mode: str, params: Params, timeout_s: float) -> dict:
    """The level one repository reaches in ``mode``, with the reason it stopped."""
    out: dict = {"repo": repo.rsplit("/", 1)[-1], "mode": mode, "level": "", "reason": ""}
    started = time.monotonic()
    language = language_named(GO)
    try:
        commit = git(repo, "rev-parse", "HEAD").decode().strip()
        profile = language.site_profile(repo, commit, out["repo"], "go-bench", params)
        detection = language.detect(repo)
        if detection is None:
            out["reason"] = "no_go_module"
            return out
        if mode == "swesmith" and detection.package_manager == PRE_MODULE:
            out["reason"] = "no_go_mod"  # SWE-smith runs go test ./... in the tree as it is
            out["detail"] = "no go.mod: go test ./... says 'go.mod file not found'"
            return out
        if mode == "swesmith":
            root = root_module(modules(detection))
            manager = "go-vendor" if detection.package_manager == "go-vendor" else "go"
            profile = dataclasses.replace(
                profile,
                recipe=render_go_dockerfile(Toolchain(SWESMITH_GO, "golang:1.24"), root, manager),
                test_cmd=module_command(root, params.validate.per_test_timeout_s),
                runtime=SWESMITH_GO, profile_id=profile.profile_id + "-swesmith",
                image=profile.image + "-swesmith",
            )  # fmt: skip
        out["go"], out["why"] = profile.runtime, detection.why
        prepared = language.prepare(
            box, profile, repo, commit, params, count=lambda *_: None, fetch=None,
            say=lambda _: None,
        )  # fmt: skip
        out["image"] = prepared.profile.image
        if prepared.reason:
            out["reason"], out["detail"] = prepared.reason, prepared.detail[:300]
            return out
        out["level"] = "installed"
        reading = Reading.of(language.reading(prepared.profile))
        ctx = RunContext(f"gobench-{out['repo']}", prepared.profile.profile_id,
                         prepared.profile.test_cmd,
                         reading.report_path, timeout_s, parse=reading.parse)  # fmt: skip
        with box.session(SessionSpec(image=prepared.profile.image)) as session:
            session.put_archive(archive(repo, commit, prefix="repo/"))
            run = run_tests(session, ctx, "clean", attempt=0)
        statuses = collections.Counter(t.status for t in run.tests)
        out["tests"], out["passed"] = len(run.tests), statuses["PASSED"]
        out["broken_packages"] = len(run.collection_errors)
        if not run.tests:
            out["reason"] = "timeout_at_clean" if run.timed_out else "no_tests_ran"
            out["detail"] = "; ".join(run.collection_errors)[:300] or f"exit {run.exit_code}"
            return out
        out["level"] = "compiled"
        if out["passed"]:
            out["level"] = "clean_pass"
        else:
            out["reason"] = "no_passing_tests"
    except UserError as exc:
        out["reason"], out["detail"] = exc.reason, str(exc)[:300]
    except Exception as exc:  # a bug or the engine: counted, and the other repositories go on
        out["reason"], out["detail"] = "benchmark_error", f"{exc.__class__.__name__}: {exc}"[:300]
    finally:
        out["minutes"] = round((time.monotonic() - started) / 60, 2)
    return out


def figures(rows: list[dict]) -> dict:
    reached = {level: sum(LEVELS.index(r["level"]) >= i for r in rows if r["level"])
               for i, level in enumerate(LEVELS)}  # fmt: skip
    reasons = collections.Counter(r["reason"] for r in rows if r["reason"])
    minutes = [r["minutes"] for r in rows]
    return {"repos": len(rows), **reached, "reasons": dict(reasons),
            "median_minutes": round(statistics.median(minutes), 2) if minutes else 0.0}  # fmt: skip


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
    with tempfile.TemporaryDirectory(prefix="trajforge-gobench-") as work:
        params = dataclasses.replace(Params(), cache_dir=f"{work}/cache")
        repos = []
        for path in args.repo:
            try:
                repos.append(checkout(path, work))
            except (OSError, subprocess.CalledProcessError) as exc:
                print(f"{path}: not checked out ({exc}); left out", flush=True)
        for repo in repos:
            for mode in modes:
                row = measure(box, repo, mode, params, args.timeout)
                rows.append(row)
                print(json.dumps(row), flush=True)
        box.close()
        for image in {r["image"] for r in rows if r.get("image")}:
            box.remove_image(image)
    summary = {mode: figures([r for r in rows if r["mode"] == mode]) for mode in modes}
    for mode, fig in summary.items():
        print(f"{mode}: {fig}")
    if set(MODES) <= set(summary) and summary["swesmith"]["clean_pass"]:
        gain = summary["layer"]["clean_pass"] / summary["swesmith"]["clean_pass"]
        print(f"reach_gain: {gain:.2f}")
    if args.out:
        with open(args.out, "w") as handle:
            json.dump({"rows": rows, "summary": summary}, handle, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
