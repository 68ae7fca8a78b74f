"""Harder tasks: 2-3 validated bugs of one snapshot combined into one candidate.

A combination is worth a task only if every bug in it still matters, so each member must bring a
FAIL_TO_PASS test of its own (one no other member breaks); validation then checks that each of
those tests still fails with all bugs in place. Members are drawn reproducibly from the seed, from
one module or across modules, and never touch the same lines.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass

from trajforge.schemas.candidate import Candidate, CandidateMeta
from trajforge.schemas.errors import SourceError
from trajforge.schemas.records import content_id
from trajforge.schemas.task_instance import TaskInstance
from trajforge.verifiers.sandbox.git_tree import apply_patches, git

ORIGIN = "bug/combo"


@dataclass(frozen=True)
class Combination:
    candidate: Candidate
    members: tuple[str, ...]  # candidate ids of the bugs combined
    signatures: dict[str, str]  # member candidate id -> a FAIL_TO_PASS test only it breaks


def combine_bugs(
    repo_path: str,
    tasks: Sequence[TaskInstance],
    *,
    count: int,
    seed: int,
    sizes: tuple[int, ...] = (2, 3),
) -> list[Combination]:
    """Up to ``count`` combinations of the validated single bugs in ``tasks`` (one snapshot)."""
    singles = sorted((t for t in tasks if t.origin != ORIGIN), key=lambda t: t.candidate_id)
    rng = random.Random(seed)
    chosen: list[Combination] = []
    seen: set[tuple[str, ...]] = set()
    for _ in range(count * 20):
        if len(chosen) >= count or len(singles) < 2:
            break
        size = min(rng.choice(sizes), len(singles))
        members = tuple(sorted(rng.sample(singles, size), key=lambda t: t.candidate_id))
        key = tuple(t.candidate_id for t in members)
        if key in seen:
            continue
        seen.add(key)
        signatures = _signatures(members)
        if signatures is None:
            continue
        candidate = _combined_candidate(repo_path, members)
        if candidate is not None:
            chosen.append(Combination(candidate, key, signatures))
    return chosen


def _signatures(members: Sequence[TaskInstance]) -> dict[str, str] | None:
    """Each member's first FAIL_TO_PASS test that no other member breaks (None if one has none)."""
    found = {}
    for task in members:
        others = {t for other in members if other is not task for t in other.FAIL_TO_PASS}
        own = [t for t in task.FAIL_TO_PASS if t not in others]
        if not own:
            return None
        found[task.candidate_id] = own[0]
    return found


def _combined_candidate(repo_path: str, members: Sequence[TaskInstance]) -> Candidate | None:
    base = members[0].base_commit
    try:  # bugs that touch the same lines do not apply together: not a combination
        buggy = apply_patches(repo_path, base, [t.bug_patch for t in members])
    except SourceError:
        return None
    clean = git(repo_path, "rev-parse", f"{base}^{{tree}}").decode().strip()
    bug_patch = _diff(repo_path, clean, buggy)
    fix = _diff(repo_path, buggy, clean)
    operators = [t.origin.removeprefix("bug/") for t in members]
    description = f"{len(members)} bugs combined: {', '.join(operators)}"
    first = members[0]
    return Candidate(
        candidate_id=content_id(first.repo, base, bug_patch),
        repo=first.repo,
        source=first.source,
        base_commit=base,
        patch=fix,
        test_patch="",
        origin=ORIGIN,
        created_at=first.created_at,
        meta=CandidateMeta(base, description, first.created_at, fix.count("diff --git"), 0, 0),
        bug_patch=bug_patch,
    )


def _diff(repo_path: str, old: str, new: str) -> str:
    return git(repo_path, "diff", "--no-color", "--no-ext-diff", old, new).decode(
        "utf-8", "surrogateescape"
    )
