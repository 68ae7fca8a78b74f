"""Stage outputs on an object store (s3://, gs://): staged inside the output, committed by a marker.

An object store has no rename, so a finished run cannot be swapped into place as a local one is
(``sinks.publish``). A run writes its tables into ``<output>/.staging-<8 hex>/`` instead, where
every worker can reach them. Publishing then:

1. deletes the output's old marker (from here on readers refuse the output as unfinished),
2. deletes the old run's files and copies the staged ones into place (server-side copies),
3. writes the marker last, listing every published file and its size,
4. deletes the staging folder.

Readers trust the marker (``outputs.published``): they read exactly the files it lists, and a
staging folder with no marker is a run cut off or under way, refused with one line. A run that
dies at any step leaves either the old output or a refused one, never a mix that reads as whole.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Sequence

from trajforge.pipelines.runtime.outputs import MARKER, STAGING
from trajforge.schemas.errors import UserError
from trajforge.schemas.storage import (
    copy_files,
    delete_files,
    exists,
    files_under,
    join,
    write_bytes_atomic,
)


def check_output(stage: str, output: str, inputs: Sequence[str] = ()) -> None:
    """Refuse an output that is or holds an input, or holds files trajforge did not write."""
    root = output.rstrip("/")
    for given in inputs:
        if given.rstrip("/") == root or given.startswith(root + "/"):
            raise UserError(
                f"{stage}: --output {output} is or holds the input {given}; a run replaces its "
                "output, so pass a location of its own"
            )
    names = files_under(root)
    if not names or exists(join(root, MARKER)):
        return
    if any(_inside_staging(root, path) for path in names):
        return  # a run cut off before its marker: trajforge's, and replaceable
    raise UserError(
        f"{stage}: --output {output} holds files trajforge did not write; pass a new location "
        "(or remove them yourself)"
    )


def staging_dir(output: str) -> str:
    """A fresh staging folder inside ``output``; those of runs that were cut off are deleted."""
    root = output.rstrip("/")
    delete_files(path for path in files_under(root) if _inside_staging(root, path))
    staging = join(root, f"{STAGING}{uuid.uuid4().hex[:8]}")
    write_bytes_atomic(join(staging, MARKER), b"a trajforge run under way\n")
    return staging


def publish(staging: str, output: str) -> None:
    """Commit the finished ``staging`` as ``output`` (see the module doc for the steps)."""
    root = output.rstrip("/")
    staged = {
        path[len(staging) + 1 :]: size
        for path, size in files_under(staging).items()
        if path != join(staging, MARKER)
    }
    marker = join(root, MARKER)
    delete_files([marker] if exists(marker) else [])
    delete_files(path for path in files_under(root) if not _inside_staging(root, path))
    names = sorted(staged)
    copy_files([join(staging, n) for n in names], [join(root, n) for n in names])
    body = {"written_by": "trajforge", "files": dict(sorted(staged.items()))}
    write_bytes_atomic(marker, json.dumps(body, indent=1).encode())
    delete_files(files_under(staging))


def _inside_staging(root: str, path: str) -> bool:
    return path.startswith(f"{root}/{STAGING}")
