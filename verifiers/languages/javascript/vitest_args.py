"""The vitest command line of a graded run, and where vite may write its bundled configuration.

vite loads a configuration that is an ES module (``.mjs``/``.mts``, or ``.js``/``.ts`` under
``"type": "module"``) by writing it bundled beside itself and importing that file; the
repository's root is read-only to the tests' user. So the configuration vite would pick is
named to it through a link in a folder of the grader's (``LINKS``, the only place the tests'
user may add files there): the file itself stays the task's own and read-only, its imports
resolve from its real folder, and the root stays the working directory. vitest looks for its
workspace file beside the configuration, so the root's workspace files are linked too. A
workspace whose member configurations are ES modules is refused: each would be written beside
itself, in folders the tests may not write.
"""

from __future__ import annotations

import json
import posixpath

LINKS = "/tmp/.trajforge-vite"
# The names vitest tries, in its order, at the root.
CONFIG_ORDER = tuple(f"{name}.config.{ext}" for name in ("vitest", "vite")
                     for ext in ("ts", "mts", "cts", "js", "mjs", "cjs"))  # fmt: skip
WORKSPACE_PREFIX = ("vitest.workspace.", "vitest.projects.")


def is_module(package_json: bytes | None) -> bool:
    try:
        package = json.loads(package_json or b"{}")
    except ValueError:
        return False
    return isinstance(package, dict) and package.get("type") == "module"


def is_esm(path: str, module: bool) -> bool:
    """Whether vite loads ``path`` as an ES module (``module``: package.json says so)."""
    ext = path.rsplit(".", 1)[-1]
    return ext in ("mjs", "mts") or (module and ext in ("js", "ts"))


def config_links(guard: list[str], package_json: bytes | None) -> list[str]:
    """The root files to link into ``LINKS`` (the configuration vite picks, first, then the
    workspace files), or none when that configuration is CommonJS or absent."""
    root = {p for p in guard if "/" not in p}
    config = next((name for name in CONFIG_ORDER if name in root), "")
    if not config or not is_esm(config, is_module(package_json)):
        return []
    return [config, *sorted(p for p in root if p.startswith(WORKSPACE_PREFIX))]


def member_esm_config(guard: list[str], package_json: bytes | None) -> str:
    """A workspace member's configuration that is an ES module, when the root has a workspace
    file; "" otherwise."""
    if not any("/" not in p and p.startswith(WORKSPACE_PREFIX) for p in guard):
        return ""
    module = is_module(package_json)
    for path in sorted(guard):
        if "/" in path and posixpath.basename(path) in CONFIG_ORDER and is_esm(path, module):
            return path
    return ""


def vitest_args(
    reporter: str, entry: str, program: str, files: tuple[str, ...], per_test_s: int, config: str
) -> list[str]:
    """node's arguments: the reporter preloaded (it takes the records' key before any project
    code runs) and handed to vitest through its entry module, vitest's own console reporter, no
    results cache (``node_modules/.vite``: root's, and a test could plant one for another run),
    ``config`` (a link in ``LINKS``; "": vitest finds it), validate's per-test limit, ``files``
    (none: the whole suite)."""
    chosen = ["--config", config] if config else []
    return ["-r", reporter, program, "run", "--no-cache",
            "--reporter=default", f"--reporter={entry}", *chosen,
            f"--testTimeout={per_test_s * 1000}", *files]  # fmt: skip
