"""validate's side of coverage-guided injection: the clean baseline's covered lines, remembered.

Written once per clean snapshot validate measures (schemas/coverage_sites.py says why and how
inject reads it); a snapshot measured without coverage leaves nothing, and inject samples as before.
"""

from __future__ import annotations

from collections.abc import Iterable

from trajforge.schemas.coverage_sites import covered_lines, remember
from trajforge.schemas.storage import ContentCache
from trajforge.verifiers.languages.python.coverage import CoverageMap


def record_covered(
    cache: ContentCache | None, tree_id: str, coverage: CoverageMap | None, passing: Iterable[str]
) -> None:
    if cache is None or coverage is None:
        return
    remember(cache, covered_lines(tree_id, coverage.files, coverage.tests, passing))
