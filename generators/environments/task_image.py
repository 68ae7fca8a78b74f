"""A task's image: which image a task's tests run in, decided here for every caller.

``evaluate``, ``serve-rewards``, the reward API and ``TaskEnv`` (all through
``pipelines/evaluation/evaluator.py``) and the rollout stage ask ``ensure_task_image``, so a fix to
how a task's image is found lands everywhere at once.

A task row's ``image_name`` is a request, not a trust anchor: anyone can write a tasks file, and
a row may name any image, a victim's ``trajforge-env:<profile>`` included. So:

1. The named image, here or pulled (``registry.fetch_image``), runs the row when the row names
   its digest (``image_digest``) and it is that image, or, with no digest named, when the image's
   recipe label (``trajforge.recipe``, set by trajforge's builder) equals the recipe hash
   trajforge computes from the row's own ``env_recipe`` at its setup commit (a row without a
   recipe has nothing to compare: the image it names runs it). A row that names a digest and
   finds another image under the name is a RegistryError, as a rebuild would be another image.
2. Otherwise (the named image is missing, or was built from another recipe: counted
   ``images_untrusted``), with rebuilds allowed and a recipe in the row, the row's recipe is
   built as ``trajforge-eval:<recipe hash>`` (reused when already there with that label),
   counted ``images_rebuilt``, and one line says so. Never under the row's name and never as
   ``trajforge-env:*``: a tasks file cannot replace an image that ``validate`` reuses.
3. Else a RegistryError that says what to do (the rollout stage never builds: it runs the very
   image its task was proven in).

Every language's task goes the same way: its recipe is labelled and hashed by the same builder;
a rebuild first calls the caller's ``ensure_base`` (its language's
``Language.ensure_base_image``: a JavaScript task's node base image is made on demand).

What runs is the image's id, not its name: a name moved after the check (a concurrent rebuild,
a user's ``docker tag``) cannot change what a task runs in, and a verdict keyed by it is keyed by
content.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from trajforge.generators.environments.image import build_recipe, recipe_digest
from trajforge.generators.environments.recipe import EVAL_KIND, RECIPE_LABEL, eval_image_name
from trajforge.generators.environments.registry import MISSING, check_digest, fetch_image
from trajforge.schemas.errors import UserError
from trajforge.schemas.params import EnvironmentParams
from trajforge.schemas.task_instance import TaskInstance
from trajforge.verifiers.sandbox.base import ImageInfo, ImageStore, RegistryError
from trajforge.verifiers.sandbox.git_tree import GitError

REBUILT_COUNTER = "images_rebuilt"  # a row's recipe built here, as trajforge-eval:<hash>
UNTRUSTED_COUNTER = "images_untrusted"  # a named image here that is not the row's recipe
NAMED = "named"  # the image the row names, here or pulled
EVAL = "eval"  # the row's recipe built before, found as trajforge-eval:<hash>
REBUILT = "rebuilt"  # the row's recipe built now, as trajforge-eval:<hash>


@dataclass(frozen=True)
class TaskImage:
    """The image a task runs in."""

    run: str  # the image id to start its containers from
    tag: str  # the name it was found or built under (what reports show)
    how: str  # NAMED | EVAL | REBUILT
    why: str = ""  # why the image the row names does not run it ("" when it does)


def _no_count(name: str) -> None:
    """The default counter: outside a stage nothing is counted."""


def ensure_task_image(
    store: ImageStore,
    task: TaskInstance,
    repo_path: str,
    env: EnvironmentParams,
    count: Callable[[str], None] = _no_count,
    *,
    rebuild: bool = True,
    say: Callable[[str], None] | None = None,
    ensure_base: Callable[[str], None] | None = None,
) -> TaskImage:
    """The image ``task`` runs in (see the module doc); a RegistryError, or a UserError with
    reason ``environment_build_failed``, when there is none. ``repo_path`` is the task's source
    here (its setup commit is the recipe's build context). ``rebuild``: whether the row's recipe
    may be built (evaluate: yes unless ``--no-rebuild``; rollout: never). ``ensure_base``
    makes the base image a recipe builds FROM before a rebuild, where the task's language
    makes it on demand (``Language.ensure_base_image``)."""
    named = task.image_name
    why = f"the task names no image ({named!r})" if not _plausible(named) else ""
    if not why and fetch_image(store, named, env, count) != MISSING:
        info = store.image_info(named)
        if info is not None:
            if task.image_digest:
                check_digest(store, named, task.image_digest)  # that image, or a RegistryError
                return TaskImage(info.image_id, named, NAMED)
            why = _recipe_mismatch(info, task, repo_path)
            if not why:
                return TaskImage(info.image_id, named, NAMED)
            count(UNTRUSTED_COUNTER)
    if not why:
        where = f"nor in {env.registry}" if env.registry else "(no environment.registry)"
        why = f"{named} is not here {where}"
    if not (rebuild and task.env_recipe):
        lack = "rebuilds are off" if not rebuild else "the task has no recipe to rebuild"
        raise RegistryError(
            f"{task.instance_id}: {why}, and {lack}; pull the image the task was proven in "
            "(`trajforge images pull --outputs DIR`, environment.registry) or rerun validate"
        )
    return _built(store, task, repo_path, env, count, why, say, ensure_base)


def _plausible(name: str) -> bool:
    """A name an engine could look up (no option, no whitespace)."""
    return bool(name) and not name.startswith("-") and not any(c.isspace() for c in name)


def row_recipe_hash(task: TaskInstance, repo_path: str) -> str:
    """The hash of the row's own recipe at its setup commit (the base commit when it names none);
    a UserError (``bad_task``) when that commit is not in the task's repository."""
    commit = task.environment_setup_commit or task.base_commit
    try:
        return recipe_digest(repo_path, task.env_recipe, task.profile_id, commit)
    except GitError as exc:
        raise UserError(
            f"{task.instance_id}: the task's setup commit {commit[:12]!r} is not in its "
            f"repository ({exc.detail}); its recipe cannot be built",
            reason="environment_build_failed",
        ) from None


def _recipe_mismatch(info: ImageInfo, task: TaskInstance, repo_path: str) -> str:
    """Why the image the row names is not the row's recipe ("" when it is, or the row has no
    recipe to compare it with)."""
    if not task.env_recipe:
        return ""
    recorded = info.labels.get(RECIPE_LABEL, "")
    expected = row_recipe_hash(task, repo_path)
    if recorded == expected:
        return ""
    said = f"{RECIPE_LABEL} {recorded[:12]}" if recorded else f"no {RECIPE_LABEL} label"
    return (
        f"{task.image_name} here was not built from the task's recipe ({said}, the task's "
        f"recipe is {expected[:12]})"
    )


def _built(
    store: ImageStore,
    task: TaskInstance,
    repo_path: str,
    env: EnvironmentParams,
    count: Callable[[str], None],
    why: str,
    say: Callable[[str], None] | None,
    ensure_base: Callable[[str], None] | None,
) -> TaskImage:
    """The row's recipe as ``trajforge-eval:<its hash>``: found there already, or built now."""
    expected = row_recipe_hash(task, repo_path)
    tag = eval_image_name(expected)
    info = store.image_info(tag)
    if info is not None and info.labels.get(RECIPE_LABEL) == expected:
        return TaskImage(info.image_id, tag, EVAL, why)
    commit = task.environment_setup_commit or task.base_commit
    if ensure_base is not None:
        ensure_base(task.env_recipe)
    result = build_recipe(
        store, tag, task.env_recipe, task.profile_id, commit, repo_path, env, EVAL_KIND
    )
    info = store.image_info(tag) if result.ok else None
    if info is None:
        tail = (result.log.strip().splitlines() or ["(no log)"])[-1][:200]
        raise UserError(
            f"{task.instance_id}: building the task's recipe as {tag} failed ({tail}); pull the "
            "image the task was proven in instead (`trajforge images pull --outputs DIR`)",
            reason="environment_build_failed",
        )
    count(REBUILT_COUNTER)
    if say is not None:
        say(f"{task.instance_id}: {why}; built the task's recipe as {tag} and ran it there")
    return TaskImage(info.image_id, tag, REBUILT, why)
