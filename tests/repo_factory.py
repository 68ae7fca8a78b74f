"""Real git repositories for the tests: a small package with real bugs, fixes and tests."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

GIT_ENV = {
    "GIT_AUTHOR_NAME": "Test Author",
    "GIT_AUTHOR_EMAIL": "author@example.invalid",
    "GIT_COMMITTER_NAME": "Test Author",
    "GIT_COMMITTER_EMAIL": "author@example.invalid",
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_CONFIG_GLOBAL": os.devnull,
}


class RepoBuilder:
    """Write files and commit them; returns commit SHAs. Dates advance one day per commit."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.day = 0
        path.mkdir(parents=True, exist_ok=True)
        self.git("init", "-q", "-b", "main")

    def git(self, *args: str, input: bytes | None = None) -> str:
        env = {**os.environ, **GIT_ENV}
        date = f"2024-01-{self.day + 1:02d}T12:00:00+00:00"
        env.update(GIT_AUTHOR_DATE=date, GIT_COMMITTER_DATE=date)
        out = subprocess.run(
            ["git", "-C", str(self.path), *args],
            input=input,
            env=env,
            check=True,
            capture_output=True,
        )
        return out.stdout.decode().strip()

    def write(self, files: dict[str, str | None]) -> None:
        for name, text in files.items():
            target = self.path / name
            if text is None:
                target.unlink()
                continue
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(text)

    def commit(self, message: str | bytes, files: dict[str, str | None]) -> str:
        self.write(files)
        self.git("add", "-A")
        raw = message if isinstance(message, bytes) else message.encode()
        self.git("commit", "-q", "--allow-empty", "-F", "-", input=raw)
        self.day += 1
        return self.git("rev-parse", "HEAD")


PYPROJECT = """\
[build-system]
requires = ["setuptools>=61"]
build-backend = "setuptools.build_meta"

[project]
name = "calc"
version = "0.1.0"
requires-python = ">=3.9"
dependencies = []{extra_deps}

[project.optional-dependencies]
test = ["pytest"]

[tool.setuptools]
packages = ["calc"]
"""

OPS_BUGGY = """\
def add(a, b):
    return a - b


def mul(a, b):
    return a * b
"""

OPS_FIXED = OPS_BUGGY.replace("return a - b", "return a + b")

TESTS_BASE = """\
from calc.ops import mul


def test_mul():
    assert mul(3, 4) == 12
"""

TEST_ADD = """

def test_add():
    assert add(2, 3) == 5
"""

COUNTER = """\
import os

COUNTER = "/tmp/trajforge-flaky-counter"


def bump():
    n = int(open(COUNTER).read()) + 1 if os.path.exists(COUNTER) else 1
    with open(COUNTER, "w") as handle:
        handle.write(str(n))
    return n
"""


def pyproject(extra_deps: str = "") -> str:
    deps = f'\ndependencies = ["{extra_deps}"]' if extra_deps else ""
    return PYPROJECT.replace("dependencies = []{extra_deps}", deps or "dependencies = []")


def build_add_fix_repo(path: Path) -> RepoBuilder:
    """Two commits: calc whose ``add`` subtracts, then its fix with ``test_add`` (the one task)."""
    repo = RepoBuilder(path)
    files = {"pyproject.toml": pyproject(), "calc/__init__.py": "", "calc/ops.py": OPS_BUGGY}
    repo.commit("Initial calc", {**files, "tests/test_ops.py": TESTS_BASE})
    tests = TESTS_BASE.replace("import mul", "import add, mul") + TEST_ADD
    repo.commit("Fix add: it subtracted", {"calc/ops.py": OPS_FIXED, "tests/test_ops.py": tests})
    return repo


def build_calc_repo(path: Path) -> dict[str, str]:
    """The shared fixture: one commit per case the validation rule must get right."""
    repo = RepoBuilder(path)
    shas = {}
    shas["initial"] = repo.commit(
        "Initial calc package",
        {
            "pyproject.toml": pyproject(),
            "calc/__init__.py": "",
            "calc/ops.py": OPS_BUGGY,
            "tests/test_ops.py": TESTS_BASE,
        },
    )
    # A real fix with its test: kept, F2P = test_add, P2P = test_mul.
    shas["fix_add"] = repo.commit(
        "Fix add: it subtracted",
        {
            "calc/ops.py": OPS_FIXED,
            "tests/test_ops.py": TESTS_BASE.replace("import mul", "import add, mul") + TEST_ADD,
        },
    )
    # Only tests: not a candidate.
    shas["tests_only"] = repo.commit(
        "More tests for mul",
        {"tests/test_mul_more.py": "from calc.ops import mul\n\n\ndef test_mul_zero():\n"
         "    assert mul(0, 5) == 0\n"},
    )  # fmt: skip
    # New test imports a function that does not exist at base: collection error, rejected.
    shas["import_error"] = repo.commit(
        "Add div",
        {
            "calc/ops.py": OPS_FIXED + "\n\ndef div(a, b):\n    return a / b\n",
            "tests/test_div.py": "from calc.ops import div\n\n\ndef test_div():\n"
            "    assert div(6, 3) == 2\n",
        },
    )
    # Non-UTF-8 message, a real fix: kept, message decoded with replacement characters.
    shas["latin1"] = repo.commit(
        "Fix sub for caf\xe9 users".encode("latin-1"),
        {
            "calc/ops.py": (path / "calc/ops.py").read_text()
            + "\n\ndef sub(a, b):\n    return a - b\n",
            "tests/test_sub.py": "from calc import ops\n\n\ndef test_sub():\n"
            "    assert getattr(ops, 'sub', None) is not None and ops.sub(5, 3) == 2\n",
        },
    )
    # A flaky test beside a real F2P test: the flaky one is kept out of F2P/P2P.
    ops_now = (path / "calc/ops.py").read_text()
    shas["flaky"] = repo.commit(
        "Add neg",
        {
            "calc/ops.py": ops_now + "\n\ndef neg(a):\n    return -a\n",
            "tests/counter.py": COUNTER,
            "tests/test_neg.py": "from calc import ops\nfrom tests.counter import bump\n\n\n"
            "def test_neg():\n    assert getattr(ops, 'neg', lambda a: a)(2) == -2\n\n\n"
            "def test_neg_flaky():\n    n = bump()\n"
            "    assert getattr(ops, 'neg', lambda a: a)(1) == -1 and n == 1\n",
            "tests/__init__.py": "",
        },
    )
    # A hanging test: killed by the timeout, rejected.
    ops_now = (path / "calc/ops.py").read_text()
    shas["hang"] = repo.commit(
        "Add pow",
        {
            "calc/ops.py": ops_now + "\n\ndef pow2(a):\n    return a * a\n",
            "tests/test_pow.py": "import time\nfrom calc import ops\n\n\ndef test_pow():\n"
            "    if not hasattr(ops, 'pow2'):\n        time.sleep(3600)\n"
            "    assert ops.pow2(3) == 9\n",
        },
    )
    # An install that fails: the base commit declares a dependency that does not exist (the
    # environment is detected at base), so the fix on top of it is rejected with the log tail.
    shas["bad_dep"] = repo.commit(
        "Depend on a package that does not exist",
        {"pyproject.toml": pyproject("trajforge-no-such-package-xyz==9.9")},
    )
    ops_now = (path / "calc/ops.py").read_text()
    shas["bad_install"] = repo.commit(
        "Add half",
        {
            "calc/ops.py": ops_now + "\n\ndef half(a):\n    return a / 2\n",
            "tests/test_half.py": "from calc import ops\n\n\ndef test_half():\n"
            "    assert getattr(ops, 'half', lambda a: a)(4) == 2\n",
        },
    )
    return shas
