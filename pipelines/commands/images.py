"""``trajforge images list|push|pull|prune``: environment images, judged by the tasks that use them.

Environment images are big (hundreds of MB each) and made once per profile, so they pile up.
Which ones matter is what the tasks say: the ``image_name`` of every task row in the given stage
outputs or exported datasets (``--outputs``). ``list`` shows them, ``push`` and ``pull`` move the
referenced ones through the registry, ``prune`` removes the rest; base images and images that a
container uses are never removed.
"""

from __future__ import annotations

import argparse
import os
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


def add_arguments(parser: argparse.ArgumentParser) -> None:
    actions = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
    for action, text in ACTIONS.items():
        sub = actions.add_parser(action, help=text, description=text)
        sub.add_argument(
            "--outputs", nargs="+", default=[], required=action != "list", metavar="DIR",
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


def run(args: argparse.Namespace, beam_args: list[str]) -> int:
    params = options.load(args)
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
        return prune_action(sandbox, used, args.repository, args.dry_run)
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
    from trajforge.generators.environments.recipe import PROFILE_LABEL

    here = _within(store.list_images(PROFILE_LABEL), repository)
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
    store: ImageStore, used: Counter[str], repository: str | None, dry_run: bool
) -> int:
    """Remove the local environment images no task names; never a base image, never one that a
    container (running or stopped) uses."""
    from trajforge.generators.environments.base_image import base_image_tag
    from trajforge.generators.environments.recipe import PROFILE_LABEL

    in_use = getattr(store, "container_image_ids", None)
    if in_use is None:
        raise UserError("images prune: this sandbox cannot say which images containers use")
    containers = in_use()
    base = base_image_tag("").partition(":")[0]
    removed = kept = freed = 0
    for tag in _within(store.list_images(PROFILE_LABEL), repository):
        info = store.image_info(tag)
        if info is None:  # removed meanwhile
            continue
        why = _keep(tag, info, used, containers, base)
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


def _keep(tag: str, info: ImageInfo, used: Counter[str], containers: set[str], base: str) -> str:
    """Why ``tag`` must stay, or "" when nothing keeps it."""
    if info.image_id in containers:
        return "a container uses it"
    if tag.partition(":")[0] == base:
        return "a base image"
    if tag in used:
        return f"{used[tag]} task(s) use it"
    by_digest = sum(used[digest] for digest in info.repo_digests if digest in used)
    return f"{by_digest} task(s) name it by digest" if by_digest else ""


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
