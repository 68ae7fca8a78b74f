"""``trajforge publish DIR --repo-id ORG/NAME``: push an export to the Hugging Face Hub.

A release must never be half there: everything that can be checked locally (the repo id, the
dataset card, every Parquet shard, the token) is checked before the first network call, and the
files go up in one commit, so the Hub holds the old version or the new one, never a mix. Stale
Parquet shards from an earlier push are deleted in that same commit (a dataset reads every shard).

The token comes from the environment, goes to ``huggingface_hub`` only, and is scrubbed from every
message: it never reaches a log, an exception, the manifest or any file. ``dry_run`` writes the
manifest of exactly what would be uploaded (path, size, sha256 per file) and touches no network.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from dataclasses import dataclass
from typing import Any

import pyarrow.parquet as pq
import yaml
from trajforge.schemas.errors import UserError
from trajforge.schemas.storage import write_bytes_atomic

REPO_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*/[A-Za-z0-9][A-Za-z0-9._-]*$")
TOKEN_SHAPE = re.compile(r"hf_[A-Za-z0-9]{8,}")  # any Hugging Face token, not only ours
CARD = "README.md"
CHUNK = 1 << 20


class PublishError(UserError):
    reason = "publish_failed"


@dataclass(frozen=True)
class ManifestEntry:
    path: str  # POSIX path inside the repo, relative to the export directory
    size: int
    sha256: str


@dataclass(frozen=True)
class PublishResult:
    repo_id: str
    private: bool
    dry_run: bool
    files: tuple[ManifestEntry, ...]
    manifest_path: str = ""  # dry run: where the manifest was written
    commit_url: str = ""  # push: the commit on the Hub
    deleted: tuple[str, ...] = ()  # stale Parquet shards removed by the commit

    @property
    def total_bytes(self) -> int:
        return sum(f.size for f in self.files)

    def render(self) -> str:
        """The lines the CLI prints."""
        what = f"{len(self.files)} files, {self.total_bytes:,} bytes"
        if self.dry_run:
            return (
                f"dry run: would push {what} to dataset {self.repo_id} "
                f"({'private' if self.private else 'public'}); nothing uploaded\n"
                f"manifest: {self.manifest_path}"
            )
        lines = [f"published {what} to dataset {self.repo_id} in one commit: {self.commit_url}"]
        if self.deleted:
            lines.append(f"deleted {len(self.deleted)} stale Parquet file(s) in the same commit")
        return "\n".join(lines)


def manifest(
    repo_id: str, private: bool, files: tuple[ManifestEntry, ...], endpoint: str
) -> dict[str, Any]:
    return {
        "repo_id": repo_id,
        "repo_type": "dataset",
        "private": private,
        "endpoint": endpoint,
        "file_count": len(files),
        "total_bytes": sum(f.size for f in files),
        "files": [{"path": f.path, "size": f.size, "sha256": f.sha256} for f in files],
    }


def publish_dataset(
    directory: str,
    repo_id: str,
    *,
    private: bool,
    dry_run: bool,
    token_env: str = "HF_TOKEN",
    endpoint: str | None = None,
    manifest_path: str | None = None,
) -> PublishResult:
    """Push ``directory`` (an export: README.md card + Parquet shards) as dataset ``repo_id``."""
    check_repo_id(repo_id)
    files = export_files(directory)
    entries = tuple(_entry(directory, path) for path in files)
    hub = endpoint or _default_endpoint()
    if dry_run:
        target = manifest_path or f"{os.path.abspath(directory)}.publish-manifest.json"
        body = json.dumps(manifest(repo_id, private, entries, hub), indent=2) + "\n"
        write_bytes_atomic(target, body.encode())
        return PublishResult(repo_id, private, True, entries, manifest_path=target)
    token = os.environ.get(token_env, "").strip()
    if not token:
        raise PublishError(
            f"publish: set {token_env} to a Hugging Face write token "
            f"({hub}/settings/tokens) to push {repo_id}, or pass --dry-run to see what would go up",
            reason="no_token",
        )
    return _push(directory, entries, repo_id, private, token, token_env, hub)


def check_repo_id(repo_id: str) -> None:
    if not REPO_ID.match(repo_id) or ".." in repo_id or len(repo_id) > 96:
        raise PublishError(
            f"publish: {repo_id!r} is not a Hub repo id; pass --repo-id ORG/NAME "
            "(letters, digits, '.', '_', '-')",
            reason="bad_repo_id",
        )


def export_files(directory: str) -> list[str]:
    """Every file to upload, relative and sorted; hidden files (temp files, .git) stay home.

    Only regular files inside the directory go up: a symlink (to a file or a directory, inside
    or outside) is never followed, so nothing outside the export can be published through one.
    """
    if not os.path.isdir(directory):
        raise PublishError(
            f"publish: {directory} is not a directory; pass a `trajforge export` output",
            reason="not_an_export",
        )
    found: list[str] = []
    root = os.path.realpath(directory)
    for parent, dirs, names in os.walk(root, followlinks=False):
        # A symlinked directory is listed in ``dirs`` but never entered (followlinks=False).
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        for name in sorted(names):
            path = os.path.join(parent, name)
            if not name.startswith(".") and _regular_inside(path, root):
                found.append(os.path.relpath(path, root))
    posix = sorted(path.replace(os.sep, "/") for path in found)
    if CARD not in posix:
        raise PublishError(
            f"publish: {directory} has no {CARD} dataset card, so it is not an export; "
            "run `trajforge export` and pass its output",
            reason="not_an_export",
        )
    shards = [p for p in posix if p.endswith(".parquet")]
    if not shards:
        raise PublishError(
            f"publish: {directory} has no Parquet files, so it is not an export; "
            "run `trajforge export` and pass its output",
            reason="not_an_export",
        )
    _check_card(directory)
    for shard in shards:
        _check_parquet(directory, shard)
    return posix


def _regular_inside(path: str, root: str) -> bool:
    """A regular file (not a symlink, fifo or device) that really lies under ``root``."""
    if os.path.islink(path) or not os.path.isfile(path):
        return False
    return os.path.commonpath([os.path.realpath(path), root]) == root


def _check_card(directory: str) -> None:
    """The Hub refuses a commit whose card metadata is not a YAML mapping: refuse it first."""
    with open(os.path.join(directory, CARD), encoding="utf-8", errors="replace") as handle:
        text = handle.read()
    match = re.match(r"\A---\s*\n(.*?)\n---\s*(\n|\Z)", text, re.DOTALL)
    if match is None:
        return
    try:
        metadata = yaml.safe_load(match.group(1))
    except yaml.YAMLError as exc:
        problem = " ".join(str(exc).split())[:160]
        raise PublishError(
            f"publish: the metadata of {directory}/{CARD} is not valid YAML ({problem}); "
            "fix the card or re-run `trajforge export`",
            reason="bad_card",
        ) from None
    if metadata is not None and not isinstance(metadata, dict):
        raise PublishError(
            f"publish: the metadata of {directory}/{CARD} must be a YAML mapping; "
            "fix the card or re-run `trajforge export`",
            reason="bad_card",
        )


def _check_parquet(directory: str, shard: str) -> None:
    try:
        pq.read_metadata(os.path.join(directory, shard))
    except Exception as exc:  # pyarrow raises several types for a torn file
        problem = " ".join(str(exc).split())[:160]
        raise PublishError(
            f"publish: {directory}/{shard} is not a readable Parquet file ({problem}); "
            "re-run `trajforge export`",
            reason="bad_parquet",
        ) from None


def _entry(directory: str, path: str) -> ManifestEntry:
    digest = hashlib.sha256()
    size = 0
    with open(os.path.join(directory, path), "rb") as handle:
        while chunk := handle.read(CHUNK):
            digest.update(chunk)
            size += len(chunk)
    return ManifestEntry(path, size, digest.hexdigest())


def _default_endpoint() -> str:
    from huggingface_hub import constants

    return str(constants.ENDPOINT).rstrip("/")


def _push(
    directory: str,
    entries: tuple[ManifestEntry, ...],
    repo_id: str,
    private: bool,
    token: str,
    token_env: str,
    endpoint: str,
) -> PublishResult:
    from huggingface_hub import CommitOperationAdd, CommitOperationDelete, HfApi

    api = HfApi(endpoint=endpoint, token=token, library_name="trajforge")
    local = {e.path for e in entries}
    problem = ""
    try:
        api.create_repo(repo_id, repo_type="dataset", private=private, exist_ok=True)
        if private and api.repo_info(repo_id, repo_type="dataset").private is False:
            problem = (
                f"{repo_id} already exists and is public, but --private was asked: make it "
                "private on the Hub first, or drop --private"
            )
        else:
            stale = tuple(
                sorted(
                    path
                    for path in api.list_repo_files(repo_id, repo_type="dataset")
                    if path.endswith(".parquet") and path not in local
                )
            )
            operations: list[Any] = [
                CommitOperationAdd(e.path, os.path.join(directory, e.path)) for e in entries
            ]
            operations += [CommitOperationDelete(path_in_repo=path) for path in stale]
            info = api.create_commit(
                repo_id,
                operations,
                commit_message=f"trajforge: publish {_version(directory)}",
                commit_description=f"{len(entries)} files, {sum(e.size for e in entries):,} bytes",
                repo_type="dataset",
            )
            url = str(getattr(info, "commit_url", "") or f"{endpoint}/datasets/{repo_id}")
            return PublishResult(repo_id, private, False, entries, commit_url=url, deleted=stale)
    except Exception as exc:  # network, HTTP and Hub errors all end the same way
        problem = _explain(exc, repo_id, token_env, endpoint)
    # Raised outside the ``except``: the original error (and anything in it) is not chained.
    raise PublishError(
        _scrub(f"publish: could not push {repo_id}: {problem}; nothing was published", token),
        reason="push_failed",
    )


def _explain(exc: Exception, repo_id: str, token_env: str, endpoint: str) -> str:
    """What went wrong, as the user can act on it; HTTP status first, then the transport."""
    response = getattr(exc, "response", None)
    status = getattr(response, "status_code", None)
    org = repo_id.split("/")[0]
    if status == 401:
        return f"{endpoint} rejected the token in {token_env} (401); set a valid token"
    if status == 403:
        return f"the token in {token_env} may not write to {org} (403); use a write token for {org}"
    detail = " ".join(str(exc).split())[:200] or type(exc).__name__
    if status is not None:
        return f"{endpoint} answered {status} ({detail}); check the repo id and retry"
    return (
        f"{endpoint} is unreachable ({type(exc).__name__}: {detail}); "
        "check the network or HF_ENDPOINT and retry"
    )


def _scrub(text: str, token: str) -> str:
    """One line, with the token (and anything shaped like a Hub token) masked."""
    if token:
        text = text.replace(token, "***")
    return " ".join(TOKEN_SHAPE.sub("hf_***", text).split())


def _version(directory: str) -> str:
    """The export's version (its version.json), for the commit message."""
    try:
        with open(os.path.join(directory, "version.json"), encoding="utf-8") as handle:
            data = json.load(handle)
    except (OSError, ValueError):
        return "export"
    return str(data.get("version", "export")) if isinstance(data, dict) else "export"
