"""Train/validation split by repository: no repository's code is seen in both splits.

Repositories are ranked by a hash of the seed and their name; the first
``round(fraction * repos)`` (at least one, at most all but one) go to validation. Then every config
whose rows span two or more repositories is given both splits: the config with the fewest
repositories is fixed first, and because each config's repositories are a subset of the tasks'
(trajectories and prompts come from tasks), fixing the smaller sets never breaks the larger ones.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping

TRAIN = "train"
VALIDATION = "validation"


def repo_rank(repo: str, seed: int) -> str:
    return hashlib.sha256(f"{seed}\0{repo}".encode()).hexdigest()


def assign_splits(
    config_repos: Mapping[str, Iterable[str]], fraction: float, seed: int
) -> dict[str, str]:
    """repo -> ``train`` | ``validation``; ``fraction`` 0 keeps everything in train."""
    if not 0.0 <= fraction < 1.0:
        raise ValueError(f"validation fraction must be in [0, 1), got {fraction}")
    sets = {config: set(repos) for config, repos in config_repos.items()}
    repos = sorted(set().union(*sets.values()), key=lambda r: repo_rank(r, seed))
    held_out: set[str] = set()
    if fraction > 0 and len(repos) >= 2:
        count = min(len(repos) - 1, max(1, round(fraction * len(repos))))
        held_out = set(repos[:count])
        for config in sorted(sets, key=lambda c: (len(sets[c]), c)):
            ranked = sorted(sets[config], key=lambda r: repo_rank(r, seed))
            if len(ranked) < 2:
                continue
            if not held_out & set(ranked):
                held_out.add(ranked[0])
            if set(ranked) <= held_out:
                held_out.discard(ranked[-1])
    return {repo: VALIDATION if repo in held_out else TRAIN for repo in repos}
