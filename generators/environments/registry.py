"""Environment images through a registry: use what is here, pull what the registry has, build the
rest (the caller, from the profile's recipe) and push it when asked.

Building an environment takes minutes; pulling it takes seconds, and the pulled image is exactly
the one the tasks were proven in. So the build step asks, in order: is the image here (use it),
does the registry have it (pull it), else build it and, with ``environment.push``, push it so
the next machine pulls. A task that names a digest gets that image or a RegistryError: a
different image under the same name would make its verdicts someone else's.

Names: ``<registry>/env:<profile_id>`` with a registry, ``trajforge-env:<profile_id>`` without
(``image_name``). Digests: the repo digest (``<registry>/env@sha256:...``) once pushed or pulled,
else the local image id (``sha256:...``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from trajforge.generators.environments.recipe import image_name as image_name  # re-exported
from trajforge.schemas.params import EnvironmentParams
from trajforge.verifiers.sandbox.base import ImageStore, RegistryError
from trajforge.verifiers.sandbox.containers import registry_host, split_image

PRESENT = "present"  # here already
PULLED = "pulled"  # pulled from the registry
MISSING = "missing"  # neither: the caller builds it
BUILT = "built"  # built here by the caller
FAILED = "failed"  # the caller's build failed

PULLED_COUNTER = "images_pulled"
PUSHED_COUNTER = "images_pushed"


@dataclass(frozen=True)
class Ensured:
    """How an environment image came to be here, and which image it is."""

    how: str  # PRESENT | PULLED | BUILT | FAILED
    digest: str  # repo digest once pushed or pulled, else the local image id; "" when FAILED


def _no_count(name: str) -> None:
    """The default counter: outside a stage nothing is counted."""


def profile_of(image: str) -> str:
    """The profile id an environment image is named after (its tag)."""
    return split_image(image)[1]


def fetch_image(
    store: ImageStore,
    image: str,
    env: EnvironmentParams,
    count: Callable[[str], None] = _no_count,
) -> str:
    """PRESENT, PULLED (counted as ``images_pulled``) or MISSING (the caller builds it).

    The registry is asked only when ``environment.registry`` is set and the name points at a
    registry: a bare ``trajforge-env:<id>`` is never looked up anywhere.
    """
    if store.image_info(image) is not None:
        return PRESENT
    if env.registry and registry_host(image) and store.pull_image(image):
        count(PULLED_COUNTER)
        return PULLED
    return MISSING


def image_digest(store: ImageStore, image: str) -> str:
    """The image by content: its repo digest in its own repository, else its local id."""
    info = store.image_info(image)
    if info is None:
        raise RegistryError(f"registry: {image} is not here; build or pull it first")
    repository = split_image(image)[0]
    ours = (d for d in info.repo_digests if d.partition("@")[0] == repository)
    return next(ours, info.image_id)


def check_digest(store: ImageStore, image: str, expected: str) -> None:
    """RegistryError unless the local ``image`` is the one ``expected`` names (a repo digest,
    its ``sha256:...`` part, or an image id)."""
    info = store.image_info(image)
    if info is None:
        raise RegistryError(f"registry: {image} is not here; build or pull it first")
    known = {info.image_id, *info.repo_digests, *(d.partition("@")[2] for d in info.repo_digests)}
    if expected in known:
        return
    raise RegistryError(
        f"registry: profile {profile_of(image)}: {image} here is {image_digest(store, image)}, "
        f"but the tasks name {expected}; remove it (`docker rmi {image}`) and pull the one "
        "they name, or rerun the stage that made the tasks"
    )


def publish_image(
    store: ImageStore,
    image: str,
    env: EnvironmentParams,
    count: Callable[[str], None] = _no_count,
) -> str:
    """The image's digest, pushing it first (``images_pushed``) when ``environment.push`` is set
    and it has no repo digest in its repository yet (built here, never pushed)."""
    digest = image_digest(store, image)
    if not env.push or "@" in digest:
        return digest
    if not env.registry or registry_host(image) is None:
        raise RegistryError(
            f"registry: profile {profile_of(image)}: environment.push is set but {image} names "
            "no registry; set environment.registry and rerun, so images are named there"
        )
    pushed = store.push_image(image)
    count(PUSHED_COUNTER)
    return pushed


def ensure_image(
    store: ImageStore,
    image: str,
    env: EnvironmentParams,
    build: Callable[[], bool],
    expected_digest: str = "",
    count: Callable[[str], None] = _no_count,
) -> Ensured:
    """The environment ``image`` here: used, pulled, or built by ``build`` (True when it made the
    image), then pushed when ``environment.push`` is set.

    ``expected_digest`` is what a task row names (``image_digest``); an image here or pulled
    that is another image is a RegistryError, and so is one missing everywhere: a rebuild would
    be a new image, not the one the task was proven in. Counts ``images_pulled`` and
    ``images_pushed`` through ``count`` (a stage's ``StageFn.count``); builds are the caller's.
    """
    how = fetch_image(store, image, env, count)
    if how == MISSING:
        if expected_digest:
            raise _missing(image, env, expected_digest)
        if not build():
            return Ensured(FAILED, "")
        how = BUILT
    elif expected_digest:
        check_digest(store, image, expected_digest)
    return Ensured(how, publish_image(store, image, env, count))


def _missing(image: str, env: EnvironmentParams, expected_digest: str) -> RegistryError:
    where = f"nor in {env.registry}" if env.registry else "(no environment.registry)"
    return RegistryError(
        f"registry: profile {profile_of(image)}: {image} is not here {where}, and the tasks "
        f"name {expected_digest or 'it'}: a rebuild would be another image; pull it "
        "(`trajforge images pull --outputs DIR`), push it from the machine that built it, or "
        "rerun the stage that made the tasks"
    )
