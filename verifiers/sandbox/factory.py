"""Choose a sandbox backend from params: Docker by default, podman where no daemon may run,
local only when asked for."""

from __future__ import annotations

from trajforge.schemas.params import Params
from trajforge.verifiers.sandbox.base import Limits, Sandbox


def make_sandbox(params: Params, quiet: bool = False, spares: int = 1) -> Sandbox:
    """``spares``: containers per image started ahead (Docker), one per request served at once."""
    limits = Limits(
        memory=params.sandbox.memory,
        cpus=params.sandbox.cpus,
        pids=params.sandbox.pids,
        max_output_bytes=params.validate.max_log_bytes,
        tmp_size=params.sandbox.tmp_size,
        writable_layer_size=params.sandbox.writable_layer_size,
        max_read_bytes=params.sandbox.max_read_bytes,
    )
    if params.sandbox.kind == "docker":
        from trajforge.verifiers.sandbox.docker import DockerSandbox

        return DockerSandbox(limits, params.sandbox.docker_host, spares)
    if params.sandbox.kind == "podman":
        from trajforge.verifiers.sandbox.podman import PodmanSandbox

        return PodmanSandbox(limits)
    from trajforge.verifiers.sandbox.local import LocalSandbox

    return LocalSandbox(params.cache_dir, limits, quiet=quiet)
