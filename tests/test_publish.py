"""Publishing an export: checked before any network call, one commit, and the token never leaks.

No stand-ins for huggingface_hub: the only network is a local port nobody listens on.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import subprocess
import sys
import traceback
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from trajforge.pipelines.release.publish import PublishError, publish_dataset

FAKE_TOKEN = "hf_FakeSecretToken0123456789abcdef"
UNREACHABLE = "http://127.0.0.1:9"
ROOT = Path(__file__).resolve().parents[1]


def make_export(root: Path) -> Path:
    export = root / "export"
    for split, ids in (("train", ["a", "b"]), ("validation", ["c"])):
        path = export / "data" / "tasks" / f"{split}-00000-of-00001.parquet"
        path.parent.mkdir(parents=True, exist_ok=True)
        pq.write_table(pa.table({"instance_id": ids, "repo": ["acme/widgets"] * len(ids)}), path)
    (export / "README.md").write_text("---\nlicense: apache-2.0\npretty_name: t\n---\n# Tasks\n")
    (export / "version.json").write_text(json.dumps({"version": "v1"}))
    (export / ".tmp-half-written.parquet").write_bytes(b"torn")  # hidden: never uploaded
    return export


@pytest.fixture
def hf_env(tmp_path, monkeypatch):
    """The fake token in the environment, and huggingface_hub's home inside the test's tmp dir."""
    monkeypatch.setenv("HF_TOKEN", FAKE_TOKEN)
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf-home"))
    return tmp_path


def _one_line(message: str) -> None:
    assert "\n" not in message and message.startswith("publish: ")


def _assert_no_token_under(root: Path) -> None:
    for path in root.rglob("*"):
        if path.is_file():
            assert FAKE_TOKEN.encode() not in path.read_bytes(), path


def test_dry_run_writes_the_manifest_and_uploads_nothing(hf_env):
    export = make_export(hf_env)
    result = publish_dataset(
        str(export), "acme/tasks", private=True, dry_run=True, endpoint=UNREACHABLE
    )
    manifest = json.loads(Path(result.manifest_path).read_text())
    assert Path(result.manifest_path) == hf_env / "export.publish-manifest.json"
    assert manifest["repo_id"] == "acme/tasks" and manifest["private"] is True
    expected = sorted(
        p.relative_to(export).as_posix()
        for p in export.rglob("*")
        if p.is_file() and not p.name.startswith(".")
    )
    assert [f["path"] for f in manifest["files"]] == expected
    assert "README.md" in expected and "data/tasks/train-00000-of-00001.parquet" in expected
    for entry in manifest["files"]:
        data = (export / entry["path"]).read_bytes()
        assert entry["size"] == len(data)
        assert entry["sha256"] == hashlib.sha256(data).hexdigest()
    assert manifest["total_bytes"] == sum(f["size"] for f in manifest["files"])
    assert "nothing uploaded" in result.render()
    _assert_no_token_under(hf_env)


def test_dry_run_needs_no_token(tmp_path, monkeypatch):
    monkeypatch.delenv("HF_TOKEN", raising=False)
    export = make_export(tmp_path)
    target = tmp_path / "out" / "manifest.json"
    result = publish_dataset(
        str(export), "acme/tasks", private=False, dry_run=True, manifest_path=str(target)
    )
    assert json.loads(target.read_text())["private"] is False
    assert len(result.files) == 4


def test_no_token_is_one_clear_line(tmp_path, monkeypatch):
    monkeypatch.delenv("MY_HF_TOKEN", raising=False)
    export = make_export(tmp_path)
    with pytest.raises(PublishError) as caught:
        publish_dataset(
            str(export), "acme/tasks", private=False, dry_run=False, token_env="MY_HF_TOKEN"
        )
    assert caught.value.reason == "no_token"
    _one_line(str(caught.value))
    assert "set MY_HF_TOKEN" in str(caught.value) and "acme/tasks" in str(caught.value)


@pytest.mark.parametrize(
    ("breakage", "reason", "words"),
    [
        ("no_dir", "not_an_export", "is not a directory"),
        ("no_card", "not_an_export", "no README.md dataset card"),
        ("no_parquet", "not_an_export", "no Parquet files"),
        ("torn_parquet", "bad_parquet", "is not a readable Parquet file"),
        ("bad_yaml", "bad_card", "is not valid YAML"),
    ],
)
def test_a_directory_that_is_not_an_export_is_refused(hf_env, breakage, reason, words):
    export = make_export(hf_env)
    if breakage == "no_dir":
        export = hf_env / "missing"
    elif breakage == "no_card":
        (export / "README.md").unlink()
    elif breakage == "no_parquet":
        for shard in export.rglob("*.parquet"):
            shard.unlink()
    elif breakage == "torn_parquet":
        (export / "data" / "tasks" / "train-00000-of-00001.parquet").write_bytes(b"PAR1 torn")
    else:
        (export / "README.md").write_text("---\nlicense: [apache\n---\n# card\n")
    with pytest.raises(PublishError) as caught:
        publish_dataset(str(export), "acme/tasks", private=False, dry_run=False)
    assert caught.value.reason == reason
    assert words in str(caught.value)
    _one_line(str(caught.value))


@pytest.mark.parametrize(
    "repo_id", ["tasks", "acme/", "/tasks", "a/b/c", "acme/ta sks", "ac..me/x"]
)
def test_a_bad_repo_id_is_refused(hf_env, repo_id):
    with pytest.raises(PublishError) as caught:
        publish_dataset(str(make_export(hf_env)), repo_id, private=False, dry_run=True)
    assert caught.value.reason == "bad_repo_id" and "--repo-id ORG/NAME" in str(caught.value)


def test_a_refused_push_names_the_repo_and_never_the_token(hf_env, caplog, capfd):
    caplog.set_level(logging.DEBUG)
    export = make_export(hf_env)
    with pytest.raises(PublishError) as caught:
        publish_dataset(
            str(export), "acme/tasks", private=True, dry_run=False, endpoint=UNREACHABLE
        )
    error = caught.value
    message = str(error)
    _one_line(message)
    assert error.reason == "push_failed"
    assert "acme/tasks" in message and "unreachable" in message and "retry" in message
    assert "nothing was published" in message
    assert error.__cause__ is None and error.__context__ is None  # no chained transport error
    shown = "".join(traceback.format_exception(error)) + repr(error.args)
    captured = capfd.readouterr()
    for text in (shown, caplog.text, captured.out, captured.err):
        assert FAKE_TOKEN not in text
    _assert_no_token_under(hf_env)


def test_hf_endpoint_from_the_environment_is_used_and_the_token_stays_out(tmp_path):
    """As the CLI runs it: a fresh process that reads HF_ENDPOINT and HF_TOKEN itself."""
    export = make_export(tmp_path)
    script = (
        "from trajforge.pipelines.release.publish import publish_dataset\n"
        f"publish_dataset({str(export)!r}, 'acme/tasks', private=False, dry_run=False)\n"
    )
    env = {
        **os.environ,
        "HF_TOKEN": FAKE_TOKEN,
        "HF_ENDPOINT": UNREACHABLE,
        "HF_HOME": str(tmp_path / "hf-home"),
        "PYTHONPATH": str(ROOT),
    }
    proc = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=120
    )
    assert proc.returncode != 0
    assert "could not push acme/tasks" in proc.stderr and UNREACHABLE in proc.stderr
    assert FAKE_TOKEN not in proc.stdout + proc.stderr
    _assert_no_token_under(tmp_path)
