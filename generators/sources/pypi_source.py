"""Turn a PyPI package into a git history: one commit per release sdist, oldest first.

Each commit is dated by its sdist's upload time, so a commit miner treats the result like any
other repository. The build is deterministic (same inputs give byte-identical commits on any
machine), idempotent (a repo whose marker lists the same releases is reused) and crash-safe
(it is built beside the target and renamed into place only when complete).
"""

from __future__ import annotations

import bz2
import contextlib
import gzip
import hashlib
import io
import json
import lzma
import os
import re
import shutil
import ssl
import stat
import tarfile
import tempfile
import threading
import urllib.error
import urllib.request
import zipfile
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any
from urllib.parse import urljoin

from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version
from trajforge.schemas.errors import ParamsError, SourceError
from trajforge.schemas.params import SourcesParams
from trajforge.verifiers.sandbox.git_tree import GitError, git

SDIST_EXTS = (".tar.gz", ".tgz", ".tar.bz2", ".tar.xz", ".zip")
MARKER = "trajforge-pypi.json"
GIT_IDENTITY = ("PyPI", "pypi@trajforge.invalid")
# Pinned git settings: user and system config never reach the build, so SHAs are reproducible.
GIT_CONFIG = (
    "commit.gpgsign=false",
    "core.autocrlf=false",
    "core.symlinks=true",
    "init.defaultBranch=main",
    "gc.auto=0",
    "maintenance.auto=false",
)
# Highest-precedence attributes: an sdist's own .gitattributes must not rewrite file contents.
NEUTRAL_ATTRIBUTES = "* -text -ident -filter !eol !working-tree-encoding\n"
_NAME_RE = re.compile(r"^([A-Z0-9]|[A-Z0-9][A-Z0-9._-]*[A-Z0-9])$", re.IGNORECASE)
_TIMEOUT_S = 60


@dataclass(frozen=True)
class Release:
    version: str
    filename: str
    url: str
    sha256: str
    epoch: int  # upload time, seconds since 1970 UTC


def pypi_history(
    name: str,
    cache_dir: str,
    *,
    max_releases: int | None = SourcesParams.max_releases,
    pypi_url: str = SourcesParams.pypi_url,
    include_prereleases: bool = False,
) -> str:
    """Build (or reuse) a git repo at <cache_dir>/pypi/<normalized-name>; return its path."""
    if not _NAME_RE.match(name):
        raise SourceError(f"pypi:{name}: not a valid PyPI project name", reason="pypi_bad_name")
    if max_releases is not None and max_releases < 1:
        raise ParamsError(f"pypi:{name}: max_releases must be >= 1 or None, got {max_releases}")
    normalized = canonicalize_name(name)  # PyPI would redirect any other spelling here
    json_url = f"{pypi_url.rstrip('/')}/pypi/{normalized}/json"
    meta = _fetch_json(name, json_url)
    releases = _select_releases(name, meta, json_url, include_prereleases)
    if max_releases is not None:
        releases = releases[-max_releases:]
    marker = {
        "name": normalized,
        "releases": [[r.version, r.sha256] for r in releases],
    }

    target = os.path.join(os.path.abspath(cache_dir), "pypi", normalized)
    with _building(target):  # threads of one worker (describe, rollout) ask at the same time
        return _history_at(name, target, marker, releases, cache_dir)


_BUILD_LOCKS: dict[str, threading.Lock] = {}
_BUILD_LOCKS_GUARD = threading.Lock()


def _building(target: str) -> threading.Lock:
    with _BUILD_LOCKS_GUARD:
        return _BUILD_LOCKS.setdefault(target, threading.Lock())


def _history_at(
    name: str, target: str, marker: dict[str, Any], releases: list, cache_dir: str
) -> str:
    if _marker_matches(target, marker):
        return target
    archives = [_download(name, r, os.path.join(cache_dir, "pypi-sdists")) for r in releases]
    tmp = f"{target}.tmp-{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    try:
        _build_repo(name, tmp, releases, archives, marker)
        _swap_into_place(tmp, target, marker)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return target


def pypi_has(name: str, pypi_url: str = SourcesParams.pypi_url) -> bool | None:
    """Whether PyPI has a project named ``name``: False when it answers 404 (or the name is not
    a valid project name), None when it cannot be asked (the network, a bad answer)."""
    if not _NAME_RE.match(name):
        return False
    try:
        _fetch_json(name, f"{pypi_url.rstrip('/')}/pypi/{canonicalize_name(name)}/json")
    except SourceError as error:
        return False if error.reason == "pypi_not_found" else None
    return True


def _open_url(url: str) -> Any:
    """urlopen with the CA bundle from SSL_CERT_FILE / REQUESTS_CA_BUNDLE when one is set."""
    cafile = os.environ.get("SSL_CERT_FILE") or os.environ.get("REQUESTS_CA_BUNDLE")
    context = ssl.create_default_context(cafile=cafile or None)
    request = urllib.request.Request(url, headers={"User-Agent": "trajforge-pypi-source"})
    return urllib.request.urlopen(request, timeout=_TIMEOUT_S, context=context)


def _unreachable(name: str, url: str, err: Exception) -> SourceError:
    return SourceError(
        f"pypi:{name}: cannot fetch {url} ({err}); check network, proxy settings and CA bundle",
        reason="pypi_unreachable",
    )


def _fetch_json(name: str, url: str) -> dict[str, Any]:
    try:
        with _open_url(url) as response:
            body = response.read()
    except urllib.error.HTTPError as err:
        if err.code == 404:
            raise SourceError(
                f"pypi:{name}: PyPI has no project named {name!r}; check the spelling",
                reason="pypi_not_found",
            ) from None
        raise _unreachable(name, url, err) from None
    except (urllib.error.URLError, OSError) as err:
        raise _unreachable(name, url, err) from None
    try:
        meta = json.loads(body)
    except ValueError:
        meta = None
    if not isinstance(meta, dict):
        raise SourceError(
            f"pypi:{name}: {url} did not return PyPI JSON; check --pypi-url",
            reason="pypi_bad_response",
        )
    return meta


def _select_releases(
    name: str, meta: dict[str, Any], json_url: str, include_pre: bool
) -> list[Release]:
    """One non-yanked sdist per release, oldest upload first. Mirrors give relative URLs."""
    releases = meta.get("releases")
    if not isinstance(releases, dict):  # PyPI may drop "releases"; "urls" is the latest one
        releases = {meta.get("info", {}).get("version", ""): meta.get("urls") or []}
    chosen: list[tuple[float, Version, Release]] = []
    skipped_pre = 0
    for version, files in releases.items():
        sdist = _pick_sdist(files or [])
        if sdist is None:
            continue
        try:
            parsed = Version(version)
        except InvalidVersion:
            continue
        if parsed.is_prerelease and not include_pre:
            skipped_pre += 1
            continue
        uploaded = sdist.get("upload_time_iso_8601") or sdist["upload_time"] + "Z"
        when = datetime.fromisoformat(uploaded)
        if when.tzinfo is None:
            when = when.replace(tzinfo=UTC)
        digest = sdist["digests"]["sha256"].lower()
        release = Release(
            version,
            sdist["filename"],
            urljoin(json_url, sdist["url"]),
            digest,
            int(when.timestamp()),
        )
        chosen.append((when.timestamp(), parsed, release))
    if not chosen:
        hint = f" ({skipped_pre} pre-releases skipped)" if skipped_pre else ""
        raise SourceError(
            f"pypi:{name}: no release has a usable sdist{hint}; this source needs sdists",
            reason="pypi_no_sdist",
        )
    chosen.sort(key=lambda item: (item[0], item[1]))
    return [release for _, _, release in chosen]


def _pick_sdist(files: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The release's sdist in a format we can unpack, .tar.gz preferred (old releases had two)."""
    candidates = [
        f
        for f in files
        if f.get("packagetype") == "sdist"
        and not f.get("yanked")
        and _sdist_ext(f.get("filename", ""))
        and f.get("digests", {}).get("sha256")
        and f.get("url")
        and (f.get("upload_time_iso_8601") or f.get("upload_time"))
    ]
    candidates.sort(key=lambda f: SDIST_EXTS.index(_sdist_ext(f["filename"]) or ".zip"))
    return candidates[0] if candidates else None


def _sdist_ext(filename: str) -> str | None:
    return next((ext for ext in SDIST_EXTS if filename.lower().endswith(ext)), None)


def _download(name: str, release: Release, sdist_dir: str) -> str:
    """Fetch the sdist into a content-addressed cache; the sha256 from PyPI must match."""
    path = os.path.join(sdist_dir, release.sha256 + (_sdist_ext(release.filename) or ""))
    if os.path.exists(path) and _sha256_file(path) == release.sha256:
        return path
    os.makedirs(sdist_dir, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=sdist_dir, prefix=".part-")
    try:
        digest = hashlib.sha256()
        with os.fdopen(fd, "wb") as out:
            try:
                with _open_url(release.url) as response:
                    while chunk := response.read(1 << 20):
                        digest.update(chunk)
                        out.write(chunk)
            except (urllib.error.URLError, OSError) as err:
                raise _unreachable(name, release.url, err) from None
        if digest.hexdigest() != release.sha256:
            raise SourceError(
                f"pypi:{name}: {release.filename} sha256 is {digest.hexdigest()}, PyPI says "
                f"{release.sha256}; retry, or check for a proxy rewriting downloads",
                reason="pypi_bad_digest",
            )
        os.replace(tmp, path)
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
    return path


def _sha256_file(path: str) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


# Caps on what one sdist may unpack to: a release over any of them is skipped with the reason, so
# a gzip bomb (1 MB -> 1 GB) or a sparse member (159 bytes -> 2 GB) costs nothing. Real sdists
# stay far below them (the largest source file in a popular sdist is a few MB).
MAX_MEMBERS = 50_000
MAX_MEMBER_BYTES = 64 << 20  # one file, unpacked
MAX_TOTAL_BYTES = 512 << 20  # the whole release, unpacked (hardlink copies included)
MAX_HEADER_BYTES = 1 << 20  # a tar's own metadata records (pax, GNU long names), read in memory
_STREAM_SLACK = 64 << 20  # tar headers and padding on top of the members' bytes
_COPY_CHUNK = 1 << 20


class _Unsafe(Exception):
    """An archive member that would land outside the work tree, or a member kind we refuse."""

    reason = "pypi_unsafe_sdist"


class _TooLarge(_Unsafe):
    """An archive that unpacks to more than the caps allow."""

    reason = "pypi_sdist_too_large"


@dataclass(frozen=True)
class _Member:
    name: str  # path inside the archive
    kind: str  # "file" | "dir" | "symlink" | "hardlink"
    link: str  # a symlink's target, or the member a hardlink copies
    executable: bool
    size: int


class _CheckedTarInfo(tarfile.TarInfo):
    """Refuses sparse members and oversized metadata records before tarfile reads them."""

    def _proc_member(self, tarfile_: tarfile.TarFile) -> tarfile.TarInfo:
        if self.type == tarfile.GNUTYPE_SPARSE:
            raise _Unsafe(f"sparse member {self.name!r} (sparse files are refused)")
        metadata = (tarfile.GNUTYPE_LONGNAME, tarfile.GNUTYPE_LONGLINK, *_PAX_TYPES)
        if self.type in metadata and self.size > MAX_HEADER_BYTES:
            raise _TooLarge(f"a {self.size}-byte tar metadata record (over {MAX_HEADER_BYTES})")
        return super()._proc_member(tarfile_)  # type: ignore[misc]


_PAX_TYPES = (tarfile.XHDTYPE, tarfile.XGLTYPE, tarfile.SOLARIS_XHDTYPE)


class _Capped(io.RawIOBase):
    """The decompressed tar stream, refused once it passes ``limit`` bytes."""

    def __init__(self, inner: Any, limit: int) -> None:
        self.inner, self.limit, self.count = inner, limit, 0

    def readable(self) -> bool:
        return True

    def read(self, size: int | None = -1) -> bytes:
        room = self.limit - self.count + 1
        data = self.inner.read(room if size is None or size < 0 else min(size, room))
        self.count += len(data)
        if self.count > self.limit:
            raise _TooLarge(f"the tar stream unpacks to more than {self.limit} bytes")
        return bytes(data)


def _decompressed(path: str) -> Any:
    """The sdist as a plain tar stream (gzip, bzip2, xz or none, told by its magic bytes)."""
    with open(path, "rb") as f:
        magic = f.read(6)
    if magic.startswith(b"\x1f\x8b"):
        return gzip.open(path, "rb")
    if magic.startswith(b"BZh"):
        return bz2.open(path, "rb")
    if magic.startswith(b"\xfd7zXZ\x00"):
        return lzma.open(path, "rb")
    return open(path, "rb")


@contextlib.contextmanager
def _tar_stream(path: str) -> Any:
    """One streaming pass over a tar sdist (no seeking, nothing kept but the current member)."""
    with _decompressed(path) as raw:
        capped = _Capped(raw, MAX_TOTAL_BYTES + _STREAM_SLACK)
        with tarfile.open(fileobj=capped, mode="r|", tarinfo=_CheckedTarInfo) as tf:
            yield tf


class _Budget:
    """Counts members and unpacked bytes against the caps."""

    def __init__(self) -> None:
        self.members = 0
        self.total = 0

    def member(self) -> None:
        self.members += 1
        if self.members > MAX_MEMBERS:
            raise _TooLarge(f"more than {MAX_MEMBERS} members")

    def file(self, name: str, size: int) -> None:
        if size > MAX_MEMBER_BYTES:
            raise _TooLarge(f"member {name!r} unpacks to {size} bytes (over {MAX_MEMBER_BYTES})")
        self.total += size
        if self.total > MAX_TOTAL_BYTES:
            raise _TooLarge(f"members unpack to more than {MAX_TOTAL_BYTES} bytes")


def _scan_archive(path: str) -> list[_Member]:
    """Every member's metadata, within the caps; no member's data is held in memory."""
    budget = _Budget()
    members: list[_Member] = []
    if path.endswith(".zip"):
        with zipfile.ZipFile(path) as zf:
            for info in zf.infolist():
                budget.member()
                mode = info.external_attr >> 16
                if info.is_dir():
                    members.append(_Member(info.filename, "dir", "", False, 0))
                elif stat.S_ISLNK(mode):
                    budget.file(info.filename, info.file_size)
                    if info.file_size > 4096:
                        raise _Unsafe(
                            f"symlink {info.filename!r} has a {info.file_size}-byte target"
                        )
                    link = zf.read(info).decode("utf-8", "surrogateescape")
                    members.append(_Member(info.filename, "symlink", link, False, 0))
                else:
                    budget.file(info.filename, info.file_size)
                    executable = bool(mode & 0o111)
                    members.append(_Member(info.filename, "file", "", executable, info.file_size))
        return members
    sizes: dict[str, int] = {}
    with _tar_stream(path) as tf:
        for member in tf:
            budget.member()
            if member.issparse():
                raise _Unsafe(f"sparse member {member.name!r} (sparse files are refused)")
            if member.isdir():
                members.append(_Member(member.name, "dir", "", False, 0))
            elif member.issym():
                members.append(_Member(member.name, "symlink", member.linkname, False, 0))
            elif member.isreg():
                budget.file(member.name, member.size)
                sizes[member.name] = member.size
                executable = bool(member.mode & 0o111)
                members.append(_Member(member.name, "file", "", executable, member.size))
            elif member.islnk():
                _check_relative(member.linkname, f"hardlink {member.name}")
                if member.linkname not in sizes:
                    raise _Unsafe(f"hardlink {member.name!r} to {member.linkname!r}: no such file")
                budget.file(member.name, sizes[member.linkname])  # written out as a copy
                executable = bool(member.mode & 0o111)
                hardlink = _Member(member.name, "hardlink", member.linkname, executable, 0)
                members.append(hardlink)
            # device files and fifos are skipped
    return members


def _copy_capped(source: Any, path: str, name: str) -> None:
    """Stream one member to disk, refusing it once it passes the per-member cap."""
    written = 0
    with open(path, "wb") as out:
        while chunk := source.read(_COPY_CHUNK):
            written += len(chunk)
            if written > MAX_MEMBER_BYTES:
                raise _TooLarge(f"member {name!r} unpacks to more than {MAX_MEMBER_BYTES} bytes")
            out.write(chunk)


def _check_relative(name: str, what: str) -> list[str]:
    """Path parts of an archive name; absolute paths and '..' are refused, not cleaned up."""
    if name.startswith(("/", "\\")) or re.match(r"^[A-Za-z]:", name):
        raise _Unsafe(f"{what} has absolute path {name!r}")
    parts = [p for p in name.split("/") if p not in ("", ".")]
    if ".." in parts:
        raise _Unsafe(f"{what} escapes the archive: {name!r}")
    return parts


def _dropped(parts: list[str], kind: str) -> bool:
    """Build artefacts and metadata that are not source; .git would clobber the repo."""
    if parts == ["PKG-INFO"]:
        return True
    if any(p.lower() == ".git" or p == "__pycache__" for p in parts):
        return True
    dirs = parts if kind == "dir" else parts[:-1]
    return any(p.endswith(".egg-info") for p in dirs) or parts[-1].endswith(".pyc")


def _resolve(links: dict[tuple[str, ...], str], where: list[str], target: str, depth: int = 0):
    """Where ``target`` (a link's text, relative to the directory ``where``) really leads, as
    the OS would follow it through the archive's own symlinks; None if it leaves the root."""
    if target.startswith("/") or depth > 40:  # absolute, or a loop
        return None
    path = list(where)
    for part in target.split("/"):
        if part in ("", "."):
            continue
        if part == "..":
            if not path:
                return None
            path.pop()
            continue
        link = links.get((*path, part))
        if link is None:
            path.append(part)
            continue
        followed = _resolve(links, path, link, depth + 1)
        if followed is None:
            return None
        path = followed
    return path


def _check_links(entries: list[tuple[list[str], _Member]]) -> None:
    """Refuse any symlink that, followed through the archive's other symlinks, leaves the root
    (``sub/s -> ..`` then ``sub/t -> s/../../etc`` passes a purely lexical check)."""
    links = {tuple(parts): m.link for parts, m in entries if m.kind == "symlink"}
    for parts, member in entries:
        if member.kind != "symlink":
            continue
        if _resolve(links, parts[:-1], member.link) is None:
            raise _Unsafe(f"symlink {'/'.join(parts)!r} points outside: {member.link!r}")


def _extract(archive: str, dest: str) -> None:
    """Unpack into dest without its single top-level directory, refusing anything unsafe.

    Two passes: the first reads only headers (within the caps), the second streams each file to
    disk, so no member is ever held in memory whole.
    """
    scanned = _scan_archive(archive)
    entries = [(_check_relative(m.name, "member"), m) for m in scanned]
    entries = [e for e in entries if e[0]]
    tops = {parts[0] for parts, _ in entries}
    strip = len(tops) == 1 and all(len(p) > 1 or m.kind == "dir" for p, m in entries)
    if strip:
        entries = [(parts[1:], m) for parts, m in entries if len(parts) > 1]
    entries = [(p, m) for p, m in entries if not _dropped(p, "dir" if m.kind == "dir" else "file")]
    _check_links(entries)
    wanted = {m.name: parts for parts, m in entries}
    root = os.path.realpath(dest)
    for parts, member in entries:  # directories first, so file modes never depend on order
        if member.kind == "dir":
            os.makedirs(os.path.join(dest, *parts), exist_ok=True)
    written: dict[str, str] = {}  # archive name -> path on disk, for hardlink copies

    def target(parts: list[str]) -> str:
        path = os.path.join(dest, *parts)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        if os.path.realpath(os.path.dirname(path)) != os.path.join(root, *parts[:-1]):
            raise _Unsafe(f"member {'/'.join(parts)!r} lies behind a symlink")
        return path

    def store(name: str, source: Any, executable: bool) -> None:
        parts = wanted.get(name)
        if parts is None:
            return
        path = target(parts)
        _copy_capped(source, path, name)
        os.chmod(path, 0o755 if executable else 0o644)
        written[name] = path

    if archive.endswith(".zip"):
        with zipfile.ZipFile(archive) as zf:
            for info in zf.infolist():
                mode = info.external_attr >> 16
                if info.filename in wanted and not info.is_dir() and not stat.S_ISLNK(mode):
                    with zf.open(info) as source:
                        store(info.filename, source, bool(mode & 0o111))
    else:
        with _tar_stream(archive) as tf:
            for member in tf:
                if member.isreg() and not member.issparse():
                    source = tf.extractfile(member)
                    assert source is not None
                    store(member.name, source, bool(member.mode & 0o111))
    for parts, member in entries:
        if member.kind == "hardlink" and member.link in written:
            path = target(parts)
            with open(written[member.link], "rb") as source:
                _copy_capped(source, path, member.name)
            os.chmod(path, 0o755 if member.executable else 0o644)
    # Symlinks last: no file is ever written through a link the archive created.
    for parts, member in entries:
        if member.kind != "symlink":
            continue
        path = target(parts)
        if os.path.lexists(path):
            raise _Unsafe(f"symlink {'/'.join(parts)!r} replaces another member")
        os.symlink(member.link, path)


def _git(repo: str, *args: str, env: dict[str, str]) -> None:
    """git with the pinned settings and ``env`` alone: this machine's environment stays out."""
    git(repo, *args, env=env, config=GIT_CONFIG, inherit_env=False)


def _build_repo(
    name: str, repo: str, releases: list[Release], archives: list[str], marker: dict[str, Any]
) -> None:
    """git init, then per release: replace the work tree with the sdist and commit it."""
    os.makedirs(repo)
    with tempfile.TemporaryDirectory(prefix="trajforge-git-home-") as home:
        env = {
            "PATH": os.environ.get("PATH", os.defpath),
            "HOME": home,
            "XDG_CONFIG_HOME": home,
            "GIT_CONFIG_NOSYSTEM": "1",
            "GIT_CONFIG_GLOBAL": os.devnull,
            "GIT_ATTR_NOSYSTEM": "1",
            "LC_ALL": "C",
            "TZ": "UTC",
            "GIT_AUTHOR_NAME": GIT_IDENTITY[0],
            "GIT_AUTHOR_EMAIL": GIT_IDENTITY[1],
            "GIT_COMMITTER_NAME": GIT_IDENTITY[0],
            "GIT_COMMITTER_EMAIL": GIT_IDENTITY[1],
        }
        try:
            _git(repo, "init", "-q", "--template=", env=env)
            os.makedirs(os.path.join(repo, ".git", "info"), exist_ok=True)
            with open(os.path.join(repo, ".git", "info", "attributes"), "w") as f:
                f.write(NEUTRAL_ATTRIBUTES)
            skipped: list[SourceError] = []  # releases refused since the last commit
            committed = 0
            for release, archive in zip(releases, archives, strict=True):
                _clear_work_tree(repo)
                refused = _unpack(name, release, archive, repo)
                if refused is not None:  # this release is skipped; the history goes on
                    skipped.append(refused)
                    marker.setdefault("skipped", []).append([release.version, refused.reason])
                    continue
                date = f"@{release.epoch} +0000"
                env.update(GIT_AUTHOR_DATE=date, GIT_COMMITTER_DATE=date)
                message = f"Release {release.version}\n\nsdist: {release.filename}\n"
                message += f"sha256: {release.sha256}\n"
                message += "".join(f"skipped before it: {err}\n" for err in skipped)
                skipped = []
                committed += 1
                _git(repo, "add", "--all", "--force", ".", env=env)
                commit = ["commit", "-q", "--allow-empty", "--no-verify", "--cleanup=verbatim"]
                _git(repo, *commit, "-m", message, env=env)
            if not committed:  # every release was refused: say why (the first one's reason)
                first = marker["skipped"][0][1] if marker.get("skipped") else "pypi_bad_sdist"
                reasons = "; ".join(str(err) for err in skipped)
                raise SourceError(reasons, reason=first)
        except GitError as err:
            raise SourceError(
                f"pypi:{name}: git failed building the history: {err.detail}",
                reason="pypi_git_failed",
            ) from None
    with open(os.path.join(repo, ".git", MARKER), "w") as f:
        json.dump(marker, f, indent=1)


def _unpack(name: str, release: Release, archive: str, repo: str) -> SourceError | None:
    """Unpack one release into the work tree, or say why it is refused (the tree is then
    cleared, so nothing of a refused release is committed)."""
    try:
        _extract(archive, repo)
        return None
    except _Unsafe as err:
        refused = SourceError(f"pypi:{name}: refusing {release.filename}: {err}", err.reason)
    except (tarfile.TarError, zipfile.BadZipFile, EOFError, KeyError, OSError) as err:
        refused = SourceError(
            f"pypi:{name}: cannot unpack {release.filename}: {err}", reason="pypi_bad_sdist"
        )
    _clear_work_tree(repo)
    return refused


def _clear_work_tree(repo: str) -> None:
    for entry in os.scandir(repo):
        if entry.name == ".git":
            continue
        if entry.is_dir(follow_symlinks=False):
            shutil.rmtree(entry.path)
        else:
            os.unlink(entry.path)


def _marker_matches(target: str, marker: dict[str, Any]) -> bool:
    """Whether the repo at ``target`` was built from the same releases (skips aside)."""
    try:
        with open(os.path.join(target, ".git", MARKER)) as f:
            built = json.load(f)
    except (OSError, ValueError):
        return False
    return isinstance(built, dict) and all(built.get(k) == marker[k] for k in ("name", "releases"))


def _swap_into_place(tmp: str, target: str, marker: dict[str, Any]) -> None:
    """Rename the finished build over the target; a concurrent identical build may win."""
    try:
        os.rename(tmp, target)
        return
    except OSError:
        if _marker_matches(target, marker):
            return
    old = f"{target}.old-{os.getpid()}"
    shutil.rmtree(old, ignore_errors=True)
    os.rename(target, old)
    os.rename(tmp, target)
    shutil.rmtree(old, ignore_errors=True)
