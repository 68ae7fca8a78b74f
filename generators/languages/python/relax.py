"""The relaxation ladder: the same install with its pins loosened, one rung at a time.

Pins written two years ago often no longer install: an exact pin with no wheel for today's
Python, two exact pins whose dependencies now clash, a range whose newest release broke it.
Each rung keeps what the project declared and gives up a little more of it:

``declared``  the commands as detected;
``era``       the same commands resolved as of the commit's date (uv's ``--exclude-newer``):
              what a user installing on that day got;
``ranges``    every exact pin ``==1.2.3`` becomes ``~=1.2`` (``>=1.2,<2``); requirements files
              are read at detection time and installed inline, so the git tree stays as it is;
``unpinned``  names only, extras and markers kept;
``no-deps``   every install ``--no-deps``, the project's own direct requirements unpinned
              first; prepare's repair round then adds what a test still cannot import.

``ranges`` keeps the era (the compatible releases of the project's time); ``unpinned`` and
``no-deps`` resolve as of today, for a release newer than the commit with files for today's
Python. The order of rungs and sets, and which date each gets, is prepare's (``_plan``).
"""

from __future__ import annotations

import ast
import configparser
import posixpath
import re
import shlex
import tomllib
from collections.abc import Iterable, Mapping, Sequence

from packaging.requirements import InvalidRequirement, Requirement
from packaging.version import InvalidVersion, Version
from trajforge.schemas import python_ast

RUNGS = ("declared", "era", "ranges", "unpinned", "no-deps")
LOOSENED = ("ranges", "unpinned", "no-deps")  # the rungs that rewrite the commands
_VCS = ("git+", "hg+", "svn+", "bzr+")
# where a project's own repository lives: a name given to a URL there is the project's PyPI name
PUBLIC_FORGES = frozenset({"github.com", "gitlab.com", "bitbucket.org", "codeberg.org"})
_EGG = re.compile(r"#(?:.*&)?egg=([A-Za-z0-9][A-Za-z0-9._-]*)(\[[^\]]*\])?")
_VALUE_OPTIONS = frozenset(
    {"-c", "--constraint", "-i", "--index-url", "--extra-index-url", "-f", "--find-links"}
)


def is_direct_reference(requirement: str) -> bool:
    """A VCS or URL requirement (``git+https://...``, ``pkg @ https://...``)."""
    return "://" in requirement or requirement.startswith(_VCS)


def pypi_release(requirement: str) -> str | None:
    """The PyPI requirement that stands in for a VCS/URL one, by the name the project gave it:
    ``lightning @ git+https://github.com/...`` -> ``lightning``, ``git+https://...#egg=foo``
    -> ``foo``. Extras and markers are kept. None (left out) for a URL with no name, whose
    repository's name may be someone else's project on PyPI, and for one on a host that is
    not a public forge (``corp @ https://pypi.internal.example/...``): a private package whose
    name on PyPI may be anyone's."""
    if not is_direct_reference(requirement):
        return requirement
    host = re.search(r"://(?:[^@/]*@)?([^/:]+)", requirement)
    if host is None or host.group(1).lower() not in PUBLIC_FORGES:
        return None
    try:
        parsed = Requirement(requirement)
    except InvalidRequirement:
        egg = _EGG.search(requirement)
        if egg is None:
            return None
        marker = requirement.partition(";")[2].strip()
        return egg.group(1) + (egg.group(2) or "") + (f"; {marker}" if marker else "")
    parsed.url = None
    return str(parsed)


def compatible(requirement: str) -> str:
    """``==1.2.3`` -> ``~=1.2`` (``==2`` -> ``>=2,<3``); other specifiers, extras and markers
    stay. Anything that does not parse is left as it is."""
    try:
        parsed = Requirement(requirement)
    except InvalidRequirement:
        return requirement
    specs = []
    for spec in parsed.specifier:
        if spec.operator not in ("==", "==="):
            specs.append(str(spec))
            continue
        try:
            release = Version(spec.version.removesuffix(".*")).release
        except InvalidVersion:
            specs.append(str(spec))
            continue
        if len(release) >= 2:
            specs.append(f"~={release[0]}.{release[1]}")
        else:
            specs += [f">={release[0]}", f"<{release[0] + 1}"]
    return _with_specifiers(parsed, specs)


def unpinned(requirement: str) -> str:
    """The name alone, with its extras and markers."""
    try:
        parsed = Requirement(requirement)
    except InvalidRequirement:
        return requirement
    return _with_specifiers(parsed, [])


def _with_specifiers(parsed: Requirement, specs: Sequence[str]) -> str:
    extras = f"[{','.join(sorted(parsed.extras))}]" if parsed.extras else ""
    marker = f"; {parsed.marker}" if parsed.marker else ""
    return f"{parsed.name}{extras}{','.join(sorted(specs))}{marker}"  # sorted: one recipe


def relaxed(
    commands: Sequence[str],
    rung: str,
    files: Mapping[str, str],
    project_requirements: Sequence[str] = (),
) -> tuple[str, ...]:
    """``commands`` on ``rung`` (the first command, pip's upgrade, and the last, the runner,
    are left as they are). ``files``: the repository's requirements files by path, read at
    detection time; ``project_requirements``: the project's own direct requirements."""
    if rung not in LOOSENED or len(commands) < 2:
        return tuple(commands)
    loosen = compatible if rung == "ranges" else unpinned
    no_deps = rung == "no-deps"
    out: list[str] = [commands[0]]
    for command in commands[1:-1]:
        words = _pip_install_args(command)
        if words is None:
            out.append(command)
            continue
        args = _rewrite(words, files, loosen)
        if no_deps and _installs_project(args):
            own = [unpinned(r) for r in project_requirements if not is_direct_reference(r)]
            out += [_pip(["--no-deps", *own])] if own else []
        if args:
            out.append(_pip(["--no-deps", *args] if no_deps and "--no-deps" not in args else args))
    out.append(commands[-1])
    return tuple(dict.fromkeys(out))


def _pip_install_args(command: str) -> list[str] | None:
    """The arguments of a ``pip install`` command, or None for any other command."""
    try:
        words = shlex.split(command)
    except ValueError:
        return None
    if words[:2] == ["pip", "install"]:
        return words[2:]
    if words[:4] == ["python", "-m", "pip", "install"]:
        return words[4:]
    return None


def _rewrite(args: Sequence[str], files: Mapping[str, str], loosen) -> list[str]:
    """pip's arguments with each requirement loosened and each ``-r`` file inlined; constraint
    files, indexes and hashes are dropped (they pin what this rung loosens)."""
    out: list[str] = []
    remaining = iter(args)
    for arg in remaining:
        if arg in ("-r", "--requirement"):
            out += _file_requirements(next(remaining, ""), files, loosen, set())
        elif arg.startswith("--requirement="):
            out += _file_requirements(arg.partition("=")[2], files, loosen, set())
        elif arg in _VALUE_OPTIONS:
            next(remaining, None)
        elif arg in ("-e", "--editable"):
            out += [arg, next(remaining, "")]
        elif arg.startswith("-") or arg.startswith((".", "/")):
            out.append(arg)
        else:
            release = pypi_release(arg)
            out += [loosen(release)] if release else []
    return out


def _file_requirements(path: str, files: Mapping[str, str], loosen, seen: set[str]) -> list[str]:
    """A requirements file's requirements (its ``-r`` includes followed), loosened; a file not
    read at detection time stays ``-r path``."""
    path = posixpath.normpath(path)
    if path in seen:
        return []
    seen.add(path)
    if path not in files:
        return ["-r", path]
    out: list[str] = []
    for line in _logical_lines(files[path]):
        words = shlex.split(line, comments=True) if line else []
        if not words:
            continue
        if words[0] in ("-r", "--requirement") and len(words) > 1:
            include = posixpath.join(posixpath.dirname(path), words[1])
            out += _file_requirements(include, files, loosen, seen)
        elif words[0] in ("-e", "--editable") and len(words) > 1:
            out += ["-e", words[1]]
        elif not words[0].startswith("-"):
            requirement = " ".join(w for w in words if not w.startswith("--hash"))
            release = pypi_release(requirement)
            out += [loosen(release)] if release else []
    return out


def _logical_lines(text: str) -> Iterable[str]:
    """A requirements file's lines with ``\\`` continuations joined and comments removed."""
    joined = re.sub(r"\\\r?\n", " ", text)
    for line in joined.splitlines():
        yield re.sub(r"(^|\s)#.*$", "", line).strip()


def _installs_project(args: Sequence[str]) -> bool:
    """Whether pip's arguments install the project itself (``-e .``, ``.[test]``)."""
    targets = [a for a in args if not a.startswith("-")]
    return any(t == "." or t.startswith((".[", "./")) for t in targets)


def _pip(args: Sequence[str]) -> str:
    return "pip install " + " ".join(shlex.quote(a) for a in args)


def project_requirements(files: Mapping[str, str]) -> list[str]:
    """The project's own direct requirements (``[project].dependencies``, setup.cfg's
    ``install_requires``, a literal ``install_requires=[...]`` in setup.py): what the
    ``no-deps`` rung installs unpinned before the project itself."""
    found: list[str] = []
    try:
        pyproject = tomllib.loads(files.get("pyproject.toml", ""))
    except (tomllib.TOMLDecodeError, ValueError):
        pyproject = {}
    project = pyproject.get("project")
    deps = project.get("dependencies") if isinstance(project, dict) else None
    found += [d for d in deps if isinstance(d, str)] if isinstance(deps, list) else []
    parser = configparser.ConfigParser(interpolation=None, strict=False)
    try:
        parser.read_string(files.get("setup.cfg", ""))
        value = parser.get("options", "install_requires", fallback="")
    except configparser.Error:
        value = ""
    found += [line.strip() for line in value.splitlines() if line.strip()]
    found += _setup_py_requires(files.get("setup.py", ""))
    return list(dict.fromkeys(found))


def _setup_py_requires(text: str) -> list[str]:
    try:
        tree = python_ast.parse(text)
    except (SyntaxError, ValueError):
        return []
    for node in ast.walk(tree):
        if not isinstance(node, ast.keyword) or node.arg != "install_requires":
            continue
        if isinstance(node.value, ast.List | ast.Tuple):
            return [
                e.value
                for e in node.value.elts
                if isinstance(e, ast.Constant) and isinstance(e.value, str)
            ]
    return []
