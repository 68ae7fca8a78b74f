"""A Go environment's recipe: the Dockerfile its image is built from.

The same shape as the other languages': a ``build`` stage with the network and the CA bundle
(``SSL_CERT_FILE``, which the go command reads) fetches the toolchain when the project's Go is
newer than Debian's (``toolchain.py``), downloads every module's dependencies (``go mod
download``; nothing for a vendored project) and compiles the tests once (``go test -vet=off
-run '^$'``, as the runs build them), so the build cache is warm; a pre-module tree (no go.mod)
gets one there (``go mod init`` with its import comment's path, ``go mod tidy``), kept beside
the caches; only ``/go`` (the toolchain, the module cache, the build cache) is copied into the
final image, whose go command has ``GOPROXY=off``: a test run needs no network. The repository
itself is not kept: a run puts its tree at ``/repo``. A package whose tests do not compile at
the setup commit does not fail the build (its run says so, per package).

The first comment lines name the modules (``# go modules: <path>=<folder> ...``): the run's
report names packages by import path, which the reading maps to repository folders
(``modules_in_recipe``).
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Sequence

from trajforge.generators.environments.recipe import CA_FILE, ENV_MARKER, MARKER_SOURCE
from trajforge.generators.environments.recipe import _run as run_step
from trajforge.generators.languages.base import Detection
from trajforge.generators.languages.go.base_image import GO_BASE
from trajforge.generators.languages.go.detection import (
    PRE_MODULE,
    Module,
    modules,
)
from trajforge.generators.languages.go.toolchain import DEBIAN_GO, Toolchain
from trajforge.verifiers.languages.go.runs import PRE_MODULE_FILES

GO_RECIPE_FORMAT = "go-dockerfile-v1"
GOPATH = "/go"
TOOLCHAIN_LINK = f"{GOPATH}/toolchain"  # -> the fetched toolchain's folder in the module cache
GO_ENV = {
    "GOPATH": GOPATH,
    "GOMODCACHE": f"{GOPATH}/pkg/mod",
    "GOCACHE": f"{GOPATH}/cache",
    "HOME": "/tmp",
    "LANG": "C.UTF-8",
    "CGO_ENABLED": "1",  # the base image has gcc and libc6-dev
    "GOTELEMETRY": "off",
}
MODULES_LINE = re.compile(r"^# go modules: (.*)$", re.MULTILINE)
CA_PRELUDE = f"if [ -s {CA_FILE} ]; then export SSL_CERT_FILE={CA_FILE}; fi"
WARM_TIMEOUT = "10m"  # the warm-up's test binaries run no test; a hanging TestMain is cut


def recipe(detection: Detection, extra: Sequence[str] = ()) -> str:
    """The project's Dockerfile, from what detection found."""
    toolchain = Toolchain(detection.runtime, "")
    return render_go_dockerfile(toolchain, modules(detection), detection.package_manager, extra)


def render_go_dockerfile(
    toolchain: Toolchain, found: Sequence[Module], manager: str, extra: Sequence[str] = ()
) -> str:
    """The Dockerfile for a Go project: a pure function of its Go, its modules, whether they
    come from (``go``: the proxy; ``go-vendor``: ``vendor/``; ``go-work``: a workspace, whose
    go command refuses any ``-mod`` but readonly, and whose ``go mod download`` looks for the
    workspace's own modules on the proxy: its warm-up downloads what the tests need) and extra
    build steps."""
    mod = {"go-vendor": "-mod=vendor", "go-work": ""}.get(manager, "-mod=mod")
    flags = {"GOFLAGS": mod} if mod else {}
    build_env = {**GO_ENV, **flags, "GOTOOLCHAIN": "local"}
    final_env = {
        **GO_ENV,
        **flags,
        "GOTOOLCHAIN": f"go{toolchain.version}" if toolchain.fetched else "local",
        "GOPROXY": "off",
        "GOSUMDB": "off",  # go.sum lines the cache already verified; nothing to ask
        "GONOSUMDB": "*",
    }
    fetch = ["go version"]
    link = []
    if toolchain.fetched:  # Debian's go (1.19) predates GOTOOLCHAIN: fetch the module itself
        module = f"golang.org/toolchain@{toolchain.module}.linux-$(go env GOARCH)"
        fetch = [
            f"cd /tmp && go mod download -json {module} > /dev/null",
            f"ln -s {GOPATH}/pkg/mod/{module} {TOOLCHAIN_LINK}",
            # a module zip keeps no modes: the go command of 1.21+ marks a toolchain's programs
            # executable when it switches to one; Debian's does not know toolchains
            f"find {TOOLCHAIN_LINK}/bin {TOOLCHAIN_LINK}/pkg/tool -type f -exec chmod a+x {{}} +",
            f"ln -sf {TOOLCHAIN_LINK}/bin/go /usr/local/bin/go",
            "hash -r; go version",
        ]
        link = [run_step([f"ln -sf {TOOLCHAIN_LINK}/bin/go /usr/local/bin/go", "go version"])]
    download = [] if manager in ("go-vendor", "go-work") else [
        f"(cd {shlex.quote(m.folder)} && go mod download)" for m in found
    ]  # fmt: skip
    if manager == PRE_MODULE:  # GOPATH era: the module is made here, its requirements resolved
        download = [
            f"go mod init {shlex.quote(found[0].path)}",
            "go mod tidy -e",
            f"touch go.sum && mkdir -p {PRE_MODULE_FILES} && cp go.mod go.sum {PRE_MODULE_FILES}/",
        ]
    warm = [
        f"(cd {shlex.quote(m.folder)} && go test -count=1 -vet=off -run '^$' "
        f"-timeout {WARM_TIMEOUT} ./... > /dev/null 2>&1) "
        f"|| echo 'trajforge: some tests of {m.folder} do not compile'"
        for m in found
    ]
    build_vars = " ".join(f"{k}={v}" for k, v in build_env.items())
    final_vars = " ".join(f"{k}={v}" for k, v in final_env.items())
    names = " ".join(f"{m.path}={m.folder}" for m in found)
    return "\n".join(
        [
            f"# trajforge environment recipe ({GO_RECIPE_FORMAT}), go {toolchain.version}"
            + (" (Debian's)" if toolchain.version == DEBIAN_GO else " (fetched)"),
            f"# go modules: {names}",
            "# Build context: repo/ (the repository at the setup commit), trajforge/ca.crt (a CA",
            "# bundle, or an empty file), trajforge/env.json (a marker). Build args: PROFILE_ID,",
            "# SETUP_COMMIT.",
            f"ARG BASE={GO_BASE}",
            "FROM ${BASE} AS build",
            f"ENV {build_vars}",
            "COPY trajforge/ca.crt " + CA_FILE,
            run_step([CA_PRELUDE, "set -x", *fetch]),
            "COPY repo/ /repo/",
            "WORKDIR /repo",
            run_step(
                [CA_PRELUDE, "set -x", *download, *warm, *extra, f"chmod -R a+rwX {GOPATH}/cache"]
            ),
            "",
            "FROM ${BASE}",
            "ARG PROFILE_ID=",
            "ARG SETUP_COMMIT=",
            f"ENV {final_vars}",
            f"COPY --from=build {GOPATH}/ {GOPATH}/",
            *link,
            f"COPY {MARKER_SOURCE} {ENV_MARKER}",
            "WORKDIR /repo",
            'LABEL trajforge.profile_id="${PROFILE_ID}" trajforge.setup_commit="${SETUP_COMMIT}"',
            "",
        ]
    )


def modules_in_recipe(recipe: str) -> dict[str, str]:
    """``{module path: folder}`` from a recipe's modules line; {} when it has none."""
    match = MODULES_LINE.search(recipe)
    if match is None:
        return {}
    pairs = (word.rpartition("=") for word in match.group(1).split())
    return {path: folder for path, _, folder in pairs if path}
