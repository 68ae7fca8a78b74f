"""``trajforge images list|push|pull|prune``: environment images, judged by the tasks that use them.

Environment images are big (hundreds of MB each) and made once per profile, so they pile up.
Which ones matter is what the tasks say: the ``image_name`` of every task row in the given stage
outputs or exported datasets (``--outputs``). ``list`` shows them, ``push`` and ``pull`` move the
referenced ones through the registry, ``prune`` removes the rest, by this rule (PRUNE_RULE):

- only images trajforge built: its labels on the image, under the name trajforge gives such an
  image (``trajforge-env:<profile id>`` or ``<registry>/env:<profile id>`` for the profile its
  label names, ``trajforge-eval:<recipe hash>`` for the recipe hash its label names). Labels
  are inherited, so a user's image built ``FROM trajforge-env:*`` carries them too; its own name
  is not the one its labels imply, so it is never trajforge's;
- never an image another local image is built on (that image's layers begin with all of its
  layers): untagging it frees nothing and breaks the other's ``FROM`` (a rebuild of it);
- never an image a container uses, running or stopped, nor a base image;
- never one made or last tagged by a build within ``--min-age`` (24 hours by default; a build
  served whole from the cache keeps the first build's creation time, and tags anew): a run going
  on now may have just built it and not yet started a container of it, and no engine says when an
  image was last used. A run that uses an older image holds a container of it while it does
  (spares are started ahead), so ``--min-age 0`` is safe only when no trajforge run goes on here;
- and never one a task of ``--outputs`` names (by name or by digest).

``prune --keep-none`` says out loud that no output's tasks are to be kept (a benchmark or CI
machine's cleanup): the rest of the rule still holds. Without it ``prune`` needs ``--outputs``,
so a forgotten argument never removes the images a dataset needs.
"""

from __future__ import annotations

import argparse
import os
import time
from collections import Counter
from typing import TYPE_CHECKING

from trajforge.pipelines.commands import options
from trajforge.schemas.errors import UserError

if TYPE_CHECKING:
    from trajforge.verifiers.sandbox.base import ImageInfo, ImageStore

NAME = "images"
HELP = "list, push, pull or prune environment images (by the tasks of stage outputs)"
# Tables whose rows name an environment: a stage output's, and an export's explore config.
TASK_TABLES = ("tasks", "explore_tasks", "explore")

ACTIONS = {
    "list": "the local environment images, with size and digest (--outputs: which the tasks use)",
    "push": "push every image the tasks of --outputs name (needs environment.registry)",
    "pull": "pull the images the tasks of --outputs name that are not here",
    "prune": "remove the local environment images no task of --outputs names",
}
PRUNE_RULE = (
    "Only images trajforge built (its labels, under the name those labels imply: never a user's "
    "image built FROM one), never one another local image is built on, one a container uses, a "
    "base image, or one made or rebuilt within --min-age (a run going on now may have just built "
    "it)."
)
DEFAULT_MIN_AGE_H = 24.0


def add_arguments(parser: argparse.ArgumentParser) -> None:
    actions = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
    for action, text in ACTIONS.items():
        described = f"{text}. {PRUNE_RULE}" if action == "prune" else text
        sub = actions.add_parser(action, help=text, description=described)
        sub.add_argument(
            "--outputs", nargs="+", default=[], required=action in ("push", "pull"),
            metavar="DIR",
            help="stage output or exported dataset directories whose tasks name images",
        )  # fmt: skip
        sub.add_argument("--params", help="params YAML (default: ./params.yaml if present)")
        if action in ("list", "prune"):
            sub.add_argument(
                "--repository", metavar="REPO",
                help="only images named in REPO or below it (e.g. localhost:5000/trajforge)",
            )  # fmt: skip
        if action == "prune":
            sub.add_argument("--dry-run", action="store_true", help="say what would go only")
            sub.add_argument(
                "--keep-none", action="store_true",
                help="no tasks to keep images for (instead of --outputs): a benchmark or CI "
                "machine's cleanup; the rest of the rule still holds",
            )  # fmt: skip
            sub.add_argument(
                "--min-age", type=_hours, default=DEFAULT_MIN_AGE_H, metavar="HOURS",
                help="keep images made less than this long ago, which a run going on now may "
                f"have just built (default {DEFAULT_MIN_AGE_H:g}; 0 only when no run is going on)",
            )  # fmt: skip


def _hours(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not value >= 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of hours (0 or more)")
    return value


def run(args: argparse.Namespace, beam_args: list[str]) -> int:
    params = options.load(args)
    if args.action == "prune" and bool(args.outputs) == bool(args.keep_none):
        raise UserError(
            "images prune: pass --outputs DIR... (the tasks whose images to keep) or --keep-none "
            "(keep none: remove every unused trajforge image the rule allows), not both or neither"
        )
    used = referenced_images(args.outputs)  # bad input fails here, before any engine is asked
    registry = params.environment.registry or ""
    if args.action == "push" and not registry:
        raise UserError(
            "images push: environment.registry is not set; set it (e.g. localhost:5000/trajforge) "
            "in the params file"
        )
    from trajforge.verifiers.sandbox.base import ImageStore
    from trajforge.verifiers.sandbox.factory import make_sandbox

    sandbox = make_sandbox(params, quiet=True)
    try:
        if not isinstance(sandbox, ImageStore):
            raise UserError(
                f"images: sandbox.kind {params.sandbox.kind} has no images; set sandbox.kind docker"
            )
        if args.action == "list":
            return list_action(sandbox, used, args.outputs, args.repository)
        if args.action == "push":
            return push_action(sandbox, used, registry)
        if args.action == "pull":
            return pull_action(sandbox, used)
        return prune_action(sandbox, used, args.repository, args.dry_run, args.min_age)
    finally:
        sandbox.close()


def referenced_images(directories: list[str]) -> Counter[str]:
    """Image name -> how many task rows name it, over every directory (each checked: a stage
    output or an export holding a task table whose files all read)."""
    from trajforge.pipelines.runtime import outputs
    from trajforge.schemas.storage import is_local

    used: Counter[str] = Counter()
    for directory in directories:
        if is_local(directory):
            _check_output_dir(directory)
        files = [f for table in TASK_TABLES for f in outputs.table_files(directory, table)]
        if not files:
            raise UserError(
                f"images: {directory} holds no tasks (no tasks/, explore_tasks/ or explore/ "
                "Parquet files); pass the output of validate or a later stage, or an export"
            )
        _, bad = outputs.readable(files, ["image_name"])
        if bad:  # never judge by part of the tasks: prune would remove what the rest names
            path, why = next(iter(bad.items()))
            raise UserError(f"images: {path}: {why}")
        used.update(name for name in outputs.column(files, "image_name") if name)
    return used


def _check_output_dir(directory: str) -> None:
    """A directory trajforge wrote: the output marker, or an older output's summary.json, or an
    export's version.json (a dataset downloaded from the Hub has no marker)."""
    from trajforge.pipelines.runtime.sinks import MARKER

    if not os.path.isdir(directory):
        raise UserError(
            f"images: {directory} is not a directory; pass stage output or export directories"
        )
    known = (MARKER, "summary.json", "version.json")
    if not any(os.path.exists(os.path.join(directory, name)) for name in known):
        raise UserError(
            f"images: {directory} is not a stage output or an export (none of "
            f"{', '.join(known)}); pass a directory trajforge wrote"
        )


def list_action(
    store: ImageStore, used: Counter[str], directories: list[str], repository: str | None
) -> int:
    """One line per local environment image (and per referenced image that is not here)."""
    here = _within(_labelled(store), repository)
    total = 0
    for tag in here:
        info = store.image_info(tag)
        size = sum(n for _, n in info.layers) if info else 0
        total += size
        mark = ("used" if tag in used else "unused") if directories else ""
        print(f"{mark:<8}{tag}  {_size(size)}  {_repo_digest(tag, info)}".lstrip())
    missing = [name for name in sorted(used) if name not in here and _in(name, repository)]
    for name in missing:
        print(f"{'missing':<8}{name}  -  - ({used[name]} task(s); `trajforge images pull`)")
    line = f"{len(here)} environment image(s) here, {_size(total)}"
    if directories:
        in_use = sum(tag in used for tag in here)
        line += f"; {in_use} used by the tasks, {len(here) - in_use} unused, {len(missing)} missing"
    print(line)
    return 0


def push_action(store: ImageStore, used: Counter[str], registry: str) -> int:
    """Push each referenced image named in ``registry``; 1 when any could not be pushed."""
    pushed = 0
    for name in sorted(used):
        if not _in(name, registry):
            print(f"skip    {name}: not named in environment.registry {registry}")
        elif store.image_info(name) is None:
            print(f"missing {name}: not here; `trajforge images pull` or rebuild it")
        else:
            print(f"pushed  {name}  {store.push_image(name)}")
            pushed += 1
    print(f"pushed {pushed} of {len(used)} image(s) the tasks name")
    return 0 if pushed == len(used) else 1


def pull_action(store: ImageStore, used: Counter[str]) -> int:
    """Pull each referenced image not here; 1 when any is still not here."""
    from trajforge.verifiers.sandbox.containers import registry_host

    pulled = present = 0
    for name in sorted(used):
        if store.image_info(name) is not None:
            print(f"present {name}")
            present += 1
        elif registry_host(name) is None:
            print(f"skip    {name}: a local name, no registry to pull it from; rebuild it")
        elif store.pull_image(name):
            print(f"pulled  {name}")
            pulled += 1
        else:
            print(f"absent  {name}: its registry does not have it")
    print(f"pulled {pulled}, {present} already here, {len(used) - pulled - present} not here")
    return 0 if pulled + present == len(used) else 1


def prune_action(
    store: ImageStore,
    used: Counter[str],
    repository: str | None,
    dry_run: bool,
    min_age_h: float = DEFAULT_MIN_AGE_H,
) -> int:
    """Remove the local environment images no task names, by PRUNE_RULE (the module doc)."""
    from trajforge.generators.environments.base_image import base_image_tag

    in_use = getattr(store, "container_image_ids", None)
    layers_of = getattr(store, "image_layers", None)
    if in_use is None or layers_of is None:
        raise UserError("images prune: this sandbox cannot say which images containers use")
    containers = in_use()
    layers = layers_of()
    now = time.time()
    base = base_image_tag("").partition(":")[0]
    removed = kept = freed = 0
    for tag in _within(_labelled(store), repository):
        info = store.image_info(tag)
        if info is None:  # removed meanwhile
            continue
        why = _keep(tag, info, used, containers, base, layers, now - min_age_h * 3600)
        if why:
            print(f"keep    {tag}: {why}")
            kept += 1
            continue
        size = sum(n for _, n in info.layers)
        if not dry_run:
            store.remove_image(tag)
        print(f"{'would remove' if dry_run else 'removed'} {tag}  {_size(size)}")
        removed, freed = removed + 1, freed + size
    verb = "would remove" if dry_run else "removed"
    print(f"{verb} {removed} image(s) ({_size(freed)} at most), kept {kept}")
    return 0


def _labelled(store: ImageStore) -> list[str]:
    """Tags of the local images with trajforge's labels (a user's image built on one too)."""
    from trajforge.generators.environments.recipe import PROFILE_LABEL, RECIPE_LABEL

    return sorted({*store.list_images(PROFILE_LABEL), *store.list_images(RECIPE_LABEL)})


def _keep(
    tag: str,
    info: ImageInfo,
    used: Counter[str],
    containers: set[str],
    base: str,
    layers: dict[str, tuple[str, ...]],
    made_before: float,
) -> str:
    """Why ``tag`` must stay, or "" when nothing keeps it (PRUNE_RULE)."""
    if not_ours := _not_trajforges(tag, info):
        return not_ours
    if info.image_id in containers:
        return "a container uses it"
    if tag.partition(":")[0] == base:
        return "a base image"
    if tag in used:
        return f"{used[tag]} task(s) use it"
    by_digest = sum(used[digest] for digest in info.repo_digests if digest in used)
    if by_digest:
        return f"{by_digest} task(s) name it by digest"
    if children := _built_on(info, layers):
        return f"{len(children)} other image(s) are built on it ({children[0][:19]}...)"
    # a rebuild served from the cache keeps its first build's Created: its tag time says when a
    # run last built it
    if max(info.created, info.tagged) > made_before:
        return "made within --min-age (a run going on now may have just built it)"
    return ""


def _not_trajforges(tag: str, info: ImageInfo) -> str:
    """Why the image under ``tag`` is not one trajforge built ("" when it is): its labels imply
    a name (an environment's profile id, an evaluation image's recipe hash) and ``tag`` is not
    it. A user's image built FROM one of ours inherits our labels, never our name."""
    from trajforge.generators.environments.recipe import (
        EVAL_KIND,
        EVAL_REPOSITORY,
        KIND_LABEL,
        PROFILE_LABEL,
        RECIPE_LABEL,
    )
    from trajforge.verifiers.sandbox.containers import split_image

    repository, name = split_image(tag)
    labels = info.labels
    if labels.get(KIND_LABEL) == EVAL_KIND or repository == EVAL_REPOSITORY:
        if repository == EVAL_REPOSITORY and name and name == labels.get(RECIPE_LABEL):
            return ""
        return "not trajforge's (its name is not trajforge-eval:<its recipe label>)"
    environment = repository == "trajforge-env" or repository.endswith("/env")
    if environment and name and name == labels.get(PROFILE_LABEL):
        return ""
    return "not trajforge's (its name is not the environment name its profile label implies)"


def _built_on(info: ImageInfo, layers: dict[str, tuple[str, ...]]) -> list[str]:
    """Ids of the other local images whose layers begin with all of this image's layers."""
    mine = layers.get(info.image_id) or tuple(diff_id for diff_id, _ in info.layers)
    if not mine:
        return []
    return sorted(
        image_id
        for image_id, theirs in layers.items()
        if image_id != info.image_id and len(theirs) >= len(mine) and theirs[: len(mine)] == mine
    )


def _within(tags: list[str], repository: str | None) -> list[str]:
    return [tag for tag in tags if _in(tag, repository)]


def _in(image: str, repository: str | None) -> bool:
    """``image`` is named in ``repository`` or below it (always, with no repository)."""
    if not repository:
        return True
    from trajforge.verifiers.sandbox.containers import split_image

    name = split_image(image)[0]
    return name == repository or name.startswith(repository.rstrip("/") + "/")


def _repo_digest(tag: str, info: ImageInfo | None) -> str:
    """The digest the registry gave ``tag``'s repository, or "-" (never pushed or pulled)."""
    from trajforge.verifiers.sandbox.containers import split_image

    repository = split_image(tag)[0]
    digests = [d for d in (info.repo_digests if info else ()) if d.partition("@")[0] == repository]
    return digests[0] if digests else "-"


def _size(n: int) -> str:
    """Bytes as Docker prints them (decimal units)."""
    if n < 1000:
        return f"{n} B"
    value = n / 1000
    for unit in ("kB", "MB"):
        if value < 1000:
            return f"{value:.1f} {unit}"
        value /= 1000
    return f"{value:.1f} GB"
