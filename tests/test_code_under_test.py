"""Issue 30: the code under test must be the repository's. A project named like one of pytest's
own dependencies (iniconfig) that nothing installs gets PyPI's iniconfig with the runner; the
collection says which package the tests imported from where, linking /repo back last is tried
(it cannot install here), and the environment ends with ``wrong_code_under_test`` instead of a
run that tests PyPI's code.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from reach_repos import build_runner_dependency
from trajforge.verifiers.collection import parse_origins
from wild_runs import run_wild


def test_the_plugins_lines_read_as_name_from_file() -> None:
    data = b"pluggy\t/venv/lib/python3.11/site-packages/pluggy/__init__.py\nnot a line\n"
    assert parse_origins(data) == (
        "pluggy from /venv/lib/python3.11/site-packages/pluggy/__init__.py",
    )
    assert parse_origins(b"") == ()
    assert len(parse_origins(b"x\ty\n" * 1000)) == 20


@pytest.mark.docker
@pytest.mark.usefixtures("docker_engine")
def test_pypis_copy_standing_in_for_the_project_is_refused(tmp_path: Path) -> None:
    repo = tmp_path / "iniconfig"
    build_runner_dependency(repo)
    out = run_wild(repo, tmp_path)
    assert not out.tasks
    reasons = {r["reason"] for r in out.rejections}
    assert reasons == {"wrong_code_under_test"}, out.rejections
    detail = out.rejections[0]["detail"]
    assert "tests import iniconfig from " in detail and "site-packages" in detail, detail
    assert detail.endswith("not /repo") and len(detail.splitlines()) == 1
    assert out.rerun_summary.get("images_built", 0) == 0, out.rerun_summary


def test_a_command_line_projects_main_module_is_not_one_of_its_packages(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """cookiecutter has /repo/cookiecutter/ and a top-level __main__.py: under pytest,
    sys.modules["__main__"] is pytest's own, which must not read as the project's code coming
    from elsewhere (EnvBench's cookiecutter came back wrong_code_under_test for it)."""
    from trajforge.verifiers import origin_plugin

    (tmp_path / "cookiecutter").mkdir()
    (tmp_path / "cookiecutter" / "__init__.py").write_text("")
    (tmp_path / "__main__.py").write_text("print('cli')\n")
    (tmp_path / "tasks.py").write_text("")
    monkeypatch.setattr(origin_plugin, "REPO", str(tmp_path))
    assert origin_plugin._own_names() == {"cookiecutter", "tasks"}
