"""Which language a repository is at one commit, read from that commit's tree, not the working
copy: mine splits a commit by its parent's language, inject mutates a snapshot by its own.

The registry decides (``for_repo``, Python first) on the commit's top-level files written to a
scratch folder, with the files a language's detector reads below the root too
(``Language.nested_project_files``: a Go monorepo's go.mods, at most ``MAX_NESTED``, at most
``MAX_DEPTH`` folders down), and only the name of the language is kept (what it detected is
validate's business).
A tree no language knows is the registry's ``DEFAULT`` (Python), as every repository was before
the language layer, so a Python repository without packaging files mines and injects exactly as
it did.
"""

from __future__ import annotations

import os
import tempfile
from functools import lru_cache

from trajforge.generators.languages.base import Language
from trajforge.generators.languages.registry import BY_NAME, DEFAULT, LANGUAGES, for_repo
from trajforge.verifiers.sandbox.git_tree import git

FILE_MODES = ("100644", "100755")  # plain files; links and submodules are never followed
# A larger top-level file is written empty: only its presence can matter to a language's name
# (package.json, which must parse, is always written whole).
MAX_READ = 1 << 20
NESTED = frozenset(name.encode() for lang in LANGUAGES for name in lang.nested_project_files)
MAX_NESTED = 64
MAX_DEPTH = 5


def language_at(repo_path: str, commit: str) -> Language:
    """The language of ``repo_path`` at ``commit`` (a bad package.json there raises the
    detector's one-line ``UserError``)."""
    recursive = ("-r",) if NESTED else ()
    listing = git(repo_path, "ls-tree", "-z", "--long", *recursive, commit)
    files: list[tuple[bytes, str, int]] = []
    nested = 0
    for entry in listing.split(b"\0"):
        header, _, name = entry.partition(b"\t")
        fields = header.split()
        if len(fields) != 4 or fields[1] != b"blob" or fields[0].decode() not in FILE_MODES:
            continue
        depth = name.count(b"/")
        if depth:  # below the root: only a nested project file, and only so many
            if name.rsplit(b"/", 1)[1] not in NESTED or depth > MAX_DEPTH or nested >= MAX_NESTED:
                continue
            nested += 1
        files.append((name, fields[2].decode(), int(fields[3])))
    return BY_NAME[_name_of_files(os.path.realpath(repo_path), tuple(files))]


@lru_cache(maxsize=512)
def _name_of_files(repo_path: str, files: tuple[tuple[bytes, str, int], ...]) -> str:
    """The language name of a set of top-level files (name, blob, size); cached, as the same
    blobs give the same answer whatever else the commit changed."""
    with tempfile.TemporaryDirectory(prefix="trajforge-lang-") as scratch:
        for name, blob, size in files:
            small = size <= MAX_READ or name == b"package.json"
            data = git(repo_path, "cat-file", "blob", blob) if small else b""
            target = os.path.join(scratch, *os.fsdecode(name).split("/"))
            os.makedirs(os.path.dirname(target), exist_ok=True)
            with open(target, "wb") as handle:
                handle.write(data)
        found = for_repo(scratch)
    return found[0].name if found else DEFAULT.name
