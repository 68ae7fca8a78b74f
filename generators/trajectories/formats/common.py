"""What the formats share: OpenAI-shaped messages, ids, usage counters and bad-input rejections.

Messages are copied, not interpreted: role, text and tool calls are kept exactly as written
(``arguments`` stays the JSON text the model wrote), so an import loses nothing a trainer reads.
List-style content (OpenAI content parts) keeps its text parts joined with nothing between them,
which gives back the string that multimodal tools split; image parts have no column and are left
out.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from trajforge.schemas.errors import UserError
from trajforge.schemas.records import content_id
from trajforge.schemas.rejection import Rejection
from trajforge.schemas.trajectory import Message, ToolCall, Trajectory

STAGE = "import"
ROLES = frozenset({"system", "user", "assistant", "tool"})
Result = Trajectory | Rejection
WHOLE = "check --format, and that the file is whole"


class BadInput(UserError):
    """A file or row that cannot be imported; ``reason`` becomes the rejection's code."""

    reason = "unknown_format"


def guarded(label: str, parse: Callable[[], Iterable[Trajectory]]) -> list[Result]:
    """Run one record's parser; whatever goes wrong becomes a Rejection, never a traceback."""
    try:
        return list(parse())
    except UserError as exc:
        return [Rejection(label, STAGE, exc.reason, str(exc))]
    except (KeyError, TypeError, ValueError, AttributeError, IndexError, RecursionError) as exc:
        detail = f"{label}: unexpected structure ({type(exc).__name__}: {exc}); check --format"
        return [Rejection(label, STAGE, "unknown_format", detail)]


def load_json(label: str, data: bytes | str) -> Any:
    try:
        text = data.decode("utf-8") if isinstance(data, bytes) else data
    except UnicodeDecodeError as exc:
        raise BadInput(
            f"{label}: not UTF-8 text (bad byte at {exc.start}); is it the right file?",
            "malformed_json",
        ) from None
    if not text.strip():
        raise BadInput(f"{label}: empty; copy it again or leave it out", "malformed_json")
    try:
        return json.loads(text)
    except RecursionError:
        raise BadInput(f"{label}: JSON nested too deeply to read", "malformed_json") from None
    except json.JSONDecodeError as exc:
        # Unterminated string: the text ended inside a string; else the error is at the end.
        truncated = exc.msg.startswith("Unterminated string") or exc.pos >= len(text.rstrip())
        hint = "it ends early: copy it again" if truncated else "fix the file or leave it out"
        raise BadInput(
            f"{label}: not valid JSON ({exc.msg} at line {exc.lineno} column {exc.colno}); {hint}",
            "malformed_json",
        ) from None


def require_dict(value: Any, label: str, what: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        kind = type(value).__name__
        raise BadInput(f"{label}: {what} has type {kind}, not object; check --format")
    return value


def as_dict(value: Any) -> dict[str, Any]:
    """An optional object: itself, or {} where it is absent or not an object."""
    return value if isinstance(value, dict) else {}


def nested_text(value: Any, *keys: str) -> str | None:
    """``value[k1][k2]...`` when every level is a mapping and the leaf is non-empty text."""
    for key in keys:
        value = value.get(key) if isinstance(value, dict) else None
    return value if isinstance(value, str) and value else None


def require_list(value: Any, label: str, what: str) -> list[Any]:
    if value is None:
        raise BadInput(f"{label}: no `{what}`; {WHOLE}", "missing_field")
    if not isinstance(value, list):
        kind = type(value).__name__
        raise BadInput(f"{label}: `{what}` has type {kind}, not list; check --format")
    return value


def text_of(content: Any, where: str) -> str:
    """A message's text: a string as is; content parts' text joined; None as ""."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        texts = []
        for part in content:
            if isinstance(part, str):
                texts.append(part)
            elif isinstance(part, dict) and isinstance(part.get("text"), str):
                texts.append(part["text"])
            elif not isinstance(part, dict):
                raise BadInput(f"{where}: a content part has type {type(part).__name__}")
        return "".join(texts)
    kind = type(content).__name__
    raise BadInput(f"{where}: content has type {kind}, not text or content parts")


def check_tool_call(raw: Any, where: str) -> None:
    """An OpenAI tool call must be an object with a function name (``ToolCall.from_openai`` then
    keeps ``arguments`` as written; a dict, as some tools save, becomes JSON)."""
    call = require_dict(raw, where, "a tool call")
    function = call.get("function")
    if not isinstance(function, dict) or not isinstance(function.get("name"), str):
        raise BadInput(f"{where}: a tool call has no function name", "missing_field")


def check_role(role: Any, where: str) -> None:
    if role not in ROLES:
        raise BadInput(
            f"{where}: role {role!r} is none of {', '.join(sorted(ROLES))}; check --format",
            "unknown_role",
        )


def message(
    role: Any,
    content: str,
    where: str,
    tool_calls: tuple[ToolCall, ...] = (),
    tool_call_id: Any = None,
    name: Any = None,
) -> Message:
    """A message built from a format's own fields (not an OpenAI dict), its role checked."""
    check_role(role, where)
    return Message(
        role,
        content,
        tool_calls,
        None if tool_call_id is None else str(tool_call_id),
        None if name is None else str(name),
    )


def openai_message(raw: Any, where: str, **fields: Any) -> Message:
    """A chat-completions message (role, content, tool_calls, tool_call_id, name), checked, then
    read by ``Message.from_openai``; ``content`` may be content parts. ``fields`` stand in for
    the item's own keys, for a format that spells them differently."""
    item = {**require_dict(raw, where, "the message"), **fields}
    if "role" not in item:
        raise BadInput(f"{where}: no `role`; {WHOLE}", "missing_field")
    content = text_of(item.get("content"), where)
    for call in item.get("tool_calls") or ():
        check_tool_call(call, where)
    check_role(item["role"], where)
    return Message.from_openai({**item, "content": content})


def count(value: Any) -> int | None:
    """A counter as an int (JSON may write 12.0); anything else is None."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        return None
    return int(value)


def usage_from(stats: Any, names: Mapping[str, str]) -> dict[str, int]:
    """The counters of ``stats`` named in ``names`` (source -> trajforge name) that are numbers."""
    if not isinstance(stats, dict):
        return {}
    usage = {}
    for source, target in names.items():
        value = count(stats.get(source))
        if value is not None:
            usage[target] = value
    return usage


def exit_status(value: Any) -> str:
    return "unknown" if value is None or value == "" else str(value)


def sha256(data: bytes | str) -> str:
    raw = data.encode("utf-8") if isinstance(data, str) else data
    return hashlib.sha256(raw).hexdigest()


def trajectory_id(fmt: str, instance_id: str, digest: str, *extra: object) -> str:
    """Stable across reruns: the same bytes give the same id, a changed file a new one."""
    return content_id(fmt, instance_id, digest, *extra)
