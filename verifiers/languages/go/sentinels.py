"""Sentinel tests for a Go task: a test file of the grader's own in each graded package, and
twins appended to the graded test files, planted for the build of the test binary only.

Names and outcomes are drawn as the other languages' are (``grader/sentinels.draw_names``,
``draw_outcomes``: the system's randomness, words of the package's own test names), two to five
in **every** graded package, at least one to pass and one to fail: each package is its own test
binary, and a forger in one package's code reports on that package only (a package whose
sentinels all passed, or that had none, would leave its forger nothing to bend). A sentinel
is a small computation checked with ``t.Fatalf``, some written to fail by a small mistake; it
needs nothing but ``testing``, so it compiles in the package of any of its test files (the first
one's ``package`` clause is taken, internal or external). A **twin** is a copy of a graded
FAIL_TO_PASS test function under a new name, appended to the test file that holds it (its
imports are there); its subtests keep their names, so ``dir::Twin/sub`` goes as
``dir::Original/sub`` must. A test that reads its own name (``.Name()``: golden files, snapshot
keys) is not twinned.

The sources go to the grader's root-only folder and into the tree only while root builds the
binary (``in_container/go_grade.py``): the tests' user never reads them; their names reach the
binary's command line (``-test.run``) among the graded ones.
"""

from __future__ import annotations

import base64
import re
import secrets
from collections.abc import Mapping

from trajforge.verifiers.grader.sentinels import (
    FAIL,
    MAX_TWINS,
    PASS,
    SAME,
    Sentinel,
    draw_names,
    draw_outcomes,
)
from trajforge.verifiers.languages.go import test_events

_RANDOM = secrets.SystemRandom()
_WORDS = ("Value", "Result", "Items", "Empty", "Order", "Basic", "Round", "Simple", "Check", "Case")
TEST_FUNC = re.compile(r"^func (Test[A-Z0-9_]\w*)\(\w+ \*testing\.T\) \{", re.MULTILINE)
# Every top-level function go test may report on: tests, examples, fuzz targets (their seeds).
REPORTED_FUNC = re.compile(r"^func ((?:Test|Example|Fuzz)\w*)\s*\(", re.MULTILINE)
_PACKAGE = re.compile(r"^package\s+(\w+)", re.MULTILINE)
_CAMEL = re.compile(r"[A-Z][a-z]{2,}")


def test_names(source: str) -> set[str]:
    """The top-level test functions a Go test file declares."""
    return set(TEST_FUNC.findall(source))


def reported_names(source: str) -> set[str]:
    """The top-level functions of a Go test file that ``go test`` may report a result for."""
    return set(REPORTED_FUNC.findall(source))


def draw(
    files: Mapping[str, Mapping[str, bytes]], failing: tuple[str, ...]
) -> tuple[dict[str, dict[str, bytes]], tuple[Sentinel, ...]]:
    """(package folder -> {path: bytes planted for its build}, the sentinels) for the graded
    packages ``files`` (folder -> its test files, the task's own) and the FAIL_TO_PASS ids
    ``failing`` (twinned, ``MAX_TWINS`` at most)."""
    folders = sorted(f for f, tests in files.items() if tests)
    if not folders:
        return {}, ()
    planted: dict[str, dict[str, bytes]] = {}
    made: list[Sentinel] = []
    taken = {f: _declared(files[f]) for f in folders}
    for folder in folders:  # each package its own: a forger's binary reports on its package only
        oks = draw_outcomes([folder])[folder]
        words = {w for name in taken[folder] for w in _CAMEL.findall(name[4:])} or set(_WORDS)
        names = draw_names(words, taken[folder], len(oks), "Test", "")
        funcs = []
        for name, ok in zip(names, oks, strict=True):
            body = _body(ok)
            funcs.append(f"func {name}(t *testing.T) {{\n{body}}}\n")
            expected = PASS if ok else FAIL
            made.append(Sentinel(test_events.test_id(folder, name), expected, funcs[-1]))
        first = sorted(files[folder])[0]
        clause = _PACKAGE.search(files[folder][first].decode("utf-8", "replace"))
        package = clause.group(1) if clause else "main"
        source = f'package {package}\n\nimport "testing"\n\n' + "\n".join(funcs)
        path = f"{folder}/" if folder != "." else ""
        path += f"zz_trajforge_{secrets.token_hex(4)}_test.go"
        planted.setdefault(folder, {})[path] = source.encode()
    for test_id in _RANDOM.sample(list(failing), len(failing)):
        twins = [s for s in made if s.expected.startswith(SAME)]
        if len(twins) == MAX_TWINS:
            break
        folder = test_events.package_dir(test_id)
        if folder not in files:
            continue
        twin = _twin(files[folder], planted.get(folder, {}), taken[folder], test_id)
        if twin is not None:
            path, text, sentinel = twin
            planted.setdefault(folder, {})[path] = text
            made.append(sentinel)
    return planted, tuple(made)


def encoded(planted: Mapping[str, bytes]) -> dict[str, str]:
    """Planted files as the container's spec carries them."""
    return {path: base64.b64encode(data).decode() for path, data in planted.items()}


def _declared(tests: Mapping[str, bytes]) -> set[str]:
    return {n for data in tests.values() for n in test_names(data.decode("utf-8", "replace"))}


def _twin(
    tests: Mapping[str, bytes], planted: Mapping[str, bytes], taken: set[str], test_id: str
) -> tuple[str, bytes, Sentinel] | None:
    """(file, its text with the twin appended, the twin) for the graded test ``test_id``, or
    None where its function cannot be copied safely."""
    folder = test_events.package_dir(test_id)
    name, slash, sub = test_id[len(folder) + len(test_events.SEPARATOR) :].partition("/")
    for path in sorted(tests):
        text = planted.get(path, tests[path]).decode("utf-8", "replace")
        copy = _function(text, name)
        if copy is None:
            continue
        if ".Name()" in copy:
            return None
        new = draw_names({w for w in _CAMEL.findall(name[4:])} or set(_WORDS), taken, 1, "Test", "")
        renamed = copy.replace(f"func {name}(", f"func {new[0]}(", 1)
        twin_id = test_events.test_id(folder, new[0] + slash + sub)
        tail = "" if text.endswith("\n") else "\n"
        sentinel = Sentinel(twin_id, SAME + test_id, renamed)
        return path, (text + tail + "\n" + renamed).encode(), sentinel
    return None


def _function(text: str, name: str) -> str | None:
    """The top-level function ``name`` as gofmt writes it: from its ``func`` line to the first
    line that is a lone ``}``."""
    found = [m for m in TEST_FUNC.finditer(text) if m.group(1) == name]
    if len(found) != 1:
        return None
    start = found[0].start()
    end = text.find("\n}\n", start)
    if end < 0:
        end = text.find("\n}", start)
        if end < 0 or text[end + 2 :].strip():
            return None
    return text[start : end + 2] + "\n"


def _body(ok: bool) -> str:
    """One test body; ``ok`` False makes the wanted value wrong by a small, ordinary mistake."""
    r = _RANDOM
    a, b, c = r.randint(2, 97), r.randint(2, 97), r.randint(2, 97)
    kind = r.randrange(4)
    if kind == 0:
        want = a * (a - 1) // 2 + (0 if ok else b)
        lines = ["total := 0", f"for i := 0; i < {a}; i++ {{", "\ttotal += i", "}"]
        return _checked(lines, "total", want)
    if kind == 1:
        word = r.choice(_WORDS).lower()
        want = len(word) * c + (0 if ok else 1)
        return _checked([f'text := "{word}"', f"size := len(text) * {c}"], "size", want)
    if kind == 2:
        want = max(a, b, c) if ok else min(a, b, c) - 1
        lines = [f"items := []int{{{a}, {b}, {c}}}", "best := items[0]",
                 "for _, item := range items {", "\tif item > best {", "\t\tbest = item", "\t}",
                 "}"]  # fmt: skip
        return _checked(lines, "best", want)
    return _checked([f"value := {a} * {b}"], "value", a * b + (0 if ok else 1))


def _checked(lines: list[str], name: str, want: int) -> str:
    """``lines`` then the check that ``name`` is ``want``, as a test function's body."""
    check = [f"if {name} != {want} {{", f'\tt.Fatalf("{name} = %d, want {want}", {name})', "}"]
    return "".join(f"\t{line}\n" for line in [*lines, *check])
