"""LocalSandbox: subprocesses in a temporary directory, with NO isolation.

For development on a machine without Docker only; it must be chosen explicitly (``--sandbox
local``) and says so loudly. Sandbox paths (/repo, /venv, /tmp) are mapped under a work directory;
an environment "image" is a venv kept under the cache.
"""

from __future__ import annotations

import contextlib
import io
import os
import re
import shutil
import signal
import stat
import subprocess
import sys
import tarfile
import tempfile
import time
import uuid
from collections.abc import Iterator

from trajforge.verifiers.sandbox import usage
from trajforge.verifiers.sandbox.base import (
    BASE_ENV,
    MISSING,
    NOT_A_FILE,
    TOO_LARGE,
    ExecResult,
    FileRead,
    Limits,
    OutputCapture,
    SessionSpec,
)

# /repo, /venv or /tmp as a whole path component, not inside another path such as /var/tmp.
SANDBOX_PATH = re.compile(r"(?<![\w./-])/(?:repo|venv|tmp)(?![\w.-])")

WARNING = (
    "WARNING: --sandbox local runs untrusted repository code on this machine with NO isolation "
    "(no container, network on). Use it only for development; the default is docker."
)


class LocalSession:
    isolated = False  # no users, no container: the grader cannot run the tests as another user

    def __init__(self, workdir: str, venv: str, envs_dir: str, limits: Limits, env: dict[str, str]):
        self.workdir = workdir
        self.venv = venv
        self.envs_dir = envs_dir
        self.limits = limits
        repo = self._map("/repo")
        python_path = os.pathsep.join([repo, os.path.join(repo, "src")])
        self.env = {
            **BASE_ENV,
            **{key: self._map_command(value) for key, value in env.items()},
            "PATH": f"{venv}/bin:{os.environ.get('PATH', '/usr/bin:/bin')}",
            "HOME": self._map("/tmp"),
            "PYTHONPATH": python_path,  # the code under test, whatever the venv was built from
        }

    def _map(self, path: str) -> str:
        if path == "/venv" or path.startswith("/venv/"):
            return self.venv + path[len("/venv") :]
        return os.path.join(self.workdir, path.lstrip("/"))

    def _map_command(self, command: str) -> str:
        """Rewrite sandbox paths in one pass, so a mapped path is never rewritten again."""
        return SANDBOX_PATH.sub(lambda match: self._map(match.group(0)), command)

    def put_archive(self, tar_bytes: bytes, dest: str = "/") -> None:
        with tarfile.open(fileobj=io.BytesIO(tar_bytes)) as tar:
            tar.extractall(self._map(dest), filter="data")

    def exec(self, command: str, timeout_s: float, workdir: str = "/repo") -> ExecResult:
        started = time.monotonic()
        cwd = self._map(workdir)
        os.makedirs(cwd, exist_ok=True)
        proc = subprocess.Popen(
            ["/bin/sh", "-c", self._map_command(command)],
            cwd=cwd,
            env=self.env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        capture = OutputCapture(self.limits.max_output_bytes)
        timed_out = False
        try:
            out, _ = proc.communicate(timeout=timeout_s)
            capture.add(out)
        except subprocess.TimeoutExpired:
            timed_out = True
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            out, _ = proc.communicate()
            capture.add(out)
        usage.record(usage.RUN, time.monotonic() - started)
        return ExecResult(
            exit_code=-9 if timed_out else proc.returncode,
            output=capture.text(),
            timed_out=timed_out,
            duration_s=time.monotonic() - started,
            output_bytes=capture.total,
        )

    def read_file(self, path: str) -> bytes | None:
        return self.read_file_checked(path).data

    def read_file_checked(self, path: str) -> FileRead:
        """Never through a link, never more than Limits.max_read_bytes."""
        mapped = self._map(path)
        try:
            info = os.lstat(mapped)
        except OSError:
            return FileRead(None, MISSING)
        if not stat.S_ISREG(info.st_mode):
            return FileRead(None, NOT_A_FILE, info.st_size)
        cap = self.limits.max_read_bytes
        if info.st_size > cap:
            return FileRead(None, TOO_LARGE, info.st_size)
        try:
            fd = os.open(mapped, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
        except OSError:  # replaced by a link or removed since: not a file we read
            return FileRead(None, NOT_A_FILE)
        with os.fdopen(fd, "rb") as handle:
            data = handle.read(cap + 1)
        if len(data) > cap:  # grew since
            return FileRead(None, TOO_LARGE, len(data))
        return FileRead(data, "", len(data))

    def commit(self, tag: str) -> str:
        link = os.path.join(self.envs_dir, _safe(tag))
        tmp = f"{link}.tmp-{uuid.uuid4().hex}"
        os.symlink(self.venv, tmp)
        os.replace(tmp, link)
        return link


class LocalSandbox:
    name = "local"

    def __init__(self, cache_dir: str, limits: Limits | None = None, quiet: bool = False) -> None:
        self.limits = limits or Limits()
        self.envs_dir = os.path.abspath(os.path.join(cache_dir, "local-envs"))
        os.makedirs(self.envs_dir, exist_ok=True)
        if not quiet:
            print(WARNING, file=sys.stderr)

    def has_image(self, image: str) -> bool:
        return image.startswith("trajforge-base:") or os.path.exists(self._env_link(image))

    def close(self) -> None:
        """Nothing runs in the background here."""

    def _env_link(self, image: str) -> str:
        return os.path.join(self.envs_dir, _safe(image))

    @contextlib.contextmanager
    def session(self, spec: SessionSpec) -> Iterator[LocalSession]:
        workdir = tempfile.mkdtemp(prefix="trajforge-local-")
        for sub in ("repo", "tmp"):
            os.makedirs(os.path.join(workdir, sub))
        if spec.image.startswith("trajforge-base:"):
            venv = os.path.join(self.envs_dir, f"venv-{uuid.uuid4().hex}")  # a build: new venv
        else:
            venv = os.path.realpath(self._env_link(spec.image))
        try:
            yield LocalSession(workdir, venv, self.envs_dir, self.limits, spec.env)
        finally:
            shutil.rmtree(workdir, ignore_errors=True)


def _safe(tag: str) -> str:
    return tag.replace("/", "_").replace(":", "_")
