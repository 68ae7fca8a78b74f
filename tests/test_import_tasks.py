"""``trajforge import-tasks``: published task rows as candidates that ``validate`` proves again.

The fixtures are written here, in the shapes the datasets publish (SWE-bench's JSONL with
FAIL_TO_PASS/PASS_TO_PASS as JSON text, nebius' Parquet with lists, SWE-Gym's JSON list, a
SWE-smith ``datasets.save_to_disk`` directory and a hub snapshot), over a repository built by the
test, with patches made by real git. The end-to-end test runs ``validate`` in real containers.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import datasets
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from conftest import run_cli, write_params
from repo_factory import OPS_FIXED, RepoBuilder, build_add_fix_repo
from trajforge.generators.imports.candidates import import_candidate
from trajforge.generators.imports.files import dataset_files, read_rows
from trajforge.generators.imports.rows import BadRow, label_list, parse_row
from trajforge.generators.imports.source_keys import find_source, parse_sources
from trajforge.generators.imports.swesmith import parse_instance_id, parse_repo, strategy
from trajforge.generators.sources.specs import SourceOptions, open_source
from trajforge.pipelines.runtime.readers import candidate_files
from trajforge.schemas.candidate import Candidate
from trajforge.schemas.errors import UserError
from trajforge.schemas.rejection import Rejection
from trajforge.schemas.storage import read_records
from trajforge.schemas.task_instance import TaskInstance
from trajforge.verifiers.sandbox.git_tree import apply_patches, git

F2P = ["tests/test_ops.py::test_add"]
P2P = ["tests/test_ops.py::test_mul"]
UPSTREAM = "calc-org/calc"
ISSUE = "add() subtracts\n\n`add(2, 3)` returns -1."


# --- the repository and its patches, made by git ------------------------------------------------


class Calc:
    """calc at its buggy first commit (``initial``) and fixed second (``fixed``); the fix's
    code and test diffs as SWE-bench splits them; and a SWE-smith bug against ``fixed`` that
    adds a module."""

    def __init__(self, root: Path) -> None:
        self.path = root / "calc"
        builder = build_add_fix_repo(self.path)
        self.initial = builder.git("rev-parse", "HEAD~1")
        self.fixed = builder.git("rev-parse", "HEAD")
        self.patch = builder.git("diff", self.initial, self.fixed, "--", "calc") + "\n"
        self.test_patch = builder.git("diff", self.initial, self.fixed, "--", "tests") + "\n"
        bug_ops = OPS_FIXED.replace(
            "def add(a, b):\n    return a + b",
            "def add(a, b):\n    from calc._compat import combine\n\n    return combine(a, b)",
        )
        self.bug_patch = bug_diff(
            self.path, root / "bugwork", {"calc/ops.py": bug_ops, "calc/_compat.py": COMPAT}
        )
        self.c8 = self.fixed[:8]
        self.smith_repo = f"swesmith/calc-org__calc.{self.c8}"
        self.smith_id = f"calc-org__calc.{self.c8}.combine_file__x1y2z3w4"


COMPAT = "def combine(a, b):\n    return a - b\n"


def bug_diff(repo: Path, work: Path, files: dict[str, str | None], *flags: str) -> str:
    """A bug as SWE-smith writes it: ``git diff`` of the changed work tree against HEAD."""
    subprocess.run(["git", "clone", "-q", str(repo), str(work)], check=True)
    for name, text in files.items():
        target = work / name
        if text is None:
            target.unlink()
        else:
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(text)
    subprocess.run(["git", "-C", str(work), "add", "-A"], check=True)
    out = subprocess.run(
        ["git", "-C", str(work), "diff", "--cached", *flags], check=True, capture_output=True
    )
    return out.stdout.decode()


@pytest.fixture(scope="module")
def calc(tmp_path_factory: pytest.TempPathFactory) -> Calc:
    return Calc(tmp_path_factory.mktemp("import-tasks"))


def swe_bench_row(calc: Calc, **changes: Any) -> dict[str, Any]:
    """A row as princeton-nlp/SWE-bench publishes it (``SWEbenchInstance``): labels as JSON."""
    row = {
        "repo": UPSTREAM,
        "instance_id": "calc-org__calc-1",
        "base_commit": calc.initial,
        "patch": calc.patch,
        "test_patch": calc.test_patch,
        "problem_statement": ISSUE,
        "hints_text": "",
        "created_at": "2024-01-02T12:00:00Z",
        "version": "0.1",
        "FAIL_TO_PASS": json.dumps(F2P),
        "PASS_TO_PASS": json.dumps(P2P),
        "environment_setup_commit": calc.initial,
    }
    return {**row, **changes}


def list_row(calc: Calc, **changes: Any) -> dict[str, Any]:
    """A SWE-Gym / nebius row: the same columns, the test lists as lists."""
    row = swe_bench_row(calc, FAIL_TO_PASS=F2P, PASS_TO_PASS=P2P)
    return {**row, **changes}


def smith_row(calc: Calc, **changes: Any) -> dict[str, Any]:
    """A SWE-bench/SWE-smith row: the bug as ``patch``, its base named by ``repo``."""
    row = {
        "instance_id": calc.smith_id,
        "repo": calc.smith_repo,
        "patch": calc.bug_patch,
        "FAIL_TO_PASS": F2P,
        "PASS_TO_PASS": P2P,
        "created_at": "2025-04-18T01:02:03.456789",
        "image_name": f"swesmith.x86_64.calc-org__calc.{calc.c8}",
        "problem_statement": "add() gives the wrong sum",
    }
    return {**row, **changes}


def write_jsonl(path: Path, rows: list[Any], extra_lines: tuple[str, ...] = ()) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = [json.dumps(row) for row in rows] + list(extra_lines)
    path.write_text("".join(line + "\n" for line in lines))
    return path


def _repo(calc: Calc, tmp_path: Path):
    return open_source(str(calc.path), SourceOptions(cache_dir=str(tmp_path / "cache")))


def _import(calc: Calc, tmp_path: Path, fmt: str, raw: dict[str, Any]) -> Candidate | Rejection:
    return import_candidate(parse_row(fmt, "rows.jsonl:1", raw), _repo(calc, tmp_path))


# --- names and keys -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("instance_id", "upstream", "commit", "made_by"),
    [
        ("oauthlib__oauthlib.1fd52536.combine_file__09vlzwgc", "oauthlib/oauthlib", "1fd52536",
         "combine_file"),
        ("pandas-dev__pandas.95280573.pr_53652", "pandas-dev/pandas", "95280573", "pr"),
        ("gin-gonic__gin.3c12d2a8.lm_rewrite__4pb48n1g", "gin-gonic/gin", "3c12d2a8",
         "lm_rewrite"),
        ("pydantic__pydantic.acb0f10f.func_pm_remove_assign__abc12345", "pydantic/pydantic",
         "acb0f10f", "func_pm_remove_assign"),
        ("pdfminer__pdfminer.six.1a8bd2f7.func_basic__zz", "pdfminer/pdfminer.six", "1a8bd2f7",
         "func_basic"),
    ],
)  # fmt: skip
def test_swesmith_names(instance_id, upstream, commit, made_by):
    parsed = parse_instance_id(instance_id)
    assert parsed is not None
    name, _ = parsed
    assert (name.upstream, name.commit) == (upstream, commit)
    assert strategy(instance_id) == made_by
    repo = f"swesmith/{upstream.replace('/', '__')}.{commit}"
    assert parse_repo(repo) == name
    assert parse_repo("astropy/astropy") is None
    assert strategy("astropy__astropy-12907") == "swesmith"  # not a SWE-smith id


def test_source_keys(tmp_path):
    sources = parse_sources(
        ["oauthlib/oauthlib=https://github.com/oauthlib/oauthlib", f"Astropy/Astropy={tmp_path}"]
    )
    assert sources["Astropy/Astropy"] == str(tmp_path)
    assert find_source(sources, "swesmith/oauthlib__oauthlib.1fd52536").startswith("https://")
    assert find_source(sources, "astropy/astropy") == str(tmp_path)  # GitHub ignores case
    assert find_source(sources, "django/django") is None
    exact = parse_sources(["swesmith/a__b.12345678=/one", "a/b=/two"])
    assert find_source(exact, "swesmith/a__b.12345678") == "/one"  # the repo value first
    relative = parse_sources(["a/b=repos/b"])
    assert Path(relative["a/b"]).is_absolute()
    with pytest.raises(UserError, match="expected KEY=PATH_OR_URL"):
        parse_sources(["astropy/astropy"])


def test_labels_as_published():
    assert label_list(json.dumps(F2P), "FAIL_TO_PASS", "x") == tuple(F2P)  # SWE-bench: JSON text
    assert label_list(F2P, "FAIL_TO_PASS", "x") == tuple(F2P)  # the others: lists
    assert label_list("[]", "PASS_TO_PASS", "x") == ()
    assert label_list(None, "PASS_TO_PASS", "x") == ()
    with pytest.raises(BadRow, match="not JSON"):
        label_list("[tests/test_ops.py::test_add", "FAIL_TO_PASS", "x")
    with pytest.raises(BadRow, match="a list of int"):
        label_list([1, 2], "FAIL_TO_PASS", "x")
    with pytest.raises(BadRow, match="got dict"):
        label_list('{"a": 1}', "FAIL_TO_PASS", "x")


# --- rows -> candidates -------------------------------------------------------------------------


def test_a_swe_bench_row_is_a_fix_candidate_with_its_labels(calc, tmp_path):
    candidate = _import(calc, tmp_path, "swe-bench", swe_bench_row(calc))
    assert isinstance(candidate, Candidate), candidate
    assert candidate.base_commit == calc.initial
    assert candidate.patch == calc.patch and candidate.test_patch == calc.test_patch
    assert candidate.bug_patch == "" and candidate.origin == "commit"
    assert candidate.repo == UPSTREAM and candidate.source == str(calc.path)
    assert candidate.created_at == "2024-01-02T12:00:00Z"
    assert candidate.meta.message == "add() subtracts"
    assert candidate.meta.commit == calc.initial
    assert (candidate.meta.files_changed, candidate.meta.lines_added) == (1, 1)
    labels = candidate.labels
    assert labels is not None and labels.dataset == "swe-bench"
    assert labels.instance_id == "calc-org__calc-1"
    assert tuple(F2P) == labels.FAIL_TO_PASS and tuple(P2P) == labels.PASS_TO_PASS
    again = _import(calc, tmp_path, "swe-bench", swe_bench_row(calc))
    assert isinstance(again, Candidate) and again.candidate_id == candidate.candidate_id
    other = _import(calc, tmp_path, "swe-bench", swe_bench_row(calc, instance_id="x__y-2"))
    assert isinstance(other, Candidate) and other.candidate_id != candidate.candidate_id


def test_a_swe_smith_row_is_a_bug_whose_fix_deletes_the_file_it_added(calc, tmp_path):
    candidate = _import(calc, tmp_path, "swe-smith", smith_row(calc))
    assert isinstance(candidate, Candidate), candidate
    assert candidate.base_commit == calc.fixed  # the full sha of <commit8>
    assert candidate.bug_patch == calc.bug_patch  # verbatim
    assert candidate.test_patch == "" and candidate.origin == "bug/combine_file"
    assert "new file mode" in calc.bug_patch
    assert "deleted file mode" in candidate.patch and "calc/_compat.py" in candidate.patch
    clean_tree = git(str(calc.path), "rev-parse", f"{calc.fixed}^{{tree}}").decode().strip()
    restored = apply_patches(str(calc.path), calc.fixed, [candidate.bug_patch, candidate.patch])
    assert restored == clean_tree
    assert candidate.labels is not None
    assert candidate.labels.image_name == f"swesmith.x86_64.calc-org__calc.{calc.c8}"
    assert candidate.labels.instance_id == calc.smith_id


def test_a_bug_that_renames_and_deletes_files_is_undone_exactly(calc, tmp_path):
    """Rename headers in the bug; the fix is plain deletes and adds that restore every file."""
    ops = (calc.path / "calc" / "ops.py").read_text()
    bug = bug_diff(
        calc.path, tmp_path / "work",
        {"calc/ops.py": None, "calc/core.py": ops, "calc/__init__.py": None,
         "calc/new.py": "X = 1\n"},
        "-M",
    )  # fmt: skip
    assert "rename from calc/ops.py" in bug
    pr_id = f"calc-org__calc.{calc.c8}.pr_17"
    candidate = _import(calc, tmp_path, "swe-smith", smith_row(calc, patch=bug, instance_id=pr_id))
    assert isinstance(candidate, Candidate), candidate
    assert candidate.origin == "bug/pr"
    assert "rename" not in candidate.patch
    for path in ("calc/ops.py", "calc/__init__.py"):
        assert f"diff --git a/{path} b/{path}\nnew file mode" in candidate.patch
    for path in ("calc/core.py", "calc/new.py"):
        assert f"diff --git a/{path} b/{path}\ndeleted file mode" in candidate.patch
    clean_tree = git(str(calc.path), "rev-parse", f"{calc.fixed}^{{tree}}").decode().strip()
    assert apply_patches(str(calc.path), calc.fixed, [bug, candidate.patch]) == clean_tree


def test_a_swe_smith_mirror_is_read_through_the_bug_commit(calc, tmp_path):
    """SWE-smith's mirror has fresh history (create_mirror_repo.py: one "Initial commit") and a
    branch per bug: <commit8> is not in it, the row's base_commit (the bug commit) is."""
    mirror = RepoBuilder(tmp_path / "mirror")
    files = {
        p: (calc.path / p).read_text()
        for p in ("pyproject.toml", "calc/__init__.py", "calc/ops.py", "tests/test_ops.py")
    }
    clean = mirror.commit("Initial commit", files)
    mirror.git("checkout", "-q", "-b", calc.smith_id)
    mirror.git("apply", "--index", "-", input=calc.bug_patch.encode())
    bug_commit = mirror.commit("Bug Patch", {})
    mirror.git("checkout", "-q", "main")
    repo = open_source(str(mirror.path), SourceOptions(cache_dir=str(tmp_path / "cache")))
    row = parse_row("swe-smith", "x.jsonl:1", smith_row(calc, base_commit=bug_commit))
    candidate = import_candidate(row, repo)
    assert isinstance(candidate, Candidate), candidate
    assert candidate.base_commit == clean and "deleted file mode" in candidate.patch
    lost = import_candidate(parse_row("swe-smith", "x.jsonl:2", smith_row(calc)), repo)
    assert isinstance(lost, Rejection) and lost.reason == "commit_not_found"
    assert f"commit {calc.c8} of {UPSTREAM}" in lost.detail
    assert f"--source {UPSTREAM}=" in lost.detail


@pytest.mark.parametrize(
    ("fmt", "changes", "reason", "says"),
    [
        ("swe-bench", {"base_commit": "0123abcd" * 5}, "commit_not_found", "is not in"),
        ("swe-bench", {"patch": "diff --git a/calc/ops.py b/calc/ops.py\n--- a/calc/ops.py\n"
                       "+++ b/calc/ops.py\n@@ -1,2 +1,2 @@\n def nope(a, b):\n-    x\n+    y\n"},
         "patch_does_not_apply", "patch does not apply"),
        ("swe-bench", {"test_patch": "diff --git a/tests/test_ops.py b/tests/test_ops.py\n"
                       "--- a/tests/test_ops.py\n+++ b/tests/test_ops.py\n@@ -1 +1 @@\n-zzz\n+q\n"},
         "patch_does_not_apply", "test_patch does not apply"),
        ("swe-smith", {"repo": "swesmith/calc-org__calc.0badc0de",
                       "instance_id": "calc-org__calc.0badc0de.lm_rewrite__aa"},
         "commit_not_found", "commit 0badc0de of calc-org/calc"),
    ],
)  # fmt: skip
def test_rows_that_cannot_be_candidates_say_why(calc, tmp_path, fmt, changes, reason, says):
    raw = smith_row(calc, **changes) if fmt == "swe-smith" else swe_bench_row(calc, **changes)
    result = _import(calc, tmp_path, fmt, raw)
    assert isinstance(result, Rejection)
    assert result.reason == reason and says in result.detail, result.detail
    assert result.input == raw["instance_id"] and "rows.jsonl:1" in result.detail


@pytest.mark.parametrize(
    ("changes", "reason", "says"),
    [
        ({"base_commit": ""}, "no_base_commit", "no base_commit"),
        ({"base_commit": None}, "no_base_commit", "no base_commit"),
        ({"FAIL_TO_PASS": "[oops"}, "bad_row", "FAIL_TO_PASS is text but not JSON"),
        ({"PASS_TO_PASS": [1]}, "bad_row", "PASS_TO_PASS must be a list of test ids"),
        ({"instance_id": ""}, "bad_row", "no instance_id"),
        ({"patch": "  "}, "bad_row", "empty patch"),
        ({"repo": 7}, "bad_row", "repo must be text"),
    ],
)
def test_malformed_rows_are_bad_rows(calc, changes, reason, says):
    with pytest.raises(BadRow, match=says) as caught:
        parse_row("swe-bench", "rows.jsonl:4", swe_bench_row(calc, **changes))
    assert caught.value.reason == reason


def test_a_swe_smith_row_needs_no_base_commit_but_a_named_one():
    row = {"instance_id": "weird-id", "repo": "someone/thing", "patch": "diff --git a/x b/x\n"}
    with pytest.raises(BadRow) as caught:
        parse_row("swe-smith", "rows.jsonl:1", row)
    assert caught.value.reason == "no_base_commit"


# --- files as published -------------------------------------------------------------------------


def _rows_of(path: Path) -> list[dict[str, Any]]:
    files, missing = dataset_files([str(path)])
    assert not missing
    rows = [read for f in files for read in read_rows(f)]
    assert all(not isinstance(r, Rejection) for r in rows), rows
    return [r[1] for r in rows]  # type: ignore[index]


def test_every_published_shape_reads(calc, tmp_path):
    # SWE-bench JSONL, labels as JSON text
    jsonl = write_jsonl(tmp_path / "swe-bench.jsonl", [swe_bench_row(calc)])
    [row] = _rows_of(jsonl)
    assert row["FAIL_TO_PASS"] == json.dumps(F2P)
    # nebius Parquet with lists and its meta struct
    table = pa.Table.from_pylist([list_row(calc, meta={"has_test_patch": True, "is_lite": False})])
    pq.write_table(table, tmp_path / "nebius.parquet")
    [row] = _rows_of(tmp_path / "nebius.parquet")
    assert row["FAIL_TO_PASS"] == F2P and row["meta"]["has_test_patch"] is True
    # SWE-Gym JSON list
    (tmp_path / "gym.json").write_text(json.dumps([list_row(calc), list_row(calc)]))
    assert len(_rows_of(tmp_path / "gym.json")) == 2
    # the names swapped: the SWE-bench harness reads .jsonl as one JSON document; to_json
    # writes lines whatever the name
    (tmp_path / "list.jsonl").write_text(json.dumps([swe_bench_row(calc)] * 3, indent=2))
    assert len(_rows_of(tmp_path / "list.jsonl")) == 3
    write_jsonl(tmp_path / "lines.json", [list_row(calc), list_row(calc)])
    assert [r["FAIL_TO_PASS"] for r in _rows_of(tmp_path / "lines.json")] == [F2P, F2P]
    # SWE-smith save_to_disk, one split and a DatasetDict
    ds = datasets.Dataset.from_list([smith_row(calc), smith_row(calc, instance_id="b")])
    ds.save_to_disk(str(tmp_path / "saved"))
    assert [r["instance_id"] for r in _rows_of(tmp_path / "saved")] == [calc.smith_id, "b"]
    datasets.DatasetDict({"train": ds}).save_to_disk(str(tmp_path / "saved_dict"))
    assert len(_rows_of(tmp_path / "saved_dict")) == 2
    # a hub snapshot: data/<split>-00000-of-00001.parquet beside the card and a .cache folder
    snapshot = tmp_path / "snapshot"
    (snapshot / "data").mkdir(parents=True)
    (snapshot / ".cache" / "huggingface").mkdir(parents=True)
    (snapshot / ".cache" / "huggingface" / "x.json").write_text("{}")
    (snapshot / "README.md").write_text("---\ndataset_info: {}\n---\n")
    (snapshot / "dataset_infos.json").write_text("{}")
    ds.to_parquet(str(snapshot / "data" / "train-00000-of-00001.parquet"))
    rows = _rows_of(snapshot)
    assert [r["instance_id"] for r in rows] == [calc.smith_id, "b"]
    assert rows[0]["PASS_TO_PASS"] == P2P


def test_unreadable_files_are_set_aside(tmp_path):
    (tmp_path / "broken.parquet").write_bytes(b"PAR1 not really")
    (tmp_path / "binary.jsonl").write_bytes(b"\xff\xfe\x00garbage\n")
    (tmp_path / "dict.json").write_text('"just text"')
    for name in ("broken.parquet", "binary.jsonl", "dict.json"):
        [rejection] = list(read_rows(str(tmp_path / name)))
        assert isinstance(rejection, Rejection) and rejection.reason == "bad_input_file"
        assert name in rejection.detail
    (tmp_path / "empty").mkdir()
    files, missing = dataset_files([str(tmp_path / "nope.jsonl"), str(tmp_path / "empty")])
    assert files == [] and [r.reason for r in missing] == ["bad_input_file"] * 2
    assert "no such file" in missing[0].detail and "no dataset files" in missing[1].detail


# --- the command --------------------------------------------------------------------------------


def _tables(out: Path) -> tuple[list[Candidate], dict[str, list[Rejection]]]:
    candidates = [c for f in sorted((out / "candidates").glob("*.parquet"))
                  for c in read_records(Candidate, str(f))]  # fmt: skip
    rejections: dict[str, list[Rejection]] = {}
    for f in sorted((out / "rejections").glob("*.parquet")):
        for r in read_records(Rejection, str(f)):
            rejections.setdefault(r.reason, []).append(r)
    return candidates, rejections


def test_cli_imports_good_rows_and_counts_every_bad_one(calc, tmp_path):
    good = swe_bench_row(calc)
    rows = [
        good,
        swe_bench_row(calc, instance_id="no-base", base_commit=""),
        swe_bench_row(calc, instance_id="elsewhere", repo="other/lib"),
        swe_bench_row(calc, instance_id="lost", base_commit="0123abcd" * 5),
        swe_bench_row(calc, instance_id="mangled", patch=calc.patch.replace("a - b", "a * b")),
        swe_bench_row(calc, instance_id="labels", FAIL_TO_PASS="[not json"),
        good,  # the same instance twice
    ]
    write_jsonl(tmp_path / "in" / "swe-bench.jsonl", rows, extra_lines=("{oops",))
    (tmp_path / "in" / "broken.parquet").write_bytes(b"not parquet")
    proc = run_cli(
        "import-tasks", "--format", "swe-bench", "in", "missing.jsonl",
        "--source", f"{UPSTREAM}={calc.path}", "--output", "out", cwd=tmp_path, timeout=300,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr
    assert "import-tasks: 10 inputs, 1 kept, 9 rejected" in proc.stderr, proc.stderr
    candidates, rejections = _tables(tmp_path / "out")
    [candidate] = candidates
    assert candidate.labels is not None and candidate.labels.instance_id == "calc-org__calc-1"
    counts = {reason: len(found) for reason, found in rejections.items()}
    assert counts == {
        "no_base_commit": 1, "unknown_repo": 1, "commit_not_found": 1,
        "patch_does_not_apply": 1, "bad_row": 2, "duplicate": 1, "bad_input_file": 2,
    }  # fmt: skip
    [unknown] = rejections["unknown_repo"]
    assert unknown.input == "elsewhere" and "--source other/lib=PATH_OR_URL" in unknown.detail
    assert {r.input for r in rejections["bad_row"]} == {"labels", "in/swe-bench.jsonl:8"}
    details = " ".join(r.detail for r in rejections["bad_input_file"])
    assert "broken.parquet" in details and "missing.jsonl" in details
    assert "swe-bench.jsonl:7 (calc-org__calc-1)" in rejections["duplicate"][0].detail
    # validate's own reader takes the table as it takes mine's
    files = candidate_files("validate", [str(tmp_path / "out")], Candidate, [])
    assert [c.candidate_id for f in files for c in read_records(Candidate, f)] == [
        candidate.candidate_id
    ]


@pytest.mark.slow
def test_cli_reads_a_save_to_disk_directory_and_parquet(calc, tmp_path):
    datasets.Dataset.from_list([smith_row(calc)]).save_to_disk(str(tmp_path / "smith"))
    proc = run_cli(
        "import-tasks", "--format", "swe-smith", "smith", "--source", f"{UPSTREAM}={calc.path}",
        "--output", "out", cwd=tmp_path, timeout=300,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    [candidate], rejections = _tables(tmp_path / "out")
    assert not rejections and candidate.origin == "bug/combine_file"
    pq.write_table(pa.Table.from_pylist([list_row(calc)]), tmp_path / "nebius.parquet")
    proc = run_cli(
        "import-tasks", "--format", "nebius", "nebius.parquet",
        "--source", f"{UPSTREAM}={calc.path}", "--output", "neb", cwd=tmp_path, timeout=300,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    [candidate], rejections = _tables(tmp_path / "neb")
    assert not rejections and candidate.labels is not None
    assert candidate.labels.dataset == "nebius" and tuple(F2P) == candidate.labels.FAIL_TO_PASS


def test_cli_help_lists_import_tasks(tmp_path):
    proc = run_cli("--help", cwd=tmp_path, timeout=60)
    assert proc.returncode == 0 and "import-tasks" in proc.stdout


# --- end to end: import, then validate in real containers ---------------------------------------


@pytest.mark.docker
@pytest.mark.usefixtures("docker_engine")
def test_imported_tasks_are_validated_and_keep_their_ids(calc, tmp_path):
    params = write_params(tmp_path / "params.yaml", tmp_path / "cache", gold_runs=1)
    write_jsonl(tmp_path / "swe-bench.jsonl", [swe_bench_row(calc)])
    datasets.Dataset.from_list([smith_row(calc)]).save_to_disk(str(tmp_path / "smith"))
    for fmt, path, out in (
        ("swe-bench", "swe-bench.jsonl", "fixes"),
        ("swe-smith", "smith", "bugs"),
    ):
        proc = run_cli(
            "import-tasks", "--format", fmt, path, "--source", f"{UPSTREAM}={calc.path}",
            "--output", out, "--params", str(params), cwd=tmp_path, timeout=300,
        )  # fmt: skip
        assert proc.returncode == 0, proc.stderr
    done = run_cli(
        "validate", "--input", "fixes", "--input", "bugs", "--output", "val",
        "--params", str(params), cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    tasks = {
        t.instance_id: t
        for f in sorted((tmp_path / "val" / "tasks").glob("*.parquet"))
        for t in read_records(TaskInstance, str(f))
    }
    assert set(tasks) == {"calc-org__calc-1", calc.smith_id}, done.stderr
    fix, bug = tasks["calc-org__calc-1"], tasks[calc.smith_id]
    assert tuple(F2P) == fix.FAIL_TO_PASS and P2P[0] in fix.PASS_TO_PASS
    assert fix.base_commit == calc.initial and fix.origin == "commit"
    assert fix.patch == calc.patch and fix.test_patch == calc.test_patch
    assert tuple(F2P) == bug.FAIL_TO_PASS and bug.origin == "bug/combine_file"
    assert bug.base_commit == calc.fixed and bug.bug_patch == calc.bug_patch
    assert fix.provenance["dataset"] == "swe-bench" and bug.provenance["dataset"] == "swe-smith"
    # imported rows take the kept path of validate's own: each gold graded by the grader
    assert fix.gold_runs == bug.gold_runs == "1/1"
