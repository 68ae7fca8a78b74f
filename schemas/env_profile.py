"""EnvProfile: everything that decides how a repository's environment is installed.

``profile_id`` hashes only what decides the install, so every commit whose dependency
declarations hash the same shares one image (SWE-Next's repo profiles, content-addressed).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import pyarrow as pa
from trajforge.schemas.task_instance import DEFAULT_LANGUAGE


@dataclass(frozen=True)
class EnvProfile:
    profile_id: str
    repo: str
    python: str  # "3.11"
    install: tuple[str, ...]  # shell commands run in /repo with /venv active, network on
    test_cmd: str  # run in /repo with no network; writes JUnit XML
    image: str  # the image tag built for this profile
    status: str  # detected | built | failed | reused (its image another profile's: reused_from)
    log: str  # build log tail (or why it failed)
    setup_commit: str  # the commit the image was built at (SWE-bench's environment_setup_commit)
    recipe: str = ""  # the Dockerfile the image is built from (hashed into profile_id)
    image_digest: str = ""  # registry digest once pushed or pulled, else the local image id
    # How the environment was found (generators/languages/python/prepare.py):
    install_set: str = ""  # the ranked install set that built ("tests+tox", "package", ...)
    attempts: tuple[str, ...] = ()  # "<set>: why it failed", one per set tried before it
    repairs: tuple[str, ...] = ()  # "<module> -> <requirement> (<where declared>)", or a -W flag
    excluded: tuple[str, ...] = ()  # "<test module>: <error>", left out of test_cmd (--ignore)
    origin: str = "rules"  # rules | agent (a model's recipe) | legacy (the pre-ranking detector)
    alternatives: tuple[str, ...] = ()  # the other ranked sets, "<name>\t<cmd>\n<cmd>..."
    declared: tuple[str, ...] = ()  # every requirement the project declares: what repairs use
    # The relaxation ladder's rung that built (generators/languages/python/relax.py): declared | era
    # | ranges | unpinned | no-deps; each rung that failed before it is in ``attempts``.
    relaxation: str = "declared"
    resolved_as_of: str = ""  # the day the install resolved as of (uv's --exclude-newer), or ""
    # Debian packages the build stage installed because a failed build's log asked for them
    # (a compiler, a header: generators/environments/build_errors.py)
    system_packages: tuple[str, ...] = ()
    # The language layer's answers (generators/languages/): which language installs and tests
    # this profile, and which runner's report its test command writes (pytest: JUnit XML).
    language: str = DEFAULT_LANGUAGE  # a language's name (languages/registry.py)
    runner: str = "pytest"  # pytest | jest | vitest | mocha | node | ava | tap
    runtime: str = ""  # the interpreter's version for a non-Python profile ("18" for node)
    build_s: float = 0.0  # seconds this image's build took here (0: reused, pulled or not built)
    # The profile whose image this site runs in when its own profile was not built: its probe
    # passed in that image (generators/environments/reuse.py); "" when built (or pulled) as is
    reused_from: str = ""
    # The image's size on disk, every layer once, the base's included (image.py's ``image_bytes``;
    # 0: not measured, or a backend without images). ``environment.max_image_size`` caps it.
    image_bytes: int = 0
    # Services the suite expects, started by the image's entrypoint (services.py): "redis"...
    services: tuple[str, ...] = ()
    # The connection settings its CI gives the suite and those services, set as the image's ENV
    # (service_env.py): "DATABASE_URL=postgresql://localhost/app_test"...
    service_env: tuple[str, ...] = ()
    # The names the suite reaches those services by (compose's service keys: "db"), which each
    # container of the image maps to 127.0.0.1 (its label; verifiers/sandbox/ready.py)
    service_hosts: tuple[str, ...] = ()

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
            ("install_set", pa.string()),
            ("attempts", pa.list_(pa.string())),
            ("repairs", pa.list_(pa.string())),
            ("excluded", pa.list_(pa.string())),
            ("origin", pa.string()),
            ("alternatives", pa.list_(pa.large_string())),
            ("declared", pa.list_(pa.string())),
            ("relaxation", pa.string()),
            ("resolved_as_of", pa.string()),
            ("system_packages", pa.list_(pa.string())),
            ("language", pa.string()),
            ("runner", pa.string()),
            ("runtime", pa.string()),
            ("build_s", pa.float64()),
            ("reused_from", pa.string()),
            ("image_bytes", pa.int64()),
            ("services", pa.list_(pa.string())),
            ("service_env", pa.list_(pa.string())),
            ("service_hosts", pa.list_(pa.string())),
        ]
    )
