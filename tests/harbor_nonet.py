"""Harbor's docker environment, with "no network" enforced by Docker itself (loaded by Harbor).

Harbor 0.26's local docker environment enforces ``network_mode = "no-network"`` with an egress
sidecar built from an image on Docker Hub (``gogost/gost`` by digest) after probing the kernel
with ``alpine`` by digest; where no registry answers neither can be pulled, and Harbor rejects
the task. This subclass does what Harbor's cloud environments do instead: its own
``docker-compose-no-network.yaml`` (``network_mode: none``) on the task's containers. Everything
else (build, agents, the separate verifier, collect hooks, artifacts, rewards) is Harbor's.

Run as ``harbor run -e harbor_nonet:NoNetworkDocker`` with this folder on ``PYTHONPATH``.
"""

from harbor.environments.capabilities import EnvironmentCapabilities
from harbor.environments.docker import COMPOSE_NO_NETWORK_PATH
from harbor.environments.docker.docker import DockerEnvironment
from harbor.models.task.config import NetworkMode


class NoNetworkDocker(DockerEnvironment):
    @classmethod
    def _egress_control_kernel_support(cls) -> bool:
        return False  # no sidecar: Docker's network_mode none instead

    @property
    def capabilities(self) -> EnvironmentCapabilities:
        return super().capabilities.model_copy(update={"disable_internet": True})

    @property
    def _docker_compose_paths(self):
        paths = super()._docker_compose_paths
        if self._network_policy.network_mode == NetworkMode.NO_NETWORK:
            paths.append(COMPOSE_NO_NETWORK_PATH)
        return paths
