"""Which language a repository is at one commit, read from that commit's tree, not the working
copy: mine splits a commit by its parent's language, inject mutates a snapshot by its own.

The registry decides (``for_repo``, Python first) on the commit's top-level files written to a
scratch folder; every detector reads only top-level files (package.json, lock files, packaging
files), and only the name of the language is kept (what it detected is validate's business).
A tree no language knows is the registry's ``DEFAULT`` (Python), as every repository was before
the language layer, so a Python repository without packaging files mines and injects exactly as
it did.
"""

from __future__ import annotations

import os
import tempfile
from functools import lru_cache

from trajforge.generators.languages.base import Language
from trajforge.generators.languages.registry import BY_NAME, DEFAULT, for_repo
from trajforge.verifiers.sandbox.git_tree import git

FILE_MODES = ("100644", "100755")  # plain files; links and submodules are never followed
# A larger top-level file is written empty: only its presence can matter to a language's name
# (package.json, which must parse, is always written whole).
MAX_READ = 1 << 20


def language_at(repo_path: str, commit: str) -> Language:
    """The language of ``repo_path`` at ``commit`` (a bad package.json there raises the
    detector's one-line ``UserError``)."""
    listing = git(repo_path, "ls-tree", "-z", "--long", commit)
    files = []
    for entry in listing.split(b"\0"):
        header, _, name = entry.partition(b"\t")
        fields = header.split()
        if len(fields) == 4 and fields[1] == b"blob" and fields[0].decode() in FILE_MODES:
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
            with open(os.path.join(scratch, os.fsdecode(name)), "wb") as handle:
                handle.write(data)
        found = for_repo(scratch)
    return found[0].name if found else DEFAULT.name
