"""What an install's log and a package's scripts say, read without Docker: the one-line cause of
a failed npm/yarn/pnpm install (the package, its own error line, no secrets), the scripts a
fan-out test script starts, and the install ladder's off switches and scripts-off rung."""

from __future__ import annotations

import json
import subprocess

import pytest
from trajforge.generators.languages.javascript.detection import detect
from trajforge.generators.languages.javascript.install_cause import install_cause, redact
from trajforge.generators.languages.javascript.recipe import (
    INSTALL_ENV,
    OWN_PREPARE_JS,
    install_ladder,
    render_js_dockerfile,
    rung_ran,
)
from trajforge.generators.languages.javascript.script_fanout import called_scripts

# npm 10, a dependency's postinstall (its output captured in the block)
NPM_DEPENDENCY = """\
+ npm install
npm error code 1
npm error path /repo/node_modules/puppeteer
npm error command failed
npm error command sh -c node install.mjs
npm error Downloading Chrome
npm error Error: getaddrinfo ENOTFOUND storage.googleapis.com
npm error     at GetAddrInfoReqWrap.onlookup [as oncomplete] (node:dns:107:26)
npm error A complete log of this run can be found in: /tmp/.npm/_logs/x-debug-0.log
"""
# npm 9, the project's own prepare (its output printed before the block)
NPM_OWN = """\
> app@1.0.0 prepare
> lefthook install

\x1b[91mError: open /repo/.git/config: ENOENT .git
\x1b[0m
npm ERR! code 1
npm ERR! path /repo
npm ERR! command failed
npm ERR! command sh -c lefthook install
"""
YARN = """\
error /repo/node_modules/cypress: Command failed.
Exit code: 1
Command: node index.js --exec install
Arguments:
Directory: /repo/node_modules/cypress
Output:
Installing Cypress (version: 13.6.0)
Error: connect ECONNREFUSED download.cypress.io:443
"""
PNPM = """\
node_modules/.pnpm/electron@28.0.0/node_modules/electron postinstall$ node install.js
node_modules/.pnpm/electron@28.0.0/node_modules/electron postinstall: RequestError: getaddrinfo EAI_AGAIN github.com
node_modules/.pnpm/electron@28.0.0/node_modules/electron postinstall: Failed
 ELIFECYCLE  Command failed with exit code 1.
"""  # noqa: E501
# pnpm 9 on pnpm 10's settings file, then Docker's classic builder echoing the failing RUN's
# script over several lines (its last line once read as the cause)
PNPM_REFUSED = """\
+ pnpm install --frozen-lockfile
\x1b[91m ERROR\x1b[0m  packages field missing or empty
For help, run: pnpm help install
error: The command '/bin/sh -ec set -x
pnpm install --frozen-lockfile
mkdir -p /tmp/trajforge-out && find . -name node_modules -prune -print0' returned a non-zero code: 1
"""
NPM_404 = """\
npm error code E404
npm error 404 Not Found - GET https://registry.npmjs.org/trajforge-no-such-package-0b6f
npm error 404 'trajforge-no-such-package-0b6f@1.0.0' is not in this registry.
"""


@pytest.mark.parametrize(
    ("log", "cause"),
    [
        (NPM_DEPENDENCY, "puppeteer (node install.mjs): Error: getaddrinfo ENOTFOUND "
         "storage.googleapis.com"),
        (NPM_OWN, "the project's own script (lefthook install): Error: open /repo/.git/config: "
         "ENOENT .git"),
        (YARN, "cypress (node index.js --exec install): Error: connect ECONNREFUSED "
         "download.cypress.io:443"),
        (PNPM, "electron postinstall: RequestError: getaddrinfo EAI_AGAIN github.com"),
        (NPM_404, "E404: 404 Not Found - GET https://registry.npmjs.org/"
         "trajforge-no-such-package-0b6f"),
        (PNPM_REFUSED, "ERROR packages field missing or empty"),
        ("", "the build said nothing"),
    ],
)  # fmt: skip
def test_the_cause_names_the_package_and_its_own_error_line(log, cause):
    assert install_cause(log) == cause


def test_the_cause_is_one_line_without_secrets():
    log = (
        "npm error code E401\nnpm error 401 Unauthorized - GET "
        "https://ci:npm_abcdefghijklmnopqrstuvwxyz0123@npm.corp.example/pkg - token "
        "//npm.corp.example/:_authToken=npm_abcdefghijklmnopqrstuvwxyz0123\n"
    )
    cause = install_cause(log)
    assert "npm_abcdefghij" not in cause and "\n" not in cause
    assert cause.startswith("E401: 401 Unauthorized - GET https://***@npm.corp.example/pkg")
    assert redact("Authorization: Bearer abcdefgh12345678") == "Authorization: Bearer ***"
    assert len(install_cause("npm error code 1\nnpm error " + "x" * 1000)) == 300


SCRIPTS = {
    "test": "",
    "test:unit": "mocha",
    "test:types": "tsc",
    "test:e2e:chrome": "jest",
    "lint": "eslint .",
    "watch-js": "x",
}


@pytest.mark.parametrize(
    ("command", "started"),
    [
        ("run-p --aggregate-output test:*", ["test:unit", "test:types"]),
        ("npm-run-all --max-parallel 2 -p 'test:**' -- --bail", [
            "test:unit", "test:types", "test:e2e:chrome"]),
        ("run-s lint test:unit", ["lint", "test:unit"]),
        ('concurrently -n a,b "npm:test:*" "npm:watch-*"', [
            "test:unit", "test:types", "test:e2e:chrome", "watch-js"]),
        ("pnpm run /^test:(unit|e2e)/", ["test:unit", "test:e2e:chrome"]),
        ("pnpm --parallel /^test:/", ["test:unit", "test:types", "test:e2e:chrome"]),
        ("npm run lint && yarn test:unit", ["lint", "test:unit"]),
        ("run-p nothing:*", []),
    ],
)  # fmt: skip
def test_fan_out_scripts_expand_to_the_scripts_they_start(command, started):
    assert called_scripts(command, SCRIPTS) == started


def test_a_fanned_out_runner_is_detected(tmp_path):
    package = {
        "scripts": {
            "test": "pnpm run /^test:/",
            "test:lint": "eslint .",
            "test:unit": "mocha --require ts-node/register 'test/**/*.ts'",
        },
        "packageManager": "pnpm@8.15.8",
    }
    (tmp_path / "package.json").write_text(json.dumps(package))
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    detection = detect(str(tmp_path))
    assert detection is not None and detection.runner == "mocha"
    assert detection.runner_args == ("--require", "ts-node/register", "test/**/*.ts")


def test_the_ladder_sets_the_switches_and_has_a_scripts_off_rung():
    recipe = render_js_dockerfile("18", "npm", True)
    assert "export PUPPETEER_SKIP_DOWNLOAD=1" in recipe and "HUSKY=0" in recipe
    assert "CYPRESS_INSTALL_BINARY=0" in recipe and "SAUCECTL_INSTALL_BINARY" not in INSTALL_ENV
    ladder = install_ladder("npm", True)
    first, rung = ladder.split("; then ", 1)
    assert "--ignore-scripts" not in first and "npm ci --ignore-scripts" in rung
    assert "YARN_ENABLE_SCRIPTS=0" in install_ladder("yarn-berry", True)
    assert "pnpm install --frozen-lockfile --ignore-scripts" in install_ladder("pnpm", True)
    # the log repeats the Dockerfile's text: only a traced (``+ ``) install says the rung ran
    assert not rung_ran(f'Step 8/20 : RUN ["/bin/sh", "-ec", "{ladder}"]\n+ npm ci\n')
    assert rung_ran("+ npm ci\n\x1b[91m+ npm ci --ignore-scripts\n\x1b[0m")


@pytest.mark.parametrize(
    ("prepare", "kept"),
    [
        ("husky install && tsc -p .", "tsc -p ."),
        ("is-ci || husky install", ""),
        ("npx simple-git-hooks; npm run build", "npm run build"),
        ("lefthook install && node scripts/build.js && node_modules/.bin/husky",
         "node scripts/build.js"),
    ],
)  # fmt: skip
def test_the_own_prepare_drops_hook_installers(tmp_path, prepare, kept):
    (tmp_path / "package.json").write_text(json.dumps({"scripts": {"prepare": prepare}}))
    js = OWN_PREPARE_JS.replace("/repo/package.json", str(tmp_path / "package.json"))
    out = subprocess.run(["node", "-e", js], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == kept
