"""The ``node --test`` command line of a graded run, built by the grader, never from test_cmd.

What the project asks of node comes from the ``test`` script of its own ``package.json`` (reset
to the task's, so the patch cannot change it), read as validate reads it (the words around
``node ... --test``, through ``npm run NAME`` three deep), and split in two:

- options that load the tests' code (``--import tsx``, ``--require``, ``--loader``, the
  ``--experimental-*`` module switches): the test files' processes get them, through
  NODE_OPTIONS that the grader's reporter sets for them (``trajforge_node_options.json``), so
  none of the project's code runs in the reporter's own process;
- options that choose tests or how many files run at once (``--test-name-pattern``,
  ``--test-only``, ``--test-concurrency``, ``--test-force-exit``): the runner's.

Everything else is left out: reporters and their destinations, time limits (the grader sets
validate's), coverage, watch and inspector switches, shards, and
``--test-isolation``/``--experimental-test-isolation`` (``none`` would run the tests in the
reporter's process: files always run in processes of their own here).
"""

from __future__ import annotations

import re

from trajforge.verifiers.languages.javascript.package_scripts import runner_words

# Loader options, each taking a value, then those that do not: all of them NODE_OPTIONS accepts.
LOADER_WITH_VALUE = frozenset({"-r", "--require", "--import", "--loader", "--experimental-loader",
                               "-C", "--conditions", "--experimental-specifier-resolution",
                               "--experimental-default-type"})  # fmt: skip
LOADER_FLAGS = frozenset({"--experimental-vm-modules", "--experimental-strip-types",
                          "--experimental-transform-types", "--experimental-detect-module",
                          "--no-experimental-detect-module", "--experimental-require-module",
                          "--experimental-json-modules", "--experimental-wasm-modules",
                          "--experimental-import-meta-resolve", "--enable-source-maps",
                          "--no-warnings", "--no-deprecation"})  # fmt: skip
# The runner's own test-choosing options, with a value, then without.
RUNNER_WITH_VALUE = frozenset({"--test-name-pattern", "--test-skip-pattern",
                               "--test-concurrency"})  # fmt: skip
RUNNER_FLAGS = frozenset({"--test-only", "--test-force-exit"})
# Options left out whose value is the next word (not a spec path).
DROPPED_WITH_VALUE = frozenset({"--test-reporter", "--test-reporter-destination", "--test-timeout",
                                "--test-shard", "--test-isolation",
                                "--experimental-test-isolation", "--inspect-port", "--watch-path",
                                "--test-coverage-include", "--test-coverage-exclude", "-e",
                                "--eval", "-p", "--print", "--env-file", "--title",
                                "--test-global-setup"})  # fmt: skip
_NODE_TEST = re.compile(r"\bnode\s+((?:\S+\s+)*?--test\b.*)")  # node [opts] --test [paths]
TIMEOUT_FROM = 20  # node's --test-timeout (validate gives it on node 20 and later)


def project_args(package_json: bytes | None) -> tuple[list[str], list[str], list[str]]:
    """(loader options, runner options, spec paths) of the first ``node ... --test`` in the
    ``test`` script or a script it runs; none when the file or its scripts cannot be read."""
    words = runner_words(package_json, _NODE_TEST)
    loaders: list[str] = []
    runner: list[str] = []
    specs: list[str] = []
    value_of = ""
    for word in words:
        if value_of:
            loaders += [value_of, word] if value_of in LOADER_WITH_VALUE else []
            runner += [value_of, word] if value_of in RUNNER_WITH_VALUE else []
            value_of = ""
            continue
        name = word.split("=", 1)[0]
        if word in LOADER_WITH_VALUE | RUNNER_WITH_VALUE | DROPPED_WITH_VALUE:
            value_of = word
        elif word in LOADER_FLAGS or ("=" in word and name in LOADER_WITH_VALUE):
            loaders.append(word)
        elif word in RUNNER_FLAGS or ("=" in word and name in RUNNER_WITH_VALUE):
            runner.append(word)
        elif not word.startswith(("-", "$")):
            specs.append(word)
    return loaders, runner, specs


def children_options(package_json: bytes | None) -> list[str]:
    """The loader options the test files' processes get (the reporter's NODE_OPTIONS)."""
    return project_args(package_json)[0]


def node_args(
    reporter: str, files: tuple[str, ...], package_json: bytes | None, test_s: int, major: int
) -> list[str]:
    """node's arguments: the reporter preloaded (it takes the records' key before any project
    code runs) and named as the runner's reporter, the project's runner options, a per-test
    limit as validate's (ten tests' worth: node applies it to each file's run too), then
    ``files`` (none: the script's spec paths, else node's own conventions)."""
    _, runner, specs = project_args(package_json)
    limit = [f"--test-timeout={test_s * 10_000}"] if major >= TIMEOUT_FROM else []
    chosen = list(files) if files else specs
    return ["-r", reporter, "--test", f"--test-reporter={reporter}", *runner, *limit, *chosen]
