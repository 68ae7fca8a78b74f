"""Runnable usage examples from a repo's own docs: the seeds of exploration.

An exploration grounded in the documentation does what users of the package do, so each example
becomes a task whose end state a replay can check. Read at a git revision (nothing is checked out):
Python and ``>>>`` blocks of README and docs/ pages (``generators.explore.doc_blocks``), doctests
in the package's docstrings (tests excluded), and ``NAME --help`` for each console script. Doctests
become scripts that print what the REPL would (``generators.explore.doctest_script``). Examples
that need the network or hold placeholders are skipped, identical code is kept once, and the order
is fixed: README, docs/ pages, docstrings, console scripts, each by path. Each example keeps the
prose around it (``generators.explore.doc_prose``), which a template instruction is written from.
"""

from __future__ import annotations

import ast
import configparser
import re
import tomllib
from collections.abc import Iterator
from dataclasses import dataclass

from trajforge.generators.explore.doc_blocks import Block, markdown_blocks, rst_blocks
from trajforge.generators.explore.doc_prose import docstring_prose
from trajforge.generators.explore.doctest_script import doctest_script
from trajforge.schemas import python_ast
from trajforge.verifiers.sandbox.git_tree import GitError, git, read_file_at

DOC_DIRS = ("docs/", "doc/")
DOC_SUFFIXES = (".md", ".rst", ".txt")
SKIP_DIRS = {"tests", "test", "testing", "docs", "doc", "examples", "benchmarks", "scripts"}
SKIP_FILES = {"setup.py", "conftest.py", "noxfile.py", "fabfile.py"}
PY_LANGS = {"python", "py", "python3"}
DOCTEST_LANGS = {"pycon", "doctest", ""}
NETWORK = re.compile(
    r"https?://|\bpip3? install\b|\brequests\.(?:get|post|put|patch|delete|head|request|Session)"
    r"|urlopen|\bhttpx\.|\baiohttp\b|\bsocket\.|\bsmtplib\b|\bboto3\b|\bwget\b|\bcurl\b"
)
NOT_RUNNABLE = re.compile(r"\.\.\.|\binput\(")  # placeholders; waits for a user
SAFE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")


@dataclass(frozen=True)
class DocExample:
    kind: str  # python | doctest | command
    source: str  # "README.md:12": where it starts
    title: str  # the nearest heading, the documented object, or the script's name
    code: str  # a Python script (python, doctest) or a shell command (command)
    expected: str = ""  # a doctest's expected output, as written
    prose: str = ""  # the docs' text around it, plain; empty when there is none


def find_examples(repo_path: str, rev: str, max_examples: int = 20) -> list[DocExample]:
    """Up to ``max_examples`` distinct, runnable-looking examples, in a fixed order."""
    files = git(repo_path, "ls-tree", "-r", "-z", "--name-only", rev).decode().split("\0")
    kept: list[DocExample] = []
    seen: set[str] = set()
    for example in _all_examples(repo_path, rev, [f for f in files if f]):
        key = example.code.strip()
        if key in seen or (example.kind != "command" and not _runnable(example.code)):
            continue
        seen.add(key)
        kept.append(example)
        if len(kept) >= max_examples:
            break
    return kept


def _all_examples(repo: str, rev: str, files: list[str]) -> Iterator[DocExample]:
    readmes = sorted(f for f in files if "/" not in f and f.upper().startswith("README"))
    docs = sorted(f for f in files if f.startswith(DOC_DIRS) and f.endswith(DOC_SUFFIXES))
    for path in readmes + docs:
        text = read_file_at(repo, rev, path)
        blocks = markdown_blocks(path, text) if path.endswith(".md") else rst_blocks(path, text)
        for block in blocks:
            yield from _from_block(path, block)
    for path in _python_files(repo, rev):
        yield from _docstring_examples(path, read_file_at(repo, rev, path))
    yield from _console_scripts(repo, rev, files)


def _runnable(code: str) -> bool:
    return bool(code.strip()) and not NETWORK.search(code) and not NOT_RUNNABLE.search(code)


def _from_block(path: str, block: Block) -> Iterator[DocExample]:
    """A doctest if the block has prompts, Python if it is marked so and parses, else nothing."""
    where, lang, code = f"{path}:{block.line}", block.lang, block.code
    prompts = any(row.lstrip().startswith(">>>") for row in code.splitlines())
    if prompts and lang in PY_LANGS | DOCTEST_LANGS:
        if (script := doctest_script(code)) is not None:
            yield DocExample("doctest", where, block.title, script[0], script[1], block.prose)
    elif not prompts and lang in PY_LANGS and _parses(code):
        yield DocExample("python", where, block.title, code.strip() + "\n", prose=block.prose)


def _parses(code: str) -> bool:
    try:
        python_ast.parse(code)
    except SyntaxError:
        return False
    return True


def _python_files(repo: str, rev: str) -> list[str]:
    """The package's .py files holding a prompt (``git grep`` finds them without reading all)."""
    try:
        out = git(repo, "grep", "-l", "-F", ">>>", rev, "--", "*.py").decode()
    except GitError:  # exit status 1: no file matches
        return []
    paths = sorted(line.split(":", 1)[1] for line in out.splitlines() if ":" in line)
    return [
        p
        for p in paths
        if not SKIP_DIRS & set(p.split("/")[:-1])
        and (name := p.rsplit("/", 1)[-1]) not in SKIP_FILES
        and not name.startswith("test_")
        and not name.endswith("_test.py")
    ]


def _docstring_examples(path: str, text: str) -> Iterator[DocExample]:
    """Doctests of the module and its public classes and functions, by line; each script imports
    the module's names first, since doctest runs examples in the module's namespace."""
    try:
        tree = python_ast.parse(text)
    except SyntaxError:
        return
    parts = path.removeprefix("src/").removesuffix(".py").split("/")
    module = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
    importable = bool(module) and all(part.isidentifier() for part in module.split("."))
    preface = f"from {module} import *\n" if importable else ""
    found: list[tuple[int, DocExample]] = []
    queue: list[tuple[ast.AST, str]] = [(tree, module)]
    while queue:
        node, name = queue.pop()
        body = getattr(node, "body", [])
        first = body[0] if body else None
        if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
            doc = first.value.value
            if isinstance(doc, str) and ">>>" in doc and (script := doctest_script(doc, preface)):
                line = first.lineno + script[2]
                prose = docstring_prose(doc)
                example = DocExample("doctest", f"{path}:{line}", name, *script[:2], prose)
                found.append((line, example))
        for child in body:
            if isinstance(child, ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef) and (
                not child.name.startswith("_") or child.name.endswith("__")  # public or dunder
            ):
                queue.append((child, f"{name}.{child.name}"))
    yield from (example for _, example in sorted(found, key=lambda item: item[0]))


def _console_scripts(repo: str, rev: str, files: list[str]) -> Iterator[DocExample]:
    for path in ("pyproject.toml", "setup.cfg"):
        if path not in files:
            continue
        text = read_file_at(repo, rev, path)
        for name in _script_names(path, text):
            if SAFE_NAME.match(name):
                row = re.search(rf"^\s*[\"']?{re.escape(name)}[\"']?\s*=", text, re.MULTILINE)
                line = text.count("\n", 0, row.start()) + 1 if row else 1
                yield DocExample("command", f"{path}:{line}", name, f"{name} --help")


def _script_names(path: str, text: str) -> list[str]:
    try:
        if path == "pyproject.toml":
            data = tomllib.loads(text)
            project = data.get("project", {}).get("scripts", {})
            poetry = data.get("tool", {}).get("poetry", {}).get("scripts", {})
            return sorted({*project, *poetry})
        parser = configparser.ConfigParser(interpolation=None)
        parser.read_string(text)
        entries = parser.get("options.entry_points", "console_scripts", fallback="")
        return sorted({row.split("=")[0].strip() for row in entries.splitlines() if "=" in row})
    except (tomllib.TOMLDecodeError, configparser.Error, AttributeError):
        return []
