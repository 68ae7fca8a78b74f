"""What an issue writer may see of a JavaScript/TypeScript task: its tests' source and failures.

A JS test id is ``file > describe > ... > title`` (``verifiers/reports/ids.py``); its source is
the ``it``/``test`` call in that file whose first argument is the title (tree-sitter, the
grammar the inject stage parses with), and its failure is jest's section of the run's log
(headed ``● describe \u203a title``). mocha's and vitest's JSON reporters print no failure text,
so for them the writer works from the test's source alone.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import tree_sitter
from trajforge.generators.languages.base import IssuePrompt, IssueText
from trajforge.generators.languages.javascript.syntax import grammar_of, parse
from trajforge.verifiers.sandbox.git_tree import read_file_at

SEPARATOR = " > "
JEST_JOIN = " \u203a "  # U+203A: jest's header joins the describe titles and the title with it
TEST_CALLS = frozenset({"it", "test", "specify"})
JS_COMMON = frozenset(
    {
        "describe", "expect", "assert", "function", "const", "let", "var", "require",
        "return", "undefined", "null", "true", "false", "this", "new", "async", "await",
        "module", "exports", "toBe", "toEqual", "toStrictEqual", "toThrow", "strictEqual",
        "deepEqual", "deepStrictEqual", "equal", "equals", "ok", "done", "should",
    }
)  # fmt: skip
JS_EXTENSIONS = (".js", ".jsx", ".mjs", ".cjs", ".ts", ".tsx", ".mts", ".cts")
# A hunk header's function: ``function name(``, ``name = function``, ``name(...) {`` (a method).
JS_HUNK_CONTEXT = re.compile(
    r"^@@ [^@]* @@ ?.*?(?:function\*?\s+(\w+)|(\w+)\s*[:=]\s*(?:async\s+)?function|"
    r"class\s+(\w+))",
    re.MULTILINE,
)
# A string literal's text (a test's title, a message): prose, not a name the code uses.
_JS_STRING = re.compile(r"'(?:[^'\\\n]|\\.)*'|\"(?:[^\"\\\n]|\\.)*\"|`(?:[^`\\]|\\.)*`")
_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
_JEST_HEADER = re.compile(r"^\s*● (.+)$", re.MULTILINE)
_CODE_FRAME = re.compile(r"^\s*(?:\d+ )?\|")  # jest's code frame lines, other than its `>` line
_JS_CHECK = re.compile(r"^(?:expect\(|assert\b|assert\.|t\.\w+\()")
_JEST_END = re.compile(r"^\s*(?:● |Test Suites:|Tests:|Snapshots:)", re.MULTILINE)


def js_title(test_id: str) -> str:
    """``test/a.test.js > sum > adds two`` -> ``adds two``."""
    return test_id.rsplit(SEPARATOR, 1)[-1]


def js_test_file(test_id: str) -> str:
    return test_id.split(SEPARATOR, 1)[0]


def js_failure_excerpt(log: str, test_id: str, max_lines: int) -> str:
    """jest's failure section for the test (``● describe \u203a title``), else "" (other runners
    print none: their reports go to a file)."""
    parts = test_id.split(SEPARATOR)[1:]
    wanted = {JEST_JOIN.join(parts), js_title(test_id)}
    log = _ANSI.sub("", log)
    for match in _JEST_HEADER.finditer(log):
        if match.group(1).strip() not in wanted:
            continue
        body = log[match.end() :]
        end = _JEST_END.search(body)
        lines = body[: end.start() if end else len(body)].strip("\n").splitlines()
        lines = [line for line in lines if not line.strip().startswith("at ")]  # stack frames
        return "\n".join(lines[:max_lines]).rstrip()
    return ""


def js_test_source(path: str, source: bytes, test_id: str, max_lines: int) -> str | None:
    """The ``it``/``test`` call titled as the test, when exactly one in the file is."""
    try:
        tree = parse(grammar_of(path), source)
    except Exception:  # an unknown grammar or a parser failure: no source shown
        return None
    title = js_title(test_id)
    found = [node for node in _test_calls(tree.root_node) if _first_string(node) == title]
    if len(found) != 1:
        return None
    text = source[found[0].start_byte : found[0].end_byte].decode("utf-8", "replace")
    return "\n".join(text.splitlines()[:max_lines])


def _test_calls(root: tree_sitter.Node):
    stack = [root]
    while stack:
        node = stack.pop()
        if node.type == "call_expression":
            callee = node.child_by_field_name("function")
            name = callee.text.decode("utf-8", "replace") if callee and callee.text else ""
            if name.split(".")[0] in TEST_CALLS:  # it, it.only, test.each(...) aside
                yield node
        stack.extend(node.children)


def _first_string(call: tree_sitter.Node) -> str | None:
    arguments = call.child_by_field_name("arguments")
    first = next((c for c in arguments.named_children), None) if arguments else None
    if first is None or first.type not in ("string", "template_string") or not first.text:
        return None
    text = first.text.decode("utf-8", "replace")
    if first.type == "template_string" and "${" in text:
        return None
    return _unquote(text[1:-1], text[0])


def _unquote(body: str, quote: str) -> str:
    r"""A literal's text as the runner reports it (``\'`` -> ``'``, ``\\`` -> ``\``)."""
    return re.sub(r"\\(.)", lambda m: m.group(1), body) if "\\" in body else body


def without_strings(source: str) -> str:
    """The source with its string literals emptied, so their words are not taken as names."""
    return _JS_STRING.sub("''", source)


def js_anchor_names(patch: str) -> set[str]:
    """Function and class names of a JS patch's hunk headers, and its files' stems."""
    names = {n for groups in JS_HUNK_CONTEXT.findall(patch) for n in groups if n}
    for line in patch.splitlines():
        if line.startswith(("+++ b/", "--- a/")):
            for part in line[6:].strip().split("/"):
                for ext in JS_EXTENSIONS:
                    part = part.removesuffix(ext)
                names.add(part)
    return names


class JavaScriptIssueText(IssueText):
    """A JS task's tests read by tree-sitter, its failures as jest prints them."""

    ignored_names = JS_COMMON

    def __init__(self, prompt: IssuePrompt) -> None:
        self.prompt = prompt

    def test_sources(
        self, repo_path: str, tree: str, test_ids: Sequence[str], max_lines: int
    ) -> dict[str, str]:
        files: dict[str, bytes | None] = {}
        sources: dict[str, str] = {}
        for test_id in test_ids:
            path = js_test_file(test_id)
            if path not in files:
                try:
                    files[path] = read_file_at(repo_path, tree, path).encode("utf-8")
                except Exception:  # not in the tree (odd ids): no source shown
                    files[path] = None
            data = files[path]
            if data is not None and (text := js_test_source(path, data, test_id, max_lines)):
                sources[test_id] = text
        return sources

    def failure_excerpt(self, log: str, test_id: str, max_lines: int) -> str:
        return js_failure_excerpt(log, test_id, max_lines)

    def patch_names(self, patch: str) -> set[str]:
        return js_anchor_names(patch)

    def test_name(self, test_id: str) -> str:
        return js_title(test_id)

    def code_words(self, source: str) -> str:
        return without_strings(source)

    def evidence(self, failure: str, test_source: str) -> list[str]:
        """jest's section without its code frame, else the test's expect/assert lines."""
        lines = [line.rstrip() for line in failure.splitlines() if line.strip()]
        lines = [line for line in lines if not _CODE_FRAME.match(line)]
        if lines:
            return lines
        return [line.strip() for line in test_source.splitlines() if _JS_CHECK.match(line.strip())]
