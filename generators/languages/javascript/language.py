"""JavaScript and TypeScript as a ``Language``: package.json projects, Node from Debian,
npm/yarn/pnpm, jest, vitest, mocha, node's runner, ava and tap.

Each answer is a module of this package: detection, recipe and test command
(``detection.py``), the site's profile and image (``profile.py``), test files
(``test_files.py``), the tree-sitter operators and their sampler (``mutations.py``), the issue
text (``issue_context.py``) and the prompts (``prompts.py``). The stage-only modules are
imported when asked for: the registry is read by every stage, most of which build nothing.
"""

from __future__ import annotations

import posixpath
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, ClassVar

from trajforge.generators.languages.base import Detection, IssueText, ReportError
from trajforge.generators.languages.javascript import detection as project
from trajforge.generators.languages.javascript.base_image import (
    ensure_recipe_base,
    node_image_tag,
)
from trajforge.generators.languages.javascript.issue_context import JavaScriptIssueText
from trajforge.generators.languages.javascript.operators import JS_OPERATORS
from trajforge.generators.languages.javascript.prompts import AGENT_SYSTEM, ISSUE_PROMPT
from trajforge.generators.languages.javascript.runners import REPORT_PATH, suite_command
from trajforge.generators.languages.javascript.test_files import (
    is_js_generated,
    is_js_source_path,
    is_js_test_path,
)
from trajforge.generators.languages.recipe_language import RecipeLanguage

if TYPE_CHECKING:
    from trajforge.generators.environments.recipe_site import RecipeSite
    from trajforge.generators.mutants.byte_edits import Mutator
    from trajforge.schemas.env_profile import EnvProfile
    from trajforge.verifiers.sandbox.base import ImageStore

__all__ = ["REPORT_PATH", "JavaScript"]

# JS/TS build and tool configuration: a bug there breaks the build or the runner, never a test.
NOT_LIBRARY = ("Gruntfile.js", "gulpfile.js", "karma.conf.js", "Jakefile.js")


class JavaScript(RecipeLanguage):
    name: ClassVar[str] = project.NAME
    aliases: ClassVar[tuple[str, ...]] = ("js", "ts", "typescript")
    issue_text: ClassVar[IssueText] = JavaScriptIssueText(ISSUE_PROMPT)

    def detect(self, repo_dir: str) -> Detection | None:
        return project.detect(repo_dir)

    def base_image(self, detection: Detection) -> str:
        return node_image_tag(detection.runtime)

    def ensure_base_image(
        self, store: ImageStore, recipe: str, say: Callable[[str], None] | None
    ) -> None:
        """Docker's node base image, made on demand (``base_image.py``)."""
        ensure_recipe_base(store, recipe, say)

    def render_recipe(self, detection: Detection, install: Sequence[str] = ()) -> str:
        return project.recipe(detection, install)

    def test_command(
        self, detection: Detection, selection: Sequence[str] = (), per_test_timeout_s: int = 0
    ) -> str:
        """The full-suite command with the selection's test files appended (``detection.py``)."""
        return project.test_command(detection, selection, per_test_timeout_s)

    def suite_command(self, detection: Detection, per_test_timeout_s: int = 0) -> str:
        """The runner's full-suite command writing ``REPORT_PATH`` (``runners.py``)."""
        return suite_command(detection, per_test_timeout_s)

    def report_path(self, detection: Detection) -> str:
        return REPORT_PATH

    def parse_report(self, text: str, runner: str) -> dict[str, str]:
        parsed = project.read_runner_report(text.encode("utf-8", "replace"), runner)
        if parsed.problem:
            raise ReportError(parsed.problem)
        return parsed.statuses

    def is_test_file(self, path: str) -> bool:
        return is_js_test_path(path)

    def bug_operators(self) -> Mapping[str, object]:
        return JS_OPERATORS

    def is_source_file(self, path: str) -> bool:
        return is_js_source_path(path)

    def is_generated(self, path: str) -> bool:
        return is_js_generated(path)

    def is_library_source(self, path: str) -> bool:
        name = posixpath.basename(path)
        stem = posixpath.splitext(name)[0]
        tooling = (
            name in NOT_LIBRARY
            or stem.endswith((".config", ".conf", ".d"))  # vite.config.ts, a.d.ts (types only)
            or name.startswith(".")  # .eslintrc.js, .mocharc.js
        )
        return (
            is_js_source_path(path)
            and not is_js_test_path(path)
            and not is_js_generated(path)
            and not tooling
        )

    def is_suite_file(self, path: str) -> bool:
        """A module under __tests__/ or test/, or named *.test.* / *.spec.*, outside
        node_modules."""
        return is_js_test_path(path) and is_js_source_path(path) and not is_js_generated(path)

    def mutator(self) -> Mutator[Any]:
        """tree-sitter's JavaScript operators (``mutations.py``)."""
        from trajforge.generators.languages.javascript.mutations import JS_MUTATOR

        return JS_MUTATOR

    def agent_system_prompt(self, test_cmd: str) -> str:
        return AGENT_SYSTEM.format(test_cmd=test_cmd)

    def site(self) -> RecipeSite:
        """Its profile, image and reading (``profile.py``)."""
        from trajforge.generators.languages.javascript.profile import JS_SITE

        return JS_SITE

    def toolchain_line(self, profile: EnvProfile) -> str:
        """Node's major: an image serves one major's modules (reuse's line)."""
        return f"node {profile.runtime.split('.')[0]}"
