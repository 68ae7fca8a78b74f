"""What a mutation aims at, shared by the Python and JavaScript mutators without either's parser:
a stage that only names a function (JavaScript detection, site sampling) loads no libcst."""

from __future__ import annotations

from dataclasses import dataclass

from trajforge.schemas.errors import UserError


class MutationSourceError(UserError):
    reason = "unparsable_file"


# (path, reason, one line) of a file a sampler could not read: inject's rejections
Unparsable = list[tuple[str, str, str]]


@dataclass(frozen=True)
class FunctionTarget:
    path: str  # repo-relative file path
    qualname: str  # "Stack.push", "parse", "outer.inner"
    start_line: int  # 1-based, inclusive: the def line (after decorators)
    end_line: int
    complexity: int  # cyclomatic complexity, radon's rules, nested defs not counted
