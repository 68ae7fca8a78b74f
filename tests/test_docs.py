"""The documents stay a front door and a true map.

- The README is at most 200 lines; everything else lives in ``docs/`` and ``benchmarks/``.
- No committed text file names a path of one machine: a home directory (``/root``,
  ``/home/<user>``, ``/Users/<user>``, ``C:\\Users\\...``) or a workspace root (``/work``,
  ``/workspace``). Paths inside a container are the code's own business (``/repo``, ``/venv``,
  ``/tmp/trajforge-junit.xml``, ``/etc/ssl/certs/ca-certificates.crt``) and are allowed; a
  document may name a ``/tmp`` path only when the code itself uses it (a container path), since
  any other is some machine's scratch folder (``$SCRATCH`` says it generically).
- Every relative link in a committed Markdown file points to a file that exists, and its
  ``#anchor`` to a heading there.
- Every name a document imports ``from trajforge`` imports, and every public name has its
  section in ``docs/api.md``.
"""

from __future__ import annotations

import re
import subprocess
from functools import cache

import pytest
import trajforge
from conftest import ROOT

MAX_README_LINES = 200
ROOMS = ("pipelines", "generators", "verifiers", "filters", "schemas")

# Where a path starts: not in the middle of a word, a longer path or a URL.
_START = r"(?<![\w.~/$:-])"
_END = r"(?=[/\s'\"`),;:.\]]|$)"
MACHINE_PATH = re.compile(
    _START
    + r"(?:"
    + r"/root"
    + _END  # root's home
    + r"|/home/[\w.-]+"  # a user's home
    + r"|/Users/[\w.-]+"  # a user's home on macOS
    + r"|/work(?:space)?"
    + _END  # workspace roots
    + r"|[A-Za-z]:\\{1,2}(?:Users|Documents and Settings)\\"  # a home on Windows
    + r")",
    re.MULTILINE,
)
TMP_PATH = re.compile(_START + r"/tmp/[\w.-]+")
LINK = re.compile(r"(?<!!)\[[^\]\n]*\]\(([^)\s]+)\)|!\[[^\]\n]*\]\(([^)\s]+)\)")
FENCE = re.compile(r"^```.*?^```", re.MULTILINE | re.DOTALL)
INLINE_CODE = re.compile(r"`[^`\n]*`")
FROM_TRAJFORGE = re.compile(r"^\s*from trajforge import (\([^)]*\)|[^\n]+)", re.MULTILINE)
SELF = "tests/test_docs.py"  # names the very paths it looks for


@cache
def committed_text_files() -> dict[str, str]:
    """Every file git tracks that reads as text: path -> content."""
    listed = subprocess.run(
        ["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True
    ).stdout.decode()
    texts = {}
    for name in filter(None, listed.split("\0")):
        path = ROOT / name
        if not path.is_file():  # removed in the working tree, not yet committed
            continue
        data = path.read_bytes()
        if b"\0" in data[:8192]:
            continue
        try:
            texts[name] = data.decode()
        except UnicodeDecodeError:
            continue
    return texts


def markdown_files() -> dict[str, str]:
    return {name: text for name, text in committed_text_files().items() if name.endswith(".md")}


def machine_paths(text: str) -> list[str]:
    return [m.group(0) for m in MACHINE_PATH.finditer(text)]


@cache
def container_tmp_paths() -> frozenset[str]:
    """The /tmp paths the code itself uses (in the sandbox): a document may name these."""
    found = set()
    for name, text in committed_text_files().items():
        if name.endswith(".py") and name.split("/")[0] in ROOMS:
            found.update(TMP_PATH.findall(text))
    return frozenset(found)


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading.strip().lower())
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def anchors(text: str) -> set[str]:
    found: set[str] = set()
    seen: dict[str, int] = {}
    for line in FENCE.sub("", text).splitlines():
        match = re.match(r"^#{1,6}\s+(.*?)\s*#*\s*$", line)
        if match:
            base = slug(match.group(1))
            count = seen.get(base, 0)
            seen[base] = count + 1
            found.add(base if count == 0 else f"{base}-{count}")
    return found


def links(text: str) -> list[str]:
    prose = INLINE_CODE.sub("", FENCE.sub("", text))
    return [a or b for a, b in LINK.findall(prose)]


def test_the_readme_is_a_front_door():
    lines = (ROOT / "README.md").read_text().splitlines()
    assert len(lines) <= MAX_README_LINES, f"README.md has {len(lines)} lines"


def test_the_machine_path_check_finds_what_it_must_and_only_that():
    home, work = "/" + "home/alice", "/" + "work"
    for text in (
        f"cache_dir: {home}/cache",
        f"git clone x {work}/public/repo",
        "see /" + "root/.cache/trajforge",
        "C:" + "\\Users\\bob\\repo",
        "/" + "Users/bob/src",
        f"({work})",
    ):
        assert machine_paths(text), text
    for text in (
        "/repo /venv /tmp/trajforge-junit.xml /etc/ssl/certs/ca-certificates.crt",
        "/tmp/" + "work/repo and /tmp/cache",  # a /tmp path that merely contains the word
        "https://example.com/" + "home/page and s3://bucket/" + "work/x",
        "$SCRATCH/run and <your results folder> and ~/src",
        "/rootfs /homework /workers /var/root-ca",
        "Note:\\n",
    ):
        assert machine_paths(text) == [], text


def test_no_committed_file_names_a_path_of_one_machine():
    found = [
        f"{name}:{text.count(chr(10), 0, m.start()) + 1}: {m.group(0)}"
        for name, text in committed_text_files().items()
        if name != SELF
        for m in MACHINE_PATH.finditer(text)
    ]
    assert found == [], "machine paths (say $SCRATCH or <your results folder>):\n" + "\n".join(
        found
    )


def test_documents_name_only_the_codes_own_tmp_paths():
    allowed = container_tmp_paths()
    assert "/tmp/trajforge-junit.xml" in allowed
    found = [
        f"{name}: {path}"
        for name, text in markdown_files().items()
        for path in TMP_PATH.findall(text)
        if path not in allowed
    ]
    assert found == [], "a machine's scratch folder in a document:\n" + "\n".join(found)


def test_every_relative_link_points_to_a_file_and_heading_that_exist():
    broken = []
    for name, text in markdown_files().items():
        here = (ROOT / name).parent
        for target in links(text):
            if re.match(r"^[a-z][a-z0-9+.-]*:", target):  # https:, mailto:...
                continue
            path_part, _, anchor = target.partition("#")
            path = (here / path_part).resolve() if path_part else ROOT / name
            if not path.exists():
                broken.append(f"{name}: {target} (no such file)")
                continue
            if anchor and path.suffix == ".md" and anchor not in anchors(path.read_text()):
                broken.append(f"{name}: {target} (no such heading)")
    assert broken == [], "\n".join(broken)


def test_the_readme_links_every_document():
    readme = (ROOT / "README.md").read_text()
    linked = {(ROOT / target.partition("#")[0]).resolve() for target in links(readme)}
    documents = {(ROOT / name).resolve() for name in markdown_files() if name != "README.md"}
    assert sorted(map(str, documents - linked)) == []


@pytest.mark.parametrize("name", sorted(markdown_files()))
def test_every_name_a_document_imports_from_trajforge_imports(name):
    text = markdown_files()[name]
    code = "\n".join(FENCE.findall(text))
    imported = [
        item.split("#")[0].strip(" ()")
        for group in FROM_TRAJFORGE.findall(code)
        for item in re.split(r"[,\n]", re.sub(r"#[^\n]*", "", group))
    ]
    imported = [item for item in imported if item]
    for item in imported:
        assert item in trajforge.__all__, f"{name}: from trajforge import {item}"
        assert getattr(trajforge, item) is not None


def test_every_public_name_has_its_section_in_the_api_document():
    api = (ROOT / "docs" / "api.md").read_text()
    headings = set(re.findall(r"^### `(\w+)`", api, re.MULTILINE))
    assert headings == set(trajforge.__all__)
