"""A container is handed out once its image's entrypoint says it may be used.

An environment image that starts services for its suite (``generators/environments/
services.py``) starts them from its ``ENTRYPOINT``, which runs beside the first command of a
session, not before it. Such an image names a file in ``READY_LABEL`` that its entrypoint
touches once its services answer; every backend that starts containers waits for that file
(bounded) before handing the container out, so no test, clean or graded, races a service. An
image without the label is handed out at once, as always.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

READY_LABEL = "trajforge.ready"  # the file an image's entrypoint touches once it may be used
SERVICES_LABEL = "trajforge.services"  # which services the entrypoint starts (for people)
# The OS users its services run as: every session of such an image keeps the capabilities to
# change user (base.GRADING_CAPABILITIES), so the entrypoint can start a service that refuses
# root (PostgreSQL) as its own user.
USERS_LABEL = "trajforge.services-users"
# The names its suite reaches the services by (compose's service keys: ``db``, ``cache``), which
# every backend maps to 127.0.0.1 in each container of the image (``hosts``).
HOSTS_LABEL = "trajforge.service-hosts"
MAX_HOSTS = 16
READY_FILE = "/run/trajforge-services.ready"
# The entrypoint that starts them; run again (``entrypoint true``) it starts them afresh, which
# is how validate's reset of a container brings back a fresh container's services.
SERVICES_ENTRYPOINT = "/usr/local/bin/trajforge-services"
WAIT_S = 150  # longer than the entrypoint's own waits (60 s a service)
_PATH = re.compile(r"/[\w./-]+")
# One host name as /etc/hosts and Docker's --add-host take it: letters, digits, "-", "_", "."
_HOST = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9_.-]{0,61}[A-Za-z0-9])?")
_NOT_NAMES = frozenset({"localhost", "host.docker.internal"})


def ready_file(labels: Mapping[str, str] | None) -> str | None:
    """The file to wait for, from an image's labels; None when there is none to wait for. A
    label that is not a plain absolute path is no promise (a sandbox never waits on it)."""
    path = (labels or {}).get(READY_LABEL, "")
    return path if _PATH.fullmatch(path) and ".." not in path.split("/") else None


def host_names(names: Iterable[str]) -> tuple[str, ...]:
    """The names a container may map to 127.0.0.1: well-formed host names, none that is a
    number, ``localhost`` or one the engine itself gives, at most ``MAX_HOSTS``, sorted."""
    kept = {
        name.lower()
        for name in names
        if _HOST.fullmatch(name)
        and name.lower() not in _NOT_NAMES
        and not name.replace(".", "").isdigit()
    }
    return tuple(sorted(kept))[:MAX_HOSTS]


def hosts(labels: Mapping[str, str] | None) -> dict[str, str]:
    """``HOSTS_LABEL``'s names, each to 127.0.0.1 (the engine's ``extra_hosts``); a name that
    is not a host name is left out, whoever built the image."""
    said = (labels or {}).get(HOSTS_LABEL, "")
    return dict.fromkeys(host_names(said.split()), "127.0.0.1")


def switches_user(labels: Mapping[str, str] | None) -> bool:
    """Whether an image's entrypoint starts a service as another user (``USERS_LABEL``)."""
    return bool((labels or {}).get(USERS_LABEL, "").strip())


def wait_argv(path: str) -> list[str]:
    """A command that exits 0 once ``path`` exists, 1 after ``WAIT_S`` (the path an argument,
    never shell text)."""
    loop = (
        f'i=0; while [ ! -e "$1" ]; do i=$((i+1)); [ "$i" -gt {WAIT_S * 10} ] && exit 1; '
        "sleep 0.1; done"
    )
    return ["/bin/sh", "-c", loop, "sh", path]


def not_ready(image: str, path: str) -> str:
    """The one line of a container whose services never said they were ready."""
    return (
        f"{image}: its entrypoint did not mark it ready ({path}) within {WAIT_S} s; its services "
        "log to /var/log/trajforge-services.log in the image"
    )
