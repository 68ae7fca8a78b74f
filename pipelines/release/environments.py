"""The dataset's environments: a recipe and an image reference for every profile its tasks use.

Written beside the configs so a dataset is enough to get a task's environment on any machine::

    environments/<profile_id>/Dockerfile         the recipe the image was built from
    environments/<profile_id>/environment.json   image, digest, repo, setup commit, base image
    environments/base/py<python>/build.sh        how the base image itself is made (offline)

Pull the image by digest when the registry is reachable; else rebuild it from the recipe (the
README shows both). Tasks curated before recipes existed have none: they are counted, not faked.
"""

from __future__ import annotations

import json
import os
import re

import pyarrow.parquet as pq
from trajforge.generators.environments.base_image import base_image_recipe
from trajforge.schemas.storage import write_bytes_atomic

DIRECTORY = "environments"
COLUMNS = ("profile_id", "image_name", "image_digest", "env_recipe", "repo")
SETUP_COMMIT = {"tasks": "environment_setup_commit", "explore_tasks": "base_commit"}
FROM_BASE = re.compile(r"^ARG BASE=(\S+)$", re.MULTILINE)


def collect_environments(files: dict[str, list[str]]) -> dict[str, dict[str, str]]:
    """profile_id -> what the export writes of it, from the tasks and explore tasks tables."""
    found: dict[str, dict[str, str]] = {}
    for table, commit_column in SETUP_COMMIT.items():
        for path in files.get(table, []):
            names = set(pq.ParquetFile(path).schema_arrow.names)
            if not set(COLUMNS) <= names:  # curated before recipes: nothing to write
                continue
            rows = pq.read_table(path, columns=[*COLUMNS, commit_column]).to_pylist()
            for row in rows:
                if row["env_recipe"] and row["profile_id"] not in found:
                    found[row["profile_id"]] = {**row, "setup_commit": row[commit_column]}
    return found


def write_environments(files: dict[str, list[str]], root: str) -> list[str]:
    """Write every environment's recipe and reference under ``root``; the paths written."""
    written: list[str] = []
    pythons: set[str] = set()
    for profile_id, env in sorted(collect_environments(files).items()):
        base = FROM_BASE.search(env["env_recipe"])
        base_tag = base.group(1) if base else ""
        python = base_tag.rpartition(":py")[2] if base_tag else ""
        if python:
            pythons.add(python)
        reference = {
            "profile_id": profile_id,
            "image": env["image_name"],
            "image_digest": env["image_digest"] or "",
            "repo": env["repo"],
            "setup_commit": env["setup_commit"],
            "base_image": base_tag,
        }
        folder = os.path.join(root, DIRECTORY, profile_id)
        written.append(_write(os.path.join(folder, "Dockerfile"), env["env_recipe"]))
        text = json.dumps(reference, indent=2, sort_keys=True) + "\n"
        written.append(_write(os.path.join(folder, "environment.json"), text))
    for python in sorted(pythons):
        folder = os.path.join(root, DIRECTORY, "base", f"py{python}")
        written.append(_write(os.path.join(folder, "build.sh"), base_image_recipe(python)))
    return written


def _write(path: str, text: str) -> str:
    write_bytes_atomic(path, text.encode())
    return path
