"""A JavaScript/TypeScript environment's recipe: the Dockerfile its image is built from.

The same shape as ``recipe.py``'s: the install runs in a ``build`` stage with the network and
the CA bundle, from the lock file when there is one (``npm ci``, ``yarn --frozen-lockfile`` /
``--immutable``, ``pnpm --frozen-lockfile``), and only what the install made (every
``node_modules`` folder, and files a ``prepare`` script wrote) is copied into the final image,
so no test run needs the network, nor the package manager (runners run from
``node_modules/.bin``). The build context is ``recipe.py``'s (``build_context``),
and the image is built and labelled by ``image.py:build_recipe`` like a Python profile's.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Sequence

from trajforge.generators.environments.recipe import (
    CA_FILE,
    ENV_MARKER,
    MARKER_SOURCE,
    STAMP,
)
from trajforge.generators.environments.recipe import _run as run_step
from trajforge.generators.languages.javascript.base_image import node_image_tag

JS_RECIPE_FORMAT = "js-dockerfile-v1"
OUT = "/tmp/trajforge-out"  # the build stage's node_modules and generated files, for the copy
NODE_ENV = {
    "PATH": "/repo/node_modules/.bin:/usr/local/bin:/usr/bin:/bin",
    "HOME": "/tmp",
    "LANG": "C.UTF-8",
    "CI": "1",  # runners stop watching and asking; installs never prompt
    "NODE_OPTIONS": "--max-old-space-size=3072",
    "npm_config_update_notifier": "false",
    "npm_config_fund": "false",
    "npm_config_audit": "false",
    "npm_config_color": "false",  # a failed install's cause is read from the log
    "FORCE_COLOR": "0",
}
# The CA bundle for every client that reads one, only when one was given (a non-empty file):
# node itself, npm and pnpm (npm_config_cafile), yarn classic (YARN_CAFILE).
CA_PRELUDE = (
    f"if [ -s {CA_FILE} ]; then export NODE_EXTRA_CA_CERTS={CA_FILE} "
    f"npm_config_cafile={CA_FILE} YARN_CAFILE={CA_FILE}; fi"
)
# yarn berry's setting by its major (2 and 3: caFilePath; 4 renamed it httpsCaFilePath and
# refuses the old name, from the environment too, and classic's YARN_CAFILE as well).
BERRY_CA = (
    f'unset YARN_CAFILE; if [ -s {CA_FILE} ]; then case "$(yarn --version)" in [23].*) '
    f"export YARN_CA_FILE_PATH={CA_FILE};; *) export YARN_HTTPS_CA_FILE_PATH={CA_FILE};; esac; fi"
)
# What each package manager installs from (lock file) or without one; the log names which.
# ``{no_scripts}`` is where the ignore-scripts rung's flag goes ("" on the first try).
INSTALLS = {
    ("npm", True): "npm ci{no_scripts} || {{ echo 'trajforge: npm ci refused the lock file; "
    "npm install'; npm install{no_scripts}; }}",
    ("npm", False): "npm install{no_scripts}",
    ("yarn", True): "yarn install --frozen-lockfile --non-interactive{no_scripts}",
    ("yarn", False): "yarn install --non-interactive{no_scripts}",
    # berry installs into node_modules even where .yarnrc.yml asks for Plug'n'Play: the final
    # image has no yarn to resolve through, and runners run from node_modules/.bin (the lock
    # file does not depend on the linker, so --immutable holds); berry has no --ignore-scripts
    # flag, only YARN_ENABLE_SCRIPTS=0 (the rung's prefix below)
    ("yarn-berry", True): f"{BERRY_CA}; YARN_NODE_LINKER=node-modules yarn install --immutable",
    ("yarn-berry", False): f"{BERRY_CA}; YARN_NODE_LINKER=node-modules yarn install --no-immutable",
    ("pnpm", True): "pnpm install --frozen-lockfile{no_scripts}",
    ("pnpm", False): "pnpm install --no-frozen-lockfile{no_scripts}",  # frozen is pnpm's CI default
}
# What the install runs with: the off switches of installers that download a binary from
# their own host (the build has the registry, a sandboxed suite never drives a browser) and of
# git hook installers (the build context has no .git, and no hook ever runs in a sandbox).
# Hooks are skipped rather than a ``git init`` of the snapshot: the image has no git, and an
# installer skipped by its own switch still lets the rest of a ``prepare`` run.
# (SAUCECTL_INSTALL_BINARY is not one: it names where saucectl downloads from, not whether.)
INSTALL_ENV = {
    "PUPPETEER_SKIP_DOWNLOAD": "1",  # puppeteer 19+: Chrome for Testing
    "PUPPETEER_SKIP_CHROMIUM_DOWNLOAD": "1",  # puppeteer before 19: Chromium
    "PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD": "1",  # playwright's browsers (an install script)
    "CYPRESS_INSTALL_BINARY": "0",  # cypress's Electron app
    "ELECTRON_SKIP_BINARY_DOWNLOAD": "1",  # electron's prebuilt binary
    "SENTRYCLI_SKIP_DOWNLOAD": "1",  # @sentry/cli's native binary
    "CHROMEDRIVER_SKIP_DOWNLOAD": "true",  # chromedriver's driver binary
    "GECKODRIVER_SKIP_DOWNLOAD": "true",  # geckodriver's driver binary
    "HUSKY": "0",  # husky 5+ (``husky install``, ``husky``): skips installing hooks
    "HUSKY_SKIP_INSTALL": "1",  # husky 4 (its own postinstall)
    "LEFTHOOK": "0",  # lefthook's postinstall and ``lefthook install``
    "SKIP_SIMPLE_GIT_HOOKS": "1",  # simple-git-hooks' postinstall
    "OPENCOLLECTIVE_HIDE": "1",  # donation banners: noise in the log the cause is read from
    "ADBLOCK": "1",
}
# The rung after a failed install: the same install with scripts off (no dependency's
# postinstall runs), then the project's own ``prepare`` (what an install runs for the project
# itself: usually its build) split on ``&&``/``||``/``;`` without the hook installers' parts.
NO_SCRIPTS = {"yarn-berry": ""}  # berry: by YARN_ENABLE_SCRIPTS=0 instead of a flag
HOOK_INSTALLERS = ("husky", "lefthook", "simple-git-hooks", "yorkie", "is-ci", "pinst")
OWN_PREPARE_JS = (
    "const s = (require('/repo/package.json').scripts || {}).prepare || ''; "
    r"const hook = /(^|[\s/])(" + "|".join(HOOK_INSTALLERS) + r")(\s|$)/; "
    r"console.log(String(s).split(/&&|\|\||;/).map(x => x.trim())"
    ".filter(x => x && !hook.test(x)).join(' && '))"
)
DEFAULT_SPECS = {"yarn": "yarn@1", "pnpm": "pnpm@8"}
_EXACT = re.compile(r"(?:npm|yarn|pnpm)@\d+\.\d+\.\d+(?:-[0-9A-Za-z.]+)?")
_MAJOR = re.compile(r"(?:yarn|pnpm)@\d+")
_TRACED = re.compile(r"(?:\x1b\[[0-9;]*m)*\+ ")  # a ``set -x`` line, maybe in the builder's colour
# Copy out every node_modules folder (workspaces have one per package) and the files the
# install wrote elsewhere in the tree (a ``prepare`` build), keeping their paths; not a lock
# file the install wrote (the tree under test has its own, or none).
CARRY = (
    f"mkdir -p {OUT} && find . -name node_modules -type d -prune -print0 "
    f"| xargs -0 -r cp -a --parents -t {OUT} && find . -name node_modules -prune "
    "-o -name .git -prune -o -name package-lock.json -o -name yarn.lock -o -name pnpm-lock.yaml "
    f"-o -type f -newer {STAMP} -print0 | xargs -0 -r cp -a --parents -t {OUT}"
)


def manager_setup(manager: str, manager_spec: str) -> str:
    """Shell that makes ``manager`` available: npm is Debian's; yarn and pnpm come from the npm
    registry at the project's pin (``packageManager``), else a default (pnpm's major by the
    lock file's version). Berry is ``@yarnpkg/cli-dist``, which follows a committed
    ``yarnPath`` as the project's own yarn would. (corepack is not used: the newest needs
    Node 22, and older ones cannot check the registry's current signatures.)"""
    if manager == "npm":
        return "npm --version"
    version = manager_spec.partition("@")[2]
    if manager == "yarn-berry":
        package = "@yarnpkg/cli-dist" + (f"@{version}" if version[:1] not in ("", "1") else "")
    else:
        package = manager_spec or DEFAULT_SPECS[manager]
    return f"npm install -g {package} && {manager.split('-')[0]} --version"


def render_js_dockerfile(
    node: str,
    manager: str,
    locked: bool,
    manager_spec: str = "",
    extra: Sequence[str] = (),
) -> str:
    """The Dockerfile for a JS/TS project: a pure function of its Node major, package manager,
    whether a lock file decides the install, the manager's version (an exact pin, or a major)
    and extra steps (a reporter the project lacks). ``manager_spec`` is refused unless it is
    name@x.y.z or name@major: it reaches a shell."""
    if manager_spec and not _plain_spec(manager_spec):
        raise ValueError(f"packageManager {manager_spec!r} is not name@version")
    script = [CA_PRELUDE, _install_env(), f"touch {STAMP}", "set -x",
              install_ladder(manager, locked), *extra, CARRY]  # fmt: skip
    env = " ".join(f"{key}={value}" for key, value in NODE_ENV.items())
    return "\n".join(
        [
            f"# trajforge environment recipe ({JS_RECIPE_FORMAT}). Build context: repo/ (the",
            "# repository at the setup commit), trajforge/ca.crt (a CA bundle, or an empty",
            "# file), trajforge/env.json (a marker). Build args: PROFILE_ID, SETUP_COMMIT.",
            f"ARG BASE={node_image_tag(node)}",
            "FROM ${BASE} AS build",
            f"ENV {env}",
            "COPY trajforge/ca.crt " + CA_FILE,
            run_step([CA_PRELUDE, "set -x", manager_setup(manager, manager_spec)]),
            "COPY repo/ /repo/",
            "WORKDIR /repo",
            run_step(script),
            "",
            "FROM ${BASE}",
            "ARG PROFILE_ID=",
            "ARG SETUP_COMMIT=",
            f"ENV {env}",
            f"COPY --from=build {OUT}/ /repo/",
            f"COPY {MARKER_SOURCE} {ENV_MARKER}",
            "WORKDIR /repo",
            'LABEL trajforge.profile_id="${PROFILE_ID}" trajforge.setup_commit="${SETUP_COMMIT}"',
            "",
        ]
    )


def install_ladder(manager: str, locked: bool) -> str:
    """The install, and when it fails, the rung that installs with scripts off and then runs
    only the project's own ``prepare`` without its hook installers (``OWN_PREPARE_JS``)."""
    first = INSTALLS[(manager, locked)].format(no_scripts="")
    flag = NO_SCRIPTS.get(manager, " --ignore-scripts")
    again = INSTALLS[(manager, locked)].format(no_scripts=flag)
    if manager == "yarn-berry":
        again = f"export YARN_ENABLE_SCRIPTS=0; {again}"
    own = f'P=$(node -e {shlex.quote(OWN_PREPARE_JS)}); if [ -n "$P" ]; then sh -ec "$P"; fi'
    return (
        f"if ! {{ {first}; }}; then echo 'trajforge: the install failed; again with scripts "
        f"off, then the own prepare without hook installers'; {{ {again}; }}; {own}; fi"
    )


def rung_ran(log: str) -> bool:
    """Whether a build's log shows the scripts-off rung run (its traced install, ``set -x``'s
    ``+ `` lines; the Dockerfile's own text, which the log repeats, has no such line)."""
    return any(
        _TRACED.match(line) and ("--ignore-scripts" in line or "YARN_ENABLE_SCRIPTS=0" in line)
        for line in log.splitlines()
    )


def _install_env() -> str:
    return "export " + " ".join(f"{key}={value}" for key, value in INSTALL_ENV.items())


def _plain_spec(spec: str) -> bool:
    return bool(_EXACT.fullmatch(spec) or _MAJOR.fullmatch(spec))
