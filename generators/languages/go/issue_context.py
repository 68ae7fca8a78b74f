"""What an issue writer may see of a Go task: its tests' source and failures.

A Go test id is ``<package dir>::<TestName>[/<subtest>...]`` (``verifiers/languages/go/
test_events.py``), or, as imported datasets spell it, ``TestName/sub`` with no package. Its
source is the ``func TestName`` in that package's ``*_test.go`` files at the task's tree (every
test file of the tree when the id names no package), read with tree-sitter-go as inject reads
code. Its failure is the
``--- FAIL: TestName/sub`` block of ``go test -v`` (or, from ``go test -json``, that test's
output events): the lines the test printed before its verdict (``wrap_test.go:12: got ...``) and
those indented below it, without a panic's goroutine traces.
"""

from __future__ import annotations

import json
import posixpath
import re
from collections.abc import Sequence

import tree_sitter
from trajforge.generators.languages.base import IssuePrompt, IssueText
from trajforge.generators.languages.go.syntax import parse
from trajforge.verifiers.languages.go.test_events import SEPARATOR
from trajforge.verifiers.languages.go.test_events import package_dir as package_of
from trajforge.verifiers.sandbox.git_tree import git, read_file_at

GO_COMMON = frozenset(
    {
        "func", "return", "nil", "true", "false", "string", "int", "int64", "float64", "bool",
        "byte", "rune", "error", "err", "errors", "testing", "Errorf", "Fatalf", "Fatal", "Error",
        "Run", "Helper", "Parallel", "Skip", "Logf", "Log", "assert", "require", "Equal",
        "NoError", "reflect", "DeepEqual", "fmt", "Sprintf", "Sprint", "want", "got", "len",
        "make", "append", "range", "struct", "interface", "package", "import", "var", "const",
        "type", "defer", "tests", "name", "cmp", "Diff", "context", "Background", "ctx",
    }
)  # fmt: skip
_FUNC = re.compile(r"\bfunc\s+(?:\(\s*\w*\s*\*?\s*(\w+)[^)]*\)\s*)?(\w+)")
_TYPE = re.compile(r"\btype\s+(\w+)")
_HUNK = re.compile(r"^@@ [^@]* @@ ?(.*)$", re.MULTILINE)
# Go's string and rune literals: prose, not a name the code uses
_GO_STRING = re.compile(r"`[^`]*`|\"(?:[^\"\\\n]|\\.)*\"|'(?:[^'\\\n]|\\.)*'")
_COMMENT = re.compile(r"//[^\n]*")
_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
_VERDICT = re.compile(r"^(\s*)--- (FAIL|PASS|SKIP): (\S+)(?: \(.*\))?\s*$")
_RUN = re.compile(r"^\s*=== (?:RUN|CONT|PAUSE|NAME)\s+(\S+)\s*$")
_TRACE = re.compile(
    r"^(?:goroutine \d+ \[|\t\S+\.go:\d+|\S+\(.*\)$|created by |exit status \d+$|FAIL\s|ok\s)"
)
_CHECK = re.compile(r"^(?:t\.(?:Error|Errorf|Fatal|Fatalf)\(|assert\.|require\.)")


def package_dir(test_id: str) -> str | None:
    """``internal/calc::TestAdd/neg`` -> ``internal/calc``; ``TestAdd`` (no package) -> None."""
    return package_of(test_id) if SEPARATOR in test_id else None


def test_path(test_id: str) -> str:
    """``internal/calc::TestAdd/neg`` -> ``TestAdd/neg`` (what ``go test`` calls it)."""
    return test_id.rsplit(SEPARATOR, 1)[-1]


def test_function(test_id: str) -> str:
    """``internal/calc::TestAdd/neg`` -> ``TestAdd``: the function that runs it."""
    return test_path(test_id).split("/", 1)[0]


def _test_files(repo_path: str, tree: str, directory: str | None) -> list[str]:
    """The ``*_test.go`` files of one package dir at the tree (of the whole tree for None)."""
    if directory is None:
        listing = git(repo_path, "ls-tree", "-r", "-z", "--name-only", tree)
    else:
        where = [] if directory in ("", ".") else [directory.rstrip("/") + "/"]
        listing = git(repo_path, "ls-tree", "-z", "--name-only", tree, *where)
    paths = listing.decode("utf-8", "surrogateescape").split("\0")
    return sorted(p for p in paths if p.endswith("_test.go"))


def _functions(source: bytes) -> dict[str, list[tree_sitter.Node]]:
    found: dict[str, list[tree_sitter.Node]] = {}
    for node in parse(source).root_node.named_children:
        name = node.child_by_field_name("name") if node.type == "function_declaration" else None
        if name is not None and name.text:
            found.setdefault(name.text.decode("utf-8", "replace"), []).append(node)
    return found


def go_test_sources(
    repo_path: str, tree: str, test_ids: Sequence[str], max_lines: int
) -> dict[str, str]:
    """Each test's ``func`` (its first ``max_lines``), when exactly one in its package is."""
    files: dict[str | None, list[tuple[bytes, dict[str, list[tree_sitter.Node]]]]] = {}
    sources: dict[str, str] = {}
    for test_id in test_ids:
        directory = package_dir(test_id)
        if directory not in files:
            files[directory] = []
            try:
                paths = _test_files(repo_path, tree, directory)
            except Exception:  # no such tree or folder: no source shown
                paths = []
            for path in paths:
                try:
                    data = read_file_at(repo_path, tree, path).encode("utf-8", "surrogateescape")
                except Exception:
                    continue
                files[directory].append((data, _functions(data)))
        name = test_function(test_id)
        found = [(data, node) for data, funcs in files[directory] for node in funcs.get(name, [])]
        if len(found) != 1:
            continue
        data, node = found[0]
        text = data[node.start_byte : node.end_byte].decode("utf-8", "replace")
        sources[test_id] = "\n".join(text.splitlines()[:max_lines])
    return sources


def _json_output(log: str, name: str, directory: str | None) -> str | None:
    """The test's output from ``go test -json`` events (None when the log is not that)."""
    parts: list[str] = []
    saw_events = False
    for line in log.splitlines():
        if not line.startswith("{"):
            continue
        try:
            event = json.loads(line)
        except ValueError:
            continue
        if not isinstance(event, dict) or "Action" not in event:
            continue
        saw_events = True
        test = event.get("Test")
        if not isinstance(test, str) or not (test == name or test.startswith(name + "/")):
            continue
        package = event.get("Package")
        if (
            directory not in (None, ".", "")
            and isinstance(package, str)
            and not (package == directory or package.endswith("/" + directory))
        ):
            continue
        output = event.get("Output")
        if event.get("Action") == "output" and isinstance(output, str):
            parts.append(output)
    return "".join(parts) if saw_events else None


def go_failure_excerpt(log: str, test_id: str, max_lines: int) -> str:
    """The test's ``--- FAIL`` block: what it printed after its ``=== RUN`` line and the lines
    indented under its verdict; "" when the log shows no failure of it."""
    name = test_path(test_id)
    log = _ANSI.sub("", log)
    text = _json_output(log, name, package_dir(test_id))
    lines = (log if text is None else text).splitlines()
    verdict = next(
        (
            i
            for i, line in enumerate(lines)
            if (m := _VERDICT.match(line)) and m.group(2) == "FAIL" and m.group(3) == name
        ),
        None,
    )
    if verdict is None:
        return ""
    own = [
        i
        for i, line in enumerate(lines[:verdict])
        if (m := _RUN.match(line)) and m.group(1) == name
    ]
    before: list[str] = []
    for line in lines[own[-1] + 1 : verdict] if own else []:  # from its RUN (NAME, CONT) line
        if _RUN.match(line) or _VERDICT.match(line):
            break  # another test's output follows
        before.append(line)
    indent = _indent(lines[verdict])
    after: list[str] = []
    for line in lines[verdict + 1 :]:  # what go test prints under the verdict, and a panic
        if not line.strip() or _VERDICT.match(line) or _RUN.match(line):
            break
        if _indent(line) <= indent and not line.startswith("panic: "):
            break
        after.append(line)
    kept = [
        line.rstrip()
        for line in [*before, *after, lines[verdict]]
        if line.strip() and not _TRACE.match(line)
    ]
    return "\n".join(kept[-max_lines:])


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip())


def go_patch_names(patch: str) -> set[str]:
    """The funcs, methods (and their receivers' types) and types a Go patch's hunks sit in or
    change, and its files' stems and package folders."""
    names: set[str] = set()
    for context in _HUNK.findall(patch):
        for receiver, func in _FUNC.findall(context):
            names.update(n for n in (receiver, func) if n)
        names.update(_TYPE.findall(context))
    for line in patch.splitlines():
        if line.startswith(("+++ b/", "--- a/")):
            path = line[6:].strip()
            names.update(p for p in path.split("/")[:-1] if p)
            names.add(posixpath.basename(path).removesuffix(".go"))
        elif line.startswith(("+", "-")) and not line.startswith(("+++", "---")):
            for receiver, func in _FUNC.findall(line[1:]):
                names.update(n for n in (receiver, func) if n)
            names.update(_TYPE.findall(line[1:]))
    return names


def without_strings(source: str) -> str:
    """The source with its string literals and comments emptied, so their words are not taken
    as names."""
    return _COMMENT.sub("", _GO_STRING.sub('""', source))


class GoIssueText(IssueText):
    """A Go task's tests read by tree-sitter-go, its failures as ``go test`` prints them."""

    ignored_names = GO_COMMON

    def __init__(self, prompt: IssuePrompt) -> None:
        self.prompt = prompt

    def test_sources(
        self, repo_path: str, tree: str, test_ids: Sequence[str], max_lines: int
    ) -> dict[str, str]:
        return go_test_sources(repo_path, tree, test_ids, max_lines)

    def failure_excerpt(self, log: str, test_id: str, max_lines: int) -> str:
        return go_failure_excerpt(log, test_id, max_lines)

    def patch_names(self, patch: str) -> set[str]:
        return go_patch_names(patch)

    def test_name(self, test_id: str) -> str:
        return test_function(test_id)

    def code_words(self, source: str) -> str:
        return without_strings(source)

    def evidence(self, failure: str, test_source: str) -> list[str]:
        """The failure's lines without its verdict, else the test's checks (``t.Errorf``...)."""
        lines = [
            line.strip()
            for line in failure.splitlines()
            if line.strip() and not _VERDICT.match(line)
        ]
        if lines:
            return lines
        return [line.strip() for line in test_source.splitlines() if _CHECK.match(line.strip())]
