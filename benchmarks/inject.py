"""Benchmark coverage-guided validation of injected bugs against SWE-smith's full-suite way.

The same mutants of one real repository (one snapshot, one environment image) are validated:

  (a) full suite, as SWE-smith does: for every mutant, the whole suite on the clean code and on
      the buggy code, each in a fresh container;
  (b) trajforge: the clean suite twice per snapshot (once under per-test coverage), then per
      mutant only the tests that cover its lines, and one full-suite confirmation for the kept.

Both use the same parallelism W. The kept sets (and their FAIL_TO_PASS) are compared.

Usage: .venv/bin/python benchmarks/inject.py --repo PATH [--commit SHA] [--mutants N]
       [--seed S] [--workers W] [--json PATH]
Prints mutants/hour for both, the yield (overall and per operator), and last
``speedup_vs_full_suite: X`` = (a) seconds / (b) seconds.
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

from trajforge.generators.bugs.injector import inject_snapshot
from trajforge.generators.environments.image import build_env_image
from trajforge.generators.environments.profile import JUNIT_PATH, detect_profile
from trajforge.generators.sources.specs import SourceOptions, open_source
from trajforge.schemas.env_profile import EnvProfile
from trajforge.schemas.params import Params, ValidateParams
from trajforge.verifiers.sandbox.base import Sandbox
from trajforge.verifiers.sandbox.factory import make_sandbox
from trajforge.verifiers.validation.candidate import TestTree, ValidationResult
from trajforge.verifiers.validation.mutants import Mutation, mutation_of, validate_mutations

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from full_suite import validate_mutations_full_suite


def full_suite(
    sandbox: Sandbox,
    profile: EnvProfile,
    clean: TestTree,
    mutations: Sequence[Mutation],
    params: ValidateParams,
    workers: int,
) -> list[ValidationResult]:
    """(a), W mutants at a time."""
    lanes = [list(mutations[k::workers]) for k in range(workers)]

    def run(lane: list[Mutation]) -> list[tuple[Mutation, ValidationResult]]:
        found = validate_mutations_full_suite(sandbox, profile, clean, lane, params, JUNIT_PATH)
        return list(zip(lane, found, strict=True))

    results: dict[str, ValidationResult] = {}
    with ThreadPoolExecutor(max_workers=workers) as pool:
        for part in pool.map(run, lanes):
            results.update((m.candidate.candidate_id, r) for m, r in part)
    return [results[m.candidate.candidate_id] for m in mutations]


def summarize(name: str, seconds: float, results: Sequence[ValidationResult]) -> dict:
    kept = [r for r in results if r.task]
    reasons = collections.Counter(r.rejection.reason for r in results if r.rejection)
    runs = sum(len(r.runs) for r in results)
    per_hour = len(results) / seconds * 3600
    print(
        f"{name:>12}: {len(results)} mutants in {seconds:7.1f} s = {per_hour:7.0f} mutants/h, "
        f"kept {len(kept)}, test runs {runs}, rejected {dict(reasons)}"
    )
    return {"seconds": seconds, "per_hour": per_hour, "kept": len(kept), "reasons": reasons}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repo", required=True, help="local path, git URL or pypi:NAME")
    parser.add_argument("--commit", help="snapshot to mutate (default: newest)")
    parser.add_argument("--mutants", type=int, default=40)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--timeout", type=int, default=300, help="test timeout, seconds")
    parser.add_argument("--json", help="write the figures here")
    args = parser.parse_args(argv)

    params = Params()
    params.cache_dir = os.path.join(tempfile.mkdtemp(prefix="bench-inject-"), "cache")
    params.inject.commit, params.inject.max_candidates = args.commit, args.mutants
    params.inject.seed = args.seed
    params.validate.test_timeout_s = args.timeout
    repo = open_source(args.repo, SourceOptions.from_params(params))
    injected = inject_snapshot(repo, params.inject, params.mine.skip_globs)
    candidates = injected.candidates
    if not candidates:
        raise SystemExit(f"no mutants: {[r.detail for r in injected.rejections][:3]}")
    commit = candidates[0].base_commit
    print(f"{repo.name}@{commit[:12]}: {len(candidates)} mutants from {injected.files} files")
    profile = detect_profile(repo.path, commit, repo.name)
    sandbox = make_sandbox(params, quiet=True)
    try:
        logs = os.path.join(params.cache_dir, "build-logs")
        profile = build_env_image(sandbox, profile, repo.path, params.environment, logs)
        if profile.status != "built":
            raise SystemExit(f"the environment does not install:\n{profile.log[-2000:]}")
        clean = TestTree.at(repo.path, commit, [])
        mutations = [mutation_of(repo.path, c, clean.tree_id) for c in candidates]

        start = time.monotonic()
        guided = validate_mutations(
            sandbox, profile, clean, mutations, params.validate, JUNIT_PATH, None, args.workers
        ).results
        guided_s = time.monotonic() - start
        start = time.monotonic()
        baseline = full_suite(sandbox, profile, clean, mutations, params.validate, args.workers)
        baseline_s = time.monotonic() - start
    finally:
        sandbox.close()

    figures = {
        "repo": repo.name,
        "commit": commit,
        "mutants": len(mutations),
        "workers": args.workers,
        "full_suite": summarize("full suite", baseline_s, baseline),
        "trajforge": summarize("trajforge", guided_s, guided),
    }
    kept_guided = {r.task.candidate_id: r.task.FAIL_TO_PASS for r in guided if r.task}
    kept_full = {r.task.candidate_id: r.task.FAIL_TO_PASS for r in baseline if r.task}
    same = kept_guided == kept_full
    print(f"same kept set and FAIL_TO_PASS: {same}")
    if not same:
        only_full = sorted(set(kept_full) - set(kept_guided))
        only_guided = sorted(set(kept_guided) - set(kept_full))
        print(f"  kept only by full suite: {only_full}\n  kept only by trajforge: {only_guided}")
    per_operator: dict[str, list[int]] = collections.defaultdict(lambda: [0, 0])
    for mutation, result in zip(mutations, guided, strict=True):
        tally = per_operator[mutation.candidate.origin]
        tally[0] += bool(result.task)
        tally[1] += 1
    print("yield per operator (kept/mutants):")
    for origin, (kept, total) in sorted(per_operator.items()):
        print(f"  {origin:<28} {kept:>3}/{total:<3} {kept / total:5.0%}")
    print(f"yield: {len(kept_guided)}/{len(mutations)} = {len(kept_guided) / len(mutations):.0%}")
    speedup = baseline_s / guided_s
    figures.update(same_kept=same, per_operator=dict(per_operator), speedup=speedup)
    if args.json:
        with open(args.json, "w", encoding="utf-8") as handle:
            json.dump(figures, handle, indent=2, default=str)
    print(f"speedup_vs_full_suite: {speedup:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
