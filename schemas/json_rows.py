"""JSON rows from files and requests nobody vouches for: each row bounded before it is parsed.

A dataset, a predictions file or a request body may hold a row of any size, any nesting and any
``\\u`` escape. Here a row is refused (``RowError``: a reason and one line of cause) instead of
read when it is over ``max_bytes`` (counted before anything is decoded, and a JSON Lines line is
never held whole: ``lines`` reads at most ``max_bytes`` + 1 bytes of it), not UTF-8, not JSON,
nested past what the parser can follow (``RecursionError``) or holding a lone surrogate (a
``\\ud800`` escape with no pair, which no UTF-8 writer, Arrow's included, can write). Whatever
``loads`` returns can be encoded, written and hashed.

A document (one JSON array or object) no larger than one row is parsed whole; a larger one is cut
into its top-level members first (``members``: a scan of the bytes that skips strings with one
regex match each and counts brackets by runs), and each member is bounded and parsed on its own,
so one bad row never costs the rows around it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any, BinaryIO

MAX_ROW_BYTES = 16 * 1024 * 1024
TOO_LARGE = "row_too_large"
BAD_ROW = "bad_row"

_SKIP_CHUNK = 1024 * 1024
_ESCAPED_SURROGATE = re.compile(rb"\\u[dD][89a-fA-F]")
# Structure outside strings: a quote opens a string; openers and closers come in runs.
_TOKEN = re.compile(rb'"|[\[{]+|[\]}]+|,')
_INNER_TOKEN = re.compile(rb'"|[\[{]+|[\]}]+')  # below the top level a comma splits nothing
_STRING_REST = re.compile(rb'[^"\\]*(?:\\.[^"\\]*)*"', re.S)
_SPACE = b" \t\r\n"


class RowError(ValueError):
    """A row that is not read: ``reason`` (``row_too_large`` or ``bad_row``) and ``why``, one
    line without the row's place (the caller names it)."""

    def __init__(self, reason: str, why: str) -> None:
        super().__init__(why)
        self.reason = reason
        self.why = why


def too_large(size: int, max_bytes: int) -> RowError:
    return RowError(TOO_LARGE, f"{size:,} bytes, over the limit of {max_bytes:,} bytes for a row")


def loads(raw: bytes, max_bytes: int = MAX_ROW_BYTES) -> Any:
    """One JSON value from ``raw`` (see the module's docstring), or ``RowError``."""
    if len(raw) > max_bytes:
        raise too_large(len(raw), max_bytes)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise RowError(BAD_ROW, f"not UTF-8 text (bad byte at {exc.start})") from None
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise RowError(BAD_ROW, f"not valid JSON ({exc.msg} at column {exc.colno})") from None
    except RecursionError:
        raise RowError(BAD_ROW, "JSON nested too deeply to read") from None
    except ValueError as exc:  # e.g. an integer of more digits than Python converts
        said = (str(exc).splitlines() or [type(exc).__name__])[0][:200]
        raise RowError(BAD_ROW, f"not readable JSON ({said})") from None
    if _ESCAPED_SURROGATE.search(raw):  # only a \u escape can make a lone surrogate
        lone = lone_surrogate(value)
        if lone is not None:
            raise RowError(
                BAD_ROW, f"a string holds a lone surrogate (\\u{ord(lone):04x}), not valid Unicode"
            )
    return value


def lone_surrogate(value: Any) -> str | None:
    """The first unpaired surrogate in any string (or key) of ``value``, or None; iterative, so
    any nesting is fine."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            if not item.isascii():
                try:
                    item.encode("utf-8")
                except UnicodeEncodeError as exc:
                    return item[exc.start]
        elif isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list | tuple):
            stack.extend(item)
    return None


def text_bytes(value: Any) -> int:
    """The UTF-8 bytes of every string (and key) in ``value``, plus 8 for any other item: what a
    row read from Parquet or Arrow weighs, to hold it to the same limit; iterative."""
    total = 0
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            total += len(item) if item.isascii() else len(item.encode("utf-8", "surrogatepass"))
        elif isinstance(item, bytes):
            total += len(item)
        elif isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list | tuple):
            stack.extend(item)
        else:
            total += 8
    return total


def lines(
    handle: BinaryIO, max_bytes: int = MAX_ROW_BYTES
) -> Iterator[tuple[int, bytes | RowError]]:
    """(line number, the line without its end) of a JSON Lines stream, or ``(number, RowError)``
    for a line over ``max_bytes``: such a line is read past in chunks and never held whole."""
    number = 0
    while True:
        line = handle.readline(max_bytes + 1)
        if not line:
            return
        number += 1
        if len(line) > max_bytes and not line.endswith(b"\n"):
            size = len(line)
            while not line.endswith(b"\n"):
                line = handle.readline(_SKIP_CHUNK)
                if not line:
                    break
                size += len(line)
            yield number, too_large(size - (1 if line.endswith(b"\n") else 0), max_bytes)
            continue
        yield number, line.removesuffix(b"\n")


def members(data: bytes) -> tuple[bytes, list[tuple[int, int]]]:
    """The top-level members of the JSON array or object ``data`` holds: its opener (``b"["`` or
    ``b"{"``) and each member's (start, end) byte span (an object's as ``"key": value``).

    Only structure is read: strings are skipped whole, brackets counted, nothing is parsed, so
    this costs no memory beyond the list of spans. ``RowError`` when ``data`` is not one array or
    object (``why`` starts with "extra data" when something follows its end, as JSON Lines do)."""
    start = len(data) - len(data.lstrip(_SPACE))
    opener = data[start : start + 1]
    if opener not in (b"[", b"{"):
        raise RowError(BAD_ROW, "not a JSON array or object")
    spans: list[tuple[int, int]] = []
    depth, pos, member = 1, start + 1, start + 1
    while True:
        token = (_TOKEN if depth == 1 else _INNER_TOKEN).search(data, pos)
        if token is None:
            raise RowError(BAD_ROW, "not valid JSON (it ends inside an array or object)")
        kind = token.group()[:1]
        if kind == b'"':
            rest = _STRING_REST.match(data, token.end())
            if rest is None:
                raise RowError(BAD_ROW, "not valid JSON (a string is never closed)")
            pos = rest.end()
        elif kind in b"[{":
            depth += token.end() - token.start()
            pos = token.end()
        elif kind in b"]}":
            run = token.end() - token.start()
            if run < depth:
                depth -= run
                pos = token.end()
                continue
            end = token.start() + depth - 1  # where the top level closes
            if data[member:end].strip(_SPACE):
                spans.append((member, end))
            if data[end + 1 :].strip(_SPACE):
                raise RowError(BAD_ROW, "extra data after the first JSON value")
            return opener, spans
        else:  # a comma
            if depth == 1:
                spans.append((member, token.start()))
                member = token.end()
            pos = token.end()


def document(
    data: bytes, max_bytes: int = MAX_ROW_BYTES
) -> tuple[bytes, Iterator[tuple[str | int, Any]]]:
    """The rows of one JSON document: its opener and an iterator of ``(index, value)`` (an
    array) or ``(key, value)`` (an object), where a value that cannot be read is a ``RowError``
    instead. A document within ``max_bytes`` is parsed whole, and member by member where that
    fails or it is larger. ``RowError`` when ``data`` is not one JSON array or object (see
    ``members``)."""
    if len(data) <= max_bytes:
        try:
            whole = loads(data, max_bytes)
        except RowError:
            pass  # cut into members below: one bad member costs only itself
        else:
            if isinstance(whole, list):
                return b"[", iter(enumerate(whole))
            if isinstance(whole, dict):
                return b"{", iter(whole.items())
            raise RowError(BAD_ROW, f"holds a {type(whole).__name__}, not a list of rows")
    opener, spans = members(data)
    return opener, _parsed(data, opener, spans, max_bytes)


def _parsed(
    data: bytes, opener: bytes, spans: list[tuple[int, int]], max_bytes: int
) -> Iterator[tuple[str | int, Any]]:
    for index, (start, end) in enumerate(spans):
        if end - start > max_bytes:
            yield index, too_large(end - start, max_bytes)
            continue
        if opener == b"[":
            try:
                yield index, loads(data[start:end], max_bytes)
            except RowError as exc:
                yield index, exc
            continue
        try:
            pair = loads(b"{" + data[start:end] + b"}", max_bytes + 2)
        except RowError as exc:
            yield index, exc
            continue
        if isinstance(pair, dict) and len(pair) == 1:
            yield next(iter(pair.items()))
        else:
            yield index, RowError(BAD_ROW, "not one key and its value")
