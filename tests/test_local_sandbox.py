"""The local sandbox maps sandbox paths under its own directories, once."""

from __future__ import annotations

from trajforge.verifiers.sandbox.base import Limits
from trajforge.verifiers.sandbox.local import LocalSession


def test_paths_are_mapped_in_one_pass_even_under_tmp(tmp_path):
    work, cache = f"{tmp_path}/sandbox", f"{tmp_path}/envcache"
    session = LocalSession(
        work, f"{cache}/envs/venv-1", f"{cache}/envs", Limits(), {"CA": "/tmp/ca.crt"}
    )
    assert session._map_command("python3 -m venv /venv") == f"python3 -m venv {cache}/envs/venv-1"
    assert session._map_command("cd /repo && x --out=/tmp/j.xml") == (
        f"cd {work}/repo && x --out={work}/tmp/j.xml"
    )
    assert session._map_command("ls /var/tmp /repository") == "ls /var/tmp /repository"
    assert session.env["CA"] == f"{work}/tmp/ca.crt"
