"""ExploreTask: an exploration turned into a task whose check is executable.

An exploration's steps, labeled backward with the instruction they accomplish, become a task whose
check is the end state a replay must reproduce in a fresh container: the sha256 of every file the
actions wrote (``"<deleted>"`` for a file they removed) and of the normalized output of the steps
whose output is part of the answer. ``verifiers.replay`` computes both, for recording and replay.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

import pyarrow as pa

DELETED = "<deleted>"
ACTION_TYPE = pa.struct([("tool", pa.string()), ("arguments", pa.large_string())])


@dataclass(frozen=True)
class ReplayAction:
    tool: str  # a Workspace tool: bash | view | create | str_replace
    arguments: str  # JSON text, exactly as Workspace.run takes it


@dataclass(frozen=True)
class ExploreTask:
    task_id: str
    repo: str
    source: str
    base_commit: str
    image_name: str
    profile_id: str
    instruction: str  # what the actions accomplish, written after the fact
    actions: tuple[ReplayAction, ...]  # the replayable actions, in order
    expected_files: dict[str, str]  # path (relative: under /repo) -> sha256 | "<deleted>"
    expected_outputs: dict[str, str]  # action index ("0", "1", ...) -> sha256 of its output
    trajectory_id: str
    origin: str  # explore/template | explore/llm
    score: float | None = None  # 1-5, None until judged
    provenance: dict[str, str] = field(default_factory=dict)
    image_digest: str = ""  # the environment by content: registry digest, else the image id
    env_recipe: str = ""  # the environment's Dockerfile: anyone can rebuild image_name from it

    ARROW_SCHEMA: ClassVar[pa.Schema] = pa.schema(
        [
            ("task_id", pa.string()),
            ("repo", pa.string()),
            ("source", pa.string()),
            ("base_commit", pa.string()),
            ("image_name", pa.string()),
            ("profile_id", pa.string()),
            ("instruction", pa.large_string()),
            ("actions", pa.list_(ACTION_TYPE)),
            ("expected_files", pa.map_(pa.string(), pa.string())),
            ("expected_outputs", pa.map_(pa.string(), pa.string())),
            ("trajectory_id", pa.string()),
            ("origin", pa.string()),
            ("score", pa.float64()),
            ("provenance", pa.map_(pa.string(), pa.string())),
            ("image_digest", pa.string()),
            ("env_recipe", pa.large_string()),
        ]
    )
