"""Go's probe of a reuse: a site's tree loaded offline in another profile's Go image.

A Go image is a toolchain, a module cache and a build cache. It serves another commit of the
repository when that commit's modules are the donor's (the recipe's modules line maps the
report's import paths to folders, and the test command runs those folders), its build list is
all in the cache (the image's go command has ``GOPROXY=off``: nothing can be downloaded), and
its toolchain is the one the commit's go.mod accepts (the go command refuses a go.mod that needs
a newer Go). ``go list -deps -test ./...`` in each module resolves every module and loads every
package the tests import, as ``go test`` does before it builds: any error refuses the reuse, so
a package that would build in the site's own image builds here. A pre-module tree (GOPATH era)
is tested with the go.mod its own build made: never reused. The clean run itself is what the
reuse audit compares (``environments/reuse.py``).
"""

from __future__ import annotations

import dataclasses
import shlex

from trajforge.generators.languages.go.detection import PRE_MODULE
from trajforge.generators.languages.go.recipe import modules_in_recipe
from trajforge.schemas.env_profile import EnvProfile
from trajforge.schemas.params import Params
from trajforge.verifiers.sandbox.base import Sandbox, SessionSpec
from trajforge.verifiers.sandbox.git_tree import archive

# one line per package with tests: what the probe counts as collected
TESTED = "{{if or .TestGoFiles .XTestGoFiles}}{{.ImportPath}}{{end}}"
PROGRESS = ("go: downloading ", "go: finding ", "go: extracting ")  # what it says before failing
MAX_WHY = 300  # characters of the go command's first error kept in the refusal


def probe_reuse(
    sandbox: Sandbox,
    donor: EnvProfile,
    site: EnvProfile,
    repo_path: str,
    commit: str,
    params: Params,
) -> tuple[EnvProfile | None, int, str]:
    """(donor's profile testing ``commit`` with the site's test command, packages with tests,
    "") when every module loads offline in the donor's image; else (None, 0, why in one line)."""
    why = mismatch(donor, site)
    if why:
        return None, 0, why
    folders = sorted(set(modules_in_recipe(site.recipe).values()))
    script = "; ".join(
        f"(cd {shlex.quote(folder)} && go list -deps -test ./... > /dev/null "
        f"&& go list -f '{TESTED}' ./... >> /tmp/tested) || exit 1"
        for folder in folders
    )
    timeout_s = params.validate.test_timeout_s
    tree = archive(repo_path, commit, prefix="repo/")
    with sandbox.session(SessionSpec(image=donor.image)) as session:
        session.put_archive(tree, dest="/")
        command = f"timeout -k 5 {int(timeout_s)} sh -c {shlex.quote(script)}"
        result = session.exec(command, timeout_s=timeout_s + 30)
        tested = (session.read_file("/tmp/tested") or b"").decode("utf-8", "replace")
    if result.timed_out or result.exit_code in (124, 137):
        return None, 0, "loading the packages offline timed out"
    if result.exit_code != 0:
        return None, 0, f"the go command cannot load it offline: {first_error(result.output)}"
    packages = len([line for line in tested.splitlines() if line.strip()])
    if packages == 0:
        return None, 0, "no package has tests"
    return dataclasses.replace(donor, test_cmd=site.test_cmd), packages, ""


def mismatch(donor: EnvProfile, site: EnvProfile) -> str:
    """Why the donor's image cannot run the site's modules at all, before any container; ""."""
    if PRE_MODULE in (site.install_set, donor.install_set):
        return "a pre-module tree is tested with the go.mod its own build makes"
    if site.install_set != donor.install_set:
        return f"its modules come from {site.install_set}, the donor's from {donor.install_set}"
    if modules_in_recipe(site.recipe) != modules_in_recipe(donor.recipe):
        return "its modules (paths and folders) are not the donor's"
    if site.test_cmd != donor.test_cmd:
        return "its test command is not the donor's"
    return ""


def first_error(output: str) -> str:
    """The go command's first error line (its progress lines skipped), cut short."""
    lines = [line.strip() for line in output.splitlines() if line.strip()]
    errors = [line for line in lines if not line.startswith(PROGRESS)]
    return (errors[0] if errors else "no output")[:MAX_WHY]
