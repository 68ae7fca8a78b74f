"""pypi_history against a real local HTTP server playing PyPI, with real sdists and real git."""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import os
import socket
import subprocess
import tarfile
import threading
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from trajforge.generators.sources.pypi_source import pypi_has, pypi_history
from trajforge.schemas.errors import SourceError


@dataclass
class FakePyPI:
    """Routes path -> body; records every path requested."""

    url: str = ""
    routes: dict[str, bytes] = field(default_factory=dict)
    hits: list[str] = field(default_factory=list)

    def publish(self, name: str, releases: dict[str, list[dict]]) -> None:
        """releases: version -> files, each {filename, data, time[, packagetype, yanked, sha256]}.

        Every other file URL is relative, as some PyPI mirrors serve them.
        """
        json_releases: dict[str, list[dict]] = {}
        for n, (version, files) in enumerate(releases.items()):
            json_releases[version] = []
            for f in files:
                self.routes[f"/files/{f['filename']}"] = f["data"]
                url = "../../files/" if n % 2 else f"{self.url}/files/"
                json_releases[version].append(
                    {
                        "filename": f["filename"],
                        "url": url + f["filename"],
                        "packagetype": f.get("packagetype", "sdist"),
                        "yanked": f.get("yanked", False),
                        "upload_time_iso_8601": f["time"],
                        "digests": {"sha256": f.get("sha256", _sha(f["data"]))},
                    }
                )
        body = {"info": {"name": name}, "releases": json_releases}
        self.routes[f"/pypi/{name}/json"] = json.dumps(body).encode()


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


@pytest.fixture
def pypi() -> Iterator[FakePyPI]:
    fake = FakePyPI()

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            fake.hits.append(self.path)
            body = fake.routes.get(self.path)
            self.send_response(200 if body is not None else 404)
            self.end_headers()
            self.wfile.write(body or b"not found")

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    fake.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    yield fake
    server.shutdown()
    server.server_close()


def make_tar(members: list[tuple[str, bytes | None, dict]]) -> bytes:
    """members: (name, data or None, TarInfo attributes such as type/linkname/mode)."""
    buf = io.BytesIO()
    with (
        gzip.GzipFile(fileobj=buf, mode="wb", mtime=0) as gz,
        tarfile.open(fileobj=gz, mode="w") as tf,
    ):
        for name, data, attrs in members:
            info = tarfile.TarInfo(name)
            info.mtime = 1_600_000_000
            info.mode = 0o644
            for key, value in attrs.items():
                setattr(info, key, value)
            if data is not None:
                info.size = len(data)
            tf.addfile(info, io.BytesIO(data) if data is not None else None)
    return buf.getvalue()


def demo_sdist(version: str, *, zip_format: bool = False) -> bytes:
    top = f"demo_pkg-{version}"
    files = {
        "demo_pkg/__init__.py": f"__version__ = {version!r}\n".encode(),
        "tests/test_demo.py": b"def test_ok():\n    assert True\n",
        "PKG-INFO": f"Metadata-Version: 2.1\nName: demo-pkg\nVersion: {version}\n".encode(),
        "demo_pkg.egg-info/PKG-INFO": b"Name: demo-pkg\n",
        "demo_pkg.egg-info/SOURCES.txt": b"demo_pkg/__init__.py\n",
        "demo_pkg/__pycache__/__init__.cpython-311.pyc": b"\x00\x01",
        "demo_pkg/stale.pyc": b"\x00\x02",
    }
    if version == "0.1.0":
        files["demo_pkg/old.py"] = b"OLD = True\n"
    else:  # the sdist's own ignore rules must not hide files from the history
        files[".gitignore"] = b"*.cfg\n"
        files["setup.cfg"] = b"[metadata]\nname = demo-pkg\n"
    if zip_format:
        buf = io.BytesIO()
        with zipfile.ZipFile(buf, "w") as zf:
            for path, data in files.items():
                zf.writestr(f"{top}/{path}", data)
        return buf.getvalue()
    members: list[tuple[str, bytes | None, dict]] = [(top, None, {"type": tarfile.DIRTYPE})]
    members += [(f"{top}/{path}", data, {}) for path, data in files.items()]
    members.append((f"{top}/bin/run.sh", b"#!/bin/sh\necho hi\n", {"mode": 0o755}))
    members.append((f"{top}/dev-null", None, {"type": tarfile.CHRTYPE}))
    members.append((f"{top}/docs/readme-link", None, {"type": tarfile.SYMTYPE, "linkname": ".."}))
    return make_tar(members)


@pytest.fixture
def demo(pypi: FakePyPI) -> FakePyPI:
    """demo-pkg: 0.1.0, a yanked 0.1.1, 0.2.0 (a .zip), 1.0.0rc1, plus releases to skip."""

    def sdist(version: str, time: str, **extra: object) -> dict:
        return {
            "filename": f"demo_pkg-{version}.tar.gz",
            "data": demo_sdist(version),
            "time": time,
            **extra,
        }

    pypi.publish(
        "demo-pkg",
        {
            # Listed out of upload order on purpose: the upload time decides.
            "0.2.0": [
                {
                    "filename": "demo_pkg-0.2.0.zip",
                    "data": demo_sdist("0.2.0", zip_format=True),
                    "time": "2021-03-04T05:06:07.000001Z",
                },
                {
                    "filename": "demo_pkg-0.2.0-py3-none-any.whl",
                    "data": b"wheel",
                    "time": "2021-03-04T05:06:07Z",
                    "packagetype": "bdist_wheel",
                },
            ],
            "0.1.0": [sdist("0.1.0", "2020-01-02T03:04:05.123456Z")],
            "0.1.1": [sdist("0.1.1", "2020-06-01T00:00:00Z", yanked=True)],
            "1.0.0rc1": [sdist("1.0.0rc1", "2022-01-01T00:00:00Z")],
            "not a version": [sdist("9", "2019-01-01T00:00:00Z")],
            "0.0.1": [
                {
                    "filename": "x.whl",
                    "data": b"w",
                    "time": "2019-01-01T00:00:00Z",
                    "packagetype": "bdist_wheel",
                }
            ],
        },
    )
    return pypi


def git(repo: str, *args: str) -> str:
    return subprocess.run(
        ["git", "-C", repo, *args], check=True, capture_output=True, text=True
    ).stdout


def commits(repo: str) -> list[str]:
    return git(repo, "rev-list", "--reverse", "HEAD").split()


def tree(repo: str, rev: str) -> dict[str, str]:
    """path -> mode for every file in the commit."""
    lines = git(repo, "ls-tree", "-r", rev).splitlines()
    return {line.split("\t")[1]: line.split()[0] for line in lines}


def test_one_commit_per_release_oldest_first_dated_by_upload(demo: FakePyPI, tmp_path: Path):
    repo = pypi_history("demo-pkg", str(tmp_path), pypi_url=demo.url)

    assert repo == str(tmp_path / "pypi" / "demo-pkg")
    assert git(repo, "symbolic-ref", "HEAD").strip() == "refs/heads/main"
    log = git(repo, "log", "--reverse", "--format=%an|%ae|%cn|%ce|%at|%ct")
    stamp1, stamp2 = 1577934245, 1614834367  # 2020-01-02T03:04:05Z, 2021-03-04T05:06:07Z
    assert log.splitlines() == [
        f"PyPI|pypi@trajforge.invalid|PyPI|pypi@trajforge.invalid|{stamp1}|{stamp1}",
        f"PyPI|pypi@trajforge.invalid|PyPI|pypi@trajforge.invalid|{stamp2}|{stamp2}",
    ]
    first, second = commits(repo)
    message = git(repo, "cat-file", "commit", first).split("\n\n", 1)[1]
    zip_data = demo.routes["/files/demo_pkg-0.2.0.zip"]
    assert message == (
        "Release 0.1.0\n\nsdist: demo_pkg-0.1.0.tar.gz\n"
        f"sha256: {_sha(demo.routes['/files/demo_pkg-0.1.0.tar.gz'])}\n"
    )
    assert git(repo, "cat-file", "commit", second).split("\n\n", 1)[1] == (
        f"Release 0.2.0\n\nsdist: demo_pkg-0.2.0.zip\nsha256: {_sha(zip_data)}\n"
    )
    cached = sorted(p.name for p in (tmp_path / "pypi-sdists").iterdir())
    assert cached == sorted(
        [f"{_sha(zip_data)}.zip", f"{_sha(demo.routes['/files/demo_pkg-0.1.0.tar.gz'])}.tar.gz"]
    )


def test_work_tree_is_each_release_minus_build_artefacts(demo: FakePyPI, tmp_path: Path):
    repo = pypi_history("demo-pkg", str(tmp_path), pypi_url=demo.url)
    first, second = commits(repo)

    assert tree(repo, first) == {
        "bin/run.sh": "100755",
        "demo_pkg/__init__.py": "100644",
        "demo_pkg/old.py": "100644",
        "docs/readme-link": "120000",
        "tests/test_demo.py": "100644",
    }
    assert git(repo, "show", f"{first}:demo_pkg/__init__.py") == "__version__ = '0.1.0'\n"
    assert git(repo, "show", f"{first}:docs/readme-link") == ".."
    # 0.2.0 (zip) drops old.py, and its own .gitignore does not hide setup.cfg.
    assert set(tree(repo, second)) == {
        ".gitignore",
        "demo_pkg/__init__.py",
        "setup.cfg",
        "tests/test_demo.py",
    }
    assert git(repo, "show", f"{second}:demo_pkg/__init__.py") == "__version__ = '0.2.0'\n"
    assert git(repo, "status", "--porcelain", "--ignored") == ""


def test_prereleases_are_opt_in(demo: FakePyPI, tmp_path: Path):
    repo = pypi_history("demo-pkg", str(tmp_path), pypi_url=demo.url, include_prereleases=True)

    subjects = git(repo, "log", "--reverse", "--format=%s").splitlines()
    assert subjects == ["Release 0.1.0", "Release 0.2.0", "Release 1.0.0rc1"]


def test_max_releases_keeps_the_newest(demo: FakePyPI, tmp_path: Path):
    repo = pypi_history("demo-pkg", str(tmp_path), pypi_url=demo.url, max_releases=1)

    assert git(repo, "log", "--format=%s").splitlines() == ["Release 0.2.0"]
    assert not any("0.1.0" in hit for hit in demo.hits), "older sdists are not downloaded"


def test_second_call_reuses_the_repo_and_cached_sdists(demo: FakePyPI, tmp_path: Path):
    repo = pypi_history("demo-pkg", str(tmp_path), pypi_url=demo.url)
    git_dir_inode, before = os.stat(Path(repo) / ".git").st_ino, commits(repo)
    demo.hits.clear()

    assert pypi_history("Demo_Pkg", str(tmp_path), pypi_url=demo.url) == repo

    assert demo.hits == ["/pypi/demo-pkg/json"]
    assert os.stat(Path(repo) / ".git").st_ino == git_dir_inode
    assert commits(repo) == before

    # Different release list: rebuilt in place, only the new sdist is downloaded.
    demo.hits.clear()
    pypi_history("demo-pkg", str(tmp_path), pypi_url=demo.url, include_prereleases=True)
    assert [h for h in demo.hits if h.startswith("/files/")] == ["/files/demo_pkg-1.0.0rc1.tar.gz"]
    after = commits(repo)
    assert after[:2] == before and len(after) == 3
    assert os.stat(Path(repo) / ".git").st_ino != git_dir_inode
    assert sorted(p.name for p in (tmp_path / "pypi").iterdir()) == ["demo-pkg"]


def test_shas_do_not_depend_on_user_git_config_or_umask(
    demo: FakePyPI, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    clean = pypi_history("demo-pkg", str(tmp_path / "a"), pypi_url=demo.url)

    home = tmp_path / "home"
    (home / "hooks").mkdir(parents=True)
    (home / "hooks" / "pre-commit").write_text("#!/bin/sh\nexit 1\n")
    (home / "hooks" / "pre-commit").chmod(0o755)
    (home / ".gitconfig").write_text(
        "[user]\n name = Someone Else\n email = else@example.com\n"
        "[commit]\n gpgsign = true\n[i18n]\n commitEncoding = ISO-8859-1\n"
        f"[core]\n autocrlf = true\n hooksPath = {home / 'hooks'}\n"
        "[init]\n defaultBranch = master\n"
    )
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("GIT_AUTHOR_NAME", "Env Author")
    monkeypatch.setenv("GIT_COMMITTER_DATE", "2001-01-01T00:00:00Z")
    old_umask = os.umask(0o077)
    try:
        hostile = pypi_history("demo-pkg", str(tmp_path / "b"), pypi_url=demo.url)
    finally:
        os.umask(old_umask)

    assert len(commits(clean)) == 2
    assert commits(hostile) == commits(clean)


def test_unknown_project_is_a_one_line_source_error(pypi: FakePyPI, tmp_path: Path):
    with pytest.raises(SourceError) as info:
        pypi_history("no-such-pkg", str(tmp_path), pypi_url=pypi.url)

    assert info.value.reason == "pypi_not_found"
    assert str(info.value) == (
        "pypi:no-such-pkg: PyPI has no project named 'no-such-pkg'; check the spelling"
    )


def test_unreachable_index_names_the_url(tmp_path: Path):
    with socket.socket() as sock:  # a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{sock.getsockname()[1]}"

    with pytest.raises(SourceError) as info:
        pypi_history("demo-pkg", str(tmp_path), pypi_url=url)

    assert info.value.reason == "pypi_unreachable"
    assert f"{url}/pypi/demo-pkg/json" in str(info.value)
    assert "\n" not in str(info.value)


def test_pypi_has_answers_yes_no_or_cannot_say(demo: FakePyPI):
    """What a conftest's undeclared import is checked against: a project, a 404, no answer."""
    assert pypi_has("demo-pkg", demo.url) is True
    assert pypi_has("Demo_Pkg", demo.url) is True  # asked under its normalized name
    assert pypi_has("no-such-pkg", demo.url) is False
    assert pypi_has("not a name", demo.url) is False
    with socket.socket() as sock:  # a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{sock.getsockname()[1]}"
    assert pypi_has("demo-pkg", url) is None


def test_project_without_sdists(pypi: FakePyPI, tmp_path: Path):
    pypi.publish(
        "wheels-only",
        {
            "1.0": [
                {
                    "filename": "w.whl",
                    "data": b"w",
                    "time": "2020-01-01T00:00:00Z",
                    "packagetype": "bdist_wheel",
                }
            ]
        },
    )

    with pytest.raises(SourceError) as info:
        pypi_history("wheels-only", str(tmp_path), pypi_url=pypi.url)

    assert info.value.reason == "pypi_no_sdist"


def test_sha256_mismatch_is_rejected_and_not_cached(pypi: FakePyPI, tmp_path: Path):
    pypi.publish(
        "tampered",
        {
            "1.0": [
                {
                    "filename": "tampered-1.0.tar.gz",
                    "data": demo_sdist("1.0"),
                    "time": "2020-01-01T00:00:00Z",
                    "sha256": "0" * 64,
                }
            ]
        },
    )

    with pytest.raises(SourceError) as info:
        pypi_history("tampered", str(tmp_path), pypi_url=pypi.url)

    assert info.value.reason == "pypi_bad_digest"
    assert "tampered-1.0.tar.gz" in str(info.value)
    assert list((tmp_path / "pypi-sdists").iterdir()) == []
    assert not (tmp_path / "pypi").exists()


UNSAFE_MEMBERS: dict[str, list[tuple[str, bytes | None, dict]]] = {
    "dotdot": [("pkg-1.0/../evil", b"x", {})],
    "absolute": [("/tmp/evil", b"x", {})],
    "symlink-out": [("pkg-1.0/link", None, {"type": tarfile.SYMTYPE, "linkname": "../../evil"})],
    "symlink-abs": [("pkg-1.0/link", None, {"type": tarfile.SYMTYPE, "linkname": "/etc"})],
    "hardlink-out": [("pkg-1.0/hard", None, {"type": tarfile.LNKTYPE, "linkname": "../evil"})],
    # "d" -> "." makes "d/up" -> ".." (fine lexically) really point above the tree.
    "symlink-chain": [
        ("pkg-1.0/d", None, {"type": tarfile.SYMTYPE, "linkname": "."}),
        ("pkg-1.0/d/up", None, {"type": tarfile.SYMTYPE, "linkname": ".."}),
    ],
}


@pytest.mark.parametrize("case", sorted(UNSAFE_MEMBERS))
def test_unsafe_sdist_members_are_refused(pypi: FakePyPI, tmp_path: Path, case: str):
    members = [("pkg-1.0/setup.py", b"", {}), *UNSAFE_MEMBERS[case]]
    pypi.publish(
        "evilpkg",
        {
            "1.0": [
                {
                    "filename": "evilpkg-1.0.tar.gz",
                    "data": make_tar(members),
                    "time": "2020-01-01T00:00:00Z",
                }
            ]
        },
    )
    cache = tmp_path / "cache"

    with pytest.raises(SourceError) as info:
        pypi_history("evilpkg", str(cache), pypi_url=pypi.url)

    assert info.value.reason == "pypi_unsafe_sdist"
    assert "evilpkg-1.0.tar.gz" in str(info.value)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cache"]
    assert list((cache / "pypi").iterdir()) == [], "no repo and no half-built directory"
