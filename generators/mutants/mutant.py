"""A bug as every language's sampler and the model's rewrite return it: one function of one file
changed, the whole text before and after (the task's patch is its byte-exact undo)."""

from __future__ import annotations

from dataclasses import dataclass

from trajforge.schemas.records import content_id


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

    @classmethod
    def of_edit(
        cls,
        path: str,
        qualname: str,
        operator: str,
        texts: tuple[str, str],
        lines: tuple[int, int],
        what: str,
    ) -> Mutant:
        """An operator's edit as a mutant: ``texts`` the file before and after, ``lines`` the
        first and last of the code the bug sits in, ``what`` the edit in words."""
        original, mutated = texts
        first, last = lines
        return cls(
            mutant_id=content_id(path, operator, mutated),
            path=path,
            qualname=qualname,
            operator=operator,
            original=original,
            mutated=mutated,
            lines=tuple(range(first, last + 1)),
            description=f"{what} in {qualname} line {first}",
        )
