"""Which built profile a new one may reuse, and how the reuse probe reads a collection (no
Docker: the stage's real runs are tests/test_environment_reuse.py)."""

from __future__ import annotations

from trajforge.generators.environments.prepare import Prepared
from trajforge.generators.environments.reuse import ReuseBook, disagreement
from trajforge.generators.languages.python.profile import TEST_CMD
from trajforge.generators.languages.python.reuse_probe import donor_flags, layout_of, refusal
from trajforge.generators.languages.python.suite_layout import SuiteLayout
from trajforge.generators.languages.registry import language_named
from trajforge.pipelines.stages.environment import Group, Site, chained
from trajforge.schemas.env_profile import EnvProfile
from trajforge.verifiers.collection import CollectError, Collection


def _prepared(profile_id: str) -> Prepared:
    profile = EnvProfile(
        profile_id, "r", "3.11", (), TEST_CMD, f"env:{profile_id}", "built", "", "c"
    )
    return Prepared(profile, "", "", 1)


def _group(name: str, order: int) -> Group:
    return Group([], [Site(name, "src", "c", "r", order=(order,))], "/repo")


def test_a_repositorys_profiles_chain_per_toolchain_line_in_history_order():
    """With reuse, one chain per (repository, line), each in history order: a profile may reuse
    only one prepared before it on its line, so lines and repositories are prepared at once."""
    entries = [
        ("repo", "python 3.11", _group("late-311", 9)),
        ("repo", "python 3.8", _group("only-38", 5)),
        ("repo", "python 3.11", _group("early-311", 2)),
        ("other", "python 3.11", _group("other-311", 1)),
    ]
    names = lambda chains: [(i, [g.sites[0].input_id for g in c]) for i, c in chains]  # noqa: E731
    assert names(chained(entries, reuse=True)) == [
        ("repo", ["early-311", "late-311"]),
        ("repo", ["only-38"]),
        ("other", ["other-311"]),
    ]
    # without reuse no profile waits on another: each is its own
    assert [ids for _, ids in names(chained(entries, reuse=False))] == [
        ["late-311"], ["only-38"], ["early-311"], ["other-311"],
    ]  # fmt: skip


def test_the_nearest_built_profile_on_the_same_line_is_the_donor():
    book = ReuseBook(0.0, 0)
    book.add("repo", "python 3.11", (1,), _prepared("p1"))
    book.add("repo", "python 3.11", (5,), _prepared("p5"))
    book.add("repo", "python 3.9", (6,), _prepared("old-python"))
    book.add("other", "python 3.11", (7,), _prepared("other-repo"))

    def donor(order: int, line: str = "python 3.11", repo: str = "repo") -> str | None:
        found = book.donor(repo, line, (order,))
        return found.profile.profile_id if found else None

    assert donor(7) == "p5"  # the latest before it, never another repository's
    assert donor(3) == "p1"
    assert donor(0) == "p1"  # none before it: the earliest after it
    assert donor(7, "python 3.9") == "old-python"
    assert donor(7, "python 3.12") is None  # another interpreter: nothing to reuse
    assert donor(1, repo="unknown") is None
    book.record("repo", agreed=False)  # an audit disagreed: this repository builds its own
    assert donor(7) is None and donor(8, repo="other") == "other-repo"


def test_the_audit_share_is_seeded():
    assert not ReuseBook(0.0, 0).audits("any")
    assert ReuseBook(1.0, 0).audits("any")
    drawn = [ReuseBook(0.5, 3).audits(f"p{i}") for i in range(200)]
    assert drawn == [ReuseBook(0.5, 3).audits(f"p{i}") for i in range(200)]
    assert 60 < sum(drawn) < 140


def test_the_toolchain_line_is_the_language_s_answer():
    python = EnvProfile("p", "r", "3.12", (), TEST_CMD, "i", "built", "", "c")
    assert language_named("python").toolchain_line(python) == "python 3.12"
    node = EnvProfile("p", "r", "", (), "", "i", "built", "", "c", runtime="18.19.0")
    assert language_named("javascript").toolchain_line(node) == "node 18"


def test_the_probe_refuses_any_collection_error_and_keeps_the_donor_s_flags():
    assert refusal(Collection(3)) == ""
    broken = CollectError("tests/test_six.py", "ModuleNotFoundError: No module named 'six'", "six")
    assert refusal(Collection(2, errors=(broken,))) == (
        "tests/test_six.py cannot be collected: ModuleNotFoundError: No module named 'six'"
    )
    assert refusal(Collection(0)) == "pytest collects no tests"
    assert "timed out" in refusal(Collection(0, timed_out=True))
    assert "not /repo" in refusal(Collection(1, foreign=("calc from /venv/lib",)))
    flags = f"{TEST_CMD} -W ignore::pytest.PytestUnknownMarkWarning --ignore=tests/test_x.py"
    assert donor_flags(flags) == "-W ignore::pytest.PytestUnknownMarkWarning"
    assert donor_flags(TEST_CMD) == ""


def test_a_donor_s_layout_stays_with_the_donor():
    """Where a suite runs from is the site's (``suite_layout.py``): a reuse drops the donor's."""
    django = SuiteLayout(settings="site.settings", django_dir="web", config="web/pytest.ini")
    changedir = SuiteLayout(run_dir="checks", testpaths=("checks",))
    own = "-W ignore::DeprecationWarning -p no:cacheprovider"
    for layout in (django, changedir, SuiteLayout()):
        detected = " ".join((TEST_CMD, *layout.flags()))
        donor = f"{detected} {own} --ignore=tests/test_x.py"
        assert donor_flags(donor) == own, layout
        assert layout_of(detected) == " ".join(layout.flags())


def test_clean_runs_disagree_test_by_test():
    assert disagreement({"a": "PASSED"}, {"a": "PASSED"}) == ""
    said = disagreement({"a": "PASSED", "b": "SKIPPED"}, {"a": "PASSED", "b": "PASSED"})
    assert said == "1 tests differ, first b: SKIPPED in the reused image, PASSED in its own"
    assert "did not run in the reused image" in disagreement(None, {"a": "PASSED"})
