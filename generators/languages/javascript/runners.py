"""The test command of each JavaScript runner: the full suite, writing the runner's report.

Every command takes test files as trailing arguments (a caller appends them to a task's
stored command to run only those files); a compound command is ``sh -c '... "$@"' runner``,
so the arguments land where the runner reads them. Reports and their formats in
``verifiers/reports/`` (``REPORT_FORMATS``):

  jest, vitest, mocha: their own JSON reporter (nothing to install);
  node (``node --test``): JUnit from ``node_reporter.py``'s reporter, because node's own
      reporters leave the file out of a test's name;
  ava: ``--tap`` (``file <U+203A> title``); tap (node-tap): its own TAP, one subtest per file.

Per-test time limits where the runner has one: jest 24.9+ (an old jest's refused options left
out by its version) and vitest ``--testTimeout``, mocha
``--timeout``, node 20+ ``--test-timeout`` (which bounds each file's run too: ten tests'
worth), ava ``--timeout`` (inactivity), tap ``--timeout``
(per file: ten tests' worth).
"""

from __future__ import annotations

import shlex
from collections.abc import Callable, Sequence

from trajforge.generators.languages.base import Detection
from trajforge.generators.languages.javascript.list_tests import LIST_TESTS_JS, compact
from trajforge.generators.languages.javascript.node_reporter import NODE_REPORTER_JS
from trajforge.schemas.errors import UserError
from trajforge.schemas.js_commands import in_package

REPORT_PATH = "/tmp/trajforge-report.json"
BIN = "node_modules/.bin"
MOCHA_STDOUT = "/tmp/trajforge-mocha-stdout"
NODE_REPORTER = "/tmp/trajforge-node-reporter.cjs"
ONE_FILE = "/tmp/trajforge-one-file"
REPORT_FORMATS = {
    "jest": "jest-json",
    "vitest": "vitest-json",
    "mocha": "mocha-json",
    "node": "junit",
    "ava": "ava-tap",
    "tap": "tap",
}
# Options that take a value (the next word is not a spec path), mocha's and node's.
WITH_VALUE = ("-r", "--require", "-u", "--ui", "--file", "--extension", "--config",
              "--package", "-g", "--grep", "-f", "--fgrep", "--ignore", "--exclude",
              "-s", "--slow", "--retries", "-n", "--node-option", "--opts",
              "--compilers", "-j", "--jobs", "--import", "--loader",
              "--experimental-loader", "--test-name-pattern", "--test-concurrency",
              "--conditions", "-C")  # fmt: skip
_TS_LOADERS = ("tsx", "ts-node", "strip-types", "transform-types")


def suite_command(detection: Detection, per_test_timeout_s: int = 0) -> str:
    """The runner's full-suite command; a UserError naming the runners known otherwise."""
    build = _COMMANDS.get(detection.runner)
    if build is None:
        raise UserError(
            f"javascript: no test command for runner {detection.runner or '(none found)'} yet; "
            f"trajforge runs {', '.join(REPORT_FORMATS)}",
            reason="unsupported_runner",
        )
    if not detection.package_dir:
        return build(detection, int(per_test_timeout_s), BIN)
    return _in_package(detection.package_dir, build(detection, int(per_test_timeout_s), "$B"))


def _in_package(package_dir: str, command: str) -> str:
    """``command`` run in a workspace package's folder: the files given (repository paths) made
    relative to it, its runner from its own node_modules/.bin else the root's (hoisted)."""
    up = "/".join(".." for _ in package_dir.split("/"))
    quoted = shlex.quote(package_dir)
    return _words(
        in_package(
            package_dir,
            "n=$#; "
            f'while [ $n -gt 0 ]; do set -- "$@" "${{1#{quoted}/}}"; shift; n=$((n - 1)); done; '
            f'B={BIN}; [ -d $B ] || B={up}/{BIN}; export B; {command} "$@"',
        )
    )


def split_args(args: Sequence[str]) -> tuple[list[str], list[str]]:
    """A runner's own arguments as (options with their values, spec paths): a run of given
    files drops the spec paths, or the runner would run both."""
    options: list[str] = []
    specs: list[str] = []
    takes_value = False
    for arg in args:
        if takes_value:
            options.append(arg)
            takes_value = False
        elif arg.startswith("-"):
            options.append(arg)
            takes_value = "=" not in arg and arg in WITH_VALUE
        else:
            specs.append(arg)
    return options, specs


def _jest(detection: Detection, seconds: int, bin_dir: str) -> str:
    """jest's JSON report; the options an old jest refuses are given by its version (``--ci``
    and ``--cacheDirectory`` came with jest 20, ``--testTimeout`` with 24.9)."""
    limit = f"f.push('--testTimeout={seconds * 1000}'); " if seconds else ""
    flags = (
        "const [a, b] = require('jest/package.json').version.split('.').map(Number); "
        "const f = []; if (a >= 20) f.push('--ci', '--cacheDirectory=/tmp/jest-cache'); "
        f"if (a > 24 || (a === 24 && b >= 9)) {{ {limit}}} console.log(f.join(' '))"
    )
    return _sh(
        f'L=$(node -e "{flags}" 2>/dev/null); '
        f"exec {bin_dir}/jest --json --outputFile={REPORT_PATH} --watchman=false "
        '$L ${1:+--runTestsByPath} "$@"',
        "jest",
    )


def _vitest(detection: Detection, seconds: int, bin_dir: str) -> str:
    limit = f" --testTimeout={seconds * 1000}" if seconds else ""
    return f"{bin_dir}/vitest run --reporter=json --outputFile={REPORT_PATH}{limit}"


def _mocha(detection: Detection, seconds: int, bin_dir: str) -> str:
    # mocha before 9 ignores the output option and prints the JSON: kept as the report when no
    # file was written (the runner's console output then makes it unreadable, a collection
    # error saying so). Files given replace the script's own spec paths. mocha exits with its
    # count of failures (4 failing tests: exit 4); read as a run with failures (1), as the other
    # runners say it, or a suite with failures would count as one that did not run.
    limit = f" --timeout {seconds * 1000}" if seconds else ""
    report = f"--reporter json --reporter-options output={REPORT_PATH}"  # mocha 3-11
    options, specs = split_args(detection.runner_args)
    return _sh(
        f"[ $# -gt 0 ] || set -- {_words(specs)}; "
        f'{bin_dir}/mocha {_words(options)} {report}{limit} "$@" > {MOCHA_STDOUT}; '
        "rc=$?; if [ $rc -gt 1 ] && [ $rc -lt 128 ]; then rc=1; fi; "
        f"cat {MOCHA_STDOUT}; [ -s {REPORT_PATH} ] || cp {MOCHA_STDOUT} {REPORT_PATH}; "
        "exit $rc",
        "mocha",
    )


def _node(detection: Detection, seconds: int, bin_dir: str) -> str:
    """One ``node --test`` run over the files with ``node_reporter.py``'s reporter, which
    keeps each test's file. Without files: those the script's paths name (a folder searched by
    node's conventions, a glob), else the tree's by convention (``list_tests.py``)."""
    options, specs = split_args(detection.runner_args)
    typescript = any(loader in option for option in options for loader in _TS_LOADERS)
    exts = "js,cjs,mjs" + (",ts,cts,mts" if typescript else "")
    # node applies --test-timeout to each file's run as well: ten tests' worth
    limit = f" --test-timeout={seconds * 10_000}" if seconds and _major(detection) >= 20 else ""
    reporter = shlex.quote(compact(NODE_REPORTER_JS))
    return _sh(
        f"{_listed('node', exts, specs)}"
        f"printf %s {reporter} > {NODE_REPORTER}; "
        f"exec node {_words(options)} --test --test-reporter={NODE_REPORTER} "
        f'--test-reporter-destination={REPORT_PATH}{limit} "$@"',
        "node",
    )


def _listed(mode: str, exts: str, specs: Sequence[str]) -> str:
    """Shell setting "$@" to the test files (``list_tests.py``) when none were given."""
    lister = f"node -e {shlex.quote(compact(LIST_TESTS_JS))} -- {mode} {exts} {_words(specs)}"
    return (
        "[ $# -gt 0 ] || { IFS=$(printf '\\n+'); IFS=${IFS%+}; "
        f"set -- $({lister.strip()}); unset IFS; }}; "
    )


def _ava(detection: Detection, seconds: int, bin_dir: str) -> str:
    """One ``ava --tap`` per file (a single file's titles carry no prefix), each title then
    prefixed with the file and ava's separator, one plan for all; a file without ava tests
    ("No tests found in") reports none."""
    limit = f" --timeout={seconds}s" if seconds else ""
    prefix = (
        'F="$P$f" awk \'/^TAP version/ || /^1\\.\\.[0-9]+/ || / - No tests found in / {next} '
        'match($0, /^(not )?ok [0-9]+ - /) {print substr($0, 1, RLENGTH) ENVIRON["F"] '
        '" \\342\\200\\272 " substr($0, RLENGTH + 1); next} {print}\''
    )
    return _sh(
        f"{_listed('ava', 'js,cjs,mjs', ())}"
        f"{_ROOT_PREFIX}rc=0; echo 'TAP version 13' > {REPORT_PATH}; "
        'for f in "$@"; do '
        f'{bin_dir}/ava --tap{limit} "$f" > {ONE_FILE} || rc=1; '
        f"{prefix} {ONE_FILE} >> {REPORT_PATH}; done; "
        f"echo \"1..$(grep -cE '^(not )?ok ' {REPORT_PATH})\" >> {REPORT_PATH}; exit $rc",
        "ava",
    )


def _tap(detection: Detection, seconds: int, bin_dir: str) -> str:
    """node-tap's TAP; its time limit is per file, so a file gets ten tests' worth."""
    limit = f" --timeout={seconds * 10}" if seconds else ""
    return _sh(
        f'{bin_dir}/tap --reporter=tap{limit} "$@" > {ONE_FILE}; rc=$?; '
        f"{_PREFIX_TOP} {ONE_FILE} > {REPORT_PATH}; exit $rc",
        "tap",
    )


# P: the working folder relative to /repo with a slash ("" at the root), for ids from the root.
_ROOT_PREFIX = "P=${PWD#/repo}; P=${P#/}; P=${P:+$P/}; "
# node-tap's top-level points are its files: prefixed with P.
_PREFIX_TOP = (
    _ROOT_PREFIX + 'P="$P" awk \'/^# Subtest: / {print "# Subtest: " ENVIRON["P"] '
    "substr($0, 12); next} match($0, /^(not )?ok [0-9]+ - /) {print substr($0, 1, RLENGTH) "
    'ENVIRON["P"] substr($0, RLENGTH + 1); next} {print}\''
)


def _major(detection: Detection) -> int:
    return int(detection.runtime) if detection.runtime.isdigit() else 0


def _words(args: Sequence[str]) -> str:
    return " ".join(shlex.quote(a) for a in args)


def _sh(script: str, name: str) -> str:
    """``script`` as one command whose trailing arguments are its ``"$@"``."""
    return f"sh -c {shlex.quote(script)} {name}"


_COMMANDS: dict[str, Callable[[Detection, int, str], str]] = {
    "jest": _jest,
    "vitest": _vitest,
    "mocha": _mocha,
    "node": _node,
    "ava": _ava,
    "tap": _tap,
}
