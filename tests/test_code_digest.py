"""Cached verdicts are keyed by the verifying floor's own bytes (verifiers/code_digest.py): a fix
to a program shipped into containers, or to the code that reads what it reports, is never
answered from verdicts the code before it gave."""

from __future__ import annotations

import shutil
from pathlib import Path

from trajforge.verifiers import code_digest
from trajforge.verifiers.code_digest import PACKAGE, verifier_digest


def test_any_change_to_the_floors_code_changes_the_digest_and_nothing_else_does(tmp_path):
    copy = tmp_path / "verifiers"
    shutil.copytree(PACKAGE, copy, ignore=shutil.ignore_patterns("__pycache__"))
    assert code_digest.code_digest(copy) == verifier_digest()
    (copy / "__pycache__").mkdir(exist_ok=True)
    (copy / "__pycache__" / "x.cpython-311.pyc").write_bytes(b"compiled")
    assert code_digest.code_digest(copy) == verifier_digest()  # compiled files are not code
    guard = copy / "languages" / "javascript" / "in_container" / "trajforge_guard.js"
    guard.write_bytes(guard.read_bytes() + b"\n")
    changed = code_digest.code_digest(copy)
    assert changed != verifier_digest()
    guard.rename(guard.with_name("renamed.js"))  # the same bytes under another name
    assert code_digest.code_digest(copy) not in (changed, verifier_digest())


def test_every_verdict_cache_key_is_made_with_the_digest():
    """Each module that caches a verdict puts the digest in its key (read from the source: a
    key built without it would replay what an older grader said)."""
    root = Path(code_digest.__file__).parent
    for module in ("patch_verifier.py", "validation/candidate.py", "validation/full_runs.py",
                   "validation/gold_runs.py", "languages/python/mutants.py"):  # fmt: skip
        source = (root / module).read_text()
        keys = source.count("content_id(VERSION") + source.count("content_id(CACHE_VERSION")
        keys += source.count("key = content_id(\n")
        assert source.count("verifier_digest()") >= keys >= 1, module
