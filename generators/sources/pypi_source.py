"""Turn a PyPI package into a git history: one commit per release sdist, oldest first.

Each commit is dated by its sdist's upload time, so a commit miner treats the result like any
other repository. The build is deterministic (same inputs give byte-identical commits on any
machine), idempotent (a repo whose marker lists the same releases is reused) and crash-safe
(it is built beside the target and renamed into place only when complete).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import posixpath
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


# (path inside the archive, kind "file" | "dir" | "symlink", contents or link target, executable)
Entry = tuple[str, str, bytes, bool]


def _read_archive(path: str) -> list[Entry]:
    """Every member as an Entry; hardlinks become copies, device files and fifos are skipped."""
    entries: list[Entry] = []
    if path.endswith(".zip"):
        with zipfile.ZipFile(path) as zf:
            for info in zf.infolist():
                mode = info.external_attr >> 16
                if info.is_dir():
                    entries.append((info.filename, "dir", b"", False))
                elif stat.S_ISLNK(mode):
                    entries.append((info.filename, "symlink", zf.read(info), False))
                else:
                    entries.append((info.filename, "file", zf.read(info), bool(mode & 0o111)))
        return entries
    with tarfile.open(path, "r:*") as tf:
        for member in tf:
            if member.isdir():
                entries.append((member.name, "dir", b"", False))
            elif member.issym():
                entries.append((member.name, "symlink", member.linkname.encode(), False))
            elif member.isfile() or member.islnk():
                if member.islnk():
                    _check_relative(member.linkname, f"hardlink {member.name}")
                data = tf.extractfile(member)
                assert data is not None
                entries.append((member.name, "file", data.read(), bool(member.mode & 0o111)))
    return entries


def _check_relative(name: str, what: str) -> list[str]:
    """Path parts of an archive name; absolute paths and '..' are refused, not cleaned up."""
    if name.startswith(("/", "\\")) or re.match(r"^[A-Za-z]:", name):
        raise _Unsafe(f"{what} has absolute path {name!r}")
    parts = [p for p in name.split("/") if p not in ("", ".")]
    if ".." in parts:
        raise _Unsafe(f"{what} escapes the archive: {name!r}")
    return parts


class _Unsafe(Exception):
    """An archive member that would land outside the work tree."""


def _dropped(parts: list[str], kind: str) -> bool:
    """Build artefacts and metadata that are not source; .git would clobber the repo."""
    if parts == ["PKG-INFO"]:
        return True
    if any(p.lower() == ".git" or p == "__pycache__" for p in parts):
        return True
    dirs = parts if kind == "dir" else parts[:-1]
    return any(p.endswith(".egg-info") for p in dirs) or parts[-1].endswith(".pyc")


def _extract(archive: str, dest: str) -> None:
    """Unpack into dest without its single top-level directory, refusing anything unsafe."""
    raw = _read_archive(archive)
    entries = [(_check_relative(n, "member"), kind, data, ex) for n, kind, data, ex in raw]
    entries = [e for e in entries if e[0]]
    tops = {e[0][0] for e in entries}
    if len(tops) == 1 and all(len(e[0]) > 1 or e[1] == "dir" for e in entries):
        entries = [(e[0][1:], *e[1:]) for e in entries if len(e[0]) > 1]
    entries = [e for e in entries if not _dropped(*e[:2])]
    # Symlinks last: no file is ever written through a link the archive created.
    for parts, kind, data, executable in sorted(entries, key=lambda e: e[1] == "symlink"):
        path = os.path.join(dest, *parts)
        if kind == "dir":
            os.makedirs(path, exist_ok=True)
            continue
        parent = os.path.dirname(path)
        os.makedirs(parent, exist_ok=True)
        if os.path.realpath(parent) != os.path.join(os.path.realpath(dest), *parts[:-1]):
            raise _Unsafe(f"member {'/'.join(parts)!r} lies behind a symlink")
        if kind == "symlink":
            target = data.decode("utf-8", "surrogateescape")
            resolved = posixpath.normpath(posixpath.join("/".join(parts[:-1]), target))
            if target.startswith("/") or resolved == ".." or resolved.startswith("../"):
                raise _Unsafe(f"symlink {'/'.join(parts)!r} points outside: {target!r}")
            if os.path.lexists(path):
                raise _Unsafe(f"symlink {'/'.join(parts)!r} replaces another member")
            os.symlink(target, path)
        else:
            with open(path, "wb") as f:
                f.write(data)
            os.chmod(path, 0o755 if executable else 0o644)


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
            for release, archive in zip(releases, archives, strict=True):
                _clear_work_tree(repo)
                try:
                    _extract(archive, repo)
                except _Unsafe as err:
                    raise SourceError(
                        f"pypi:{name}: refusing {release.filename}: {err}",
                        reason="pypi_unsafe_sdist",
                    ) from None
                except (tarfile.TarError, zipfile.BadZipFile, EOFError, KeyError, OSError) as err:
                    raise SourceError(
                        f"pypi:{name}: cannot unpack {release.filename}: {err}",
                        reason="pypi_bad_sdist",
                    ) from None
                date = f"@{release.epoch} +0000"
                env.update(GIT_AUTHOR_DATE=date, GIT_COMMITTER_DATE=date)
                message = f"Release {release.version}\n\nsdist: {release.filename}\n"
                message += f"sha256: {release.sha256}\n"
                _git(repo, "add", "--all", "--force", ".", env=env)
                commit = ["commit", "-q", "--allow-empty", "--no-verify", "--cleanup=verbatim"]
                _git(repo, *commit, "-m", message, env=env)
        except GitError as err:
            raise SourceError(
                f"pypi:{name}: git failed building the history: {err.detail}",
                reason="pypi_git_failed",
            ) from None
    with open(os.path.join(repo, ".git", MARKER), "w") as f:
        json.dump(marker, f, indent=1)


def _clear_work_tree(repo: str) -> None:
    for entry in os.scandir(repo):
        if entry.name == ".git":
            continue
        if entry.is_dir(follow_symlinks=False):
            shutil.rmtree(entry.path)
        else:
            os.unlink(entry.path)


def _marker_matches(target: str, marker: dict[str, Any]) -> bool:
    try:
        with open(os.path.join(target, ".git", MARKER)) as f:
            return bool(json.load(f) == marker)
    except (OSError, ValueError):
        return False


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
