"""The agent's tools in a sandbox session: shell, view, create, edit by exact replacement, submit.

The checkout at ``/repo`` is put under a throwaway git repository when the workspace opens, so
the agent's patch is ``git diff`` against the starting state and every step can report which files
differ from it (the state summary of a transition). Commands run under coreutils ``timeout`` so a
hanging command is killed and reported while the container, and the run, go on.

A tool call the workspace cannot use (unknown tool, arguments that are not a JSON object, a
missing argument, an ambiguous edit) is answered with an observation that says what was wrong and
marked ``error``, so the agent loop can count format errors without ending the run.
"""

from __future__ import annotations

import io
import json
import shlex
import tarfile
from dataclasses import dataclass
from typing import Any

from trajforge.verifiers.sandbox.base import REPO_DIR, OutputCapture, Session

# Build output and caches are never part of the agent's patch.
EXCLUDES = ("__pycache__/", "*.pyc", "*.egg-info/", ".pytest_cache/", "build/", ".coverage")
GIT = "git -c user.name=trajforge -c user.email=trajforge@localhost -c core.fileMode=false"
EDIT_SCRATCH = "/tmp/.trajforge-edit"
KILL_GRACE_S = 5


def _tool(name: str, description: str, properties: dict[str, Any], required: list[str]) -> dict:
    return {
        "type": "function",
        "function": {
            "name": name,
            "description": description,
            "parameters": {"type": "object", "properties": properties, "required": required},
        },
    }


_PATH = {"type": "string", "description": "file path, relative to /repo or absolute"}
TOOL_SCHEMAS: dict[str, dict] = {
    "bash": _tool(
        "bash",
        "Run a shell command in /repo (no network). Output is cut to its head and tail.",
        {"command": {"type": "string", "description": "the command line"}},
        ["command"],
    ),
    "view": _tool(
        "view",
        "Show a file with line numbers, or list a directory two levels deep.",
        {
            "path": _PATH,
            "view_range": {
                "type": "array",
                "items": {"type": "integer"},
                "description": "[first, last] line to show; last -1 means the end",
            },
        },
        ["path"],
    ),
    "create": _tool(
        "create",
        "Write a new file (or overwrite one) with the given text.",
        {"path": _PATH, "file_text": {"type": "string"}},
        ["path", "file_text"],
    ),
    "str_replace": _tool(
        "str_replace",
        "Edit a file: replace old_str, which must occur exactly once, with new_str.",
        {"path": _PATH, "old_str": {"type": "string"}, "new_str": {"type": "string"}},
        ["path", "old_str", "new_str"],
    ),
    "submit": _tool("submit", "Finish: your changes to /repo are the answer.", {}, []),
}


def tool_schemas(names: tuple[str, ...]) -> list[dict]:
    return [TOOL_SCHEMAS[name] for name in names]


@dataclass(frozen=True)
class StepOutcome:
    observation: str  # what the agent is shown
    exit_code: int | None  # the shell's for bash; 0 or 1 for the file tools; None on errors
    changed_files: tuple[str, ...]  # files that differ from the starting state after the step
    submitted: bool = False
    error: str | None = None  # why the call could not be used (a format error), else None


class ToolError(Exception):
    """A call the workspace cannot carry out; its message is shown to the agent."""


class Workspace:
    """One task's checkout in one session; every tool call goes through ``run``."""

    def __init__(
        self, session: Session, command_timeout_s: float, max_observation_chars: int
    ) -> None:
        self.session = session
        self.command_timeout_s = command_timeout_s
        self.max_observation_chars = max_observation_chars

    def open(self) -> None:
        """Snapshot the starting state in a private git repository (the diff's base)."""
        excludes = "\\n".join(EXCLUDES)
        script = (
            f"rm -rf .git && git init -q && printf '{excludes}\\n' >> .git/info/exclude && "
            f"{GIT} add -A && {GIT} commit -q --allow-empty -m start"
        )
        result = self.session.exec(script, timeout_s=120)
        if result.exit_code != 0:
            raise RuntimeError(f"workspace: cannot snapshot /repo: {result.output.strip()[-300:]}")

    def run(self, name: str, arguments: str) -> StepOutcome:
        try:
            args = _arguments(arguments)
            if name not in TOOL_SCHEMAS:
                raise ToolError(f"unknown tool {name!r}; use one of {', '.join(TOOL_SCHEMAS)}")
            if name == "submit":
                return StepOutcome("submitted", 0, self.changed_files(), submitted=True)
            observation, exit_code = getattr(self, f"_{name}")(args)
        except ToolError as exc:
            return StepOutcome(f"error: {exc}", None, self.changed_files(), error=str(exc))
        return StepOutcome(self._cap(observation), exit_code, self.changed_files())

    def changed_files(self) -> tuple[str, ...]:
        result = self.session.exec(f"{GIT} add -A && {GIT} diff --cached --name-only", 60)
        return tuple(sorted(line for line in result.output.splitlines() if line.strip()))

    def diff(self) -> str:
        """The agent's changes as a patch against the starting state (binary-safe)."""
        result = self.session.exec(f"{GIT} add -A && {GIT} diff --cached --binary", 120)
        if result.exit_code != 0:
            raise RuntimeError(f"workspace: git diff failed: {result.output.strip()[-300:]}")
        return result.output

    def _bash(self, args: dict[str, Any]) -> tuple[str, int]:
        command = _string(args, "command")
        limit = self.command_timeout_s
        wrapped = f"timeout -k {KILL_GRACE_S} {limit:g} bash -c {shlex.quote(command)}"
        result = self.session.exec(wrapped, timeout_s=limit + KILL_GRACE_S + 30)
        output = result.output
        if result.exit_code == 124 or result.timed_out:
            output += f"\n[command timed out after {limit:g} s and was killed]"
        elif result.exit_code != 0:
            output += f"\n[exit code {result.exit_code}]"
        return output, result.exit_code

    def _view(self, args: dict[str, Any]) -> tuple[str, int]:
        path = shlex.quote(_string(args, "path"))
        first, last = 1, -1
        if (window := args.get("view_range")) is not None:
            if not (
                isinstance(window, list)
                and len(window) == 2
                and all(isinstance(n, int) for n in window)
            ):
                raise ToolError("view_range must be two integers [first, last]")
            first, last = max(1, window[0]), window[1]
        stop = "$" if last == -1 else str(last)
        command = (
            f"if [ -d {path} ]; then find {path} -maxdepth 2 -not -path '*/.*' | sort | head -400; "
            f"elif [ -f {path} ]; then cat -n {path} | sed -n '{first},{stop}p'; "
            f"else echo 'no such file or directory: '{path}; exit 1; fi"
        )
        result = self.session.exec(command, timeout_s=60)
        return result.output, result.exit_code

    def _create(self, args: dict[str, Any]) -> tuple[str, int]:
        path, text = _string(args, "path"), _string(args, "file_text")
        self._write(path, text.encode("utf-8"))
        return f"wrote {path} ({len(text.splitlines())} lines)", 0

    def _str_replace(self, args: dict[str, Any]) -> tuple[str, int]:
        path = _string(args, "path")
        old, new = _string(args, "old_str"), _string(args, "new_str")
        raw = self.session.read_file(_absolute(path))
        if raw is None:
            raise ToolError(f"no such file: {path}")
        text = raw.decode("utf-8", "replace")
        count = text.count(old) if old else 0
        if count != 1:
            where = "does not occur" if count == 0 else f"occurs {count} times"
            raise ToolError(f"old_str {where} in {path}; it must occur exactly once")
        self._write(path, text.replace(old, new, 1).encode("utf-8"))
        return f"edited {path}", 0

    def _write(self, path: str, data: bytes) -> None:
        """Through a scratch file and ``cat >``, so the target keeps its mode and owner."""
        buffer = io.BytesIO()
        with tarfile.open(fileobj=buffer, mode="w") as tar:
            info = tarfile.TarInfo(EDIT_SCRATCH.lstrip("/"))
            info.size, info.mode = len(data), 0o644
            tar.addfile(info, io.BytesIO(data))
        self.session.put_archive(buffer.getvalue(), "/")
        target = shlex.quote(_absolute(path))
        result = self.session.exec(
            f'mkdir -p "$(dirname {target})" && cat {EDIT_SCRATCH} > {target}', timeout_s=60
        )
        if result.exit_code != 0:
            raise ToolError(f"cannot write {path}: {result.output.strip()[-200:]}")

    def _cap(self, text: str) -> str:
        capture = OutputCapture(self.max_observation_chars)
        capture.add(text.encode("utf-8", "replace"))
        return capture.text()


def _arguments(arguments: str) -> dict[str, Any]:
    try:
        value = json.loads(arguments) if arguments and arguments.strip() else {}
    except json.JSONDecodeError as exc:
        raise ToolError(f"arguments are not valid JSON ({exc.msg}); send a JSON object") from None
    if not isinstance(value, dict):
        raise ToolError("arguments must be a JSON object")
    return value


def _string(args: dict[str, Any], key: str) -> str:
    value = args.get(key)
    if not isinstance(value, str):
        raise ToolError(f"missing string argument {key!r}")
    return value


def _absolute(path: str) -> str:
    return path if path.startswith("/") else f"{REPO_DIR}/{path}"
