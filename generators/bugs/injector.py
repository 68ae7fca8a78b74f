"""A repository snapshot -> bug candidates: sampled mutants of its source files, as patches.

The snapshot's language (``languages/at_commit.py``, read from the commit's tree) says which
files are library code, which files make a suite, and which operators apply and how they are
sampled (``Language.is_library_source``, ``is_suite_file``, ``bug_operators``,
``sample_mutants``: Python's libcst operators, JavaScript/TypeScript's on tree-sitter's tree).
``inject.mode`` says who writes the bugs: ``procedural`` (the operators), ``llm`` (a model
rewrites whole functions, bugs/llm_rewrite.py; only a language that ``writes_model_bugs``, as
the splice and check are libcst's) or ``both``. The task starts at
``base_commit + bug_patch`` (the injection) and ``patch`` is the fix that gives back the original
bytes. Nothing executes here; ``validate`` proves each candidate (coverage-guided, see
verifiers/languages/python/mutants.py) and decides which become tasks, whoever wrote it.
"""

from __future__ import annotations

from dataclasses import dataclass

from trajforge.generators.bugs.llm_rewrite import ACCEPTED, pick_functions, rewrite_functions
from trajforge.generators.bugs.sites import CoverageSource, Guide, guide_for
from trajforge.generators.languages.at_commit import language_at
from trajforge.generators.languages.base import Language
from trajforge.generators.languages.registry import DEFAULT, LANGUAGES
from trajforge.generators.llm.client import LLMClient
from trajforge.generators.mining.diff_split import is_skipped, is_test_path
from trajforge.generators.mutants.mutant import Mutant
from trajforge.generators.mutants.sampling import text_digest
from trajforge.generators.sources.specs import RepoRef
from trajforge.schemas.candidate import Candidate, CandidateMeta
from trajforge.schemas.diff import unified_diff
from trajforge.schemas.errors import ParamsError, SourceError, UserError
from trajforge.schemas.params import CHOICES, InjectParams
from trajforge.schemas.records import content_id
from trajforge.schemas.rejection import Rejection
from trajforge.verifiers.sandbox.git_tree import git, resolve_commit

STAGE = "inject"
MODES = CHOICES["inject.mode"]  # who writes the bugs: the operators, a model, or both
NOT_LIBRARY_DIRS = ("docs/", "doc/", "examples/", "benchmarks/")


@dataclass(frozen=True)
class InjectionResult:
    candidates: list[Candidate]
    rejections: list[Rejection]
    files: int  # source files looked at
    rewrites: int = 0  # functions the model was asked to rewrite
    # "" at the newest commit; else one line: the older commit taken, and why
    moved: str = ""
    # coverage guidance: None when off; else whether sites came from the covered lines
    guided: bool | None = None
    language: str = DEFAULT.name  # the snapshot's, from its commit's tree
    # guided from known lines: (operator sites on executed lines, operator sites looked at)
    sites: tuple[int, int] | None = None


def check_operators(names: list[str]) -> list[str]:
    """The requested operators (empty: every one); a name no language knows is a one-line
    params error. Each snapshot then takes the ones of its language (``operators_for``)."""
    known = {name for language in LANGUAGES for name in language.bug_operators()}
    unknown = sorted(set(names) - known)
    if unknown:
        raise ParamsError(
            f"params: inject.operators has unknown {', '.join(unknown)} "
            f"(known: {', '.join(sorted(known))})"
        )
    return names


def operators_for(language: Language, names: list[str], snapshot: str) -> list[str]:
    """The allow-list's operators that ``language`` has (all of its own when the list is
    empty); a list naming none of them is one line for this snapshot, not a silent nothing."""
    own = frozenset(language.bug_operators())
    if not names:
        return sorted(own)
    kept = [name for name in names if name in own]
    if not kept:
        raise SourceError(
            f"{snapshot}: inject.operators ({', '.join(names)}) names no {language.name} operator "
            f"(its operators: {', '.join(sorted(own))}); add one or leave the list empty",
            reason="no_operator_for_language",
        )
    return kept


def uses_llm(params: InjectParams) -> bool:
    return params.mode in ("llm", "both")


def inject_snapshot(
    repo: RepoRef,
    params: InjectParams,
    skip_globs: list[str],
    client: LLMClient | None = None,
    workers: int = 1,
    covered_at: CoverageSource | None = None,
) -> InjectionResult:
    """Bugs in the library code at ``params.commit`` (default: the newest commit): sampled
    mutants, model rewrites (through ``client``, ``workers`` requests at a time), or both.

    With ``params.coverage_guided`` and ``covered_at`` (a snapshot's commit and git tree -> the
    lines its passing tests execute, as validate's clean run measured them), bugs go only into
    lines those tests run (bugs/sites.py); with nothing known, sampling is as without it."""
    if params.mode not in MODES:
        raise ParamsError(
            f"params: inject.mode must be one of {', '.join(MODES)}, got {params.mode!r}"
        )
    if uses_llm(params) and client is None:
        raise UserError(
            f"inject: mode {params.mode} has a language model rewrite functions, but no endpoint "
            "is configured; set llm.base_url and llm.model (or --base-url and --model), or "
            "inject.mode: procedural",
            reason="no_llm_endpoint",
        )
    check_operators(params.operators)
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
    language = language_at(repo.path, commit)
    commit, paths, moved = _commit_with_suite(repo, commit, params, language)
    if moved:
        language = language_at(repo.path, commit)
    snapshot = f"{repo.name}@{commit[:12]}"
    operators = operators_for(language, params.operators, snapshot)
    if not language.writes_model_bugs and params.mode == "llm":
        raise SourceError(
            f"{snapshot}: model-written bugs (inject.mode llm) are {_model_bug_languages()} "
            f"only; this snapshot is {language.name}: use inject.mode procedural or both",
            reason="llm_bugs_python_only",
        )
    files, rejections = _library_sources(repo, commit, paths, skip_globs, language)
    guide = guide_for(repo.path, commit, covered_at if params.coverage_guided else None)
    mutants: list[Mutant] = []
    unparsable: list[tuple[str, str, str]] = []
    if params.mode in ("procedural", "both"):
        mutants, unparsable = _sample(language, files, params, operators, guide)
    rewrites = 0
    if not language.writes_model_bugs and uses_llm(params):
        detail = (
            f"{snapshot}: model-written bugs are {_model_bug_languages()} only; {language.name} "
            "got the operators'"
        )
        rejections.append(Rejection(snapshot, STAGE, "llm_bugs_python_only", detail))
    elif client is not None and uses_llm(params):
        functions, unpicked = guide.sample(
            lambda guided: pick_functions(
                files,
                seed=params.seed,
                count=params.llm_rewrites,
                min_complexity=params.min_complexity,
                include=guided.runs if guided else None,
            )
        )
        unparsable = unparsable or unpicked  # the same files fail either way: count them once
        rewrites = len(functions)
        tests = _test_sources(repo, commit, paths)
        outcomes = rewrite_functions(
            client, functions, files, tests, seed=params.seed, workers=workers
        )
        seen = {text_digest(m.mutated) for m in mutants}
        for outcome in outcomes:
            target = outcome.function.target
            where = f"{snapshot}:{target.path}::{target.qualname}"
            if outcome.mutant is None or outcome.reason != ACCEPTED:
                rejections.append(Rejection(where, STAGE, outcome.reason, outcome.detail))
            elif text_digest(outcome.mutant.mutated) in seen:
                detail = f"{target.qualname}: the model's bug is one the operators made too"
                rejections.append(Rejection(where, STAGE, "rewrite_duplicate", detail))
            else:
                seen.add(text_digest(outcome.mutant.mutated))
                mutants.append(outcome.mutant)
    for path, reason, detail in unparsable:
        if reason == "no_targets":  # constants, __init__.py: nothing to mutate, nothing lost
            continue
        rejections.append(Rejection(f"{snapshot}:{path}", STAGE, reason, detail))
    created_at = git(repo.path, "show", "-s", "--format=%cI", commit).decode().strip()
    candidates = [_candidate(repo, commit, created_at, m) for m in mutants]
    if not candidates and not rewrites:  # a rejected rewrite is counted as itself
        rejections.append(
            Rejection(
                snapshot,
                STAGE,
                "no_mutants",
                f"{repo.name}: no function with complexity >= {params.min_complexity} "
                + (
                    f"offers a mutation of {', '.join(operators)}"
                    if params.mode == "procedural"
                    else "to mutate or rewrite"
                ),
            )
        )
    sites = (guide.executed, guide.sites) if guide.covered is not None else None
    return InjectionResult(
        candidates, rejections, len(files), rewrites, moved, guide.guided, language.name, sites
    )


def _model_bug_languages() -> str:
    """The languages whose bugs a model may write, as a message names them."""
    return ", ".join(language.name for language in LANGUAGES if language.writes_model_bugs)


def _sample(
    language: Language,
    files: dict[str, str],
    params: InjectParams,
    operators: list[str],
    guide: Guide,
) -> tuple[list[Mutant], list[tuple[str, str, str]]]:
    """The procedural mutants of the snapshot's language, under the coverage guide."""
    return guide.sample(
        lambda guided: language.sample_mutants(
            files,
            seed=params.seed,
            max_mutants=params.max_candidates,
            operators=operators,
            min_complexity=params.min_complexity,
            guide=guided,
        )
    )


def has_suite(paths: list[str], language: Language = DEFAULT) -> bool:
    """A test module by the language's conventions (``Language.is_suite_file``), not just
    test plumbing (a conftest.py, a package's __init__.py)."""
    return any(language.is_suite_file(p) for p in paths)


def _tree(repo: RepoRef, commit: str) -> list[str]:
    return git(repo.path, "ls-tree", "-r", "--name-only", commit).decode().splitlines()


def _commit_with_suite(
    repo: RepoRef, commit: str, params: InjectParams, language: Language
) -> tuple[str, list[str], str]:
    """The commit to mutate, its files, and "" or the line saying why it is an older one.

    Bugs need tests to break: a snapshot with none is said so before anything is built. With
    no commit asked for, the newest of ``inject.max_commits_back`` first-parent ancestors that
    has a suite stands in for the newest commit (tests deleted, or not yet written back then)."""
    paths = _tree(repo, commit)
    if has_suite(paths, language):
        return commit, paths, ""
    asked = params.commit is not None
    back = 0 if asked else params.max_commits_back
    history = git(
        repo.path, "rev-list", "--first-parent", f"--max-count={back + 1}", commit
    ).decode()
    for older in history.split()[1:]:
        older_paths = _tree(repo, older)
        if has_suite(older_paths, language):
            moved = (
                f"{repo.name}: {older[:12]} taken: the newest commit {commit[:12]} has no test "
                f"files; {older[:12]} is the newest of its first-parent ancestors with tests"
            )
            return older, older_paths, moved
    searched = "" if asked else f" nor in the {back} first-parent commits before it"
    hint = "pass a --commit that has them" if asked else "raise inject.max_commits_back"
    raise SourceError(
        f"{repo.name}: no test files at {commit[:12]}{searched}; injected bugs need tests to "
        f"break ({hint}, or pass another repository)",
        reason="no_tests_at_commit",
    )


def _test_sources(repo: RepoRef, commit: str, paths: list[str]) -> dict[str, str]:
    """The snapshot's test files (the model is told which tests exist, never which will fail):
    pytest's, as model-written bugs are libcst's (``Language.writes_model_bugs``)."""
    tests = {}
    for path in paths:
        if is_test_path(path) and path.endswith(".py"):
            raw = git(repo.path, "cat-file", "blob", f"{commit}:{path}")
            tests[path] = raw.decode("utf-8", "replace")
    return tests


def is_library_source(path: str, skip_globs: list[str], language: Language = DEFAULT) -> bool:
    """A file a bug may go into: not skipped, not docs or examples, and the language's library
    source (not a test, not generated or vendored, not packaging or tool configuration)."""
    if is_skipped(path, skip_globs) or path.startswith(NOT_LIBRARY_DIRS):
        return False
    return language.is_library_source(path)


def _library_sources(
    repo: RepoRef, commit: str, paths: list[str], skip_globs: list[str], language: Language
) -> tuple[dict[str, str], list[Rejection]]:
    """The snapshot's library files, decoded; undecodable ones are counted, not fatal."""
    wanted = [p for p in paths if is_library_source(p, skip_globs, language)]
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
