"""Security hardening (issue 12): each test builds the attack for real and shows it fails.

Same-named repositories cannot share (and poison) an image; credentials in a clone URL reach no
output and no log; publish never follows a symlink out of the export; sdist bombs and symlink
chains skip their release and the history goes on.
"""

from __future__ import annotations

import functools
import gzip
import http.server
import io
import json
import socket
import subprocess
import sys
import tarfile
import threading
from collections.abc import Iterator
from pathlib import Path

import polars as pl
import pytest
from conftest import run_cli, write_params
from repo_factory import RepoBuilder
from test_publish import make_export
from test_pypi_source import FakePyPI, make_tar, pypi  # noqa: F401  (pypi: the fixture)
from trajforge.generators.sources import pypi_source
from trajforge.pipelines.release.publish import publish_dataset
from trajforge.schemas.redact import redact_source, redact_text

pytestmark = pytest.mark.docker

# --- a small package with one real fix, shared by the repository tests ------------------------

SETUP_PY = """\
import os
from setuptools import setup

if os.path.exists("build_hook.py"):  # a project's own build step
    exec(open("build_hook.py").read())

setup(name="lib", version="0.1", packages=["lib"])
"""
BUGGY = "def add(a, b):\n    return a - b\n"
FIXED = "def add(a, b):\n    return a + b\n"
TESTS = "from lib.ops import add\n\n\ndef test_add():\n    assert add(1, 2) == 3\n"
# Installed by the hostile repository: every later Python in that environment skips test_add,
# so a benign repository validated in the same image would lose its FAIL_TO_PASS test.
# (A .pth file's import line runs at every interpreter start in that environment.)
HOOK_PTH = "import os; os.environ['PYTEST_ADDOPTS'] = \"-k 'not test_add'\"\n"
HOOK = f"""\
import glob
for site in glob.glob("/venv/lib/python3*/site-packages"):
    with open(site + "/zz_hook.pth", "w") as handle:
        handle.write({HOOK_PTH!r})
"""


def build_lib_repo(path: Path, *, hostile: bool, first_day: int = 0) -> RepoBuilder:
    repo = RepoBuilder(path)
    repo.day = first_day
    files = {"setup.py": SETUP_PY, "lib/__init__.py": "", "lib/ops.py": BUGGY}
    if hostile:
        files["build_hook.py"] = HOOK
    repo.commit("Initial lib", files)
    repo.commit("Fix add", {"lib/ops.py": FIXED, "tests/test_ops.py": TESTS})
    return repo


def _commits(repo: Path) -> set[str]:
    out = subprocess.run(
        ["git", "-C", str(repo), "rev-list", "--all"], capture_output=True, text=True, check=True
    )
    return set(out.stdout.split())


# --- item 1: images keyed by the source, not its display name ----------------------------------


def test_same_named_repositories_get_separate_images_and_cannot_poison_each_other(
    docker_engine, tmp_path: Path
):
    # Two repositories named "local/lib" with the same setup.py; the hostile one is older, so
    # an image shared by name would be built from it, install hook and all.
    hostile = tmp_path / "attacker" / "lib"
    benign = tmp_path / "victim" / "lib"
    build_lib_repo(hostile, hostile=True, first_day=0)
    build_lib_repo(benign, hostile=False, first_day=10)
    write_params(tmp_path / "params.yaml", tmp_path / "cache")

    mined = run_cli("mine", "--repo", str(hostile), "--repo", str(benign), "--output", "mine",
                    cwd=tmp_path)  # fmt: skip
    assert mined.returncode == 0, mined.stderr
    done = run_cli("validate", "--input", "mine", "--output", "out", cwd=tmp_path)
    assert done.returncode == 0, done.stderr

    tasks = pl.read_parquet(tmp_path / "out" / "tasks" / "*.parquet").to_dicts()
    by_source = {t["source"]: t for t in tasks}
    victim = by_source[str(benign)]
    assert victim["repo"] == "local/lib"
    assert victim["FAIL_TO_PASS"] == ["tests/test_ops.py::test_add"], "the hook reached it"
    assert victim["environment_setup_commit"] in _commits(benign)
    profiles = pl.read_parquet(tmp_path / "out" / "profiles" / "*.parquet")
    assert profiles.height == 2 and profiles["image"].n_unique() == 2
    attacker_images = set(profiles.filter(pl.col("setup_commit").is_in(_commits(hostile)))["image"])
    assert victim["image_name"] not in attacker_images
    # The hook is real: in its own image it hid the attacker's own failing test.
    assert str(hostile) not in by_source

    # Reused images report the commit they were really built at, again from the task's own repo.
    again = run_cli("validate", "--input", "mine", "--output", "out2", cwd=tmp_path)
    assert again.returncode == 0, again.stderr
    rerun = pl.read_parquet(tmp_path / "out2" / "tasks" / "*.parquet").to_dicts()
    assert [t["source"] for t in rerun] == [str(benign)]
    assert rerun[0]["environment_setup_commit"] == victim["environment_setup_commit"]
    assert rerun[0]["FAIL_TO_PASS"] == victim["FAIL_TO_PASS"]


# --- item 2: credentials in a clone URL ------------------------------------------------------

SECRET = "s3cr3tTOKENvalue42"


@pytest.fixture
def git_http(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    """A bare repository served over git's dumb HTTP protocol by a real local HTTP server."""
    source = tmp_path / "src" / "lib"
    build_lib_repo(source, hostile=False)
    served = tmp_path / "served"
    served.mkdir()
    bare = served / "lib.git"
    subprocess.run(["git", "clone", "-q", "--bare", str(source), str(bare)], check=True)
    subprocess.run(["git", "-C", str(bare), "update-server-info"], check=True)

    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args: object) -> None:
            pass

    handler = functools.partial(Quiet, directory=str(served))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    yield f"127.0.0.1:{server.server_address[1]}", source
    server.shutdown()
    server.server_close()


def _files_under(*roots: Path) -> list[Path]:
    return [p for root in roots for p in root.rglob("*") if p.is_file()]


def test_credentials_in_a_clone_url_reach_no_output_and_no_log(git_http, tmp_path: Path):
    host, _ = git_http
    with socket.socket() as sock:  # a port nobody listens on: a rejection that names the spec
        sock.bind(("127.0.0.1", 0))
        dead = f"http://user:{SECRET}@127.0.0.1:{sock.getsockname()[1]}/gone.git"
    url = f"http://user:{SECRET}@{host}/lib.git"
    work = tmp_path / "work"
    work.mkdir()
    write_params(work / "params.yaml", tmp_path / "cache")

    mined = run_cli("mine", "--repo", url, "--repo", dead, "--output", "mine", cwd=work)
    assert mined.returncode == 0, mined.stderr
    assert SECRET not in mined.stderr + mined.stdout

    candidates = pl.read_parquet(work / "mine" / "candidates" / "*.parquet")
    assert candidates.height == 1
    assert candidates["source"].to_list() == [f"http://{host}/lib.git"]
    assert candidates["repo"].to_list() == ["lib"] or candidates["repo"][0].endswith("/lib")
    rejections = pl.read_parquet(work / "mine" / "rejections" / "*.parquet")
    assert any("gone.git" in row for row in rejections["input"].to_list())
    leaked = [p for p in _files_under(work) if SECRET.encode() in p.read_bytes()]
    assert leaked == []

    # The redacted source opens the same clone again (what later stages do with it).
    shown = redact_source(url)
    assert shown == f"http://{host}/lib.git"
    signed = "https://h.example/o/r.git?private_token=T1&ref=main&X-Amz-Signature=T2"
    assert redact_source(signed) == "https://h.example/o/r.git?ref=main"
    assert "T1" not in redact_text(f"could not clone {signed}: {url}")
    assert SECRET not in redact_text(f"could not clone {signed}: {url}")


# --- item 3: publish never follows a symlink ---------------------------------------------------


def test_publish_lists_no_symlink_and_nothing_outside_the_export(tmp_path: Path):
    export = make_export(tmp_path)
    outside = tmp_path / "private"
    outside.mkdir()
    (outside / "id_rsa").write_text("PRIVATE KEY\n")
    (outside / "more").mkdir()
    (outside / "more" / "secrets.txt").write_text("PRIVATE\n")
    (export / "data" / "key.txt").symlink_to(outside / "id_rsa")
    (export / "linked-dir").symlink_to(outside / "more", target_is_directory=True)
    (export / "inner-link.json").symlink_to(export / "version.json")  # inside, still a link

    result = publish_dataset(
        str(export), "acme/tasks", private=True, dry_run=True, endpoint="http://127.0.0.1:9"
    )

    listed = json.loads(Path(result.manifest_path).read_text())["files"]
    paths = sorted(entry["path"] for entry in listed)
    assert paths == [
        "README.md",
        "data/tasks/train-00000-of-00001.parquet",
        "data/tasks/validation-00000-of-00001.parquet",
        "version.json",
    ]


# --- item 4: sdist bombs and symlink chains ----------------------------------------------------


def _zeros_member(name: str, size: int) -> tuple[tarfile.TarInfo, io.RawIOBase]:
    class Zeros(io.RawIOBase):
        def __init__(self) -> None:
            self.left = size

        def readable(self) -> bool:
            return True

        def readinto(self, buffer) -> int:  # type: ignore[no-untyped-def]
            n = min(len(buffer), self.left)
            buffer[:n] = bytes(n)
            self.left -= n
            return n

    info = tarfile.TarInfo(name)
    info.size, info.mode, info.mtime = size, 0o644, 1_600_000_000
    return info, Zeros()


def _tar_gz(build) -> bytes:  # type: ignore[no-untyped-def]
    buf = io.BytesIO()
    with (
        gzip.GzipFile(fileobj=buf, mode="wb", mtime=0, compresslevel=9) as gz,
        tarfile.open(fileobj=gz, mode="w", format=tarfile.PAX_FORMAT) as tf,
    ):
        build(tf)
    return buf.getvalue()


def gzip_bomb_one_member() -> bytes:
    """One file just over the per-member cap: ~70 KB on disk."""
    return _tar_gz(lambda tf: tf.addfile(*_zeros_member("pkg-1.1/big.bin", 65 << 20)))


def gzip_bomb_hardlinks() -> bytes:
    """One 60 MB file copied by hardlinks past the total cap: 1 MB -> 600 MB unpacked."""

    def build(tf: tarfile.TarFile) -> None:
        tf.addfile(*_zeros_member("pkg-1.2/big.bin", 60 << 20))
        for n in range(9):
            link = tarfile.TarInfo(f"pkg-1.2/copy{n}.bin")
            link.type, link.linkname = tarfile.LNKTYPE, "pkg-1.2/big.bin"
            tf.addfile(link)

    return _tar_gz(build)


def sparse_bomb() -> bytes:
    """A ~200-byte sdist whose one (sparse) member reads back as 2 GB of zeros."""

    def build(tf: tarfile.TarFile) -> None:
        info = tarfile.TarInfo("pkg-1.3/big.bin")
        info.size = 1
        info.pax_headers = {
            "GNU.sparse.map": f"{(2 << 30) - 1},1",
            "GNU.sparse.realsize": str(2 << 30),
            "GNU.sparse.name": "pkg-1.3/big.bin",
        }
        tf.addfile(info, io.BytesIO(b"x"))

    return _tar_gz(build)


def symlink_chain() -> bytes:
    """``sub/s -> ..`` makes ``sub/t -> s/../../etc`` (inside, read lexically) leave the tree."""
    return make_tar(
        [
            ("pkg-1.4/setup.py", b"", {}),
            ("pkg-1.4/sub/s", None, {"type": tarfile.SYMTYPE, "linkname": ".."}),
            ("pkg-1.4/sub/t", None, {"type": tarfile.SYMTYPE, "linkname": "s/../../etc"}),
        ]
    )


def good(version: str) -> bytes:
    top = f"pkg-{version}"
    return make_tar(
        [
            (f"{top}/setup.py", b"from setuptools import setup\nsetup(name='pkg')\n", {}),
            (f"{top}/pkg/__init__.py", f"VERSION = {version!r}\n".encode(), {}),
        ]
    )


def test_sdist_bombs_and_symlink_chains_skip_their_release(pypi: FakePyPI, tmp_path: Path):  # noqa: F811
    releases = {
        "1.0": good("1.0"),
        "1.1": gzip_bomb_one_member(),
        "1.2": gzip_bomb_hardlinks(),
        "1.3": sparse_bomb(),
        "1.4": symlink_chain(),
        "2.0": good("2.0"),
    }
    assert all(len(data) < 1 << 20 for data in releases.values()), "small on disk"
    pypi.publish(
        "bombpkg",
        {
            version: [
                {"filename": f"bombpkg-{version}.tar.gz", "data": data,
                 "time": f"2020-01-0{n + 1}T00:00:00Z"}
            ]
            for n, (version, data) in enumerate(releases.items())
        },
    )  # fmt: skip

    # In a child process, so the allocations traced are the history's own: Python's allocator
    # (tracemalloc) sees every bytes object an sdist could be read into, whatever the
    # interpreter's baseline or the machine's load.
    script = (
        "import json, sys, tracemalloc\n"
        "from trajforge.generators.sources.pypi_source import pypi_history\n"
        "tracemalloc.start()\n"
        "repo = pypi_history('bombpkg', sys.argv[1], pypi_url=sys.argv[2])\n"
        "peak = tracemalloc.get_traced_memory()[1] // 1024\n"
        "print(json.dumps({'repo': repo, 'peak_kb': peak}))\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", script, str(tmp_path / "cache"), pypi.url],
        capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["peak_kb"] < 64 * 1024, "an sdist was held in memory"
    repo = out["repo"]

    log = subprocess.run(
        ["git", "-C", repo, "log", "--reverse", "--format=%s%x00%b%x01"],
        capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    commits = [c.strip("\n").split("\0") for c in log.split("\x01") if c.strip()]
    assert [subject for subject, _ in commits] == ["Release 1.0", "Release 2.0"]
    body = commits[1][1]
    assert "bombpkg-1.1.tar.gz" in body and "bombpkg-1.3.tar.gz" in body
    assert "sparse" in body and "sub/t" in body
    marker = json.loads((Path(repo) / ".git" / pypi_source.MARKER).read_text())
    assert marker["skipped"] == [
        ["1.1", "pypi_sdist_too_large"],
        ["1.2", "pypi_sdist_too_large"],
        ["1.3", "pypi_unsafe_sdist"],
        ["1.4", "pypi_unsafe_sdist"],
    ]
    files = subprocess.run(
        ["git", "-C", repo, "ls-tree", "-r", "--name-only", "HEAD"],
        capture_output=True, text=True, check=True,
    ).stdout.split()  # fmt: skip
    assert files == ["pkg/__init__.py", "setup.py"]
    assert not any(p.is_symlink() for p in Path(repo).rglob("*") if ".git" not in p.parts)
