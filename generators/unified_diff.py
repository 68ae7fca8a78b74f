"""A git-style unified diff of one file, written without a repository, that `git apply` accepts.

Mutants and rewrites exist only as text, so their patches are written here rather than by git.
Lines split on "\\n" alone, as git does: a "\\r" stays part of its line, and a last line without
"\\n" gets git's "\\ No newline at end of file" marker.
"""

from __future__ import annotations

import difflib

CONTEXT = 3
_NO_NEWLINE = "\\ No newline at end of file\n"


def unified_diff(path: str, before: str, after: str) -> str:
    """``diff --git`` text turning ``before`` into ``after``; empty when they are equal."""
    if before == after:
        return ""
    old, new = _lines(before), _lines(after)
    a, b = _quote("a/" + path), _quote("b/" + path)
    tab = "\t" if " " in path else ""  # git ends ---/+++ names holding a space with a tab
    out = [f"diff --git {a} {b}\n", f"--- {a}{tab}\n", f"+++ {b}{tab}\n"]
    matcher = difflib.SequenceMatcher(None, old, new, autojunk=False)
    for group in matcher.get_grouped_opcodes(CONTEXT):
        first, last = group[0], group[-1]
        out.append(f"@@ -{_range(first[1], last[2])} +{_range(first[3], last[4])} @@\n")
        for tag, i1, i2, j1, j2 in group:
            if tag == "equal":
                out.extend(_emit(" ", old[i1:i2]))
                continue
            out.extend(_emit("-", old[i1:i2]))
            out.extend(_emit("+", new[j1:j2]))
    return "".join(out)


def _lines(text: str) -> list[str]:
    lines = text.split("\n")
    tail = lines.pop()  # "" when the text ends with a newline
    return [line + "\n" for line in lines] + ([tail] if tail else [])


def _emit(sign: str, lines: list[str]) -> list[str]:
    out = []
    for line in lines:
        out.append(sign + line)
        if not line.endswith("\n"):
            out.append("\n" + _NO_NEWLINE)
    return out


def _range(start: int, stop: int) -> str:
    """git's hunk range: 1-based start, the count omitted when 1, start-1 when empty."""
    length = stop - start
    if length == 1:
        return str(start + 1)
    return f"{start + 1 if length else start},{length}"


def _quote(name: str) -> str:
    """C-style quoting, as git writes names that hold quotes, backslashes or control bytes."""
    if not any(c in '"\\' or ord(c) < 0x20 or ord(c) == 0x7F for c in name):
        return name
    escapes = {'"': '\\"', "\\": "\\\\", "\t": "\\t", "\n": "\\n", "\r": "\\r"}
    body = "".join(
        escapes.get(c, f"\\{ord(c):03o}" if ord(c) < 0x20 or ord(c) == 0x7F else c) for c in name
    )
    return f'"{body}"'
