"""A repository snapshot -> bug candidates: sampled mutants of its source files, as patches.

The task starts at ``base_commit + bug_patch`` (the injection) and ``patch`` is the fix that gives
back the original bytes. Nothing executes here; ``validate`` proves each candidate (coverage-guided,
see verifiers/validation/mutants.py) and decides which become tasks.
"""

from __future__ import annotations

from dataclasses import dataclass

from trajforge.generators.bugs.mutations import OPERATORS, Mutant, sample_mutants
from trajforge.generators.mining.diff_split import is_skipped, is_test_path
from trajforge.generators.sources.specs import RepoRef
from trajforge.schemas.candidate import Candidate, CandidateMeta
from trajforge.schemas.diff import unified_diff
from trajforge.schemas.errors import ParamsError, SourceError, UserError
from trajforge.schemas.params import InjectParams
from trajforge.schemas.records import content_id
from trajforge.schemas.rejection import Rejection
from trajforge.verifiers.sandbox.git_tree import git, resolve_commit

STAGE = "inject"
# Packaging and test plumbing: a bug there breaks the install or collection, never a test.
NOT_LIBRARY = ("setup.py", "noxfile.py", "conftest.py", "__main__.py")


@dataclass(frozen=True)
class InjectionResult:
    candidates: list[Candidate]
    rejections: list[Rejection]
    files: int  # source files looked at


def check_operators(names: list[str]) -> list[str]:
    """The requested operators (all when empty); an unknown name is a one-line params error."""
    unknown = sorted(set(names) - set(OPERATORS))
    if unknown:
        raise ParamsError(
            f"params: inject.operators has unknown {', '.join(unknown)} "
            f"(known: {', '.join(sorted(OPERATORS))})"
        )
    return names or sorted(OPERATORS)


def inject_snapshot(repo: RepoRef, params: InjectParams, skip_globs: list[str]) -> InjectionResult:
    """Sampled mutants of the library code at ``params.commit`` (default: the newest commit)."""
    if params.mode == "llm":
        raise UserError(
            "inject: mode llm rewrites functions with a language model, but no endpoint is "
            "configured; set inject.mode: procedural (or configure the LLM endpoint)",
            reason="no_llm_endpoint",
        )
    operators = check_operators(params.operators)
    commit = resolve_commit(repo.path, params.commit or "HEAD")
    if commit is None and not params.commit:
        raise SourceError(
            f"{repo.name}: has no commits (HEAD is unborn); commit to it first, or pass another "
            "repository",
            reason="no_commits",
        )
    if commit is None:
        raise SourceError(
            f"{repo.name}: commit {params.commit} not found; pass an existing SHA to --commit",
            reason="unknown_commit",
        )
    paths = git(repo.path, "ls-tree", "-r", "--name-only", commit).decode().splitlines()
    if not any(is_test_path(p) and p.endswith(".py") for p in paths):
        raise SourceError(
            f"{repo.name}: no test files at {commit[:12]}; injected bugs need tests to break",
            reason="no_tests",
        )
    files, rejections = _library_sources(repo, commit, paths, skip_globs)
    mutants, unparsable = sample_mutants(
        files,
        seed=params.seed,
        max_mutants=params.max_candidates,
        operators=operators,
        min_complexity=params.min_complexity,
    )
    for path, reason, detail in unparsable:
        if reason == "no_targets":  # constants, __init__.py: nothing to mutate, nothing lost
            continue
        rejections.append(Rejection(f"{repo.name}@{commit[:12]}:{path}", STAGE, reason, detail))
    created_at = git(repo.path, "show", "-s", "--format=%cI", commit).decode().strip()
    candidates = [_candidate(repo, commit, created_at, m) for m in mutants]
    if not candidates:
        rejections.append(
            Rejection(
                f"{repo.name}@{commit[:12]}",
                STAGE,
                "no_mutants",
                f"{repo.name}: no function with complexity >= {params.min_complexity} offers a "
                f"mutation of {', '.join(operators)}",
            )
        )
    return InjectionResult(candidates, rejections, len(files))


def _library_sources(
    repo: RepoRef, commit: str, paths: list[str], skip_globs: list[str]
) -> tuple[dict[str, str], list[Rejection]]:
    """Non-test Python files at the commit, decoded; undecodable ones are counted, not fatal."""
    wanted = [
        p
        for p in paths
        if p.endswith(".py")
        and not is_test_path(p)
        and not is_skipped(p, skip_globs)
        and p.rsplit("/", 1)[-1] not in NOT_LIBRARY
        and not p.startswith(("docs/", "doc/", "examples/", "benchmarks/"))
    ]
    files: dict[str, str] = {}
    rejections = []
    for path in wanted:
        raw = git(repo.path, "cat-file", "blob", f"{commit}:{path}")
        try:
            files[path] = raw.decode("utf-8")
        except UnicodeDecodeError:
            detail = f"{repo.name}:{path} is not UTF-8; left out of bug injection"
            rejections.append(Rejection(f"{repo.name}:{path}", STAGE, "undecodable_file", detail))
    return files, rejections


def _candidate(repo: RepoRef, commit: str, created_at: str, mutant: Mutant) -> Candidate:
    bug_patch = unified_diff(mutant.path, mutant.original, mutant.mutated)
    fix = unified_diff(mutant.path, mutant.mutated, mutant.original)
    removed = sum(1 for line in fix.splitlines() if line.startswith("-") and line[:3] != "---")
    added = sum(1 for line in fix.splitlines() if line.startswith("+") and line[:3] != "+++")
    return Candidate(
        candidate_id=content_id(repo.name, commit, bug_patch),
        repo=repo.name,
        source=repo.source,
        base_commit=commit,
        patch=fix,
        test_patch="",
        origin=f"bug/{mutant.operator}",
        created_at=created_at,
        meta=CandidateMeta(commit, mutant.description, created_at, 1, added, removed),
        bug_patch=bug_patch,
    )
