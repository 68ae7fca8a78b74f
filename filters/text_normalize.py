"""Normalization, tokens and hashed n-grams: the one definition dedup and decontamination share.

Exact dedup hashes the normalized text, MinHash dedup shingles its tokens, decontamination counts
its n-grams in a benchmark's: all three must agree on what "the same content" is, so it is defined
here once. Patches are reduced to their change (headers, ``index`` lines and hunk line numbers
dropped, whitespace collapsed), so the same change at another offset normalizes the same.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import xxhash

PATCH_FIELDS = frozenset({"patch", "test_patch", "model_patch", "bug_patch"})
FIELD_SEPARATOR = "\n"

_TOKEN = re.compile(r"\w+|[^\w\s]")
_HUNK = re.compile(r"^@@ -\d+(?:,(\d+))? \+\d+(?:,(\d+))? @@ ?(.*)$")
_HEADERS = (
    "diff --git ",
    "index ",
    "--- ",
    "+++ ",
    "new file mode",
    "deleted file mode",
    "old mode",
    "new mode",
    "similarity index",
    "dissimilarity index",
    "rename from",
    "rename to",
    "copy from",
    "copy to",
    "Binary files ",
    "GIT binary patch",
    "\\",  # "\ No newline at end of file"
)

# n-gram hashing: a polynomial over 64-bit token hashes, then MurmurHash3's fmix64 so every bit
# of the result depends on every token (the low bits of a bare polynomial barely mix).
_POLY = np.uint64(0x100000001B3)
_FMIX = (np.uint64(33), np.uint64(0xFF51AFD7ED558CCD), np.uint64(0xC4CEB9FE1A85EC53))


def collapse_whitespace(text: str) -> str:
    return " ".join(text.split())


def normalize_text(text: str) -> str:
    """Prose (issue text, messages): NFKC, case-folded, whitespace collapsed."""
    return collapse_whitespace(unicodedata.normalize("NFKC", text).casefold())


def normalize_patch(patch: str) -> str:
    """A unified diff reduced to its change, one ``+``/``-``/`` `` line per changed line.

    File headers, ``index`` and mode lines and hunk line numbers are dropped (the hunk's
    function context is kept), blank lines are dropped and whitespace is collapsed. Hunk bodies
    are read by their line counts, so a removed line that starts with ``--`` is not taken for a
    header. Text that is not a diff comes back whitespace-collapsed line by line.
    """
    out: list[str] = []
    old = new = 0  # lines left in the current hunk
    for line in patch.splitlines():
        if old > 0 or new > 0:
            tag = line[:1]
            if tag == "\\":
                continue
            if tag == "-":
                old -= 1
            elif tag == "+":
                new -= 1
            else:  # context; an empty line is context whose leading space was stripped
                old, new, tag = old - 1, new - 1, " "
            body = collapse_whitespace(line[1:])
            if body:
                out.append(f"{tag}{body}")
            continue
        hunk = _HUNK.match(line)
        if hunk:
            old, new = int(hunk.group(1) or 1), int(hunk.group(2) or 1)
            out.append(f"@@ {collapse_whitespace(hunk.group(3))}".rstrip())
        elif not line.startswith(_HEADERS):
            body = collapse_whitespace(line)
            if body:
                out.append(body)
    return "\n".join(out)


def normalize_field(name: str, value: Any) -> str:
    """One field of a record, normalized by its kind (a diff, chat messages, or prose)."""
    if value is None:
        return ""
    if isinstance(value, str):
        return normalize_patch(value) if name in PATCH_FIELDS else normalize_text(value)
    if isinstance(value, Sequence):  # chat messages: their contents and tool-call arguments
        return normalize_text(" ".join(_message_text(m) for m in value))
    return normalize_text(str(value))


def field_value(record: Any, name: str) -> Any:
    """A field of a dataclass record or of a row dict."""
    if isinstance(record, Mapping):
        return record[name]
    return getattr(record, name)


def record_text(record: Any, fields: Sequence[str]) -> str:
    """The normalized text of the named fields, one after another (empty fields skipped)."""
    parts = (normalize_field(name, field_value(record, name)) for name in fields)
    return FIELD_SEPARATOR.join(part for part in parts if part)


def tokenize(text: str) -> list[str]:
    """Words and single punctuation characters: code's identifiers and operators both count."""
    return _TOKEN.findall(text)


def ngram_hashes(tokens: Sequence[str], n: int, pad_short: bool = True) -> np.ndarray:
    """64-bit hashes of every run of ``n`` consecutive tokens, in order (uint64).

    Tokens are hashed with xxh3 once each and combined with a vectorized polynomial, so the cost
    is one hash call per token whatever ``n`` is. A text shorter than ``n`` tokens is one n-gram
    of all its tokens when ``pad_short`` (dedup: a short record still has a shingle), else none
    (decontamination: a few common tokens must not count as overlap).
    """
    count = len(tokens)
    if count == 0 or (count < n and not pad_short):
        return np.empty(0, dtype=np.uint64)
    token_hashes = np.fromiter(map(_TOKEN_HASHES.__getitem__, tokens), np.uint64, count)
    width = max(1, count - n + 1)
    hashes = np.zeros(width, dtype=np.uint64)
    for offset in range(min(n, count)):
        hashes = hashes * _POLY + token_hashes[offset : offset + width]
    return fmix64(hashes)


class _TokenHashCache(dict[str, int]):
    """xxh3-64 of each token, remembered: code reuses few tokens many times (bounded memory)."""

    limit = 1 << 18

    def __missing__(self, token: str) -> int:
        value = xxhash.xxh3_64_intdigest(token.encode("utf-8"))
        if len(self) < self.limit:
            self[token] = value
        return value


_TOKEN_HASHES = _TokenHashCache()


def fmix64(values: np.ndarray) -> np.ndarray:
    """MurmurHash3's 64-bit finalizer, element-wise (a bijection that mixes every bit)."""
    shift, mul1, mul2 = _FMIX
    values = values ^ (values >> shift)
    values = values * mul1
    values = values ^ (values >> shift)
    values = values * mul2
    return values ^ (values >> shift)


def _message_text(message: Any) -> str:
    if isinstance(message, str):
        return message
    content = field_value(message, "content") or ""
    calls = optional_value(message, "tool_calls") or ()
    arguments = [str(field_value(field_value(c, "function"), "arguments")) for c in calls]
    return " ".join([content, *arguments])


def optional_value(record: Any, name: str) -> Any:
    """A field that a record may lack: None then."""
    if isinstance(record, Mapping):
        return record.get(name)
    return getattr(record, name, None)
