"""The Docker sandbox's promises, checked inside real containers."""

from __future__ import annotations

import contextlib
import io
import os
import tarfile

import docker
import pytest
from trajforge.generators.environments.base_image import base_image_tag
from trajforge.verifiers.sandbox.base import Limits, SessionSpec
from trajforge.verifiers.sandbox.docker import LABEL, DockerSandbox, janitor

IMAGE = base_image_tag("3.11")


@pytest.fixture(scope="module")
def sandbox(docker_engine) -> DockerSandbox:
    return DockerSandbox(Limits(memory="256m", cpus=0.5, pids=64, max_output_bytes=4000))


def test_no_network_no_capabilities_no_privileges(sandbox):
    with sandbox.session(SessionSpec(IMAGE)) as session:
        net = session.exec("cat /sys/class/net/*/operstate; ls /sys/class/net", 30, workdir="/")
        assert net.output.split() == ["unknown", "lo"]  # loopback only
        caps = session.exec("grep CapEff /proc/self/status", 30, workdir="/")
        assert caps.output.split()[-1] == "0000000000000000"
        nnp = session.exec("grep NoNewPrivs /proc/self/status", 30, workdir="/")
        assert nnp.output.split()[-1] == "1"
        attrs = session.container.client.api.inspect_container(session.container.id)["HostConfig"]
        assert attrs["Memory"] == 256 * 1024 * 1024
        assert attrs["NanoCpus"] == 500_000_000
        assert attrs["PidsLimit"] == 64
        assert session.container.labels[LABEL] == "1"


def test_host_secrets_do_not_reach_the_container(sandbox, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-secret-should-not-leak")
    with sandbox.session(SessionSpec(IMAGE)) as session:
        env = session.exec("env", 30, workdir="/")
    assert "sk-secret" not in env.output and "OPENAI_API_KEY" not in env.output


def test_timeout_kills_the_command(sandbox):
    with sandbox.session(SessionSpec(IMAGE)) as session:
        result = session.exec("sleep 600", 2, workdir="/")
    assert result.timed_out and result.exit_code == -9 and result.duration_s < 60


def test_huge_output_is_capped_keeping_head_and_tail(sandbox):
    with sandbox.session(SessionSpec(IMAGE)) as session:
        result = session.exec("echo FIRST; seq 1 200000; echo LAST", 60, workdir="/")
    assert result.output.startswith("FIRST") and result.output.rstrip().endswith("LAST")
    assert len(result.output) < 5000 and result.output_bytes > 1_000_000
    assert "bytes cut" in result.output


def test_pids_limit_stops_a_fork_bomb(sandbox):
    with sandbox.session(SessionSpec(IMAGE)) as session:
        result = session.exec("for i in $(seq 200); do sleep 30 & done; wait", 20, workdir="/")
    assert "fork" in result.output.lower() or "resource" in result.output.lower()


def test_files_in_and_out(sandbox):
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        info = tarfile.TarInfo("repo/hello.txt")
        info.size = 5
        tar.addfile(info, io.BytesIO(b"hello"))
    with sandbox.session(SessionSpec(IMAGE)) as session:
        session.put_archive(buffer.getvalue())
        result = session.exec("cat hello.txt > /tmp/out.txt; cat hello.txt", 30)
        assert result.output == "hello" and result.exit_code == 0
        assert session.read_file("/tmp/out.txt") == b"hello"
        assert session.read_file("/tmp/missing") is None


def test_janitor_removes_leftovers_of_a_dead_run(docker_engine):
    client = docker.from_env()
    leftover = client.containers.run(
        IMAGE,
        ["sleep", "600"],
        detach=True,
        labels={LABEL: "1", "trajforge.owner": f"{os.uname().nodename}:999999"},
    )
    try:
        assert janitor() >= 1
        assert not client.containers.list(all=True, filters={"id": leftover.id})
    finally:
        with contextlib.suppress(docker.errors.NotFound):
            leftover.remove(force=True)
