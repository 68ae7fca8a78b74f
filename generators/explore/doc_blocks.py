"""Code blocks of Markdown and reStructuredText pages, with the heading they sit under.

Markdown: fenced blocks (``` or ~~~) with their info string. rst: ``code-block`` / ``code`` /
``sourcecode`` / ``doctest`` directives, ``::`` literal blocks and bare ``>>>`` paragraphs. What
a block means (Python, doctest, neither) is for the caller to decide; this only finds them.

Each block carries the prose around it (``generators.explore.doc_prose``): the text between the
previous block (or its heading) and it, else (none there, or too little: "For example:") its
section's opening text. Text after a block is never used for it: it often states the output.
"""

from __future__ import annotations

import re
import textwrap
from collections.abc import Iterator
from dataclasses import dataclass, field

from trajforge.generators.explore.doc_prose import clean_prose, has_prose

_FENCE = re.compile(r"^(\s*)(`{3,}|~{3,})\s*\{?\.?([\w+-]*)")
_ATX = re.compile(r"^#{1,6}\s+(.+?)\s*#*\s*$")
_UNDERLINE = re.compile(r"^([=\-~^\"'`#*+.:_])\1{2,}\s*$")
_SETEXT = re.compile(r"^(=+|-+)\s*$")
_DIRECTIVE = re.compile(r"^(\s*)\.\.\s+(code-block|code|sourcecode|doctest)::\s*(\S*)")
_OPTION = re.compile(r"^\s+:[\w-]+:")


@dataclass(frozen=True)
class Block:
    lang: str  # lower-cased info string / directive argument; "pycon" for doctest directives
    line: int  # 1-based line of the block's first line of code
    title: str  # the nearest heading above, else the page's path
    code: str  # dedented
    prose: str = ""  # the text around it, plain (empty: none)


@dataclass
class _Prose:
    """Text lines seen in the current section: all before its first block, and since the last."""

    intro: list[str] = field(default_factory=list)
    pending: list[str] = field(default_factory=list)
    blocks: int = 0

    def add(self, line: str) -> None:
        self.pending.append(line)
        if not self.blocks:
            self.intro.append(line)

    def take(self) -> str:
        text = clean_prose(self.pending)
        if not has_prose(text):  # nothing, or only "For example:"
            text = clean_prose(self.intro)
        self.pending, self.blocks = [], self.blocks + 1
        return text


def markdown_blocks(path: str, text: str) -> Iterator[Block]:
    lines, title, i, prose = text.splitlines(), path, 0, _Prose()
    while i < len(lines):
        if (heading := _heading(lines, i, markdown=True)) is not None:
            title, prose = heading, _Prose()
            i += 1
            continue
        match = _FENCE.match(lines[i])
        if not match:
            prose.add(lines[i])
            i += 1
            continue
        indent, fence = len(match.group(1)), match.group(2)
        end = i + 1
        while end < len(lines) and not lines[end].strip().startswith(fence):
            end += 1
        rows = [row[indent:] if row[:indent].isspace() else row for row in lines[i + 1 : end]]
        start = i + 1 + _first_code_row(rows)
        code = "\n".join(rows).strip("\n")
        yield Block(match.group(3).lower(), start, title, code, prose.take())
        i = end + 1


def rst_blocks(path: str, text: str) -> Iterator[Block]:
    lines, title, i, prose = text.splitlines(), path, 0, _Prose()
    while i < len(lines):
        if (heading := _heading(lines, i, markdown=False)) is not None:
            title, prose = heading, _Prose()
            i += 1
            continue
        line = lines[i]
        directive = _DIRECTIVE.match(line)
        if directive or (line.rstrip().endswith("::") and not line.lstrip().startswith("..")):
            base = len(line) - len(line.lstrip())
            end = i + 1
            while end < len(lines) and (not lines[end].strip() or _indent(lines[end]) > base):
                end += 1
            body = [row for row in lines[i + 1 : end] if not _OPTION.match(row)]
            start = i + 1 + _first_code_row(lines[i + 1 : end])
            lang = ""
            if directive:
                lang = "pycon" if directive.group(2) == "doctest" else directive.group(3).lower()
                lang = lang or "python"  # Sphinx's default highlighting language
            else:
                prose.add(line)  # "Paragraph::" is text ending in a colon
            yield Block(lang, start, title, _dedent(body), prose.take())
            i = max(end, i + 1)
        elif line.lstrip().startswith(">>>"):
            end = i
            while end < len(lines) and lines[end].strip():
                end += 1
            yield Block("pycon", i + 1, title, _dedent(lines[i:end]), prose.take())
            i = end
        else:
            prose.add(line)
            i += 1


def _heading(lines: list[str], i: int, markdown: bool) -> str | None:
    """The heading that line ``i`` is (ATX in Markdown; text over an underline in both)."""
    if markdown and (match := _ATX.match(lines[i])):
        return match.group(1)
    text = lines[i].strip()
    below = lines[i + 1] if i + 1 < len(lines) else ""
    underline = _SETEXT if markdown else _UNDERLINE
    if text and not underline.match(lines[i]) and underline.match(below):
        return text
    return None


def _first_code_row(rows: list[str]) -> int:
    """1-based position of the first row of code (not blank, not a directive option)."""
    return next((k for k, row in enumerate(rows, 1) if row.strip() and not _OPTION.match(row)), 1)


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip())


def _dedent(rows: list[str]) -> str:
    return textwrap.dedent("\n".join(rows)).strip("\n")
