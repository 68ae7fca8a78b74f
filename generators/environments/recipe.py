"""An environment's recipe: the Dockerfile every image of a profile is built from.

The recipe is the profile's install commands rendered once, hashed into ``profile_id`` and
exported with the dataset, so anyone can rebuild the environment with plain ``docker build`` and
no trajforge. Two stages: the install runs in ``build`` with the network and the CA bundle, and
only ``/venv`` is copied into the final image, so the bundle (and pip's caches, and the source
tree) never reach a layer anyone pulls. Index and CA are build inputs, never baked in.

Build context (what ``build_context`` makes)::

    repo/                 the repository at the setup commit (``git archive``), no .git
    trajforge/ca.crt      a CA bundle for TLS-intercepting proxies; empty for none
    trajforge/env.json    the marker: profile id and setup commit (copied to /venv)

Every ``pip install`` of the profile's commands goes through uv (pinned, installed in the build
stage only) and falls back to pip when uv refuses the step; the build log says which one
installed it. The profile keeps writing ``pip install ...``: the translation is the ``pip`` shell
function of ``INSTALL_PRELUDE``, one place. Layers, in order, so Docker's build cache shares
what it can (``LAYERS``): the system packages (``apt``) and uv, per base image; the test tools;
the dependencies from their declarations; the repository; the main install (the project built
once: ``RELINK_SKIP``); then each repair as its own ``RUN`` (``add_step``), so a repair round
reuses the main install's layer and costs only its own step.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import re
import tarfile
from collections.abc import Mapping, Sequence

from trajforge.generators.environments.base_image import base_image_tag
from trajforge.generators.environments.dependency_layer import (
    DEPS_DIR,
    RELINK,
    dependency_steps,
    is_tool_step,
)
from trajforge.generators.environments.services import with_services
from trajforge.verifiers.sandbox.base import BASE_ENV, REPO_DIR

# bump when the template changes: every profile id changes too (v2: generated files are kept;
# v3: installs through uv with pip as the fallback, every VCS backend's pretend version, layers;
# v4: versioningit's write file; v5: tools, dependency and per-commit layers, LAYERS)
RECIPE_FORMAT = "dockerfile-v6"  # v6: the project built once (RELINK_SKIP), one commit COPY
PROFILE_LABEL = "trajforge.profile_id"  # on every environment image: what `images` lists
SETUP_COMMIT_LABEL = "trajforge.setup_commit"
# Set by trajforge at build time (``docker build --label``, never by the recipe's text, and a
# build's own labels override the recipe's): what the image was built from, and which namespace.
RECIPE_LABEL = "trajforge.recipe"  # recipe_hash() of the Dockerfile and its build context
KIND_LABEL = "trajforge.image"  # ENV_KIND (validate's images) | EVAL_KIND (a task row's recipe)
ENV_KIND = "env"
EVAL_KIND = "eval"
EVAL_REPOSITORY = "trajforge-eval"  # a row's recipe is built only here, as trajforge-eval:<hash>
RECIPE_HASH_VERSION = "recipe-hash-v1"
CA_FILE = "/tmp/trajforge/ca.crt"
MARKER_SOURCE = "trajforge/env.json"
ENV_MARKER = "/venv/trajforge-env.json"  # read back to learn a reused image's setup commit
# /repo is a plain tree (no .git), so a backend that reads the version from git has none. Each
# is told one: a fixed 0.0.0, never the commit's, because the recipe is hashed into profile_id
# and one image serves every commit of a profile. setuptools-scm, hatch-vcs and flit-scm read
# SETUPTOOLS_SCM_PRETEND_VERSION; pdm-backend its own; poetry- and uv-dynamic-versioning (the
# dunamai-based ones) a bypass. setuptools-git-versioning (0.0.1) and versioneer ("0+unknown")
# fall back by themselves; versioningit has no variable, so it gets a PKG-INFO (VERSION_FILE).
PRETEND = "0.0.0"
PRETEND_VERSION = {
    "SETUPTOOLS_SCM_PRETEND_VERSION": PRETEND,
    "VCS_VERSIONING_PRETEND_VERSION": PRETEND,
    "PDM_BUILD_SCM_VERSION": PRETEND,
    "POETRY_DYNAMIC_VERSIONING_BYPASS": PRETEND,
    "UV_DYNAMIC_VERSIONING_BYPASS": PRETEND,
    "PBR_VERSION": PRETEND,
}
# versioningit falls back to an sdist's PKG-INFO: written only for a project that names it and
# has none, before the stamp, so it is a build input and never carried into the image.
VERSION_FILE = (
    "if grep -qs versioningit pyproject.toml setup.cfg setup.py && [ ! -e PKG-INFO ]; then "
    f"printf 'Metadata-Version: 1.0\\nName: unknown\\nVersion: {PRETEND}\\n' > PKG-INFO; fi"
)
# ...and from a PKG-INFO it writes no `[tool.versioningit.write]` file, which the package may
# import (`from ._version import __version__`): written after the install, when it is missing,
# inside the tree only, so the carry step takes it into the image.
VERSIONINGIT_WRITE = """\
if grep -qs '^\\[tool.versioningit.write\\]' pyproject.toml; then python3 - <<'TRAJFORGE'
import os, re
text = open("pyproject.toml").read()
table = re.search(r"^\\[tool\\.versioningit\\.write\\]\\s*$(.*?)(?=^\\[|\\Z)", text, re.M | re.S)
name = table and re.search(r"^file\\s*=\\s*[\\x22\\x27]([^\\x22\\x27]+)", table.group(1), re.M)
path = os.path.normpath(name.group(1)) if name else ""
if path and not path.startswith(("..", "/")) and not os.path.exists(path):
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    with open(path, "w") as out:
        out.write('__version__ = "0.0.0"\\n' if path.endswith(".py") else "0.0.0\\n")
TRAJFORGE
fi"""
# uv, pinned so a recipe resolves the same tomorrow, in a venv of its own in the build stage
# only (never copied into the final image). A mirror without it leaves pip to do everything.
UV_VERSION = "0.13.9"
TOOLS = "/opt/trajforge-tools"
UV = f"{TOOLS}/bin/uv"
INSTALL_UV = (
    f"python3 -m venv {TOOLS} && {TOOLS}/bin/pip install -q uv=={UV_VERSION} "
    f"|| echo 'trajforge: uv could not be installed; pip installs every step'"
)
# The relink (RELINK) puts /repo back as the installed project after a step that replaced it
# (a runner that depends on the project itself). When /repo is still installed editable it
# would build the same project again for the same result, so it is skipped; any doubt (no
# such install, an unreadable record) runs it.
EDITABLE_FROM_REPO = (
    "import importlib.metadata as m, json, sys; "
    'u = [json.loads(d.read_text("direct_url.json") or "{}") for d in m.distributions()]; '
    f'sys.exit(0 if any(x.get("url") == "file://{REPO_DIR}" '
    'and (x.get("dir_info") or {}).get("editable") is True for x in u) else 1)'
)
RELINK_SKIP = (
    f'if [ "$*" = "{RELINK.removeprefix("pip install ")}" ] && '
    f"/venv/bin/python -c '{EDITABLE_FROM_REPO}' 2>/dev/null; then "
    'echo "trajforge: relink skipped, /repo is installed editable: $*"; return 0; fi; '
)
# Every `pip install` goes to uv first, then to pip when uv refuses it (another resolver, an
# option uv does not know); other pip commands go to pip. The log names the installer. Both
# installers write their errors into stdout, the stream of the markers: the engine reads a
# build's two streams side by side, so across streams the log's order is the load's
# (uv's error after the fallback marker made a build's cause uv's in one run, pip's in another).
PIP_THROUGH_UV = (
    "pip() { "
    'if [ "$1" != install ]; then /venv/bin/pip "$@"; return; fi; shift; '
    f"{RELINK_SKIP}"
    f'if [ -x {UV} ] && {UV} pip install --python /venv/bin/python "$@" 2>&1; then '
    'echo "trajforge: uv installed: $*"; return 0; fi; '
    f'[ -x {UV} ] && echo "trajforge: uv failed, pip installs: $*"; '
    '/venv/bin/pip install "$@" 2>&1; echo "trajforge: pip installed: $*"; }'
)
# The install sees the CA bundle only when one was given, and the index only when one is named
# (pip's and uv's variables: uv reads neither PIP_INDEX_URL nor PIP_CERT).
CA_PRELUDE = (
    f"if [ -s {CA_FILE} ]; then export PIP_CERT={CA_FILE} SSL_CERT_FILE={CA_FILE} "
    f"REQUESTS_CA_BUNDLE={CA_FILE}; fi"
)
INSTALL_PRELUDE = (
    CA_PRELUDE,
    'if [ -n "$PIP_INDEX" ]; then export PIP_INDEX_URL="$PIP_INDEX" '
    'UV_DEFAULT_INDEX="$PIP_INDEX"; fi',
    # uv writes no bytecode unless told (pip does by default): without it every graded or
    # validating run compiles pytest, pluggy and the dependencies again, as a user that
    # cannot write __pycache__ (0.4-0.7 s of each pytest start)
    "export UV_LINK_MODE=copy UV_NO_PROGRESS=1 UV_COMPILE_BYTECODE=1",
    PIP_THROUGH_UV,
)
_ISO_DATE = re.compile(r"\d{4}-\d{2}-\d{2}(T\d{2}:\d{2}(:\d{2})?Z?)?")
_APT_NAME = re.compile(r"[a-z0-9][a-z0-9+.-]*")
# The build stage's system packages and the shared libraries they need at run time: the
# packages they depend on whose Debian section is `libs` (libxml2-dev -> libxml2), listed here
# by `apt-cache depends` and installed again in the final stage; compilers and headers are not.
APT_RUNTIME = "/opt/trajforge-apt/runtime"

# Files the install wrote under /repo (hatch-vcs / setuptools-scm version files, in-place
# extensions): the test's /repo is the git tree, which lacks them, so the image carries them in
# /repo (and a copy in /venv, for a session that empties /repo and puts a tree back). Metadata
# (*.egg-info lists file names) and caches stay behind.
STAMP = "/tmp/trajforge/stamp"
GENERATED = "/venv/trajforge-generated"
CARRY = (
    f"mkdir -p {GENERATED} && find . \\( -name __pycache__ -o -name '*.egg-info' "
    "-o -name '*.dist-info' -o -name .eggs -o -name build \\) -prune "
    f"-o -type f -newer {STAMP} -print0 | xargs -0 -r cp --parents -t {GENERATED}"
)

# The layers (Docker's classic builder, no BuildKit cache mounts, so reuse is layer reuse):
# per base image, the system packages and uv, then the venv with the test tools (pip's and the
# runner's steps); per set of declared dependencies, the dependency layer (dependency_layer.py:
# its inputs are trajforge/deps/, derived from the declarations alone); per commit, the build
# stage's run of every install command over that, whose changes to /venv (the delta, hashed
# file by file against the dependency layer's snapshot) are all the final image adds on top of
# the dependency layer's /venv, so two commits' images share that layer by id.
LAYERS = ("base", "apt", "uv", "tools", "deps", "commit")
DELTA_STEP = "python3 - delta <<'TRAJFORGE'"  # the build stage's last step: what the commit changed
MAKE_VENV = "[ -x /venv/bin/python ] || python3 -m venv /venv"
SNAPSHOT = "/opt/trajforge-venv.json"
DELTA = "/tmp/trajforge-delta"
REMOVED = "/tmp/trajforge-removed"
VENV_DELTA = f"""\
import hashlib, json, os, shutil, sys
def walk(root):
    seen = {{}}
    for folder, dirs, files in os.walk(root):
        for name in dirs + files:
            path = os.path.join(folder, name)
            if os.path.islink(path):
                seen[path] = "l " + os.readlink(path)
            elif os.path.isdir(path):
                seen[path] = "d"
            else:
                with open(path, "rb") as handle:
                    digest = hashlib.sha256(handle.read()).hexdigest()
                seen[path] = "f %o %s" % (os.lstat(path).st_mode, digest)
    return seen
if sys.argv[1] == "snapshot":
    with open("{SNAPSHOT}", "w") as out:
        json.dump(walk("/venv"), out)
    sys.exit(0)
with open("{SNAPSHOT}") as handle:
    old = json.load(handle)
new = walk("/venv")
gone = [p for p, kind in old.items() if p not in new or new[p][0] != kind[0]]
os.makedirs("{DELTA}/venv", exist_ok=True)
for path, kind in sorted(new.items()):
    if old.get(path) == kind:
        continue
    target = "{DELTA}" + path
    if kind == "d":
        os.makedirs(target, exist_ok=True)
        continue
    os.makedirs(os.path.dirname(target), exist_ok=True)
    if kind.startswith("l "):
        os.symlink(os.readlink(path), target)
    else:
        shutil.copy2(path, target)
os.makedirs("{DELTA}{REPO_DIR}", exist_ok=True)
if os.path.isdir("{GENERATED}"):
    shutil.copytree("{GENERATED}", "{DELTA}{REPO_DIR}", symlinks=True, dirs_exist_ok=True)
with open("{REMOVED}", "wb") as out:
    out.write(b"".join(p.encode() + b"\\0" for p in sorted(gone)))
print("trajforge: commit layer: %d of %d venv entries changed, %d removed"
      % (sum(old.get(p) != k for p, k in new.items()), len(new), len(gone)))
TRAJFORGE"""


def image_name(registry: str | None, profile_id: str) -> str:
    """Where a profile's image lives: in the registry when one is configured, else locally."""
    return f"{registry.rstrip('/')}/env:{profile_id}" if registry else f"trajforge-env:{profile_id}"


def eval_image_name(recipe_hash: str) -> str:
    """Where a task row's own recipe is built (evaluate, serve-rewards, the reward API): a name
    only trajforge gives, by content, never a name the row chooses nor a profile's image."""
    return f"{EVAL_REPOSITORY}:{recipe_hash}"


def recipe_hash(dockerfile: str, tree: str, profile_id: str, setup_commit: str) -> str:
    """What an image is by its recipe: sha256 of the Dockerfile and of its build context (the
    repository's git tree at the setup commit, and the marker's profile id and commit).

    The CA bundle and the index URL are build inputs that never reach the final image, so they
    are not part of it: the same recipe built behind another proxy is the same recipe.
    """
    fields = [RECIPE_HASH_VERSION, dockerfile, tree, marker(profile_id, setup_commit).decode()]
    return hashlib.sha256(json.dumps(fields).encode()).hexdigest()


def render_dockerfile(
    python: str,
    install: Sequence[str],
    *,
    exclude_newer: str | None = None,
    apt: Sequence[str] = (),
    services: Sequence[str] = (),
    service_env: Sequence[str] = (),
    service_hosts: Sequence[str] = (),
) -> str:
    """The Dockerfile for a profile: a pure function of its Python, install commands and options.

    ``exclude_newer`` (an ISO date or UTC time) resolves as of that moment: uv's
    UV_EXCLUDE_NEWER, and pip's PIP_UPLOADED_PRIOR_TO for the steps pip takes over (a pip
    older than 26 ignores it). ``apt``: Debian packages for the build stage, before the
    install; the shared libraries they depend on are installed in the final stage too.
    ``services``: what the suite expects running (``services.py``), installed in the final
    stage and started by its entrypoint, with ``service_env`` (``service_env.py``) as the
    image's ENV and ``service_hosts`` as the names containers reach them by; none renders no
    line of theirs.

    Three stages, so a new commit pays only for what it changed (``LAYERS``): ``deps`` (the
    test tools, then the dependencies from their declarations alone), ``build`` (the
    repository and every install command over that), and the final image, whose layers are the
    base, the dependency venv and the commit's delta.
    """
    era = _era(exclude_newer) if exclude_newer else []
    packages = _apt_names(apt)
    prelude = [*INSTALL_PRELUDE, *era]
    tools = [command for command in install if is_tool_step(command)]
    deps = dependency_steps(install, UV)
    # One shell script: -e stops at the first failing step, -x puts each step in the build log.
    start = [*prelude, VERSION_FILE, f"touch {STAMP}", "set -x"]
    script = "\n".join([*start, MAKE_VENV, *install, VERSIONINGIT_WRITE, CARRY])
    env = " ".join(f"{key}={value}" for key, value in BASE_ENV.items())
    pretend = " ".join(f"{key}={value}" for key, value in PRETEND_VERSION.items())
    text = "\n".join(
        [
            f"# trajforge environment recipe ({RECIPE_FORMAT}). Build context: repo/ (the",
            "# repository at the setup commit, `git archive`), trajforge/ca.crt (a CA bundle, or",
            "# an empty file), trajforge/env.json (a marker), trajforge/deps/ (optional: the",
            "# dependency declarations, which only make a rebuild faster). Build args: PIP_INDEX",
            "# (an index URL, optional), PROFILE_ID and SETUP_COMMIT (labels).",
            f"ARG BASE={base_image_tag(python)}",
            "FROM ${BASE} AS deps",
            "ARG PIP_INDEX=",
            f"ENV {env} {pretend}",
            "COPY trajforge/ca.crt " + CA_FILE,
            *([_run([CA_PRELUDE, _apt_build(packages)])] if packages else []),
            _run([CA_PRELUDE, INSTALL_UV]),
            _run([*prelude, "set -x", MAKE_VENV, *tools]),
            f"COPY trajforge/ca.crt trajforge/dep[s] {DEPS_DIR}/",
            f"WORKDIR {DEPS_DIR}",
            _run([*prelude, "set -x", *deps, f"python3 - snapshot <<'TRAJFORGE'\n{VENV_DELTA}"]),
            "",
            "FROM deps AS build",
            "WORKDIR /repo",  # before the commit's files: a cached step, not one per commit
            "COPY repo/ /repo/",
            f"COPY {MARKER_SOURCE} {ENV_MARKER}",
            _run([script]),
            _run([f"{DELTA_STEP}\n{VENV_DELTA}"]),
            "",
            "FROM ${BASE}",
            f"ENV {env}",
            "WORKDIR /repo",  # cached, as every step before the commit's own
            *(
                [f"COPY --from=build {APT_RUNTIME} {APT_RUNTIME}", _run([_apt_runtime()])]
                if packages
                else []
            ),
            "COPY --from=deps /venv /venv",
            f"COPY --from=build {REMOVED} {REMOVED}",
            _run([f"xargs -0 -r rm -rf < {REMOVED}", f"rm {REMOVED}"]),
            f"COPY --from=build {DELTA}/ /",
            "ARG PROFILE_ID= SETUP_COMMIT=",
            f'LABEL {PROFILE_LABEL}="${{PROFILE_ID}}" {SETUP_COMMIT_LABEL}="${{SETUP_COMMIT}}"',
            "",
        ]
    )
    return with_services(text, services, service_env, service_hosts)


def add_step(recipe: str, install: Sequence[str]) -> str:
    """``recipe`` with ``install`` run after everything its build stage installed (before the
    venv's delta is taken), as one more ``RUN``: the layers before it are the same, so Docker's
    build cache reuses them and a repair round costs only this step. The step sees what the
    main install saw (the prelude, the era)."""
    lines = recipe.split("\n")
    delta = next(
        i for i, line in enumerate(lines) if line.startswith(f"RUN {_run([DELTA_STEP])[4:-2]}")
    )
    main = json.loads(next(line for line in lines if line.startswith("RUN ") and STAMP in line)[4:])
    prelude = main[2].split(f"\n{VERSION_FILE}")[0]  # the CA, index, pip function and era
    step = _run([prelude, "set -x", *install])
    return "\n".join([*lines[:delta], step, *lines[delta:]])


def recipe_install(recipe: str) -> list[str]:
    """The main install's commands, read back from a recipe ``render_dockerfile`` wrote (what
    the build context's dependency files are derived from); [] for an older format."""
    for line in recipe.split("\n"):
        if line.startswith("RUN ") and STAMP in line:
            script = json.loads(line[4:])[2]
            _, venv, rest = script.partition(f"\n{MAKE_VENV}\n")
            return rest.split(f"\n{VERSIONINGIT_WRITE}")[0].split("\n") if venv else []
    return []


def _run(script: Sequence[str]) -> str:
    """One ``RUN`` of a shell script, in exec form so no shell of the builder rewrites it."""
    return f"RUN {json.dumps(['/bin/sh', '-ec', chr(10).join(script)])}"


def _era(exclude_newer: str) -> list[str]:
    """The lines that make uv and pip resolve as of ``exclude_newer``."""
    if not _ISO_DATE.fullmatch(exclude_newer):
        raise ValueError(f"exclude_newer {exclude_newer!r} is not an ISO date (YYYY-MM-DD)")
    moment = exclude_newer if "T" in exclude_newer else f"{exclude_newer}T00:00:00Z"
    moment = moment if moment.endswith("Z") else f"{moment}Z"
    return [f"export UV_EXCLUDE_NEWER={moment} PIP_UPLOADED_PRIOR_TO={moment}"]


def _apt_names(apt: Sequence[str]) -> list[str]:
    """Debian package names, sorted and once each (the recipe is hashed: order must not split
    profiles); a name that is not one is a caller's bug, refused before it reaches a shell."""
    names = sorted(set(apt))
    bad = [name for name in names if not _APT_NAME.fullmatch(name)]
    if bad:
        raise ValueError(f"apt: {bad} are not Debian package names")
    return names


def _apt_build(packages: Sequence[str]) -> str:
    """Install ``packages`` in the build stage and list the shared libraries they depend on."""
    names = " ".join(packages)
    ca = f"if [ -s {CA_FILE} ]; then set -- -o Acquire::https::CAInfo={CA_FILE}; fi"
    return "\n".join(
        [
            ca,
            'apt-get "$@" update',
            'DEBIAN_FRONTEND=noninteractive apt-get "$@" install -y --no-install-recommends '
            + names,
            f"mkdir -p {os.path.dirname(APT_RUNTIME)}",
            f"for p in {names}; do echo $p; apt-cache depends --no-recommends --no-suggests $p "
            "| awk '$1 ~ /Depends:$/ && $2 !~ /^</ {print $2}'; done | sort -u "
            "| while read -r p; do apt-cache show --no-all-versions $p 2>/dev/null "
            f"| grep -qx 'Section: libs' && echo $p || true; done > {APT_RUNTIME}",
            f"echo trajforge: runtime libraries: $(cat {APT_RUNTIME})",
            "rm -rf /var/lib/apt/lists/*",
        ]
    )


def _apt_runtime() -> str:
    """Install in the final stage the shared libraries the build stage listed, if any."""
    return (
        f"if [ -s {APT_RUNTIME} ]; then apt-get update && DEBIAN_FRONTEND=noninteractive "
        f"xargs apt-get install -y --no-install-recommends < {APT_RUNTIME} && "
        f"rm -rf /var/lib/apt/lists/*; fi; rm -rf {os.path.dirname(APT_RUNTIME)}"
    )


def marker(profile_id: str, setup_commit: str) -> bytes:
    """What an image says about itself: the profile it is and the commit it was built at."""
    fields = {"profile_id": profile_id, "setup_commit": setup_commit}
    return json.dumps(fields, sort_keys=True).encode()


def build_context(
    repo_tar: bytes,
    ca_bundle: bytes,
    marker_bytes: bytes,
    deps: Mapping[str, bytes] | None = None,
) -> bytes:
    """The build context as one tar: the repo tree (already under ``repo/``) and trajforge/,
    with the dependency layer's inputs (``dependency_layer.dependency_files``) under
    trajforge/deps/. Every trajforge/ entry has a fixed time and mode, so the same inputs are
    the same layer to Docker's cache, whatever the commit."""
    out = io.BytesIO()
    ours = [("trajforge/ca.crt", ca_bundle), (MARKER_SOURCE, marker_bytes)]
    ours += [(f"trajforge/deps/{path}", content) for path, content in sorted((deps or {}).items())]
    with tarfile.open(fileobj=out, mode="w") as tar:
        with tarfile.open(fileobj=io.BytesIO(repo_tar), mode="r") as repo:
            for member in repo.getmembers():
                tar.addfile(member, repo.extractfile(member) if member.isfile() else None)
        for name, content in ours:
            info = tarfile.TarInfo(name)
            info.size, info.mode, info.mtime = len(content), 0o644, 0
            tar.addfile(info, io.BytesIO(content))
    return out.getvalue()
