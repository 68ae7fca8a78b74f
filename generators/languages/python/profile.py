"""Detect how to install and test a Python repository at a commit, with no per-repo spec.

Everything is read from the packaging files alone (pyproject.toml, setup.py, setup.cfg,
requirements files, tox.ini, noxfile.py), so any repository gets an environment without a
hand-written recipe. ``profile_id`` hashes the normalised dependency declarations, not whole
files: a release commit that only bumps the version keeps its image.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Sequence

from trajforge.generators.environments.commit_files import (
    commit_date,
    decode_all,
    ls_tree,
    read_paths,
)
from trajforge.generators.environments.recipe import image_name, render_dockerfile
from trajforge.generators.environments.services import Named, described, services_at
from trajforge.generators.languages.python.declarations import (
    _declarations,
    _load_ini,
    _load_toml,
    _matters,
    _requirement_name,
)
from trajforge.generators.languages.python.install_sets import (
    InstallSet,
    _declared_requirements,
    _install_sets,
    _legacy_install_commands,
    _read_includes,
    encode_set,
    runner_requirement,
)
from trajforge.generators.languages.python.interpreter import _python_evidence, choose_python
from trajforge.generators.languages.python.suite_layout import (
    PYTEST_DJANGO,
    SuiteLayout,
    suite_layout,
)
from trajforge.schemas.env_profile import EnvProfile
from trajforge.schemas.records import content_id
from trajforge.verifiers.sandbox.base import REPO_DIR

JUNIT_PATH = "/tmp/trajforge-junit.xml"


# --rootdir: a run of selected tests (a rerun) that all sit under a folder with its own pytest.ini
# would otherwise root there, and its test ids would not be the full run's.
TEST_CMD = (
    f"python -m pytest -rA -p no:cacheprovider -o junit_family=xunit1 --rootdir={REPO_DIR} "
    f"--junitxml={JUNIT_PATH}"
)


PROFILE_FORMAT = "profile-v4"  # v4: ranked install sets, the runner pinned by era


def config_files(repo_path: str, commit: str) -> dict[str, str]:
    """The packaging, requirements, tox and nox files at ``commit``: what the setup agent reads."""
    tree = ls_tree(repo_path, commit)
    return decode_all(read_paths(repo_path, commit, tree, [p for p in tree if _matters(p)]))


def detect_profile(
    repo_path: str,
    commit: str,
    repo: str,
    *,
    default_python: str = "3.11",
    pythons: Sequence[str] = ("3.11",),
    source: str | None = None,
    registry: str | None = None,
    legacy: bool = False,
) -> EnvProfile:
    """How to install and test ``repo`` at ``commit``, read from its packaging files alone.

    The install renders to a Dockerfile (``recipe``), hashed into ``profile_id``: a changed recipe
    is a new profile and a new image name, never a stale tag. With a ``registry`` the image is
    named there (``<registry>/env:<profile_id>``), so any machine can pull it.

    ``profile_id`` (and so the image) is keyed by ``source``, the identity of where the code
    comes from (``RepoRef.identity``; the repository's real path when not given), never by the
    display name ``repo``: two repositories that share a name and a setup.py must not share an
    image, or one's install-time code would run inside the other's tests.
    """
    identity = source or f"file://{os.path.realpath(repo_path)}"
    tree = ls_tree(repo_path, commit)
    texts = decode_all(read_paths(repo_path, commit, tree, [p for p in tree if _matters(p)]))
    paths = set(tree)
    pyproject = _load_toml(texts["pyproject.toml"]) if "pyproject.toml" in texts else None
    setup_cfg = _load_ini(texts["setup.cfg"]) if "setup.cfg" in texts else None
    committed = commit_date(repo_path, commit)
    evidence = {**texts, **_python_evidence(repo_path, commit, tree)}
    chosen = choose_python(
        evidence, pyproject, setup_cfg, committed, default_python, pythons, f"{repo}@{commit}",
        legacy,
    )  # fmt: skip
    python = chosen.python
    # the legacy detector (the benchmark's baseline) ran every suite from the root
    where = f"{repo}@{commit[:12]}"
    layout = SuiteLayout() if legacy else suite_layout(repo_path, commit, tree, where)
    if legacy:
        commands, req_files = _legacy_install_commands(texts, paths, python, pyproject, setup_cfg)
        sets = [InstallSet("legacy", tuple(commands))]
    else:
        runner = runner_requirement(python, committed)
        named = {_requirement_name(r) for r in _declared_requirements(texts, pyproject, setup_cfg)}
        if layout.django and PYTEST_DJANGO not in named:  # resolved with the era's pytest
            runner = f"{runner} {PYTEST_DJANGO}"
        sets, req_files = _install_sets(texts, paths, python, pyproject, setup_cfg, runner)
    used = _read_includes(repo_path, commit, tree, texts, req_files)
    declared = _declarations(texts, used, pyproject, setup_cfg)
    install = list(sets[0].commands)
    services = Named() if legacy else services_at(repo_path, commit, tree)
    render = functools.partial(
        render_dockerfile,
        services=services.started,
        service_env=services.environment,
        service_hosts=services.hosts,
    )
    recipe = render(python, install)
    recipes = [render(python, s.commands) for s in sets]
    flags = layout.flags()
    test_cmd = " ".join((TEST_CMD, *flags))
    # the layout's options key the profile only where there are some: other ids stay as they were
    keyed = (recipes, declared, flags) if flags else (recipes, declared)
    profile_id = content_id(PROFILE_FORMAT, identity, repo, *keyed, length=16)
    return EnvProfile(
        profile_id=profile_id,
        repo=repo,
        python=python,
        install=tuple(install),
        test_cmd=test_cmd,
        image=image_name(registry, profile_id),
        status="detected",
        log="; ".join(filter(None, (f"python {python}: {chosen.why}", described(services)))),
        setup_commit=commit,
        recipe=recipe,
        install_set=sets[0].name,
        origin="legacy" if legacy else "rules",
        alternatives=tuple(encode_set(s) for s in sets[1:]),
        declared=tuple(_declared_requirements(texts, pyproject, setup_cfg)),
        services=services.started,
        service_env=services.environment,
        service_hosts=services.hosts,
    )
