"""The test command of each JavaScript runner: the full suite, writing the runner's report.

Every command takes test files as trailing arguments (a caller appends them to a task's
stored command to run only those files); a compound command is ``sh -c '... "$@"' runner``,
so the arguments land where the runner reads them. Reports and their formats in
``verifiers/reports/`` (``REPORT_FORMATS``):

  jest, vitest, mocha: their own JSON reporter (nothing to install);
  node (``node --test``): JUnit, one run per file wrapped in a suite named by the file,
      because node's reporters leave the file out of a test's name;
  ava: ``--tap`` (``file <U+203A> title``); tap (node-tap): its own TAP, one subtest per file.

Per-test time limits where the runner has one: jest 24.9+ and vitest ``--testTimeout``, mocha
``--timeout``, node 20+ ``--test-timeout``, ava ``--timeout`` (inactivity), tap ``--timeout``
(per file, seconds).
"""

from __future__ import annotations

import shlex
from collections.abc import Callable, Sequence

from trajforge.generators.languages.base import Detection
from trajforge.schemas.errors import UserError

REPORT_PATH = "/tmp/trajforge-report.json"
MOCHA_STDOUT = "/tmp/trajforge-mocha-stdout"
NODE_ONE_FILE = "/tmp/trajforge-node-file.xml"
JEST_KNOWS_TIMEOUT = (
    """node -e "const [a, b] = require('jest/package.json').version.split('.').map(Number); """
    """process.exit(a > 24 || (a === 24 && b >= 9) ? 0 : 1)" 2>/dev/null"""
)
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
    return build(detection, int(per_test_timeout_s))


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


def _jest(detection: Detection, seconds: int) -> str:
    # --testTimeout came with jest 24.9; an older jest refuses the run for it
    limit = (
        f'{JEST_KNOWS_TIMEOUT} && L="--testTimeout={seconds * 1000}" || L=""; '
        if seconds
        else 'L=""; '
    )
    return _sh(
        f"{limit}exec node_modules/.bin/jest --ci --json --outputFile={REPORT_PATH} "
        '--watchman=false --cacheDirectory=/tmp/jest-cache $L ${1:+--runTestsByPath} "$@"',
        "jest",
    )


def _vitest(detection: Detection, seconds: int) -> str:
    limit = f" --testTimeout={seconds * 1000}" if seconds else ""
    return f"node_modules/.bin/vitest run --reporter=json --outputFile={REPORT_PATH}{limit}"


def _mocha(detection: Detection, seconds: int) -> str:
    # mocha before 9 ignores the output option and prints the JSON: kept as the report when no
    # file was written (the runner's console output then makes it unreadable, a collection
    # error saying so). Files given replace the script's own spec paths.
    limit = f" --timeout {seconds * 1000}" if seconds else ""
    report = f"--reporter json --reporter-options output={REPORT_PATH}"  # mocha 3-11
    options, specs = split_args(detection.runner_args)
    return _sh(
        f"[ $# -gt 0 ] || set -- {_words(specs)}; "
        f'node_modules/.bin/mocha {_words(options)} {report}{limit} "$@" > {MOCHA_STDOUT}; '
        f"rc=$?; cat {MOCHA_STDOUT}; [ -s {REPORT_PATH} ] || cp {MOCHA_STDOUT} {REPORT_PATH}; "
        "exit $rc",
        "mocha",
    )


def _node(detection: Detection, seconds: int) -> str:
    """One ``node --test`` per file with the JUnit reporter, each file's XML inside a suite
    named by the file (its tests' ids start with it). Without files: the script's paths (a
    folder searched by node's naming conventions, a glob matched by find), else the tree's."""
    options, specs = split_args(detection.runner_args)
    typescript = any(loader in option for option in options for loader in _TS_LOADERS)
    limit = f" --test-timeout={seconds * 1000}" if seconds and _major(detection) >= 20 else ""
    escape = "sed -e 's/&/\\&amp;/g' -e 's/</\\&lt;/g' -e 's/\"/\\&quot;/g'"
    strip = "sed -e 's/<?xml[^>]*>//' -e 's#</*testsuites>##g'"
    return _sh(
        f"[ $# -gt 0 ] || {{ IFS=$(printf '\\n+'); IFS=${{IFS%+}}; "
        f"set -- $({_node_find(specs, typescript)}); unset IFS; }}; "
        f"rc=0; echo '<testsuites>' > {REPORT_PATH}; "
        'for f in "$@"; do '
        f"rm -f {NODE_ONE_FILE}; "
        f"node {_words(options)} --test --test-reporter=junit "
        f'--test-reporter-destination={NODE_ONE_FILE}{limit} "$f" || rc=1; '
        f'n=$(printf %s "$f" | {escape}); '
        f'echo "<testsuite name=\\"$n\\" file=\\"$n\\">" >> {REPORT_PATH}; '
        f"[ -f {NODE_ONE_FILE} ] && {strip} {NODE_ONE_FILE} >> {REPORT_PATH}; "
        f"echo '</testsuite>' >> {REPORT_PATH}; done; "
        f"echo '</testsuites>' >> {REPORT_PATH}; exit $rc",
        "node",
    )


def _node_find(specs: Sequence[str], typescript: bool) -> str:
    """find(1) listing the files ``node --test`` would run for ``specs`` (none: the tree)."""
    exts = ("js", "cjs", "mjs", *(("ts", "cts", "mts") if typescript else ()))
    names = [f"*.test.{e}" for e in exts] + [f"*-test.{e}" for e in exts]
    names += [f"*_test.{e}" for e in exts] + [f"test-*.{e}" for e in exts]
    names += [f"test.{e}" for e in exts]
    in_test_dir = " -o ".join(f"-path '*/test/*.{e}'" for e in exts)
    convention = " -o ".join(f"-name {shlex.quote(n)}" for n in names) + f" -o {in_test_dir}"
    prune = "-path '*/node_modules' -prune -o"
    roots: list[str] = []
    globs: list[str] = []
    for spec in specs:
        if any(c in spec for c in "*?["):
            globs.append(spec)
        else:
            roots.append(spec)
    parts = []
    if roots or not globs:
        where = _words([r if r.startswith(("/", ".")) else f"./{r}" for r in roots] or ["."])
        parts.append(f"find {where} {prune} -type f \\( {convention} \\) -print")
    for glob in globs:
        root = glob.split("*", 1)[0].rsplit("/", 1)[0] or "."
        pattern = glob.replace("**/", "")
        pattern = pattern if pattern.startswith(("/", ".")) else f"./{pattern}"
        root = root if root.startswith(("/", ".")) else f"./{root}"
        parts.append(
            f"find {shlex.quote(root)} {prune} -type f -path {shlex.quote(pattern)} -print"
        )
    listing = "; ".join(parts)
    return f"{{ {listing}; }} 2>/dev/null | sed 's#^\\./##' | sort -u"


def _ava(detection: Detection, seconds: int) -> str:
    limit = f" --timeout={seconds}s" if seconds else ""
    return _sh(f'exec node_modules/.bin/ava --tap{limit} "$@" > {REPORT_PATH}', "ava")


def _tap(detection: Detection, seconds: int) -> str:
    limit = f" --timeout={seconds}" if seconds else ""
    return _sh(f'exec node_modules/.bin/tap --reporter=tap{limit} "$@" > {REPORT_PATH}', "tap")


def _major(detection: Detection) -> int:
    return int(detection.runtime) if detection.runtime.isdigit() else 0


def _words(args: Sequence[str]) -> str:
    return " ".join(shlex.quote(a) for a in args)


def _sh(script: str, name: str) -> str:
    """``script`` as one command whose trailing arguments are its ``"$@"``."""
    return f"sh -c {shlex.quote(script)} {name}"


_COMMANDS: dict[str, Callable[[Detection, int], str]] = {
    "jest": _jest,
    "vitest": _vitest,
    "mocha": _mocha,
    "node": _node,
    "ava": _ava,
    "tap": _tap,
}
