"""How procedural bugs are drawn, whatever the language: one sampler, so a seed means the same
draw for Python (languages/python/mutations.py) and JavaScript/TypeScript (languages/javascript/
mutations.py).

A language's sampler surveys its files into *sites* (operator -> function -> edit indices) with
each function's complexity; ``draw_sites`` orders them. ``text_digest`` is the one identity of a
file's text that every dedupe of mutants (within a sampler, and injector's across operators and
model rewrites) compares. ``draw_mutants`` turns the drawn sites into distinct mutants, the
same way for every language.
"""

from __future__ import annotations

import hashlib
import random
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from itertools import islice

from trajforge.generators.mutants.mutant import Mutant

# operator -> (path, function index) -> the indices of that function's edits still to draw
Sites = dict[str, dict[tuple[str, int], list[int]]]


@dataclass(frozen=True)
class Site:
    """One drawn edit: the ``edit``-th edit of ``operator`` in function ``function`` of ``path``."""

    path: str
    function: int
    operator: str
    edit: int


def draw_sites(
    sites: Sites, complexity: dict[tuple[str, int], int], rng: random.Random
) -> Iterator[Site]:
    """Sites in sampling order, each once, until none is left (``sites`` is consumed).

    Picks go round the operators (in a seeded order), and within an operator to a function drawn
    by complexity / (1 + times already picked)^2: complex functions are favoured, no function
    dominates."""
    uses: Counter[tuple[str, int]] = Counter()
    while True:
        live = [op for op, by_function in sites.items() if by_function]
        if not live:
            return
        rng.shuffle(live)
        for op in live:
            by_function = sites[op]
            if not by_function:
                continue
            keys = list(by_function)
            weights = [complexity[k] / (1 + uses[k]) ** 2 for k in keys]
            key = rng.choices(keys, weights)[0]
            remaining = by_function[key]
            edit = remaining.pop(rng.randrange(len(remaining)))
            if not remaining:
                del by_function[key]
            uses[key] += 1
            yield Site(key[0], key[1], op, edit)


def text_digest(text: str) -> bytes:
    """A file text's identity for dedupe (two mutants that make the same text are one bug)."""
    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).digest()


def draw_mutants(
    sites: Sites,
    complexity: dict[tuple[str, int], int],
    seed: int,
    max_mutants: int,
    originals: Iterable[str],
    make: Callable[[list[Site]], Iterable[Mutant | None]],
) -> list[Mutant]:
    """Up to ``max_mutants`` mutants, reproducible from ``seed``: ``draw_sites``'s picks taken a
    batch at a time (as many as are still wanted), each made by ``make`` (None where the language
    refuses the edit); a mutated text made before, or an original's, is left out."""
    picks = draw_sites(sites, complexity, random.Random(seed))
    mutants: list[Mutant] = []
    seen = {text_digest(text) for text in originals}
    while len(mutants) < max_mutants:
        batch = list(islice(picks, max_mutants - len(mutants)))
        if not batch:
            break
        for mutant in make(batch):
            if mutant is not None and text_digest(mutant.mutated) not in seen:
                seen.add(text_digest(mutant.mutated))
                mutants.append(mutant)
    return mutants
