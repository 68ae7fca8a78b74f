"""The lines a snapshot's passing tests execute, per file: where an injected bug can be seen.

``validate`` measures per-test coverage on every clean snapshot it runs; it keeps the union over
the tests that pass, keyed by the snapshot's git tree (a content hash of its files, whatever the
source or commit it came from). ``inject`` reads it back to sample mutation sites only in
functions some passing test runs: a bug nothing executes is ``not_covered`` and its full suite run
buys nothing. The entry lives in ``validate``'s namespace of the results cache, so a shared cache
(``shared_cache``) carries it between machines like any verdict.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from trajforge.schemas.records import content_id
from trajforge.schemas.storage import ContentCache

NAMESPACE = "validate"  # the results cache's namespace validate writes and inject reads
VERSION = 1


@dataclass(frozen=True)
class CoveredLines:
    tree_id: str  # git tree of the clean snapshot: its exact files
    files: dict[str, frozenset[int]] = field(default_factory=dict)  # path -> executed lines

    def runs_any(self, path: str, first: int, last: int) -> bool:
        """Whether a passing test executed a line in ``first..last`` of ``path``."""
        return any(first <= n <= last for n in self.files.get(path, ()))

    def to_json(self) -> dict:
        return {
            "tree_id": self.tree_id,
            "files": {p: sorted(lines) for p, lines in sorted(self.files.items())},
        }

    @classmethod
    def from_json(cls, data: Mapping) -> CoveredLines | None:
        """None for an entry that is not one (a torn or foreign file): inject samples unguided."""
        try:
            files = {
                str(path): frozenset(int(n) for n in lines)
                for path, lines in dict(data["files"]).items()
            }
            return cls(str(data["tree_id"]), files)
        except (KeyError, TypeError, ValueError):
            return None


def covered_key(tree_id: str) -> str:
    return content_id(VERSION, "covered_lines", tree_id, length=32)


def covered_lines(
    tree_id: str, by_file: Mapping[str, Mapping[int, Iterable[int]]], tests: Iterable[str],
    passing: Iterable[str],
) -> CoveredLines:  # fmt: skip
    """The union of the lines the passing tests executed, from a per-test map
    (path -> line -> indices into ``tests``)."""
    ids = list(tests)
    good = {i for i, test in enumerate(ids) if test in set(passing)}
    files = {}
    for path, lines in by_file.items():
        hit = frozenset(n for n, who in lines.items() if good.intersection(who))
        if hit:
            files[path] = hit
    return CoveredLines(tree_id, files)


def remember(cache: ContentCache, covered: CoveredLines) -> None:
    cache.put(covered_key(covered.tree_id), covered.to_json())


def recall(cache: ContentCache, tree_id: str) -> CoveredLines | None:
    entry = cache.get(covered_key(tree_id))
    found = CoveredLines.from_json(entry) if entry is not None else None
    return found if found is not None and found.tree_id == tree_id else None
