"""The container backends the sandbox tests run against, and the engine-side checks they need.

The tests prove a sandbox's promises from the outside too (its container's configuration, its
labels, a container killed or removed under it), through each engine's own CLI: ``docker`` and
``podman`` take the same commands for all of it.
"""

from __future__ import annotations

import io
import json
import subprocess
import tarfile
from dataclasses import dataclass

from trajforge.verifiers.sandbox.base import Limits, Session
from trajforge.verifiers.sandbox.containers import LABEL, OWNER_LABEL, OWNER_START_LABEL, Sweep

BACKENDS = ("docker", "podman")


def tar_of(files: dict[str, bytes]) -> bytes:
    """A tar of ``files`` (name -> bytes), as put_archive and build contexts take."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


def container_id(session: Session) -> str:
    """The id of the container behind a session of either backend."""
    cid = getattr(session, "cid", None)
    return cid if isinstance(cid, str) else session.container.id  # type: ignore[attr-defined]


@dataclass(frozen=True)
class Backend:
    name: str  # "docker" | "podman": the sandbox.kind and the engine's CLI

    def sandbox(self, limits: Limits | None = None):
        if self.name == "docker":
            from trajforge.verifiers.sandbox.docker import DockerSandbox

            return DockerSandbox(limits)
        from trajforge.verifiers.sandbox.podman import PodmanSandbox

        return PodmanSandbox(limits)

    def cli(self, *args: str, check: bool = True) -> str:
        proc = subprocess.run([self.name, *args], capture_output=True, text=True, check=False)
        assert proc.returncode == 0 or not check, f"{self.name} {args[0]}: {proc.stderr}"
        return proc.stdout

    def inspect(self, cid: str) -> dict:
        return json.loads(self.cli("inspect", cid))[0]

    def exists(self, cid: str) -> bool:
        return bool(self.cli("ps", "--all", "--quiet", "--no-trunc", "--filter", f"id={cid}"))

    def labelled(self, image: str, owner: str, start: str | None) -> str:
        """A container labelled as if a run ``owner`` (host:pid) had started it."""
        labels = {LABEL: "1", OWNER_LABEL: owner}
        if start is not None:
            labels[OWNER_START_LABEL] = start
        flags = [flag for key, value in labels.items() for flag in ("--label", f"{key}={value}")]
        return self.cli("run", "--detach", *self._runnable(), *flags, image, "sleep", "600").strip()

    def remove(self, cid: str) -> None:
        now = ["--time", "0"] if self.name == "podman" else []  # else podman waits 10 s for TERM
        self.cli("rm", "--force", *now, cid, check=False)

    def sweep(self) -> Sweep:
        """The sandbox's own leftover pass (what a new sandbox runs when it starts)."""
        if self.name == "docker":
            from trajforge.verifiers.sandbox.docker import sweep  # what `trajforge janitor` runs

            return sweep()
        from trajforge.verifiers.sandbox.podman import remove_leftovers as remove_podman

        return remove_podman()

    def rw_size(self, cid: str) -> int:
        """Bytes the container wrote to its writable layer (the host's disk)."""
        if self.name == "docker":
            import docker

            api = docker.from_env().api
            return api.containers(all=True, filters={"id": cid}, size=True)[0].get("SizeRw") or 0
        listed = self.cli("ps", "--all", "--size", "--filter", f"id={cid}", "--format", "json")
        return int(json.loads(listed)[0]["Size"]["rwSize"])

    def layer_cannot_be_capped(self) -> bool:
        """True where the storage driver cannot cap a writable layer (overlay off xfs)."""
        if self.name == "docker":
            info = json.loads(self.cli("info", "--format", "{{json .}}"))
            fs = dict(info.get("DriverStatus") or []).get("Backing Filesystem", "")
            return info.get("Driver") == "overlay2" and fs != "xfs"
        store = json.loads(self.cli("info", "--format", "json"))["store"]
        fs = (store.get("graphStatus") or {}).get("Backing Filesystem", "")
        return store.get("graphDriverName") == "overlay" and fs != "xfs"

    def _runnable(self) -> list[str]:
        """What a plain container needs on this host besides the image."""
        if self.name == "docker":
            return []
        from trajforge.verifiers.sandbox.podman import ulimits

        return ulimits()
