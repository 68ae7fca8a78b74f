"""A bug as every language's sampler and the model's rewrite return it: one function of one file
changed, the whole text before and after (the task's patch is its byte-exact undo)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Mutant:
    mutant_id: str  # content hash of path, operator and mutated text
    path: str
    qualname: str  # the innermost function mutated
    operator: str  # a key of OPERATORS, or llm; the task's origin is ``bug/<operator>``
    original: str  # whole original file text
    mutated: str  # whole mutated file text
    lines: tuple[int, ...]  # lines of the original the mutated node covers (select tests)
    description: str  # one line: "flip `<` to `>=` in Stack.push line 12"
