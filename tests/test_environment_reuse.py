"""A site whose evidence picks a new profile reuses the recipe of an image already built for its
repository, built at its own commit, when its probe passes there
(``generators/environments/reuse.py``), and builds its own profile when not.

Real Docker, real repositories written here. (a) Two fixes whose base commits declare different
dependencies and versions (two profiles) but whose suite runs the same: validate builds one
profile, the second task runs in the first profile's recipe built at its own commit
(``reused_from`` the first profile; six installed from its declarations, its own version 0.2.0
in the installed metadata, which a test reads), and the task lists are those of a run with reuse
off. The audit (every reuse, ``environment.reuse_audit: 1``) builds the second profile's own
image and finds the clean runs agree. (b) A second commit whose tests import a dependency its
own recipe installs and the donor's does not (a test requirements file): the reuse is refused
with its reason and its own profile is built. (c) The same, with a test skipped without the
dependency, so the suite collects: the audit disagrees and the repository goes back to
per-profile builds. (d) A second commit whose suite runs from a tox ``changedir`` with its own
pytest config: the reused image runs it with the site's layout options, not the donor's. (e) A
fix whose new test imports the dependency its base commit's test requirements added: the clean
runs at that base agree in both images, but the fix's verdict does not (the new test cannot
import six in the reused one). The audit compares the verdicts too, and the task is proven in
its own image; unaudited, the reuse rejects it.
"""

from __future__ import annotations

import subprocess
from collections import defaultdict
from pathlib import Path
from typing import Any

import apache_beam as beam
import pytest
from apache_beam.metrics.metric import MetricsFilter
from apache_beam.runners.portability.fn_api_runner import FnApiRunner
from repo_factory import RepoBuilder, pyproject
from trajforge.generators.environments.reuse import on_site
from trajforge.generators.mining.commits import mine_commit
from trajforge.generators.sources.specs import SourceOptions, open_source
from trajforge.pipelines.stages.environment import BuildEnvironments, Site
from trajforge.pipelines.stages.validate import ValidateCandidates
from trajforge.schemas.candidate import Candidate
from trajforge.schemas.params import Params

pytestmark = pytest.mark.docker

OPS = "def add(a, b):\n    return a - b\n\n\ndef sub(a, b):\n    return a + b\n"
TESTS = "from calc.ops import add, sub\n\n\ndef test_nothing():\n    assert True\n"
TEST_ADD = "\n\ndef test_add():\n    assert add(2, 3) == 5\n"
TEST_SUB = "\n\ndef test_sub():\n    assert sub(5, 3) == 2\n"
SIX = "six==1.16.0"
TEST_REQUIREMENTS = {"requirements-test.txt": f"{SIX}\n"}  # the site's recipe installs it
VERSION = (  # the installed metadata's version: the site's own install writes it
    "import importlib.metadata\n\n\n"
    "def test_version():\n    assert importlib.metadata.version('calc') == '0.2.0'\n"
)
# collects without six; passes with it, skipped without it: the audit's disagreement
SKIPPED_WITHOUT_SIX = (
    "import pytest\n\n\ndef test_six():\n    six = pytest.importorskip('six')\n    assert six.PY3\n"
)

COLLECTED: dict[str, list[Any]] = defaultdict(list)


def _keep(element: Any, bucket: str) -> None:
    COLLECTED[bucket].append(element)


def _params(cache_dir: Path, *, reuse: bool, audit: float = 0.0) -> Params:
    params = Params(cache_dir=str(cache_dir))
    params.validate.test_timeout_s = 60
    params.validate.gold_runs = 0
    params.environment.pythons = ["3.11"]
    params.environment.reuse = reuse
    params.environment.reuse_audit = audit
    return params.check()


def _counts(result: Any, stage: str) -> dict[str, int]:
    counters = result.metrics().query(MetricsFilter().with_namespace(stage))["counters"]
    counts: dict[str, int] = {}
    for counter in counters:
        name = counter.key.metric.name
        counts[name] = counts.get(name, 0) + counter.committed
    return counts


def _history(root: Path, second_files: dict[str, str]) -> tuple[RepoBuilder, list[str]]:
    """Initial calc; the fix of ``add``; a commit with ``second_files`` (a new dependency);
    the fix of ``sub``. Returns the repository and its commits."""
    repo = RepoBuilder(root)
    first = repo.commit(
        "Initial calc",
        {"pyproject.toml": pyproject(), "calc/__init__.py": "", "calc/ops.py": OPS,
         "tests/test_ops.py": TESTS},
    )  # fmt: skip
    ops = OPS.replace("return a - b", "return a + b")
    fix_add = repo.commit(
        "Fix add: it subtracted", {"calc/ops.py": ops, "tests/test_ops.py": TESTS + TEST_ADD}
    )
    second = repo.commit("Depend on six", second_files)
    fix_sub = repo.commit(
        "Fix sub: it added",
        {"calc/ops.py": ops.replace("return a + b\n", "return a - b\n").replace(
            "return a - b\n", "return a + b\n", 1),
         "tests/test_ops.py": TESTS + TEST_ADD + TEST_SUB},
    )  # fmt: skip
    return repo, [first, fix_add, second, fix_sub]


def _validate(path: Path, fixes: list[str], params: Params) -> dict[str, Any]:
    source = open_source(str(path), SourceOptions.from_params(params))
    candidates = [mine_commit(source, fix, params.mine) for fix in fixes]
    assert all(isinstance(c, Candidate) for c in candidates), candidates
    COLLECTED.clear()
    pipeline = beam.Pipeline(runner=FnApiRunner())
    out = pipeline | beam.Create(candidates) | ValidateCandidates(params)
    for tag in ("tasks", "rejections", "profiles"):
        _ = out[tag] | f"Keep{tag}" >> beam.Map(_keep, tag)
    result = pipeline.run()
    result.wait_until_finish()
    seen = {tag: list(COLLECTED.get(tag, [])) for tag in ("tasks", "rejections", "profiles")}
    return {**seen, "counts": _counts(result, "validate")}


def _environments(path: Path, commits: list[str], params: Params) -> dict[str, Any]:
    """The environment stage alone, one item per commit (in history order)."""

    def locate(item: tuple[str, int]) -> Site:
        commit, position = item
        return Site(commit[:12], str(path), commit, "local/calc", order=(position,))

    COLLECTED.clear()
    pipeline = beam.Pipeline(runner=FnApiRunner())
    items = [(commit, position) for position, commit in enumerate(commits)]
    out = pipeline | beam.Create(items) | BuildEnvironments(params, "validate", locate)
    for tag in ("ready", "profiles", "rejections"):
        _ = out[tag] | f"Keep{tag}" >> beam.Map(_keep, tag)
    result = pipeline.run()
    result.wait_until_finish()
    seen = {tag: list(COLLECTED.get(tag, [])) for tag in ("ready", "profiles", "rejections")}
    return {**seen, "counts": _counts(result, "validate")}


def _images(*runs: dict[str, Any]) -> set[str]:
    """The runs' images: their profiles', and any donor's recipe built at another profile's
    commit whose reuse was refused or disagreed (kept by the stage as a cache: ``on_site``)."""
    profiles = [p for run in runs for p in run["profiles"]]
    tried = {on_site(d, s.setup_commit, None).image for d in profiles for s in profiles if d != s}
    return {p.image for p in profiles} | tried


def _labels(run: dict[str, Any]) -> dict[str, tuple]:
    return {t.candidate_id: (t.FAIL_TO_PASS, t.PASS_TO_PASS, t.base_commit) for t in run["tasks"]}


@pytest.fixture(scope="module")
def same_suite(tmp_path_factory, docker_engine):
    """(a): validate with reuse on, then off (a fresh cache), then the audited stage alone."""
    root = tmp_path_factory.mktemp("reuse-same")
    bumped = pyproject(SIX).replace('version = "0.1.0"', 'version = "0.2.0"')
    _, commits = _history(
        root / "calc", {"pyproject.toml": bumped, "tests/test_version.py": VERSION}
    )
    fixes = [commits[1], commits[3]]
    on = _validate(root / "calc", fixes, _params(root / "cache-on", reuse=True))
    off = _validate(root / "calc", fixes, _params(root / "cache-off", reuse=False))
    audited = _environments(
        root / "calc", [commits[0], commits[2]], _params(root / "cache-audit", reuse=True, audit=1)
    )
    yield on, off, audited
    subprocess.run(
        ["docker", "rmi", "-f", *_images(on, off, audited)], capture_output=True, check=False
    )


def test_a_suite_that_runs_the_same_reuses_the_first_image(same_suite):
    on, off, _ = same_suite
    assert not on["rejections"], on["rejections"]
    assert on["counts"].get("images_built") == 1  # one profile built
    assert on["counts"].get("environments_reused") == 1
    assert on["counts"].get("reuse_images_built") == 1  # its recipe at the second's commit
    first, second = sorted(on["tasks"], key=lambda t: t.created_at)
    assert "reused_from" not in first.provenance
    assert second.provenance["reused_from"] == first.profile_id
    assert second.env_recipe == first.env_recipe
    assert second.image_name != first.image_name
    assert second.environment_setup_commit == second.base_commit  # its own tree installed
    label = subprocess.run(
        ["docker", "image", "inspect", "-f", '{{index .Config.Labels "trajforge.setup_commit"}}',
         second.image_name],
        capture_output=True, text=True, check=True,
    ).stdout.strip()  # fmt: skip
    assert label == second.base_commit
    # the installed metadata is the site's (0.2.0), not the donor's (0.1.0)
    assert "tests/test_version.py::test_version" in second.PASS_TO_PASS
    records = {p.status: p for p in on["profiles"]}
    assert set(records) == {"built", "reused"}
    assert records["reused"].reused_from == records["built"].profile_id
    assert records["reused"].image == second.image_name
    # With reuse off the second profile gets its own image; the task lists are the same.
    assert off["counts"].get("environments_reused", 0) == 0
    assert len({t.profile_id for t in off["tasks"]}) == 2
    assert all("reused_from" not in t.provenance for t in off["tasks"])
    assert _labels(on) == _labels(off)
    assert len(_labels(on)) == 2


def test_an_audited_reuse_builds_its_own_profile_and_agrees(same_suite):
    _, _, audited = same_suite
    counts = audited["counts"]
    assert counts.get("reuse_audit_agreed") == 1 and not counts.get("reuse_audit_disagreed")
    assert counts.get("environments_reused") == 1
    reused = [profile for profile, _ in audited["ready"] if profile.reused_from]
    assert len(reused) == 1


def test_a_suite_that_needs_what_the_image_lacks_is_refused_and_built(
    tmp_path, docker_engine, capfd
):
    """(b): the second commit's tests import six, which only its own recipe installs."""
    needs_six = {
        **TEST_REQUIREMENTS,
        "tests/test_six.py": "import six\n\n\ndef test_six():\n    assert six.PY3\n",
    }
    _, commits = _history(tmp_path / "calc", needs_six)
    params = _params(tmp_path / "cache", reuse=True, audit=1)
    run = _environments(tmp_path / "calc", [commits[0], commits[2]], params)
    try:
        counts = run["counts"]
        assert counts.get("reuse_refused") == 1
        assert not counts.get("environments_reused")
        assert counts.get("images_built") == 2  # its own profile, built
        assert sorted(p.status for p in run["profiles"]) == ["built", "built"]
        assert not any(profile.reused_from for profile, _ in run["ready"])
        said = capfd.readouterr().err
        assert "not reused from" in said and "No module named 'six'" in said
    finally:
        subprocess.run(["docker", "rmi", "-f", *_images(run)], capture_output=True, check=False)


def test_a_reuse_runs_the_sites_own_layout_not_the_donors(tmp_path, docker_engine):
    """(d): the tests move to ``checks/check_ops.py``, run by tox from ``checks/`` (whose
    pytest.ini names ``check_*.py``): from the root with the donor's options pytest collects
    nothing there; with the site's layout the reuse collects them and is audited equal."""
    moved = {
        "pyproject.toml": pyproject(SIX),
        "tox.ini": "[tox]\nenvlist = py311\n\n[testenv]\nchangedir = checks\ncommands = pytest\n",
        "checks/pytest.ini": "[pytest]\npython_files = check_*.py\n",
        "checks/check_ops.py": TESTS + TEST_ADD,
    }
    _, commits = _history(tmp_path / "calc", moved)
    params = _params(tmp_path / "cache", reuse=True, audit=1)
    run = _environments(tmp_path / "calc", [commits[0], commits[2]], params)
    try:
        counts = run["counts"]
        assert counts.get("environments_reused") == 1, counts
        assert counts.get("reuse_audit_agreed") == 1, counts
        (reused,) = [profile for profile, _ in run["ready"] if profile.reused_from]
        assert "-c checks/pytest.ini" in reused.test_cmd, reused.test_cmd
        donor = next(p for p, _ in run["ready"] if not p.reused_from)
        assert "checks" not in donor.test_cmd, donor.test_cmd
    finally:
        subprocess.run(["docker", "rmi", "-f", *_images(run)], capture_output=True, check=False)


def test_an_audit_that_disagrees_switches_the_repository_back(tmp_path, docker_engine, capfd):
    """(c): collects in the first image, but test_six is skipped there and passes in its own."""
    files = {**TEST_REQUIREMENTS, "tests/test_six.py": SKIPPED_WITHOUT_SIX}
    _, commits = _history(tmp_path / "calc", files)
    params = _params(tmp_path / "cache", reuse=True, audit=1)
    run = _environments(tmp_path / "calc", [commits[0], commits[2]], params)
    try:
        counts = run["counts"]
        assert counts.get("reuse_audit_disagreed") == 1
        assert not counts.get("environments_reused")
        assert not any(profile.reused_from for profile, _ in run["ready"])
        assert len({profile.profile_id for profile, _ in run["ready"]}) == 2
        said = capfd.readouterr().err
        assert "tests/test_six.py::test_six" in said and "builds its own profiles" in said
    finally:
        subprocess.run(["docker", "rmi", "-f", *_images(run)], capture_output=True, check=False)


def test_an_audit_compares_the_verdicts_not_only_the_clean_runs(tmp_path, docker_engine, capfd):
    """(e): the fix of ``sub`` adds tests/test_six.py (``import six``); its base commit's test
    requirements name six, its suite there does not import it, so the probe and the clean runs
    agree."""
    repo = RepoBuilder(tmp_path / "calc")
    files = {"pyproject.toml": pyproject(), "calc/__init__.py": "", "calc/ops.py": OPS}
    repo.commit("Initial calc", {**files, "tests/test_ops.py": TESTS})
    ops = OPS.replace("return a - b", "return a + b", 1)
    fix_add = repo.commit("Fix add", {"calc/ops.py": ops, "tests/test_ops.py": TESTS + TEST_ADD})
    six_base = repo.commit("Test with six", TEST_REQUIREMENTS)
    fixed = ops.replace("a + b\n", "a - b\n").replace("a - b\n", "a + b\n", 1)
    needs_six = repo.commit(
        "Fix sub, and test six",
        {"calc/ops.py": fixed, "tests/test_ops.py": TESTS + TEST_ADD + TEST_SUB,
         "tests/test_six.py": "import six\n\n\ndef test_six():\n    assert six.PY3\n"},
    )  # fmt: skip
    fixes = [fix_add, needs_six]
    audited = _validate(
        tmp_path / "calc", fixes, _params(tmp_path / "audited", reuse=True, audit=1)
    )
    said = capfd.readouterr().err
    unaudited = _validate(tmp_path / "calc", fixes, _params(tmp_path / "trusting", reuse=True))
    try:
        counts = audited["counts"]
        assert counts.get("reuse_audit_disagreed") == 1, counts
        assert not counts.get("environments_reused"), counts
        assert "rejected collection_error_at_base in the reused image, kept in its own" in said
        fixed_sub = {t.base_commit: t for t in audited["tasks"]}[six_base]
        assert "reused_from" not in fixed_sub.provenance
        assert fixed_sub.FAIL_TO_PASS == ("tests/test_ops.py::test_sub",)
        assert "tests/test_six.py::test_six" in fixed_sub.PASS_TO_PASS
        # what the audit guards against: trusted, the old image rejects the task
        assert unaudited["counts"].get("environments_reused") == 1, unaudited["counts"]
        assert [r.reason for r in unaudited["rejections"]] == ["collection_error_at_base"]
    finally:
        subprocess.run(
            ["docker", "rmi", "-f", *_images(audited, unaudited)], capture_output=True, check=False
        )
