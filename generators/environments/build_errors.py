"""What a failed environment build says about itself: one line naming the cause, and the Debian
packages its evidence asks for.

A build log is long and ends with Docker's echo of the whole build script
(``error: The command '/bin/sh -ec if [ -s ...ca.crt ]...' returned a non-zero code``), which
says nothing. The cause is earlier, in pip's or uv's words: the requirement that has no
release, the pins that conflict, the header the compiler could not find, the Python the
project wants. ``cause_line`` finds it; the raw log stays in the build log file.

``system_packages`` reads the same evidence for what the base image lacks (a compiler, a
header, ``pkg-config``, a Rust toolchain) and names the Debian packages that provide it:
``SYSTEM_PACKAGES`` is the one table, Debian bullseye to trixie (the base images' releases).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

MAX_LINE = 300
_ANSI = re.compile(r"\x1b\[[0-9;]*m")
_STEP = re.compile(r"^Step \d+/\d+ : ")
_BUILDKIT = re.compile(r"^#\d+ \d+(?:\.\d+)? ")  # "#9 12.34 " before each line of a RUN's output
# Docker's own last words: the build script echoed back (legacy builder and BuildKit alike)
_DOCKER_ECHO = re.compile(
    r"(?i)^(error: the command '/bin/sh|error: failed to solve: process |"
    r"error: process \"/bin/sh|executor failed running)"
)

C_TOOLCHAIN = ("build-essential", "python3-dev")
PIP_BOX = "\u00d7"  # the cross pip and uv put before a failed step's name
PIP_AFTER_UV = "trajforge: uv failed, pip installs"  # recipe.py's shell function says so
RUST = ("cargo", "rustc")

# (what the log shows, as a regex; the Debian packages that provide it; what is missing).
# A header's or library's packages come with the C toolchain (the image has no compiler).
SYSTEM_PACKAGES: tuple[tuple[str, tuple[str, ...], str], ...] = (
    (r"Python\.h", C_TOOLCHAIN, "header Python.h"),
    (r"libxml/[\w.]+\.h|libxml-2\.0|xml2-config", ("libxml2-dev",), "libxml2"),
    (r"libxslt/[\w.]+\.h|libxslt\b|xslt-config", ("libxslt1-dev",), "libxslt"),
    (r"\bffi\.h|\blibffi\b", ("libffi-dev",), "libffi"),
    (r"openssl/[\w.]+\.h|\bopenssl\.pc|Package openssl was not found", ("libssl-dev",), "openssl"),
    (r"\bzlib\.h|Package zlib was not found", ("zlib1g-dev",), "zlib"),
    (r"\bjpeglib\.h|libjpeg\b", ("libjpeg-dev",), "libjpeg"),
    (r"\bpng\.h|Package libpng", ("libpng-dev",), "libpng"),
    (r"\byaml\.h|yaml-0\.1", ("libyaml-dev",), "libyaml"),
    (r"\blber\.h|\bldap\.h", ("libldap2-dev",), "openldap"),
    (r"sasl/sasl\.h", ("libsasl2-dev",), "cyrus sasl"),
    (r"\bkrb5\.h|gssapi/gssapi\.h|krb5-config", ("libkrb5-dev",), "kerberos"),
    (r"libpq-fe\.h|pg_config executable not found|pg_config: not found", ("libpq-dev",), "libpq"),
    (
        r"mysql_config not found|mysql\.h|Package mysqlclient",
        ("default-libmysqlclient-dev", "pkg-config"),
        "mysqlclient",
    ),
    (r"\bgmp\.h|\bmpfr\.h", ("libgmp-dev", "libmpfr-dev"), "gmp"),
    (r"\bhdf5\.h|HDF5 library|hdf5\.pc", ("libhdf5-dev", "pkg-config"), "hdf5"),
    (
        r"\bcairo\.h|Package cairo was not found|\bcairo\.pc",
        ("libcairo2-dev", "pkg-config"),
        "cairo",
    ),
    (r"portaudio\.h|portaudio-2\.0", ("portaudio19-dev",), "portaudio"),
    (r"\bbzlib\.h", ("libbz2-dev",), "bzip2"),
    (r"\blzma\.h", ("liblzma-dev",), "xz"),
    (r"\bsqlite3\.h", ("libsqlite3-dev",), "sqlite3"),
    (r"\bn?curses\.h", ("libncurses-dev",), "ncurses"),
    (r"readline/readline\.h", ("libreadline-dev",), "readline"),
    (r"ft2build\.h|freetype2", ("libfreetype-dev", "pkg-config"), "freetype"),
    (r"geos_c\.h|geos-config", ("libgeos-dev",), "geos"),
    (r"gdal-config|gdal\.h", ("libgdal-dev",), "gdal"),
    (r"snappy-c\.h", ("libsnappy-dev",), "snappy"),
    (r"poppler/cpp/[\w-]+\.h|poppler-cpp", ("libpoppler-cpp-dev", "pkg-config"), "poppler"),
    (r"sndfile\.h", ("libsndfile1-dev",), "libsndfile"),
    (r"xmlsec1?/[\w.]+\.h|xmlsec1\b", ("libxmlsec1-dev", "pkg-config"), "xmlsec"),
    (
        r"pkg-config: not found|Did not find pkg-config|pkg-config.*No such file",
        ("pkg-config",),
        "pkg-config",
    ),
    (
        r"can't find Rust compiler|cargo: not found|rustc: not found"
        r"|No such file or directory: 'cargo'",
        RUST,
        "a Rust compiler",
    ),
)
_HEADER = re.compile(r"fatal error: ([\w./+-]+\.h): No such file or directory")
_COMPILER = re.compile(
    r"command '([\w.+-]*(?:gcc|g\+\+|cc|c\+\+|clang))' failed|unable to execute '([\w.+-]+)'"
    r"|([\w.+-]*(?:gcc|g\+\+|cc))(?:-\d+)?: not found"
    r"|No such file or directory: '([\w.+-]*(?:gcc|g\+\+|cc|c\+\+))'"
    r"|(Broken toolchain|C compiler cannot create executables|no acceptable C compiler)"
)
_PROJECT_PYTHON = re.compile(
    r"Package '([^']+)' requires a different Python: (\S+) not in '([^']+)'"
)
_TOOL_MISSING = re.compile(
    r"(pg_config executable not found|mysql_config not found|"
    r"can't find Rust compiler|[\w-]+-config: not found)"
)


def clean_lines(log: str) -> list[str]:
    """The log's lines without colour codes, BuildKit prefixes, blank lines, ``set -x`` traces,
    the builder's ``Step n/m : RUN ...`` lines and Docker's echo of the build script (from its
    first line to the end of the log): each quotes the script, every package name in it."""
    lines = []
    for raw in log.splitlines():
        line = _BUILDKIT.sub("", _ANSI.sub("", raw)).rstrip()
        if _DOCKER_ECHO.match(line.strip()):
            break
        if _STEP.match(line):  # the legacy builder's echo of each instruction
            continue
        if line.strip() and not line.startswith("+ ") and line.strip() != "+":
            lines.append(line)
    return lines


def system_packages(log: str) -> tuple[str, ...]:
    """The Debian packages the log's evidence asks for (a missing compiler, header, library,
    pkg-config or Rust), in the table's order; empty when it shows none."""
    text = "\n".join(clean_lines(log))
    found: list[str] = []
    if _COMPILER.search(text) or _HEADER.search(text):
        found += C_TOOLCHAIN
    for pattern, packages, _ in SYSTEM_PACKAGES:
        if re.search(pattern, text):
            found += (*C_TOOLCHAIN, *packages) if packages != RUST else packages
    return tuple(dict.fromkeys(found))


def cause_line(log: str, python: str = "") -> str:
    """The one line that says why the build failed (see the module doc), at most 300 chars.

    ``python``: the image's Python, for "no file that installs on Python 3.11"."""
    lines = clean_lines(log)
    # When uv refused a step and pip failed it too, pip's attempt is what the build ended on.
    last_try = max((i for i, line in enumerate(lines) if PIP_AFTER_UV in line), default=-1)
    for part in ([lines[last_try + 1 :]] if last_try >= 0 else []) + [lines]:
        for find in CAUSES:
            found = find(part, python)
            if found:
                return found[:MAX_LINE]
    return _fallback(lines)[:MAX_LINE]


def _timed_out(lines: Sequence[str], python: str) -> str:
    said = [line.strip() for line in lines if "timed out" in line or "budget spent" in line]
    return said[-1] if said else ""


def _python_wanted(lines: Sequence[str], python: str) -> str:
    for line in lines:
        pip = _PROJECT_PYTHON.search(line)
        if pip:
            return f"{pip.group(1)} wants Python {pip.group(3)} (the image has {pip.group(2)})"
        uv = re.search(
            r"current Python version \(([\d.]+)\) does not satisfy Python\s*([^ ,]+)"
            r"(?:.*?and ([\w.-]+)==[\w.]+ depends on Python)?",
            line,
        )
        if uv:
            who = uv.group(3) or "the project"
            return f"{who} wants Python {uv.group(2)} (the image has {uv.group(1)})"
    return ""


def _missing_system(lines: Sequence[str], python: str) -> str:
    text = "\n".join(lines)
    header = _HEADER.search(text)
    if header:
        packages = _packages_for(header.group(1))
        return f"missing header {header.group(1)} ({', '.join(packages)})"
    tool = _TOOL_MISSING.search(text)
    if tool:
        return f"{tool.group(1)} ({', '.join(_packages_for(tool.group(1)))})"
    compiler = _COMPILER.search(text)
    if compiler:
        name = next(group for group in compiler.groups() if group)
        return f"no C compiler in the image ({name}; {', '.join(C_TOOLCHAIN)})"
    for pattern, packages, what in SYSTEM_PACKAGES:
        if re.search(pattern, text):
            return f"missing {what} ({', '.join(packages)})"
    return ""


def _packages_for(evidence: str) -> tuple[str, ...]:
    for pattern, packages, _ in SYSTEM_PACKAGES:
        if re.search(pattern, evidence):
            return packages
    return ("no known Debian package",)


def _pip_conflict(lines: Sequence[str], python: str) -> str:
    """pip's ResolutionImpossible, with the lines under "The conflict is caused by:"."""
    if not any("ResolutionImpossible" in line for line in lines):
        return ""
    start = next((i for i, line in enumerate(lines) if "conflict is caused by" in line), -1)
    causes: list[str] = []
    for line in lines[start + 1 :] if start >= 0 else []:
        if not line.startswith((" ", "\t")):
            break
        causes.append(line.strip().replace("The user requested ", "requested "))
    return "ResolutionImpossible: " + (" vs ".join(causes) if causes else "conflicting pins")


def _uv_no_solution(lines: Sequence[str], python: str) -> str:
    """uv's "No solution found": its "Because ..." explanation, joined onto one line."""
    start = next((i for i, line in enumerate(lines) if "No solution found" in line), -1)
    if start < 0:
        return ""
    said: list[str] = []
    for line in lines[start + 1 :]:
        text = line.strip().lstrip("\u2570\u2500\u25b6\u2502 ").removeprefix("cause:").strip()
        if not line.startswith((" ", "\t")) or text.startswith(("hint:", "help:")) or not text:
            break
        said.append(text)
    return "no solution: " + (" ".join(said) or "the requirements are unsatisfiable")


def _no_distribution(lines: Sequence[str], python: str) -> str:
    """pip's "No matching distribution found for X", and why: a release for another Python,
    no release at all, or a release with no file for this one."""
    missing = [
        m for line in lines for m in re.findall(r"No matching distribution found for (.+)", line)
    ]
    if not missing:
        return ""
    wanted = missing[-1].strip()
    line = f"No matching distribution found for {wanted}"
    pin = re.match(r"([\w.\[\],-]+)\s*==\s*([\w.+!-]+)$", wanted)
    version = pin.group(2) if pin else ""
    text = "\n".join(lines)
    ignored = re.search(r"different python version: (.*)", text)
    listed = re.search(r"\(from versions: ([^)]*)\)", text)
    where = f"Python {python}" if python else "this Python"
    if (
        version
        and ignored
        and re.search(rf"(^|[\s,]){re.escape(version)} Requires-Python", ignored.group(1))
    ):
        spec = re.search(rf"{re.escape(version)} Requires-Python ([^;]+)", ignored.group(1))
        return f"{line} ({version} requires Python {spec.group(1).strip() if spec else '?'})"
    if listed and listed.group(1).strip() == "none":
        return f"{line} (the index has no release of it for {where})"
    if version and listed and version in [v.strip() for v in listed.group(1).split(",")]:
        return f"{line} (no file of {version} installs on {where})"
    if version and listed:
        newest = listed.group(1).split(",")[-1].strip()
        return f"{line} (no release {version}; the newest is {newest})"
    return line


def _subprocess_error(lines: Sequence[str], python: str) -> str:
    """A build backend's failure (metadata generation, a wheel build): what it did, and the
    last error its own output gave."""
    stage = ""
    for index, line in enumerate(lines):
        match = re.search(PIP_BOX + r" (.+?) did not run successfully", line)
        if match:
            stage = match.group(1)
            block = lines[index + 1 :]
            end = next((i for i, b in enumerate(block) if "[end of output]" in b), len(block))
            errors = [b.strip() for b in block[:end] if _is_error(b.strip())]
            if errors:
                return _describe_backend(stage, errors[-1])
    return f"{stage} failed" if stage else ""


def _is_error(line: str) -> bool:
    return bool(re.match(r"([\w.]*(Error|Exception|Exit)\b|error:|ERROR:|Error:)", line))


def _describe_backend(stage: str, error: str) -> str:
    what = "metadata generation" if "metadata" in stage or "requirements" in stage else stage
    if "setuptools-scm" in error or "setuptools_scm" in error:
        return f"{what} failed: setuptools-scm could not find a version (no .git)"
    return f"{what} failed: {error}"


def _fallback(lines: Sequence[str]) -> str:
    """pip's last ERROR (not its "Ignored the following versions" notes), else the last line
    that starts with error, else the last line."""
    stripped = [line.strip() for line in lines]
    pip = [line for line in stripped if line.startswith("ERROR:") and "Ignored the" not in line]
    other = [line for line in stripped if line.lower().startswith(("error", PIP_BOX))]
    return (pip or other or stripped or ["no output"])[-1]


# Each finds one kind of cause in the log's lines, most telling first; "" when it sees none.
CAUSES = (
    _timed_out,
    _python_wanted,
    _missing_system,
    _pip_conflict,
    _uv_no_solution,
    _no_distribution,
    _subprocess_error,
)


def loosening_can_help(log: str) -> bool:
    """Whether a looser pin could make this build install: not when the time ran out, the
    image lacks a system package (that is ``system_packages``' retry), the project itself wants
    another Python, or the index has no release of a name at all (a private package)."""
    lines = clean_lines(log)
    if _timed_out(lines, "") or system_packages(log):
        return False
    if any(_PROJECT_PYTHON.search(line) for line in lines):  # pip says so of the project only
        return False
    return not any("(from versions: none)" in line for line in lines)
