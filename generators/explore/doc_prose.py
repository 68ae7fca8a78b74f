"""The prose around a doc example: the sentences a template instruction is written from.

A page's prose is its text lines, less headings, code, directives, tables and link targets; a
docstring's is its text less the doctest examples and their expected output. Markup becomes plain
text (Markdown links and emphasis, reStructuredText and MyST roles, inline literals as single
backticks), each paragraph or list item one line, at most ``MAX_CHARS`` cut where a sentence or
paragraph ends. Text with fewer than ``MIN_WORDS`` words is no prose: an example that has none
gets no template instruction.
"""

from __future__ import annotations

import doctest
import inspect
import re

MAX_CHARS = 500
MIN_WORDS = 3

_WORD = re.compile(r"[A-Za-z]{2,}")
_BULLET = re.compile(r"^(?:[*+-]|\d+[.)])\s+")
_IMAGE = re.compile(r"!\[[^\]]*\]\([^)]*\)|!\[[^\]]*\]\[[^\]]*\]")
_MD_LINK = re.compile(r"\[([^\]]*)\](?:\([^)]*\)|\[[^\]]*\])")
_HTML = re.compile(r"<[!/]?[A-Za-z][^>]*>|<!--.*?-->")
_RST_ROLE = re.compile(r"(?::[\w:+-]+:|\{[\w:+-]+\})`~?([^`<]*?)\s*(?:<[^>]*>)?`")  # MyST too
_RST_LINK = re.compile(r"(?<![\w`])`([^`<\s][^`<]*?)\s*(?:<[^>]*>)?`__?(?!\w)")
_RST_LITERAL = re.compile(r"``(.+?)``")
_CODE = re.compile(r"(`[^`]+`)")
_STRONG = re.compile(r"\*\*(.+?)\*\*|(?<!\w)__(\S.*?)__(?!\w)")
_EMPHASIS = re.compile(r"(?<![\w*])\*(?!\s)([^*]+?)\*(?![\w*])")
_SKIP = re.compile(
    r"^\s*(?:\.\.\s|\.\.$|:::|\[[^\]]+\]:\s|\||[=\-~^\"'`#*+.:_]{3,}\s*$|:[\w-]+:(?:\s|$))"
)


def has_prose(text: str) -> bool:
    return len(_WORD.findall(text)) >= MIN_WORDS


def clean_prose(lines: list[str]) -> str:
    """Paragraphs of ``lines`` as plain text, one per line; what is not prose is left out."""
    paragraphs: list[list[str]] = [[]]
    literal_indent: int | None = None  # inside a literal block after a "::" paragraph
    for line in lines:
        if not line.strip():
            paragraphs.append([])
            continue
        indent = len(line) - len(line.lstrip())
        if literal_indent is not None and indent > literal_indent:
            continue
        literal_indent = None
        if _SKIP.match(line) or (line.startswith(("    ", "\t")) and not paragraphs[-1]):
            continue
        text = line.strip()
        if _BULLET.match(text) and paragraphs[-1]:  # a list item starts a line of its own
            paragraphs.append([])
        if text.endswith("::"):
            literal_indent = indent
            text = text[:-2].rstrip() + (":" if text[:-2].strip() else "")
        if text.lstrip().startswith(">>>"):
            continue
        paragraphs[-1].append(text)
    cleaned = [_plain(" ".join(p)) for p in paragraphs if p]
    return _cap("\n".join(p for p in cleaned if _WORD.search(p)))


def docstring_prose(doc: str) -> str:
    """The docstring's text before its first example, else the text between and after them."""
    try:
        parts = doctest.DocTestParser().parse(inspect.cleandoc(doc))
    except ValueError:  # inconsistent indentation: the caller has no example either
        return ""
    texts = [p for p in parts if isinstance(p, str)]
    first = next((i for i, p in enumerate(parts) if isinstance(p, doctest.Example)), len(parts))
    before = clean_prose("".join(p for p in parts[:first] if isinstance(p, str)).splitlines())
    return before if has_prose(before) else clean_prose("\n\n".join(texts[1:]).splitlines())


def _plain(text: str) -> str:
    text = _MD_LINK.sub(r"\1", _HTML.sub("", _IMAGE.sub("", text)))
    out: list[str] = []
    for i, piece in enumerate(_RST_LITERAL.split(text)):  # odd pieces: ``inline literals``
        if i % 2:
            out.append(f"`{piece}`")
            continue
        piece = _RST_LINK.sub(r"\1", _RST_ROLE.sub(r"`\1`", piece))
        for j, part in enumerate(_CODE.split(piece)):  # emphasis marks in `code` are code
            if not j % 2:
                part = _EMPHASIS.sub(r"\1", _STRONG.sub(lambda m: m.group(1) or m.group(2), part))
            out.append(part)
    return re.sub(r"\s+", " ", "".join(out)).strip()


def _cap(text: str) -> str:
    if len(text) <= MAX_CHARS:
        return text
    head = text[:MAX_CHARS]
    end = max(head.rfind(". "), head.rfind("\n") - 1)  # a sentence or a paragraph ends
    return head[: end + 1] if end >= MAX_CHARS // 3 else head.rsplit(" ", 1)[0] + " ..."
