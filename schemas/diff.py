"""The one model of a unified diff: parsed once for scores, coverage and verification; written
without a repository for mutants and rewrites.

Parsing follows hunk headers, so a removed line that reads ``--- x`` is content, not a file header.
Writing splits lines on "\\n" alone, as git does: a "\\r" stays part of its line, and a last line
without "\\n" gets git's "\\ No newline at end of file" marker, so `git apply` accepts the text.
"""

from __future__ import annotations

import codecs
import difflib
import re
from collections import defaultdict
from dataclasses import dataclass, field

CONTEXT = 3
_NO_NEWLINE = "\\ No newline at end of file\n"
_HUNK = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+\d+(?:,(\d+))? @@")
_NEW_HUNK = re.compile(r"^@@ -\d+(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")
_FILE_DIFF = re.compile(r"^diff --git ", re.MULTILINE)


@dataclass
class PatchStats:
    """What a unified diff changes: files, hunks, changed lines, and where in the originals."""

    files: set[str] = field(default_factory=set)
    hunks: int = 0
    added: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    # original path -> 1-based lines the patch removes or inserts beside (new files have none)
    touched: dict[str, set[int]] = field(default_factory=lambda: defaultdict(set))

    @property
    def lines(self) -> int:
        return len(self.added) + len(self.removed)


def parse_patch(patch: str) -> PatchStats:
    """One pass over ``patch``: headers outside hunks, counted content inside them."""
    stats = PatchStats()
    old_left = new_left = 0
    old_path: str | None = None
    old_line = 0
    for line in patch.splitlines():
        if old_left > 0 or new_left > 0:
            if line.startswith("-"):
                stats.removed.append(line[1:])
                _touch(stats, old_path, old_line)
                old_line += 1
                old_left -= 1
            elif line.startswith("+"):  # an insertion sits between old_line - 1 and old_line
                stats.added.append(line[1:])
                _touch(stats, old_path, old_line - 1, old_line)
                new_left -= 1
            elif not line.startswith("\\"):  # "\\ No newline at end of file" takes no line
                old_line += 1
                old_left -= 1
                new_left -= 1
            continue
        if line.startswith("diff --git "):
            stats.files.add(line.split(" b/", 1)[-1])
        elif line.startswith("+++ ") and not line.startswith("+++ /dev/null"):
            stats.files.add(_header_path(line, "b/"))
        elif line.startswith("--- "):
            old_path = None if line.startswith("--- /dev/null") else _header_path(line, "a/")
            if old_path is not None:
                stats.files.add(old_path)
        elif match := _HUNK.match(line):
            stats.hunks += 1
            old_line = int(match.group(1))
            old_left = int(match.group(2)) if match.group(2) is not None else 1
            new_left = int(match.group(3)) if match.group(3) is not None else 1
    return stats


def touched_lines(patch: str) -> dict[str, set[int]]:
    """path -> line numbers (1-based, in the original) that the patch removes or inserts beside."""
    return {path: lines for path, lines in parse_patch(patch).touched.items() if lines}


def added_lines(patch: str) -> dict[str, set[int]]:
    """path -> line numbers (1-based, in the new file) that ``patch`` adds; a file the patch
    only deletes lines from (or deletes) is absent. Read from hunk headers, so ``patch`` should
    be git's own diff of two trees (``git diff-tree -p``), not a model's text."""
    lines: dict[str, set[int]] = defaultdict(set)
    path: str | None = None
    old_left = new_left = new_line = 0
    for line in patch.splitlines():
        if old_left > 0 or new_left > 0:
            if line.startswith("+"):
                if path is not None:
                    lines[path].add(new_line)
                new_line += 1
                new_left -= 1
            elif line.startswith("-"):
                old_left -= 1
            elif not line.startswith("\\"):
                new_line += 1
                old_left -= 1
                new_left -= 1
            continue
        if line.startswith("+++ "):
            path = (
                None
                if line.startswith("+++ /dev/null")
                else _git_path(line[4:].split("\t")[0], "b/")
            )
        elif match := _NEW_HUNK.match(line):
            old_left = int(match.group(1)) if match.group(1) is not None else 1
            new_line = int(match.group(2))
            new_left = int(match.group(3)) if match.group(3) is not None else 1
    return {p: n for p, n in lines.items() if n}


def without_files(patch: str, paths: set[str]) -> str:
    """``patch`` minus the per-file diffs of ``paths`` (git's ``diff --git a/X b/X`` blocks)."""
    if not paths:
        return patch
    starts = [m.start() for m in _FILE_DIFF.finditer(patch)]
    blocks = [patch[a:b] for a, b in zip(starts, [*starts[1:], len(patch)], strict=True)]
    kept = [block for block in blocks if not parse_patch(block).files & paths]
    return patch[: starts[0]] + "".join(kept) if starts else patch


def _header_path(line: str, prefix: str) -> str:
    return line[4:].split("\t")[0].rstrip().removeprefix(prefix)


def _git_path(name: str, prefix: str) -> str:
    """A path as git's diff header writes it: C-quoted (octal bytes, \\" and \\t) when it
    holds a quote, a backslash or a control or non-ASCII byte."""
    if name.startswith('"') and name.endswith('"') and len(name) > 1:
        raw = codecs.escape_decode(name[1:-1].encode("ascii", "backslashreplace"))[0]
        name = raw.decode("utf-8", "surrogateescape")
    return name.removeprefix(prefix)


def _touch(stats: PatchStats, path: str | None, *lines: int) -> None:
    if path is not None:
        stats.touched[path].update(n for n in lines if n > 0)


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
