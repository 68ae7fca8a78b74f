"""Choose a sandbox backend from params: Docker by default, local only when asked for."""

from __future__ import annotations

from schemas.params import Params
from verifiers.sandbox import Limits, Sandbox


def make_sandbox(params: Params, quiet: bool = False) -> Sandbox:
    limits = Limits(
        memory=params.sandbox.memory,
        cpus=params.sandbox.cpus,
        pids=params.sandbox.pids,
        max_output_bytes=params.validate.max_log_bytes,
    )
    if params.sandbox.kind == "docker":
        from verifiers.docker_sandbox import DockerSandbox

        return DockerSandbox(limits, params.sandbox.docker_host)
    from verifiers.local_sandbox import LocalSandbox

    return LocalSandbox(params.cache_dir, limits, quiet=quiet)
