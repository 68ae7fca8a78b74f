"""Where a Python suite runs from, as the project's own tox env runs it: tox's ``changedir`` and a
Django project's ``manage.py`` with its settings module, spelled as pytest options.

The options keep pytest's working directory and ``--rootdir`` at the repository root, so every
test id stays repository-relative (``test_project/library/tests.py::BookTests::test_title``):
validate's lists, a rerun's selection and the grader's run name the same tests. What running
from ``X`` changes is said instead: ``X``'s own pytest configuration (``-c``), and ``X`` (or its
config's ``testpaths``) as what a run without test ids collects; a Django project's folder goes
on ``sys.path`` (pytest's ``pythonpath``, as ``manage.py`` imports its settings from there). A
Django project runs through pytest-django (``--ds``; installed when the project does not declare
it), so per-test limits and the grader stay pytest's: a ``manage.py test`` suite's Django
``TestCase``s run under pytest-django.
"""

from __future__ import annotations

import configparser
import posixpath
import re
import shlex
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass

from trajforge.generators.environments.commit_files import ProfileError, decode_all, read_paths
from trajforge.generators.languages.python.declarations import _ini_get, _load_ini
from trajforge.schemas import python_ast
from trajforge.verifiers.sandbox.base import REPO_DIR

PYTEST_DJANGO = "pytest-django"
# Django's test files (tests.py) beside pytest's defaults, when the project's config names none
DJANGO_FILES = "python_files=test*.py *_test.py *tests.py"
REASON = "bad_suite_layout"
EMPTY_CONFIG = "/dev/null"  # the container's: a config file that sets nothing
MAX_DEPTH = 2  # folders deep a changedir's config is looked for
# tox's spellings of the folder tox.ini sits in
_TOX_ROOTS = ("{toxinidir}", "{tox_root}", "{toxworkdir}/..")
_SETTINGS_CALL = re.compile(r"""DJANGO_SETTINGS_MODULE['"]\s*,\s*['"]([\w.]+)['"]""")
# a tox command that runs the suite: pytest (any spelling) or Django's test command
_RUNS_TESTS = re.compile(r"(?:^|[\s/])(?:py\.?test|manage\.py\s+test|django-admin\s+test)\b", re.M)
_SETENV = re.compile(r"^\s*DJANGO_SETTINGS_MODULE\s*=\s*([\w.]+)\s*$", re.MULTILINE)
# (file, section) where pytest reads its ini options; "" = a TOML table
_PYTEST_CONFIGS = (
    ("pytest.ini", "pytest"),
    (".pytest.ini", "pytest"),
    ("pyproject.toml", ""),
    ("tox.ini", "pytest"),
    ("setup.cfg", "tool:pytest"),
)


@dataclass(frozen=True)
class SuiteLayout:
    """Where the suite runs from; the default (the root, no Django) adds no option."""

    run_dir: str = ""  # tox's changedir, repository-relative; "" = the root
    config: str = ""  # run_dir's own pytest config file, when it has one
    testpaths: tuple[str, ...] = ()  # what a run without ids collects (repository-relative)
    settings: str = ""  # DJANGO_SETTINGS_MODULE
    django_dir: str = ""  # the folder the settings module is imported from (manage.py's)
    names_files: bool = False  # the config in effect sets python_files itself
    has_config: bool = True  # pytest reads a config file of the project (run_dir's or the root's)

    @property
    def django(self) -> bool:
        return bool(self.settings)

    def flags(self) -> tuple[str, ...]:
        """The pytest options that run the suite as from ``run_dir`` (see the module doc)."""
        words: list[str] = []
        if self.django and self.django_dir:  # where manage.py would import the settings from
            if not self.has_config:  # pytest 7 resolves pythonpath against a config file's
                words += ["-c", EMPTY_CONFIG]  # folder and fails with none: an empty one
            words += ["-o", f"pythonpath={posixpath.join(REPO_DIR, self.django_dir)}"]
        if self.config:
            words += ["-c", self.config]
        if self.testpaths:
            words += ["-o", "testpaths=" + " ".join(self.testpaths)]
        if self.django:
            words.append(f"--ds={self.settings}")
            if not self.names_files:
                words += ["-o", DJANGO_FILES]
        return tuple(shlex.quote(w) for w in words)


# the ini keys ``SuiteLayout.flags`` sets with ``-o`` (besides ``-c`` and ``--ds``)
_LAYOUT_INI_KEYS = {"pythonpath", "testpaths", "python_files"}


def without_layout(words: list[str]) -> list[str]:
    """``words`` (pytest's options, split) less those a ``SuiteLayout`` wrote: what stays is a
    profile's own (its ``-W`` and unittest options), which another site's layout can join."""
    kept: list[str] = []
    rest = iter(words)
    for word in rest:
        if word.startswith("--ds="):
            continue
        if word in ("-c", "-o"):
            value = next(rest, "")
            if word == "-c" or value.split("=", 1)[0] in _LAYOUT_INI_KEYS:
                continue
            kept += [word, value]
        else:
            kept.append(word)
    return kept


def suite_layout(
    repo_path: str, commit: str, tree: Mapping[str, tuple[str, str]], where: str
) -> SuiteLayout:
    """The layout at ``commit``; ProfileError (``bad_suite_layout``) naming ``where``, the cause
    and what to do when tox names a changedir the repository lacks, or Django's settings module
    is nowhere in it."""
    paths = set(tree)
    wanted = [p for p in _wanted_files(paths) if p in tree]
    texts = decode_all(read_paths(repo_path, commit, dict(tree), wanted))
    run_dir = _changedir(texts, paths, where)
    config = _own_config(run_dir, texts) if run_dir else ""
    ini = config or _own_config("", texts)
    testpaths: tuple[str, ...] = ()
    if run_dir:
        own = _ini_value(texts, ini, "testpaths").split() if config else []
        testpaths = tuple(posixpath.join(run_dir, p) for p in own) or (run_dir,)
    names_files = bool(ini and _ini_value(texts, ini, "python_files"))
    manage = _manage_py(run_dir, paths)
    if not manage:
        return SuiteLayout(run_dir, config, testpaths, names_files=names_files)
    settings, said_by = _settings_module(texts, ini, manage)
    if not settings:
        raise ProfileError(
            f"{where}: {manage} names no DJANGO_SETTINGS_MODULE (nor does the pytest config or "
            "tox's setenv); set it in pytest.ini or tox.ini's [testenv] setenv",
            reason=REASON,
        )
    base = _settings_base(settings, (posixpath.dirname(manage), run_dir, ""), paths)
    if base is None:
        raise ProfileError(
            f"{where}: DJANGO_SETTINGS_MODULE {settings} (from {said_by}) is no module beside "
            f"{manage} or at the root; point it at the project's settings module",
            reason=REASON,
        )
    return SuiteLayout(run_dir, config, testpaths, settings, base, names_files, bool(ini))


def _wanted_files(paths: set[str]) -> list[str]:
    """The files the layout is read from: tox's and pytest's configs (in the first three levels,
    where a changedir's are) and the shallow manage.py's."""
    names = {"tox.ini", "tox.toml", *(name for name, _ in _PYTEST_CONFIGS)}
    return sorted(
        p
        for p in paths
        if (posixpath.basename(p) in names and p.count("/") <= MAX_DEPTH) or _is_manage(p)
    )


def _is_manage(path: str) -> bool:
    return posixpath.basename(path) == "manage.py" and path.count("/") <= 1


def _tox_get(parser: configparser.ConfigParser | None, key: str) -> str | None:
    """``key`` of the tox env the suite runs in (``_tox_env``), else of ``[testenv]``, which
    tox's named envs inherit."""
    section = _tox_env(parser)
    found = _ini_get(parser, section, key)
    return found if found is not None else _ini_get(parser, "testenv", key)


def _tox_env(parser: configparser.ConfigParser | None) -> str:
    """The tox.ini section the suite runs in: ``[testenv]``, unless its commands run no tests
    and exactly one named env (``[testenv:<name>]``) runs them (a project whose only test env
    is named: ``[testenv:django]``); several such envs are a guess, so ``[testenv]`` again."""
    if parser is None or _RUNS_TESTS.search(_ini_get(parser, "testenv", "commands") or ""):
        return "testenv"
    named = [
        section
        for section in parser.sections()
        if section.startswith("testenv:")
        and _RUNS_TESTS.search(_ini_get(parser, section, "commands") or "")
    ]
    return named[0] if len(named) == 1 else "testenv"


def _changedir(texts: Mapping[str, str], paths: set[str], where: str) -> str:
    """The tox env's changedir (``_tox_env``), repository-relative ("" when none or the root;
    a folder outside the repository, such as ``{envtmpdir}``, tests the installed copy: not
    ours)."""
    parser = _load_ini(texts.get("tox.ini", ""))
    raw = _tox_get(parser, "changedir")
    if raw is None and "tox.toml" in texts:
        raw = _toml_change_dir(texts["tox.toml"])
    if not raw or not raw.strip():
        return ""
    value = raw.strip()
    for root in _TOX_ROOTS:
        value = value.replace(root, "")
    value = value.lstrip("/")
    if "{" in value:  # another substitution: a folder tox makes, outside the repository
        return ""
    folder = posixpath.normpath(value) if value else "."
    if folder == ".":
        return ""
    if folder.startswith("..") or not any(p.startswith(folder + "/") for p in paths):
        raise ProfileError(
            f"{where}: tox's changedir {raw.strip()!r} is no folder of the repository; "
            "fix changedir in tox.ini (or tox.toml) or remove it",
            reason=REASON,
        )
    return folder


def _toml_change_dir(text: str) -> str | None:
    try:
        data = tomllib.loads(text)
    except (tomllib.TOMLDecodeError, ValueError):
        return None
    base = data.get("env_run_base")
    value = base.get("change_dir") if isinstance(base, dict) else None
    return value if isinstance(value, str) else None


def _own_config(folder: str, texts: Mapping[str, str]) -> str:
    """The pytest config file pytest would take in ``folder`` (its first, as pytest looks)."""
    for name, section in _PYTEST_CONFIGS:
        path = posixpath.join(folder, name) if folder else name
        if path not in texts:
            continue
        if name in ("pytest.ini", ".pytest.ini") or _has_pytest_section(texts[path], section):
            return path
    return ""


def _has_pytest_section(text: str, section: str) -> bool:
    if not section:
        return _pytest_table(text) is not None
    parser = _load_ini(text)
    return parser is not None and parser.has_section(section)


def _pytest_table(text: str) -> dict[str, object] | None:
    try:
        data = tomllib.loads(text)
    except (tomllib.TOMLDecodeError, ValueError):
        return None
    table = data.get("tool", {}).get("pytest", {}).get("ini_options")
    return table if isinstance(table, dict) else None


def _ini_value(texts: Mapping[str, str], config: str, key: str) -> str:
    """One pytest ini option of ``config`` as text ("" when unset)."""
    text = texts.get(config, "")
    if config.endswith(".toml"):
        value = (_pytest_table(text) or {}).get(key)
        return " ".join(map(str, value)) if isinstance(value, list) else str(value or "")
    section = dict(_PYTEST_CONFIGS)[posixpath.basename(config)]
    return (_ini_get(_load_ini(text), section, key) or "").strip()


def _manage_py(run_dir: str, paths: set[str]) -> str:
    """The Django project's manage.py: the changedir's, the root's, else the one manage.py one
    folder down ("" when none, or several: which project the suite is would be a guess)."""
    for folder in (run_dir, ""):
        path = posixpath.join(folder, "manage.py") if folder else "manage.py"
        if path in paths:
            return path
    nested = sorted(p for p in paths if _is_manage(p) and "/" in p)
    return nested[0] if len(nested) == 1 else ""


def _settings_module(texts: Mapping[str, str], ini: str, manage: str) -> tuple[str, str]:
    """(DJANGO_SETTINGS_MODULE, the file that says it): the pytest config pytest-django reads,
    tox's setenv, then manage.py's ``os.environ.setdefault``."""
    if ini and (value := _ini_value(texts, ini, "DJANGO_SETTINGS_MODULE")):
        return value, ini
    setenv = _tox_get(_load_ini(texts.get("tox.ini", "")), "setenv") or ""
    if match := _SETENV.search(setenv):
        return match.group(1), "tox.ini"
    source = texts.get(manage, "")
    try:
        python_ast.parse(source)
    except (SyntaxError, ValueError):
        return "", manage
    match = _SETTINGS_CALL.search(source)
    return (match.group(1), manage) if match else ("", manage)


def _settings_base(module: str, folders: tuple[str, ...], paths: set[str]) -> str | None:
    """The first of ``folders`` (repository-relative, "" = root) the settings module imports
    from; None when it is under none of them."""
    relative = module.replace(".", "/")
    for folder in dict.fromkeys(folders):
        stem = posixpath.join(folder, relative) if folder else relative
        if f"{stem}.py" in paths or f"{stem}/__init__.py" in paths:
            return folder
    return None
