"""A Go project as found in a working tree: its modules, their Go, vendoring; and the recipe
and test command that follow from what was found.

Module functions, not the ``Language`` (``language.py``), so the profile module, which the
``Language`` calls, uses them without a circle. The modules are a ``go.work``'s ``use``
folders, else the root ``go.mod``'s module (a nested go.mod beside a root one is its own
module, which ``./...`` leaves out: tools, examples), else every nested ``go.mod`` (a monorepo
of modules with no root: each is tested from its folder). The Go is ``toolchain.py``'s choice
over those go.mods; ``vendor/modules.txt`` in every module means ``-mod=vendor`` and no
download.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass

from trajforge.generators.languages.base import Detection
from trajforge.generators.languages.go import sources
from trajforge.generators.languages.go.toolchain import choose_toolchain, go_line, toolchain_line

NAME = "go"  # the registry's name of the language, the tasks' ``language``
RUNNER = "go"  # ``go test -json``: the one runner
PRE_MODULE = "go-premodule"  # the manager of a GOPATH-era tree: its go.mod is made in the build
# A pre-module tree whose files carry no import comment gets this module path: clear that it is
# not the project's, and never on the proxy (``.invalid``).
PLACEHOLDER_MODULE = "premodule.invalid/project"
# Folders the go command never treats as packages of the module (``go help packages``), and
# the installed or VCS folders no module lives in.
SKIPPED = frozenset({"vendor", "testdata", "node_modules", ".git"})
MODULE_DEPTH = 5  # nested go.mods this deep at most
MAX_MODULES = 64
MAX_GO_MOD = 1024 * 1024  # a larger go.mod is no project file
# What a module's folder and path may be: they are written into a shell script and a recipe
# comment. Import paths are narrower than this already (``module.CheckPath``).
SAFE = re.compile(r"[A-Za-z0-9._~+/-]+")
_MODULE_LINE = re.compile(r'^module\s+"?([^\s"/][^\s"]*)"?\s*(?://.*)?$', re.MULTILINE)
_USE_BLOCK = re.compile(r"^use\s*\(\s*$(.*?)^\s*\)", re.MULTILINE | re.DOTALL)
_USE_LINE = re.compile(r'^use\s+"?([^\s"(]+)"?', re.MULTILINE)


@dataclass(frozen=True)
class Module:
    """One module the project tests: its folder (``.`` for the root) and its ``module`` path."""

    folder: str
    path: str


def detect(repo_dir: str) -> Detection | None:
    """The Go project in the working tree ``repo_dir``, or None when it has no go.mod, no
    go.work and no ``.go`` file (a tree of ``.go`` files alone is a pre-module project)."""
    heads = go_file_heads(repo_dir)
    work = _read(repo_dir, "go.work")
    if work is not None:
        folders = _work_folders(work)
        found, where = (
            [f for f in folders if _read(repo_dir, _join(f, "go.mod")) is not None],
            "go.work",
        )
    elif _read(repo_dir, "go.mod") is not None:
        found, where = ["."], "go.mod"
    else:
        found, where = _nested_go_mods(repo_dir), "nested go.mod"
    modules, texts = [], []
    for folder in found:
        text = _read(repo_dir, _join(folder, "go.mod")) or ""
        match = _MODULE_LINE.search(text)
        if match and SAFE.fullmatch(folder) and SAFE.fullmatch(match.group(1)):
            modules.append(Module(folder, match.group(1)))
            texts.append((_join(folder, "go.mod"), text))
    if not found and work is None:
        return _pre_module(heads)
    if not modules and work is None:
        return None  # a go.work names the project Go even where its modules are not at hand
    files_need = sources.needs(heads)
    chosen = choose_toolchain([*([("go.work", work)] if work is not None else []), *texts],
                              files_need)  # fmt: skip
    evidence = ["go.work"] if work is not None else []
    for path, text in texts:
        lines = [f"go {v}" for v in [go_line(text)] if v]
        lines += [f"toolchain go{v}" for v in [toolchain_line(text)] if v]
        evidence.append(f"{path}: {', '.join(lines)}" if lines else path)
    vendored = work is None and all(
        os.path.isfile(os.path.join(repo_dir, m.folder, "vendor", "modules.txt")) for m in modules
    )
    sums = [_join(m.folder, "go.sum") for m in modules]
    lockfile = next((s for s in sums if os.path.isfile(os.path.join(repo_dir, s))), "")
    shape = "vendored, -mod=vendor" if vendored else "modules from the proxy"
    shape = "a workspace's modules, no -mod" if work is not None else shape
    manager = "go-vendor" if vendored else "go-work" if work is not None else "go"
    count = f"{len(modules)} modules from {where}" if len(modules) != 1 else f"module from {where}"
    return Detection(
        language=NAME,
        package_manager=manager,
        runner=RUNNER,
        runtime=chosen.version,
        evidence=tuple(evidence),
        lockfile=lockfile,
        runner_args=tuple(f"{m.path}={m.folder}" for m in modules),
        why=f"{chosen.why}; {count}; {shape}",
    )


def _pre_module(heads: list[tuple[str, str]]) -> Detection | None:
    """A GOPATH-era tree (``.go`` files, no go.mod): one module at the root, its path
    ``pre_module_path``'s; the recipe writes its go.mod in the build (``go mod init``, ``go mod
    tidy``)."""
    if not heads:
        return None
    path, where = pre_module_path(heads)
    chosen = choose_toolchain([], sources.needs(heads))
    return Detection(
        language=NAME,
        package_manager=PRE_MODULE,
        runner=RUNNER,
        runtime=chosen.version,
        evidence=(f"no go.mod: {len(heads)} .go files, module {path} from {where}",),
        lockfile="",
        runner_args=(f"{path}=.",),
        why=f"{chosen.why}; a pre-module tree, its go.mod made in the build ({path})",
    )


def pre_module_path(heads: list[tuple[str, str]]) -> tuple[str, str]:
    """``(module path, whence)`` of a pre-module tree: the shallowest import comment's (less
    its file's folder); else the path the root's external tests (``package <name>_test``)
    import for the root package (``github.com/pkg/errors`` in its ``example_test.go``): the
    tree's own path, which a placeholder would make ``go mod tidy`` fetch from the proxy
    instead; else ``PLACEHOLDER_MODULE``."""
    ordered = sorted(heads, key=lambda item: (item[0].count("/"), item[0]))
    for file, head in ordered:
        comment, folder = sources.import_comment(head), file.rpartition("/")[0]
        if comment and (not folder or comment.endswith("/" + folder)):
            root = comment[: len(comment) - len(folder) - 1] if folder else comment
            if SAFE.fullmatch(root):
                return root, f"{file}'s import comment"
    names = {sources.package_name(head) for file, head in heads if "/" not in file}
    for file, head in ordered:
        name = sources.package_name(head)
        if "/" in file or not name.endswith("_test") or name[: -len("_test")] not in names:
            continue
        for imported in sources.imports(head):
            dotted = "." in imported.partition("/")[0]  # not a standard package
            own = imported.endswith("/" + name[: -len("_test")])
            if dotted and own and SAFE.fullmatch(imported):
                return imported, f"{file}'s import of the root package"
    return PLACEHOLDER_MODULE, "no import comment (a placeholder)"


def go_file_heads(repo_dir: str) -> list[tuple[str, str]]:
    """``(path, head)`` of the tree's ``.go`` files outside the folders the go command skips,
    their first ``sources.HEAD_BYTES``, at most ``sources.MAX_GO_FILES``, in path order."""
    out: list[tuple[str, str]] = []
    for folder, dirs, files in os.walk(repo_dir):
        dirs[:] = sorted(d for d in dirs if d not in SKIPPED and not d.startswith((".", "_")))
        for name in sorted(f for f in files if f.endswith(".go") and not f.startswith((".", "_"))):
            path = os.path.join(folder, name)
            if os.path.islink(path) or not os.path.isfile(path):
                continue
            with open(path, encoding="utf-8", errors="replace") as handle:
                head = handle.read(sources.HEAD_BYTES)
            out.append((os.path.relpath(path, repo_dir).replace(os.sep, "/"), head))
            if len(out) >= sources.MAX_GO_FILES:
                return out
    return out


def modules(detection: Detection) -> list[Module]:
    """The modules a detection tests, from its ``runner_args`` (``<module path>=<folder>``)."""
    out = []
    for arg in detection.runner_args:
        path, _, folder = arg.rpartition("=")
        out.append(Module(folder, path))
    return out


def _work_folders(work: str) -> list[str]:
    """go.work's ``use`` folders, normalised (``./a`` -> ``a``), each once, inside the tree."""
    block = _USE_BLOCK.search(work)
    names = (
        [line.split("//")[0].strip().strip('"') for line in block.group(1).splitlines()]
        if block
        else []
    )
    names += _USE_LINE.findall(work)
    out: list[str] = []
    for name in filter(None, names):
        folder = os.path.normpath(name).replace(os.sep, "/")
        if not folder.startswith(("..", "/")) and folder not in out:
            out.append(folder)
    return out


def _nested_go_mods(repo_dir: str) -> list[str]:
    """The folders holding a go.mod below the root (never in vendor, testdata, hidden or
    ``_``-prefixed folders, which the go command skips too), shallow first, at most
    ``MAX_MODULES``."""
    found: list[str] = []
    root_depth = repo_dir.rstrip(os.sep).count(os.sep)
    for folder, dirs, files in os.walk(repo_dir):
        depth = folder.count(os.sep) - root_depth
        dirs[:] = sorted(
            d
            for d in dirs
            if d not in SKIPPED and not d.startswith((".", "_")) and depth < MODULE_DEPTH
        )
        if depth and "go.mod" in files:
            found.append(os.path.relpath(folder, repo_dir).replace(os.sep, "/"))
    return sorted(found, key=lambda f: (f.count("/"), f))[:MAX_MODULES]


def _read(repo_dir: str, name: str) -> str | None:
    path = os.path.join(repo_dir, *name.split("/"))
    if not os.path.isfile(path) or os.path.islink(path) or os.path.getsize(path) > MAX_GO_MOD:
        return None
    with open(path, encoding="utf-8", errors="replace") as handle:
        return handle.read()


def _join(folder: str, name: str) -> str:
    return name if folder == "." else f"{folder}/{name}"
