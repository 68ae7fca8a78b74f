"""Benchmark trajforge's validation of injected bugs against SWE-smith's real protocol.

The same bugs of one snapshot (one repository at one commit, one environment image) are validated
twice, with the same parallelism W:

  (a) SWE-smith: the clean suite once per snapshot, then one full run of the suite per bug, each
      in a fresh container (``full_suite.py``);
  (b) trajforge: the clean suite once per snapshot (under per-test coverage), then per bug one
      pytest process that runs the covering tests first and stops after them (none fails:
      equivalent; one fails: they decide, their failures rerun in the same process), or, for an
      audited bug (the first kept one and ``validate.audit_share`` of the rest) or one coverage
      cannot place, goes on through the whole suite with a rerun of the failures; last, the union
      of the FAIL_TO_PASS candidates rerun once at clean. ``--mode full`` gives every kept bug a
      full run (the protocol before covering tests decided).

The bugs come from either
  --repo PATH: a fresh pool of N procedural bugs from `trajforge inject`'s sampler, or
  --candidates DIR: an `import-tasks` (or `inject`) output, e.g. an already-validated published
      set; its bug rows are grouped by snapshot and every snapshot is measured.

Prints for both: wall seconds, test-seconds (the summed duration of every test run), runs, kept,
rejections by reason; then whether the kept sets and every FAIL_TO_PASS agree, and last
``speedup_vs_swesmith: X`` = (a) wall seconds / (b) wall seconds, and trajforge's audit line.

Usage: .venv/bin/python benchmarks/inject.py (--repo PATH [--commit SHA] [--mutants N] [--seed S]
       | --candidates DIR) [--workers W] [--timeout S] [--mode covering|full] [--json PATH]
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import sys
import tempfile
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from trajforge.generators.bugs.injector import inject_snapshot
from trajforge.generators.environments.image import build_env_image
from trajforge.generators.languages.python.profile import JUNIT_PATH, detect_profile
from trajforge.generators.sources.specs import SourceOptions, open_source
from trajforge.schemas.candidate import Candidate
from trajforge.schemas.env_profile import EnvProfile
from trajforge.schemas.params import Params, ValidateParams
from trajforge.schemas.storage import parquet_files, read_records
from trajforge.schemas.test_run import TestRun
from trajforge.verifiers.languages.python.mutants import validate_mutations
from trajforge.verifiers.sandbox.base import Sandbox
from trajforge.verifiers.sandbox.factory import make_sandbox
from trajforge.verifiers.validation.candidate import TestTree, ValidationResult
from trajforge.verifiers.validation.mutants import AuditBook, Mutation, mutation_of

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from full_suite import validate_mutations_full_suite


@dataclass
class Side:
    """What one protocol did on every snapshot: results, its own test runs, wall seconds."""

    name: str
    results: list[ValidationResult]
    runs: list[TestRun]
    seconds: float = 0.0

    def add(self, results: Sequence[ValidationResult], clean: Sequence[TestRun], s: float) -> None:
        self.results.extend(results)
        self.runs.extend(run for r in results for run in r.runs)
        self.runs.extend(clean)
        self.seconds += s

    def figures(self) -> dict:
        kept = [r for r in self.results if r.task]
        reasons = collections.Counter(r.rejection.reason for r in self.results if r.rejection)
        test_seconds = sum(run.duration_s for run in self.runs)
        print(
            f"{self.name:>10}: {len(self.results)} bugs in {self.seconds:7.1f} s wall, "
            f"{test_seconds:7.1f} test-seconds in {len(self.runs)} runs "
            f"({sum(len(run.tests) for run in self.runs)} test executions); kept {len(kept)}, "
            f"rejected {dict(sorted(reasons.items()))}"
        )
        return {
            "bugs": len(self.results),
            "seconds": round(self.seconds, 1),
            "test_seconds": round(test_seconds, 1),
            "runs": len(self.runs),
            "test_executions": sum(len(run.tests) for run in self.runs),
            "kept": len(kept),
            "reasons": dict(reasons),
        }


def swesmith(
    sandbox: Sandbox,
    profile: EnvProfile,
    clean: TestTree,
    mutations: Sequence[Mutation],
    params: ValidateParams,
    workers: int,
) -> tuple[list[ValidationResult], list[TestRun]]:
    """(a): the clean suite once, then W lanes of one fresh-container full run per bug."""
    first, clean_run = validate_mutations_full_suite(
        sandbox, profile, clean, mutations[:1], params, JUNIT_PATH
    )
    rest = list(mutations[1:])
    lanes = [rest[k::workers] for k in range(workers)]

    def run(lane: list[Mutation]) -> list[tuple[str, ValidationResult]]:
        found, _ = validate_mutations_full_suite(
            sandbox, profile, clean, lane, params, JUNIT_PATH, clean_run=clean_run
        )
        return [(m.candidate.candidate_id, r) for m, r in zip(lane, found, strict=True)]

    results = {mutations[0].candidate.candidate_id: first[0]}
    with ThreadPoolExecutor(max_workers=workers) as pool:
        for part in pool.map(run, [lane for lane in lanes if lane]):
            results.update(part)
    return [results[m.candidate.candidate_id] for m in mutations], [clean_run]


def fresh_pool(args: argparse.Namespace, params: Params) -> list[Candidate]:
    params.inject.commit, params.inject.max_candidates = args.commit, args.mutants
    params.inject.seed = args.seed
    repo = open_source(args.repo, SourceOptions.from_params(params))
    injected = inject_snapshot(repo, params.inject, params.mine.skip_globs)
    if not injected.candidates:
        raise SystemExit(f"no bugs: {[r.detail for r in injected.rejections][:3]}")
    return list(injected.candidates)


def imported(path: str) -> list[Candidate]:
    files = parquet_files(os.path.join(path, "candidates"))
    if not files:
        raise SystemExit(f"{path}: no candidates/ table; pass an import-tasks or inject output")
    rows = [c for f in files for c in read_records(Candidate, f)]
    bugs = [c for c in rows if c.bug_patch]
    if not bugs:
        raise SystemExit(f"{path}: no bug rows (SWE-smith's or inject's) among {len(rows)}")
    return bugs


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    where = parser.add_mutually_exclusive_group(required=True)
    where.add_argument("--repo", help="local path, git URL or pypi:NAME: a fresh pool of bugs")
    where.add_argument("--candidates", help="an import-tasks or inject output directory")
    parser.add_argument("--commit", help="snapshot to mutate (default: newest)")
    parser.add_argument("--mutants", type=int, default=120)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--timeout", type=int, default=300, help="test timeout, seconds")
    parser.add_argument("--mode", choices=("covering", "full"), default="covering")
    parser.add_argument("--json", help="write the figures here")
    args = parser.parse_args(argv)

    params = Params()
    params.cache_dir = os.path.join(tempfile.mkdtemp(prefix="bench-inject-"), "cache")
    params.validate.test_timeout_s = args.timeout
    params.validate.mutant_mode = args.mode
    candidates = fresh_pool(args, params) if args.repo else imported(args.candidates)
    snapshots: dict[tuple[str, str], list[Candidate]] = collections.defaultdict(list)
    for candidate in candidates:
        snapshots[(candidate.source, candidate.base_commit)].append(candidate)
    print(f"{len(candidates)} bugs over {len(snapshots)} snapshot(s), {args.workers} workers")
    ours, theirs = Side("trajforge", [], []), Side("SWE-smith", [], [])
    audit = AuditBook(params.validate.audit_share, params.validate.audit_seed)
    agreed = disagreed = 0
    mutations_all: list[Mutation] = []
    sandbox = make_sandbox(params, quiet=True)
    try:
        for (source, commit), members in sorted(snapshots.items()):
            repo = open_source(source, SourceOptions.from_params(params))
            profile = detect_profile(repo.path, commit, members[0].repo)
            logs = os.path.join(params.cache_dir, "build-logs")
            profile = build_env_image(sandbox, profile, repo.path, params.environment, logs)
            if profile.status != "built":
                print(
                    f"{repo.name}@{commit[:12]}: does not install; left out\n{profile.log[-800:]}"
                )
                continue
            clean = TestTree.at(repo.path, commit, [])
            mutations = [mutation_of(repo.path, c, clean.tree_id) for c in members]
            mutations_all.extend(mutations)
            print(f"{members[0].repo}@{commit[:12]}: {len(mutations)} bugs")

            start = time.monotonic()
            batch = validate_mutations(
                sandbox, profile, clean, mutations, params.validate, JUNIT_PATH, None, args.workers,
                audit=audit,
            )  # fmt: skip
            agreed, disagreed = agreed + batch.audit_agreed, disagreed + batch.audit_disagreed
            ours.add(batch.results, batch.clean_runs, time.monotonic() - start)
            start = time.monotonic()
            results, clean_runs = swesmith(
                sandbox, profile, clean, mutations, params.validate, args.workers
            )
            theirs.add(results, clean_runs, time.monotonic() - start)
    finally:
        sandbox.close()
    if not mutations_all:
        raise SystemExit("no snapshot installed; nothing measured")

    figures = {"bugs": len(mutations_all), "workers": args.workers}
    figures["swesmith"], figures["trajforge"] = theirs.figures(), ours.figures()
    kept_ours = {r.task.candidate_id: r.task.FAIL_TO_PASS for r in ours.results if r.task}
    kept_theirs = {r.task.candidate_id: r.task.FAIL_TO_PASS for r in theirs.results if r.task}
    same_kept = set(kept_ours) == set(kept_theirs)
    both = set(kept_ours) & set(kept_theirs)
    same_f2p = sum(kept_ours[c] == kept_theirs[c] for c in both)
    print(f"kept sets identical: {same_kept} ({len(kept_ours)} vs {len(kept_theirs)})")
    print(f"FAIL_TO_PASS identical: {same_f2p} of {len(both)} kept by both")
    for cid in sorted(set(kept_ours) ^ set(kept_theirs)):
        side = "trajforge" if cid in kept_ours else "SWE-smith"
        print(f"  kept only by {side}: {cid}")
    for cid in sorted(c for c in both if kept_ours[c] != kept_theirs[c]):
        print(f"  {cid}: trajforge {kept_ours[cid]} vs SWE-smith {kept_theirs[cid]}")
    test_seconds_ratio = figures["swesmith"]["test_seconds"] / max(
        figures["trajforge"]["test_seconds"], 1e-9
    )
    speedup = theirs.seconds / ours.seconds
    figures.update(
        same_kept=same_kept,
        same_fail_to_pass=same_f2p,
        kept_by_both=len(both),
        test_seconds_ratio=round(test_seconds_ratio, 2),
        speedup=round(speedup, 2),
        mode=args.mode,
        audit_agreed=agreed,
        audit_disagreed=disagreed,
    )
    if args.json:
        with open(args.json, "w", encoding="utf-8") as handle:
            json.dump(figures, handle, indent=2, default=str)
    print(f"audit: {agreed} agreed, {disagreed} disagreed")
    print(f"test_seconds_ratio: {test_seconds_ratio:.2f}")
    print(f"speedup_vs_swesmith: {speedup:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
