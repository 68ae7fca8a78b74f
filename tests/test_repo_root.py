"""A folder inside a checkout is not a repository to read: its git paths are relative to the
folder while a commit's are relative to the top, so `inject --repo checkout/pkg` once failed
every file with a bare `git_error`. Now it is one rejection whose line names the checkout's top."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pyarrow.parquet as pq
from conftest import run_cli, write_params


def _checkout(root: Path) -> Path:
    package = root / "calc"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("def add(a, b):\n    return a + b\n")
    identity = ["-c", "user.name=t", "-c", "user.email=t@example.com"]
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    subprocess.run(["git", "-C", str(root), "add", "."], check=True)
    subprocess.run(["git", "-C", str(root), *identity, "commit", "-qm", "calc"], check=True)
    return package


def test_a_folder_of_a_checkout_is_one_line_naming_its_top(tmp_path: Path) -> None:
    package = _checkout(tmp_path / "checkout")
    write_params(tmp_path / "params.yaml", tmp_path / "cache")
    proc = run_cli("inject", "--repo", str(package), "--output", "out", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr + proc.stdout
    (rejected,) = pq.read_table(tmp_path / "out" / "rejections").to_pylist()
    assert rejected["reason"] == "not_a_repo_root"
    assert (
        f"a folder (calc) inside the git checkout {tmp_path / 'checkout'}; pass the"
        in (rejected["detail"])
    ), rejected
