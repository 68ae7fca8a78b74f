"""One line saying why a JavaScript install failed, read from the build's log.

A failed lifecycle script is named by its package and its own error line (the host it tried
to reach, the missing file), not npm's ``command failed``: npm 9/10 print an error block
(``npm ERR!``/``npm error``: ``code``, ``path``, ``command failed``, ``command sh -c ...``, then
a dependency's captured output); a script of the project itself prints its output just before
the block. yarn classic prints ``error <path>: Command failed.`` then ``Command:`` and
``Output:``; pnpm prefixes each output line with ``<path> <event>:``. Anything else is npm's
code and first line of detail, else pnpm's or yarn's first error line, else the log's last
line. Credentials in a URL or an ``.npmrc`` setting never reach the line.
"""

from __future__ import annotations

import re

MAX_CAUSE = 300
PROJECT_DIR = "/repo"  # where the recipe installs (its WORKDIR)
_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
_BUILDKIT = re.compile(r"^#\d+ \d+\.\d+ ")  # BuildKit's step and time prefix
_NPM = re.compile(r"npm (?:ERR!|error)\s?(.*)")
# The classic builder's last words echo the failing RUN's whole script, over several lines: the
# recipe's text, never the cause (its last line was read as one).
_ECHOED = re.compile(r"(?:error: )?The command '.*?' returned a non-zero code: \d+", re.S)
_NPM_NOISE = ("code ", "errno ", "syscall ", "path ", "A complete log", "Log files", "/tmp/")
_OTHER = (
    re.compile(r"ERR_PNPM_\w+.*"),
    re.compile(r"^ERROR\s+.*"),  # pnpm's " ERROR  <why>" (BuildKit's own says "ERROR:")
    re.compile(r"Usage Error: .*"),  # yarn berry refusing its configuration
    re.compile(r"(?:^|\s)error (?!Command failed).*"),
    re.compile(r"YN\d{4}: .*(?:Error|error|failed|not found).*"),
)
# A line of a script's output that says what went wrong (not a stack frame).
_ERRORISH = re.compile(
    r"ENOTFOUND|EAI_AGAIN|ECONNREFUSED|ECONNRESET|ETIMEDOUT|ENOENT|EACCES|\bError\b|\berror\b|"
    r"fatal:|not found|can't|cannot|Cannot|failed|Failed",
)
_STACK = re.compile(r"^at\s|^\s*at\s|^node:internal|^\^+$|^Node\.js v\d")
_PACKAGE = re.compile(r"node_modules/((?:@[^/\s]+/)?[^/\s:]+)")
_PNPM_SCRIPT = re.compile(
    r"(\S*node_modules/(?:@[^/\s]+/)?[^/\s]+|\.) (preinstall|install|postinstall|prepare)[$:] (.*)"
)
_SECRETS = (
    (re.compile(r"(\w+://)[^/\s:@]+(?::[^/\s@]*)?@"), r"\1***@"),  # user:token@host
    (re.compile(r"(_authToken|_auth|_password|token|password)(\s*[=:]\s*)\S+", re.I), r"\1\2***"),
    (re.compile(r"\bnpm_[A-Za-z0-9]{20,}"), "npm_***"),
    (re.compile(r"(Bearer|Basic)\s+[A-Za-z0-9._~+/=-]{8,}"), r"\1 ***"),
)


def install_cause(log: str) -> str:
    """One line (at most ``MAX_CAUSE`` characters, no secrets) saying why the install failed."""
    lines = _lines(log)
    cause = _npm_script(lines) or _yarn_script(lines) or _pnpm_script(lines) or _plain(lines)
    return redact(" ".join(cause.split()))[:MAX_CAUSE]


def redact(text: str) -> str:
    """``text`` without the credentials a registry URL or an ``.npmrc`` line may carry."""
    for pattern, replacement in _SECRETS:
        text = pattern.sub(replacement, text)
    return text


def _lines(log: str) -> list[str]:
    # Docker's classic builder wraps each stderr chunk as ESC[91m chunk ESC[0m and a newline:
    # joined back, npm's lines are whole again.
    text = _ANSI.sub("", log.replace("\x1b[0m\n", ""))
    text = _ECHOED.sub("", text)
    stripped = (_BUILDKIT.sub("", line).strip() for line in text.splitlines())
    return [line for line in stripped if line]


def _npm_script(lines: list[str]) -> str:
    """npm's first error block when it is a failed lifecycle script: the package (from its
    ``path``), its command, and the first error line of the script's output (captured in the
    block for a dependency, printed just before it for the project's own script)."""
    start = next((i for i, line in enumerate(lines) if _NPM.match(line)), None)
    if start is None:
        return ""
    block: list[str] = []
    for line in lines[start:]:
        match = _NPM.match(line)
        if match is None:
            break
        block.append(match.group(1).strip())
    if "command failed" not in block:
        return ""
    path = next((b[5:] for b in block if b.startswith("path ")), "")
    command = next((b[8:] for b in block if b.startswith("command ") and b != "command failed"),
                   "")  # fmt: skip
    after = block[block.index("command failed") + 1 :]
    output = [b for b in after if not b.startswith(("command ", *_NPM_NOISE))]
    line = _first_error(output) or _first_error(_before(lines, start))
    return _script_cause(_who(path), command.removeprefix("sh -c "), line)


def _yarn_script(lines: list[str]) -> str:
    """yarn classic's ``error <path>: Command failed.`` with its ``Command:`` and the first
    error line after ``Output:``."""
    for i, line in enumerate(lines):
        match = re.search(r"error (\S+): Command failed\.", line)
        if match is None:
            continue
        rest = lines[i + 1 : i + 40]
        command = next((r[8:].strip() for r in rest if r.startswith("Command:")), "")
        output = rest[next((j + 1 for j, r in enumerate(rest) if r == "Output:"), len(rest)) :]
        return _script_cause(_who(match.group(1)), command, _first_error(output))
    return ""


def _pnpm_script(lines: list[str]) -> str:
    """pnpm's ``<path> <event>: <output>`` lines: the first failing package's first error."""
    for line in lines:
        match = _PNPM_SCRIPT.search(line)
        if match and _ERRORISH.search(match.group(3)) and match.group(3) != "Failed":
            return _script_cause(f"{_who(match.group(1))} {match.group(2)}", "", match.group(3))
    return ""


def _plain(lines: list[str]) -> str:
    """npm's error code and first line of detail, else pnpm's or yarn's first error line, else
    the log's last line."""
    npm = [m.group(1).strip() for line in lines if (m := _NPM.search(line))]
    npm = [line for line in npm if line]
    if npm:
        code = next((line.split()[1] for line in npm if line.startswith("code ")), "")
        detail = next((line for line in npm if not line.startswith(_NPM_NOISE)), "")
        return ": ".join(part for part in (code, detail) if part)
    for pattern in _OTHER:
        for line in lines:
            match = pattern.search(line)
            if match:
                return match.group(0).strip()
    return lines[-1] if lines else "the build said nothing"


def _who(path: str) -> str:
    """The package a script's folder belongs to: the last ``node_modules/<name>``, else the
    folder's name (a ``file:`` package is linked from its own folder), else the project."""
    names = _PACKAGE.findall(path)
    if names:
        return names[-1]
    folder = path.rstrip("/")
    if folder in ("", ".", PROJECT_DIR):
        return "the project's own script"
    return folder.rsplit("/", 1)[-1]


def _script_cause(who: str, command: str, line: str) -> str:
    ran = f" ({command})" if command else ""
    return f"{who}{ran}: {line or 'failed, saying nothing'}"


def _first_error(output: list[str]) -> str:
    """The first line that says what went wrong, else the first that is no stack frame."""
    plain = [line for line in output if not _STACK.search(line)]
    return next((line for line in plain if _ERRORISH.search(line)), plain[0] if plain else "")


def _before(lines: list[str], end: int) -> list[str]:
    """The output printed just before npm's block: from the last ``> `` script header on."""
    window = lines[max(0, end - 40) : end]
    header = max((i for i, line in enumerate(window) if line.startswith("> ")), default=-1)
    return [line for line in window[header + 1 :] if not line.startswith(("+ ", "trajforge:"))]
