"""The EnvBench draw is the same on every machine, and a repository not fetched gives its place to
the next in the draw (benchmarks/envbench_sample.py)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import envbench_sample
from repo_factory import RepoBuilder

NAMES = [f"owner{i}/project{i}" for i in range(12)]


def write_list(path: Path) -> Path:
    path.write_text(
        "".join(json.dumps({"repository": n, "revision": "0" * 40}) + "\n" for n in NAMES)
    )
    return path


def bare_mirror(mirrors: Path, name: str, tmp_path: Path) -> str:
    """A real bare mirror where the fetch tool puts one: ``owner+name/repo``."""
    work = RepoBuilder(tmp_path / "work" / name.replace("/", "+"))
    head = work.commit("first", {"README": name})
    target = Path(envbench_sample.mirror_of(str(mirrors), name))
    subprocess.run(["git", "clone", "-q", "--bare", str(work.path), str(target)], check=True)
    return head


def test_the_draw_is_seeded_and_covers_the_whole_list(tmp_path: Path) -> None:
    names = envbench_sample.read_list(str(write_list(tmp_path / "list.jsonl")))
    assert names == NAMES
    first = envbench_sample.draw(names, seed=30)
    assert first == envbench_sample.draw(names, seed=30)
    assert sorted(first) == sorted(NAMES)
    assert first != envbench_sample.draw(names, seed=31)


def test_an_unfetched_repository_gives_its_place_to_the_next(tmp_path: Path, capsys) -> None:
    listing = write_list(tmp_path / "list.jsonl")
    order = envbench_sample.draw(NAMES, seed=30)
    mirrors = tmp_path / "mirrors"
    heads = {name: bare_mirror(mirrors, name, tmp_path) for name in order[1:4]}  # not order[0]
    repos = tmp_path / "repos.txt"

    code = envbench_sample.main(
        [
            "--list",
            str(listing),
            "--count",
            "3",
            "--mirrors",
            str(mirrors),
            "--repos-out",
            str(repos),
        ]
    )

    lines = [line.split() for line in repos.read_text().splitlines() if not line.startswith("#")]
    assert code == 0
    assert [(n, c) for n, _, c in lines] == [(m.split("/")[1], heads[m]) for m in order[1:4]]
    assert all(Path(path, "HEAD").is_file() for _, path, _ in lines)
    assert f"{order[0]} skipped, not fetched" in capsys.readouterr().err


def test_an_unreadable_list_is_one_line(tmp_path: Path, capsys) -> None:
    broken = tmp_path / "list.jsonl"
    broken.write_text('{"name": "no repository key"}\n')
    assert envbench_sample.main(["--list", str(broken)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    assert "cannot read" in err and "'repository' key" in err


def test_a_mirror_missing_a_file_of_its_newest_commit_gives_its_place_too(tmp_path: Path, capsys):
    """A snapshot service may leave out a repository's largest files; `git archive` then fails
    for every version measured, so the draw moves on to the next repository."""
    listing = write_list(tmp_path / "list.jsonl")
    order = envbench_sample.draw(NAMES, seed=30)
    mirrors = tmp_path / "mirrors"
    heads = {name: bare_mirror(mirrors, name, tmp_path) for name in order[:3]}
    git_dir = envbench_sample.mirror_of(str(mirrors), order[0])
    blob = subprocess.run(
        ["git", "--git-dir", git_dir, "rev-parse", f"{heads[order[0]]}:README"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    Path(git_dir, "objects", blob[:2], blob[2:]).unlink()
    repos = tmp_path / "repos.txt"

    code = envbench_sample.main(
        [
            "--list",
            str(listing),
            "--count",
            "2",
            "--mirrors",
            str(mirrors),
            "--repos-out",
            str(repos),
        ]
    )

    names = [line.split()[0] for line in repos.read_text().splitlines()[1:]]
    assert code == 0
    assert names == [name.split("/")[1] for name in order[1:3]]
    assert f"{order[0]} skipped, incomplete: 1 files" in capsys.readouterr().err
