"""Python as a ``Language``: every answer delegates to the code that decides it today.

Nothing here decides anything new: the install and the interpreter are ``detect_profile``'s
(``generators/environments/profile.py``), the recipe ``recipe.py``'s, the report pytest's JUnit
XML read by ``verifiers/log_parsers.py``, test files ``schemas/test_ids.py``'s rule, the
operators ``generators/languages/python/operators.py``'s.
"""

from __future__ import annotations

import os
import shlex
from collections.abc import Mapping, Sequence
from typing import ClassVar

from trajforge.generators.environments.base_image import base_image_tag
from trajforge.generators.environments.profile import JUNIT_PATH, TEST_CMD, detect_profile
from trajforge.generators.environments.recipe import render_dockerfile
from trajforge.generators.languages.base import Detection, Language, ReportError
from trajforge.schemas.test_ids import is_test_path
from trajforge.verifiers.log_parsers import parse_junit_xml

# Files that make a directory a Python project (the ones detect_profile reads installs from).
PROJECT_FILES = ("pyproject.toml", "setup.py", "setup.cfg", "requirements.txt", "tox.ini")


class Python(Language):
    name: ClassVar[str] = "python"

    def detect(self, repo_dir: str) -> Detection | None:
        """A project with Python packaging files; its interpreter is ``detect_profile``'s at
        HEAD (a git repository), else empty (the caller detects at its commit)."""
        found = [f for f in PROJECT_FILES if os.path.isfile(os.path.join(repo_dir, f))]
        if not found:
            return None
        runtime, why = "", "no commit to read"
        if os.path.isdir(os.path.join(repo_dir, ".git")):
            profile = detect_profile(repo_dir, "HEAD", os.path.basename(repo_dir))
            runtime, why = profile.python, profile.log
        return Detection(
            language=self.name, package_manager="pip", runner="pytest", runtime=runtime,
            evidence=tuple(found), why=why,
        )  # fmt: skip

    def base_image(self, detection: Detection) -> str:
        return base_image_tag(detection.runtime)

    def render_recipe(self, detection: Detection, install: Sequence[str] = ()) -> str:
        return render_dockerfile(detection.runtime, install)

    def test_command(
        self, detection: Detection, selection: Sequence[str] = (), per_test_timeout_s: int = 0
    ) -> str:
        limit = (
            f" --timeout={int(per_test_timeout_s)} --timeout-method=signal"
            if per_test_timeout_s
            else ""
        )
        args = " ".join(shlex.quote(test_id) for test_id in selection)
        return f"{TEST_CMD}{limit} {args}".strip()

    def report_path(self, detection: Detection) -> str:
        return JUNIT_PATH

    def parse_report(self, text: str, runner: str) -> dict[str, str]:
        parsed = parse_junit_xml(text.encode("utf-8", "replace"))
        if parsed.problem:
            raise ReportError(parsed.problem)
        return parsed.statuses

    def is_test_file(self, path: str) -> bool:
        return is_test_path(path)

    def bug_operators(self) -> Mapping[str, object]:
        # here, not at the top: libcst is for injecting, and every stage asks the registry
        from trajforge.generators.languages.python.operators import OPERATORS

        return OPERATORS
