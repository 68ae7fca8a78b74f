"""The setup agent: a model proposes install commands for a profile the rules could not build.

In the spirit of Repo2Run and RepoLaunch, but small and bounded. The model reads the failing build
log and the repository's config files and answers with install commands; ``try_install`` (the
caller's) builds a recipe from them in a networked build container and checks that the suite
collects. The model sees what failed and tries again, at most ``rounds`` times; the first
proposal that collects is the answer, and the caller keeps it as a profile marked ``agent``.

Model output is checked, never trusted: a proposal that reads or changes environment variables,
reaches for secrets, escalates privileges, pipes into an interpreter or hides a second command
(here-documents, line continuations, command substitution) is refused before anything runs, and
the reason is the model's next prompt. Credentials are redacted from everything the model or the
log sees (``schemas/redact.py``): config files, build logs, the tried builds' output.
"""

from __future__ import annotations

import json
import os
import re
import shlex
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from trajforge.generators.llm.client import LLMClient, LLMError
from trajforge.schemas.redact import redact_text, secret_param

MAX_COMMANDS = 15
MAX_COMMAND_CHARS = 500
FILE_CHARS = 6_000  # of each config file, from its head: dependencies are declared near the top
FILES_CHARS = 30_000  # of all config files together
LOG_CHARS = 3_000  # of a build or collection log, from its tail: errors are at the end
ALLOWED_VARIABLES = frozenset({"PWD", "HOME"})  # nothing secret can hide in these
# Command words that read or change the environment, or escalate: never from a model.
REFUSED_WORDS = frozenset(
    {"env", "printenv", "export", "set", "unset", "declare", "typeset", "readonly", "eval"}
    | {"source", ".", "sudo", "su", "doas"}
)
SHELLS = frozenset({"sh", "bash", "zsh", "dash", "ksh"})
INTERPRETER = re.compile(r"^(?:[a-z]*sh|python[0-9.]*|perl|ruby|node)$")
SECRET_PATHS = re.compile(
    r"\.netrc|\.pypirc|\.ssh\b|\.aws\b|\.docker\b|\.git-credentials|\.config/gcloud|"
    r"/run/secrets|/proc/|environ\b|getenv|printenv|sudo\b"
)
_VARIABLE = re.compile(r"\$(?:\{([^}]*)\}|([A-Za-z_][A-Za-z0-9_]*)|(.?))")
_ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")
_OPERATORS = frozenset({";", "&&", "||", "|", "&", "(", ")", "|&", ";;"})
_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")  # colours in build output: noise to a model
_FENCE = re.compile(r"```([A-Za-z0-9_-]*)[ \t]*\n(.*?)```", re.DOTALL)
_SECRET_SETTING = re.compile(r"(?m)^(\s*([A-Za-z0-9_.-]+)\s*[=:]\s*)\S.*$")
_PRIORITY = ("pyproject.toml", "setup.cfg", "setup.py", "requirements", "tox.ini", "noxfile.py")

SYSTEM = f"""\
You make a Python repository's test suite collect under pytest by choosing how to install it.
The commands run one after another with `sh -e` in /repo (the repository's root, without .git),
the virtualenv /venv is active, and the network is on. pytest is installed afterwards anyway.
Answer with JSON only: {{"install": ["command", ...]}}: the whole list each time, at most
{MAX_COMMANDS} commands, each a single line. Commands that read or set environment variables,
use sudo, touch credentials, or pipe a download into a shell are refused and not run."""


@dataclass(frozen=True)
class AgentOutcome:
    install: tuple[str, ...] | None  # the install commands that made the suite collect, else None
    rounds: int  # rounds used: model calls made, the one that failed included
    log: str  # every round: the proposal, the tried result's tail, why stopped


def agent_install(
    client: LLMClient,
    repo: str,
    python: str,
    config_files: dict[str, str],
    build_log: str,
    try_install: Callable[[Sequence[str]], tuple[bool, str]],
    *,
    rounds: int = 3,
) -> AgentOutcome:
    """Ask, check, try, tell the model what happened; stop at the first install that collects.

    Stops early on an LLM error (one line in the log, no traceback) and on a proposal the model
    already made (it would only loop). A refused or unreadable answer uses up its round too, so
    a model that cannot follow the rules costs at most ``rounds`` calls. Errors of
    ``try_install`` itself (a broken sandbox) are the caller's and propagate.
    """
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": SYSTEM},
        {"role": "user", "content": first_prompt(repo, python, config_files, build_log)},
    ]
    log: list[str] = []
    seen: set[tuple[str, ...]] = set()
    for round_no in range(1, rounds + 1):
        try:
            answer = client.chat(messages).message.get("content") or ""
        except LLMError as exc:
            return _stop(None, round_no, log, f"llm error ({exc.reason}): {_one_line(str(exc))}")
        messages.append({"role": "assistant", "content": answer})
        commands, problem = parse_proposal(answer)
        key = tuple(commands) if commands else ("<unreadable>", answer.strip())
        shown = "\n".join(commands) or answer
        log.append(f"round {round_no}: proposed\n" + _indent(_head(shown, LOG_CHARS)))
        if key in seen:
            return _stop(None, round_no, log, "the model repeated an earlier proposal")
        seen.add(key)
        problem = problem or refusal(commands)
        if problem:
            log.append(f"round {round_no}: refused, not run: {problem}")
            messages.append({"role": "user", "content": _refused_prompt(problem)})
            continue
        ok, tail = try_install(commands)
        tail = _tail(redact_secrets(_ANSI.sub("", tail)), LOG_CHARS)
        if ok:
            log.append(f"round {round_no}: the suite collects")
            return _stop(tuple(commands), round_no, log, "the suite collects")
        log.append(f"round {round_no}: tried, the suite does not collect; log tail:\n{tail}")
        messages.append({"role": "user", "content": _failed_prompt(commands, tail)})
    return _stop(None, max(rounds, 0), log, f"no install collected in {max(rounds, 0)} rounds")


def first_prompt(repo: str, python: str, config_files: dict[str, str], build_log: str) -> str:
    """What the model knows: the repository's config (redacted, cut) and how the rules failed."""
    log = _tail(redact_secrets(_ANSI.sub("", build_log)), LOG_CHARS)
    return (
        f"Repository: {repo}\nPython: {python}\n\n"
        f"Installing it from its packaging files failed, or its tests do not collect. "
        f"The log's tail:\n```\n{log}\n```\n\n"
        f"Its configuration files:\n\n{config_section(config_files)}\n\n"
        'Propose the install commands as {"install": [...]}.'
    )


def config_section(config_files: dict[str, str]) -> str:
    """Each file's head, packaging files first, within FILE_CHARS each and FILES_CHARS in all."""
    parts: list[str] = []
    budget = FILES_CHARS
    for path in sorted(config_files, key=_priority):
        text = _head(redact_secrets(config_files[path]), min(FILE_CHARS, budget))
        if budget <= 0 or not text.strip():
            parts.append(f"--- {path} --- (left out: over the size budget or empty)")
            continue
        budget -= len(text)
        parts.append(f"--- {path} ---\n```\n{text}\n```")
    return "\n\n".join(parts) or "(none found)"


def redact_secrets(text: str) -> str:
    """``redact_text`` plus settings named like secrets (``token = ...``, ``password: ...``)."""

    def setting(match: re.Match[str]) -> str:
        return f"{match.group(1)}REDACTED" if secret_param(match.group(2)) else match.group(0)

    return _SECRET_SETTING.sub(setting, redact_text(text))


def parse_proposal(answer: str) -> tuple[list[str], str]:
    """The commands in a model's answer, and "" or why none could be read.

    JSON ``{"install": [...]}`` (bare or in a fenced block) first; else a fenced sh/bash block,
    one command per line (comments, blanks and ``$`` prompts dropped, continuations joined).
    """
    text = answer.strip()
    candidates = [text]
    fences = _FENCE.findall(answer)
    candidates += [body for lang, body in fences if lang.lower() in ("json", "")]
    if "{" in text and "}" in text:
        candidates.append(text[text.index("{") : text.rindex("}") + 1])
    for candidate in candidates:
        try:
            data = json.loads(candidate)
        except ValueError:
            continue
        install = data.get("install") if isinstance(data, dict) else None
        if isinstance(install, list) and all(isinstance(c, str) for c in install):
            return [c.strip() for c in install], ""
    for lang, body in fences:
        if lang.lower() in ("sh", "bash", "shell", "console", ""):
            return _shell_lines(body), ""
    return [], 'no install commands in the answer; reply with JSON {"install": ["...", ...]}'


def refusal(commands: Sequence[str]) -> str:
    """Why a proposal may not run ("" when it may): the rules a model's commands must keep."""
    if not commands:
        return "the proposal has no commands"
    if len(commands) > MAX_COMMANDS:
        return f"{len(commands)} commands; at most {MAX_COMMANDS}"
    for command in commands:
        problem = _command_refusal(command)
        if problem:
            return f"{problem}: {command[:120]!r}"
    return ""


def _command_refusal(command: str, depth: int = 0) -> str:
    if not command.strip():
        return "an empty command"
    if len(command) > MAX_COMMAND_CHARS:
        return f"a command over {MAX_COMMAND_CHARS} characters"
    if any(ord(c) < 32 and c != "\t" for c in command):
        return "a command spans lines or holds control characters"
    if command.rstrip().endswith("\\") or "<<" in command:
        return "a line continuation or here-document would join it with the next command"
    if "`" in command or "$(" in command or "<(" in command or ">(" in command:
        return "command or process substitution is not allowed"
    for match in _VARIABLE.finditer(command):
        name = match.group(1) if match.group(1) is not None else match.group(2)
        if name not in ALLOWED_VARIABLES:
            shown = name if name is not None else match.group(3)
            return f"expands ${shown}; only ${' and $'.join(sorted(ALLOWED_VARIABLES))} may be used"
    if SECRET_PATHS.search(command):
        return "touches credentials, the environment or privileges"
    try:
        lexer = shlex.shlex(command, posix=True, punctuation_chars=True)
        lexer.whitespace_split = True
        words = list(lexer)
    except ValueError:
        return "does not parse as shell words (unbalanced quotes?)"
    return _words_refusal(words, depth)


def _words_refusal(words: list[str], depth: int) -> str:
    """Checks on each simple command: its first word, what a pipe feeds, what ``sh -c`` runs."""
    start, piped = True, False
    for i, word in enumerate(words):
        if word in _OPERATORS:
            start, piped = True, word in ("|", "|&")
            continue
        if not start:
            continue
        start = False
        if _ASSIGNMENT.match(word):
            return "sets an environment variable; pass options to the tool instead"
        name = os.path.basename(word)
        if name in REFUSED_WORDS:
            return f"runs {name!r}, which reads or changes the environment or privileges"
        if piped and INTERPRETER.match(name):
            return "pipes into an interpreter (curl | sh); install from a package index instead"
        if name in SHELLS and words[i + 1 : i + 2] == ["-c"] and i + 2 < len(words):
            if depth > 0:
                return "nested shells are not allowed"
            inner = _command_refusal(words[i + 2], depth + 1)
            if inner:
                return inner
    return ""


def _shell_lines(body: str) -> list[str]:
    lines: list[str] = []
    pending = ""
    for raw in body.splitlines():
        line = raw.strip()
        if line.endswith("\\"):
            pending += line[:-1].strip() + " "
            continue
        line = (pending + line).strip()
        pending = ""
        if line.startswith("$ "):
            line = line[2:].strip()
        if line and not line.startswith("#"):
            lines.append(line)
    if pending.strip():
        lines.append(pending.strip())
    return lines


def _refused_prompt(reason: str) -> str:
    return f"That proposal was refused and nothing ran: {reason}. Propose other commands."


def _failed_prompt(commands: Sequence[str], tail: str) -> str:
    tried = "\n".join(commands)
    return (
        f"These commands were tried:\n```\n{tried}\n```\n"
        f"The build failed or the suite still does not collect. The log's tail:\n"
        f"```\n{tail}\n```\nPropose the corrected, complete list of commands."
    )


def _stop(install: tuple[str, ...] | None, rounds: int, log: list[str], why: str) -> AgentOutcome:
    return AgentOutcome(install, rounds, "\n".join([*log, f"stopped: {why}"]))


def _priority(path: str) -> tuple[int, str]:
    name = os.path.basename(path)
    ranks = [i for i, prefix in enumerate(_PRIORITY) if name.startswith(prefix)]
    return (ranks[0] if ranks else len(_PRIORITY)) + path.count("/") * 10, path


def _head(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    return text[: max(limit, 0)] + f"\n[... {len(text) - max(limit, 0)} characters cut ...]"


def _tail(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    return f"[... {len(text) - limit} characters cut ...]\n" + text[-limit:]


def _indent(text: str) -> str:
    return "\n".join(f"  {line}" for line in text.splitlines()) or "  (empty answer)"


def _one_line(text: str) -> str:
    lines = text.strip().splitlines()
    return lines[0][:300] if lines else "(no message)"
