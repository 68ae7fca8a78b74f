"""Services a suite expects (Redis, memcached, PostgreSQL, MariaDB), started inside the image.

A project whose CI or compose file runs a service beside its tests (``services: redis:`` in a
GitHub workflow, ``image: memcached`` in ``docker-compose.yml``) has a suite that talks to it on
127.0.0.1; without it the suite hangs or fails and the repository gives no task. Here the
service is installed from Debian's packages in the image's final stage and started by the
image's own entrypoint (``ENTRYPOINT``), before any command of any session runs in it: validate's
runs, the grader's, ``evaluate``'s and ``TaskEnv``'s alike, on every backend that starts a
container, with no list of services anywhere else. A suite that reaches a service by the name
its compose file or CI gives it (``db``, ``redis``: compose's service keys, a workflow's
``services:`` keys, GitLab's aliases) finds it there too: the image names those hosts
(``HOSTS_LABEL``) and every backend maps them to 127.0.0.1 in the container it starts. The
image says where its entrypoint marks the services ready (``READY_LABEL``); a sandbox hands
out a container only after that mark (``verifiers/sandbox/ready.py``). Sessions keep no
network: a service listens on loopback only.

Code under test may reach a service, so each one (``service_catalog.py``) is started so that
nothing it is told reaches past what the tests' user may do itself. PostgreSQL and MariaDB
refuse root: they run as their own OS users, so their image names those users
(``USERS_LABEL``) and every session of it keeps the capability to switch. The connection
settings a project's CI gives its suite and services (``service_env.py``) become the image's
ENV. A service named that is not in ``SERVICES`` is told in one line, never guessed.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import yaml
from trajforge.generators.environments.commit_files import ls_tree, read_paths
from trajforge.generators.environments.service_catalog import (
    DATA_DIR,
    NOT_STARTED,
    SERVICES,
    Service,
)
from trajforge.generators.environments.service_env import env_lines, suite_environment
from trajforge.verifiers.sandbox.ready import (
    HOSTS_LABEL,
    READY_FILE,
    READY_LABEL,
    SERVICES_LABEL,
    USERS_LABEL,
    host_names,
)
from trajforge.verifiers.sandbox.ready import SERVICES_ENTRYPOINT as ENTRYPOINT

LOG_FILE = "/var/log/trajforge-services.log"
READY_WAIT_S = 60  # the entrypoint's wait for each service; the sandbox waits a little longer
# a compose file or workflow larger than this is not a service declaration worth parsing
_MAX_FILE_BYTES = 512 * 1024
_COMPOSE = re.compile(r"(?:docker-)?compose(?:[.-][\w.-]*)?\.ya?ml")
_WORKFLOW = re.compile(r"\.github/workflows/[^/]+\.ya?ml")
_GITLAB = ".gitlab-ci.yml"


_BY_IMAGE = {image: service.name for service in SERVICES.values() for image in service.images}
_BY_ACTION = {action: service.name for service in SERVICES.values() for action in service.actions}


@dataclass(frozen=True)
class Named:
    """What a repository's files name: services started (sorted names of ``SERVICES``), for
    each one that is not "<image> (<where>): <why>", and the connection settings the same files
    give the suite and its services (``service_env``: "NAME=value"; none without a service)."""

    started: tuple[str, ...] = ()
    not_started: tuple[str, ...] = ()
    environment: tuple[str, ...] = ()
    hosts: tuple[str, ...] = ()  # the names the files give started services (compose's keys)


def declaration_files(paths: Iterable[str]) -> list[str]:
    """The files at a commit that may name services: compose files at the root, GitHub
    workflows, GitLab's CI file."""
    return sorted(
        path
        for path in paths
        if _COMPOSE.fullmatch(path) or _WORKFLOW.fullmatch(path) or path == _GITLAB
    )


def services_at(
    repo_path: str, commit: str, tree: dict[str, tuple[str, str]] | None = None
) -> Named:
    """The services the repository's files at ``commit`` name (``tree``: ``ls_tree``'s, read
    when not given)."""
    tree = ls_tree(repo_path, commit) if tree is None else tree
    return services_named(read_paths(repo_path, commit, tree, declaration_files(tree)))


def services_named(files: Mapping[str, bytes]) -> Named:
    """The services ``files`` (from ``declaration_files``) run beside the tests: by a service's
    image name (its tag may be an expression, ``valkey/valkey:${{ matrix.v }}``; a name that is
    one names nothing) or a workflow step's action that starts one; and the settings they give
    them. A file that is not YAML names none."""
    started: set[str] = set()
    not_started: dict[str, str] = {}
    blocks: list[Any] = []
    hosts: list[str] = []
    for path, raw in sorted(files.items()):
        declared = _declared(path, raw)
        started.update(_BY_ACTION[action] for action in declared.actions if action in _BY_ACTION)
        for image, host in zip(declared.images, declared.hosts, strict=True):
            base = image_base(image)
            if base in _BY_IMAGE:
                started.add(_BY_IMAGE[base])
                hosts.append(host)
            elif base in NOT_STARTED:
                not_started.setdefault(base, f"{image} ({path}): {NOT_STARTED[base]}")
        blocks += declared.env
    return Named(
        tuple(sorted(started)),
        tuple(not_started[name] for name in sorted(not_started)),
        suite_environment(blocks) if started else (),
        host_names(hosts),
    )


def image_base(image: str) -> str:
    """``docker.io/library/redis:7-alpine`` -> ``redis``: the last path part, no tag or digest."""
    last = image.strip().rsplit("/", 1)[-1]
    return last.split("@", 1)[0].split(":", 1)[0].lower()


@dataclass(frozen=True)
class _Declared:
    images: list[str]  # service images
    actions: list[str]  # workflow steps' actions
    env: list[Any]  # the env blocks of the jobs and services that run them
    hosts: list[str] = field(default_factory=list)  # each image's host name, in its order


def _declared(path: str, raw: bytes) -> _Declared:
    """What one file declares."""
    doc: Any = None
    if len(raw) <= _MAX_FILE_BYTES:
        try:
            doc = yaml.safe_load(raw)
        except (yaml.YAMLError, RecursionError, ValueError):
            doc = None
    if not isinstance(doc, dict):
        return _Declared([], [], [])
    if path == _GITLAB:
        served = [job for job in doc.values() if isinstance(job, dict) and job.get("services")]
        lists = [doc.get("services")] + [job.get("services") for job in served]
        variables = [job.get("variables") for job in served] + [doc.get("variables")]
        named = [pair for entry in lists for pair in _gitlab_images(entry)]
        return _Declared([i for i, _ in named], [], variables, [h for _, h in named])
    if not _WORKFLOW.fullmatch(path):
        images, environments, hosts = _services(doc.get("services"), "environment")
        return _Declared(images, [], environments, hosts)
    jobs = doc.get("jobs")
    jobs = [job for job in jobs.values() if isinstance(job, dict)] if isinstance(jobs, dict) else []
    images, actions, env, hosts = [], [], [], []
    for job in jobs:
        job_images, job_env, job_hosts = _services(job.get("services"), "env")
        job_actions = _step_actions(job.get("steps"))
        if job_images or any(action in _BY_ACTION for action in job_actions):
            env += [job.get("env"), *job_env, *_step_env(job.get("steps")), doc.get("env")]
        images += job_images
        hosts += job_hosts
        actions += job_actions
    return _Declared(images, actions, env, hosts)


def _services(block: Any, env_key: str) -> tuple[list[str], list[Any], list[str]]:
    """Images of a compose file's or a workflow's ``services:`` mapping, their env blocks and
    their keys (the host name a job in a container, or another compose service, reaches)."""
    if not isinstance(block, dict):
        return [], [], []
    images, env, hosts = [], [], []
    for key, service in block.items():
        image = service.get("image") if isinstance(service, dict) else service
        if isinstance(image, str):  # an expression in the tag is fine: the name decides
            images.append(image)
            env.append(service.get(env_key) if isinstance(service, dict) else None)
            hosts.append(key if isinstance(key, str) else "")
    return images, env, hosts


def _step_env(steps: Any) -> list[Any]:
    """A job's steps' ``env:`` blocks, in order (the first step to set a name gives it)."""
    return (
        [step.get("env") for step in steps if isinstance(step, dict)]
        if isinstance(steps, list)
        else []
    )


def _step_actions(steps: Any) -> list[str]:
    """A job's ``uses: owner/action@ref`` steps, as ``owner/action`` (lower case)."""
    if not isinstance(steps, list):
        return []
    uses = [step.get("uses") for step in steps if isinstance(step, dict)]
    return [use.split("@", 1)[0].lower() for use in uses if isinstance(use, str)]


def _gitlab_images(entry: Any) -> list[tuple[str, str]]:
    """GitLab's ``services:`` (a list of image names or of ``{name: image, alias: host}``) as
    (image, host): the host is the alias, else the image's name, as GitLab names it."""
    if not isinstance(entry, list):
        return []
    pairs = []
    for item in entry:
        image = item.get("name") if isinstance(item, dict) else item
        alias = item.get("alias") if isinstance(item, dict) else None
        if isinstance(image, str):
            pairs.append((image, alias if isinstance(alias, str) else image_base(image)))
    return pairs


def with_services(
    recipe: str,
    services: Iterable[str],
    environment: Iterable[str] = (),
    hosts: Iterable[str] = (),
) -> str:
    """``recipe`` (any language's Dockerfile whose last stage is the image) starting
    ``services``: the suite's connection settings (``environment``, "NAME=value"), their
    packages and entrypoint first in the last stage (before the commit's files, so every
    commit's build shares those layers), the entrypoint and the labels last, ``hosts`` (the
    names the suite reaches them by) among them. ``recipe`` itself for none, so a profile
    without services renders as it always did."""
    chosen = _chosen(services)
    if not chosen:
        return recipe
    lines = recipe.rstrip("\n").split("\n")
    last_stage = max(i for i, line in enumerate(lines) if line.startswith("FROM "))
    packages = " ".join(sorted({p for service in chosen for p in service.packages}))
    install = [
        "apt-get update",
        f"DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends {packages}",
        "rm -rf /var/lib/apt/lists/*",
        *(line for service in chosen for line in service.build_steps),
    ]
    script = entrypoint_script(chosen)
    write = [f"cat > {ENTRYPOINT} <<'TRAJFORGE'\n{script}TRAJFORGE", f"chmod 755 {ENTRYPOINT}"]
    names = " ".join(service.name for service in chosen)
    users = " ".join(sorted({service.user for service in chosen if service.user}))
    labels = f'{READY_LABEL}="{READY_FILE}" {SERVICES_LABEL}="{names}"'
    labels += f' {USERS_LABEL}="{users}"' if users else ""
    names_of_hosts = " ".join(host_names(hosts))
    labels += f' {HOSTS_LABEL}="{names_of_hosts}"' if names_of_hosts else ""
    return "\n".join(
        [
            *lines[: last_stage + 1],
            *env_lines(environment),
            _run(install),
            _run(write),
            *lines[last_stage + 1 :],
            f'ENTRYPOINT ["{ENTRYPOINT}"]',
            f"LABEL {labels}",
            "",
        ]
    )


def _run(script: list[str]) -> str:
    """One ``RUN`` in exec form (as ``recipe.py`` writes them): no shell of the builder's."""
    return f"RUN {json.dumps(['/bin/sh', '-ec', chr(10).join(script)])}"


def _chosen(services: Iterable[str]) -> list[Service]:
    names = sorted(set(services))
    unknown = [name for name in names if name not in SERVICES]
    if unknown:  # a caller's bug: only names from ``services_named`` reach a recipe
        raise ValueError(f"services: {unknown} are not services trajforge starts")
    return [SERVICES[name] for name in names]


def entrypoint_script(services: Iterable[Service]) -> str:
    """Start each service, wait (bounded) until its port answers, mark ready, then run the
    container's command. A service that does not answer is in the log; the suite decides."""
    lines = ["#!/bin/bash", f"mkdir -p {DATA_DIR}", f"exec 3>>{LOG_FILE}"]
    for service in services:
        lines += [
            f"{service.start} >&3 2>&3 || echo 'trajforge: {service.name} did not start' >&3",
            f"for _ in $(seq {READY_WAIT_S * 10}); do "
            f"(: >/dev/tcp/127.0.0.1/{service.port}) 2>/dev/null && break; sleep 0.1; done",
        ]
    lines += ["exec 3>&-", f"touch {READY_FILE}", 'exec "$@"', ""]
    return "\n".join(lines)


def described(named: Named) -> str:
    """One line for a profile's log: what is started, what is not and why ("" for nothing)."""
    parts = []
    if named.started:
        parts.append(f"services started in the image: {', '.join(named.started)}")
    parts += [f"service not started: {line}" for line in named.not_started]
    return "; ".join(parts)
