"""EnvProfile: everything that decides how a repository's environment is installed.

``profile_id`` hashes only what decides the install, so every commit whose dependency
declarations hash the same shares one image (SWE-Next's repo profiles, content-addressed).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import pyarrow as pa


@dataclass(frozen=True)
class EnvProfile:
    profile_id: str
    repo: str
    python: str  # "3.11"
    install: tuple[str, ...]  # shell commands run in /repo with /venv active, network on
    test_cmd: str  # run in /repo with no network; writes JUnit XML
    image: str  # the image tag built for this profile
    status: str  # detected | built | failed
    log: str  # build log tail (or why it failed)
    setup_commit: str  # the commit the image was built at (SWE-bench's environment_setup_commit)
    recipe: str = ""  # the Dockerfile the image is built from (hashed into profile_id)
    image_digest: str = ""  # registry digest once pushed or pulled, else the local image id

    ARROW_SCHEMA: ClassVar[pa.Schema] = pa.schema(
        [
            ("profile_id", pa.string()),
            ("repo", pa.string()),
            ("python", pa.string()),
            ("install", pa.list_(pa.string())),
            ("test_cmd", pa.string()),
            ("image", pa.string()),
            ("status", pa.string()),
            ("log", pa.large_string()),
            ("setup_commit", pa.string()),
            ("recipe", pa.large_string()),
            ("image_digest", pa.string()),
        ]
    )
