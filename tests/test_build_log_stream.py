"""A build log reads the same however Docker's stream cut it.

Docker's classic builder sends a RUN step's output as it was written, one chunk per write, the
two streams interleaved as they were read, each stderr chunk in colour codes: uv's ``error`` and
``: No solution found ...`` can arrive as two chunks, and a stdout line between a stderr line's
pieces. The log once took each chunk for a line, so one failed install read as "no solution:
cause" in one run and "no solution: Because ..." in another, and a profile's recorded
``attempts`` changed between runs (test_object_storage's local and Dask runs). Here a real build
writes such pieces, with pauses so the engine cannot read two writes as one chunk.
"""

from __future__ import annotations

import io
import tarfile
import uuid

import pytest
from trajforge.generators.environments.base_image import base_image_tag
from trajforge.generators.environments.build_errors import (
    PIP_AFTER_UV,
    cause_line,
    clean_lines,
)
from trajforge.verifiers.sandbox.base import ImageBuild
from trajforge.verifiers.sandbox.docker import DockerSandbox

pytestmark = [pytest.mark.docker, pytest.mark.usefixtures("docker_engine")]

BECAUSE = "Because nothing-here was not found in the package registry, calc cannot be used."
MARKER = f"{PIP_AFTER_UV}: -e ."
# (stream, text): each one write; stdout's marker lands inside stderr's set -x trace line.
WRITES = (
    (2, "error"),
    (2, ": No solution found when resolving dependencies\\n"),
    (2, "  cause"),
    (2, f": {BECAUSE}\\n"),
    (2, "+ [ -x /opt/uv ]"),
    (1, f"{MARKER}\\n"),
    (2, "\\n"),
    (2, "ERROR: No matching distribution found for nothing-here==9.9"),
)


def test_lines_written_in_pieces_are_whole_lines_of_the_log() -> None:
    script = "; sleep 0.3; ".join(f"printf '{text}' >&{fd}" for fd, text in WRITES)
    dockerfile = f"FROM {base_image_tag('3.11')}\nRUN {script}; exit 1\n"
    empty = io.BytesIO()
    tarfile.open(fileobj=empty, mode="w").close()
    tag = f"trajforge-test-stream:{uuid.uuid4().hex[:8]}"
    sandbox = DockerSandbox()
    try:
        built = sandbox.build_image(ImageBuild(tag, dockerfile, empty.getvalue()))
    finally:
        sandbox.close()
    assert not built.ok
    said = clean_lines(built.log)
    assert "error: No solution found when resolving dependencies" in said, said
    assert f"  cause: {BECAUSE}" in said, said
    assert MARKER in said, said
    # the last line, left open when the step failed, is kept before the engine's own error
    assert said[-1] == "ERROR: No matching distribution found for nothing-here==9.9", said
    assert cause_line(built.log, "3.11").startswith("No matching distribution found")
    assert cause_line("\n".join(said[: said.index(MARKER)]), "3.11") == f"no solution: {BECAUSE}"
