"""The mocha command line of a graded run, built by the grader, never from the task's test_cmd.

What the project asks of mocha comes from the ``test`` script of its own ``package.json`` (reset
to the task's, so the patch cannot change it), but only the options that choose and load tests
(spec paths, ``--require``, ``--ui``, ``--recursive``...); whatever would replace the grader's
reporter or time limit, start other processes (node flags, ``--parallel``), stop early
(``--bail``) or read another configuration file (``--config``, ``--package``, ``--opts``) is left
out. The project's ``.mocharc*`` and package.json ``mocha`` key are read by mocha itself (both
reset and read-only to the tests).
"""

from __future__ import annotations

import re

from trajforge.verifiers.languages.javascript.package_scripts import runner_words

# Options kept, each taking a value, then those that do not.
WITH_VALUE = frozenset({"-r", "--require", "-u", "--ui", "--extension", "--file", "--ignore",
                        "--exclude", "-g", "--grep", "-f", "--fgrep", "--retries", "-s",
                        "--slow"})  # fmt: skip
FLAGS = frozenset({"--recursive", "--check-leaks", "--exit", "--invert", "-i", "--sort", "-S",
                   "--async-only", "-A", "--full-trace", "--forbid-only", "--forbid-pending",
                   "--delay"})  # fmt: skip
# Options left out whose value is the next word (not a spec path).
DROPPED_WITH_VALUE = frozenset({"-R", "--reporter", "-O", "--reporter-option",
                                "--reporter-options", "-t", "--timeout", "--config", "--package",
                                "--opts", "-n", "--node-option", "-j", "--jobs", "--watch-files",
                                "--watch-ignore", "--compilers", "--inspect-port"})  # fmt: skip
_MOCHA = re.compile(r"(?:^|[\s/])_?mocha(?=\s|$)(.*)", re.S)


def project_args(package_json: bytes | None) -> tuple[list[str], list[str]]:
    """(options, spec paths) of the first mocha command in the ``test`` script, or in the
    script it runs (``npm run test-ci``); none when the file or the scripts cannot be read."""
    words = runner_words(package_json, _MOCHA)
    options: list[str] = []
    specs: list[str] = []
    value_of = ""
    for word in words:
        if value_of:
            options += [value_of, word] if value_of in WITH_VALUE else []
            value_of = ""
        elif word in WITH_VALUE or word in DROPPED_WITH_VALUE:
            value_of = word
        elif word in FLAGS or word.split("=", 1)[0] in WITH_VALUE:
            options.append(word)
        elif not word.startswith(("-", "$")):
            specs.append(word)
    return options, specs


def mocha_args(
    reporter: str, program: str, files: tuple[str, ...], package_json: bytes | None, test_s: int
) -> list[str]:
    """node's arguments: the reporter preloaded (it takes the records' key before any project
    code runs) and named as mocha's reporter, the project's options, a per-test time limit,
    then ``files`` (none: the project's own spec paths, else mocha's configuration decides)."""
    options, specs = project_args(package_json)
    chosen = list(files) if files else specs
    return ["-r", reporter, program, *options, "--reporter", reporter,
            "--timeout", str(test_s * 1000), *chosen]  # fmt: skip
