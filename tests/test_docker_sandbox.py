"""The container sandboxes' promises, checked inside real containers of each backend.

Every test takes ``backend`` (tests/conftest.py): it runs once against Docker and once against
podman, the same promise for both.
"""

from __future__ import annotations

import io
import os
import tarfile
import threading
import uuid

import pytest
from conftest import run_cli
from sandbox_backends import container_id
from trajforge.generators.environments.base_image import base_image_tag
from trajforge.verifiers.sandbox.base import (
    MISSING,
    NOT_A_FILE,
    TOO_LARGE,
    Limits,
    SandboxBroken,
    SessionSpec,
)
from trajforge.verifiers.sandbox.containers import LABEL, OWNER_LABEL, OWNER_START_LABEL

pytestmark = [pytest.mark.docker, pytest.mark.podman]

IMAGE = base_image_tag("3.11")


@pytest.fixture(scope="module")
def sandbox(backend):
    box = backend.sandbox(
        Limits(memory="256m", cpus=0.5, pids=64, max_output_bytes=4000, tmp_size="64m")
    )
    yield box
    box.close()


def test_no_network_no_capabilities_no_privileges(sandbox, backend):
    with sandbox.session(SessionSpec(IMAGE)) as session:
        net = session.exec("cat /sys/class/net/*/operstate; ls /sys/class/net", 30, workdir="/")
        assert net.output.split() == ["unknown", "lo"]  # loopback only
        caps = session.exec("grep CapEff /proc/self/status", 30, workdir="/")
        assert caps.output.split()[-1] == "0000000000000000"
        nnp = session.exec("grep NoNewPrivs /proc/self/status", 30, workdir="/")
        assert nnp.output.split()[-1] == "1"
        init = session.exec("cat /proc/1/cmdline | tr '\\0' ' '", 30, workdir="/")
        assert "sleep" in init.output and not init.output.startswith("sleep")  # an init is pid 1
        attrs = backend.inspect(container_id(session))
        host = attrs["HostConfig"]
        assert host["Memory"] == host["MemorySwap"] == 256 * 1024 * 1024  # no swap beyond it
        assert host["NanoCpus"] == 500_000_000
        assert host["PidsLimit"] == 64
        labels = attrs["Config"]["Labels"]
        assert labels[LABEL] == "1" and labels[OWNER_LABEL] == sandbox.owner
        assert labels[OWNER_START_LABEL] == sandbox.owner_start != ""


def test_only_an_image_build_session_gets_a_network(sandbox):
    with sandbox.session(SessionSpec(IMAGE, network=True)) as session:
        interfaces = session.exec("ls /sys/class/net", 30, workdir="/").output.split()
    assert "lo" in interfaces and len(interfaces) > 1


def test_host_secrets_do_not_reach_the_container(sandbox, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-secret-should-not-leak")
    with sandbox.session(SessionSpec(IMAGE, env={"EXTRA": "given"})) as session:
        env = session.exec("env", 30, workdir="/")
    assert "sk-secret" not in env.output and "OPENAI_API_KEY" not in env.output
    assert "EXTRA=given" in env.output and "HOME=/tmp" in env.output


def test_timeout_kills_the_command_and_the_container(sandbox):
    with sandbox.session(SessionSpec(IMAGE)) as session:
        result = session.exec("sleep 600", 2, workdir="/")
        assert result.timed_out and result.exit_code == -9 and result.duration_s < 60
        with pytest.raises(SandboxBroken):  # the container went with it
            session.exec("true", 30)


def test_a_container_killed_under_a_command_is_a_sandbox_error(sandbox, backend):
    with sandbox.session(SessionSpec(IMAGE)) as session:
        killer = threading.Timer(2, backend.cli, args=("kill", container_id(session)))
        killer.start()
        try:
            with pytest.raises(SandboxBroken):
                session.exec("sleep 60", 120, workdir="/")
        finally:
            killer.cancel()


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


def test_memory_limit_kills_a_hog_not_the_sandbox(sandbox):
    hog = "python3 -c \"data = b'x' * (512 * 1024 * 1024); print('survived')\""
    with sandbox.session(SessionSpec(IMAGE)) as session:
        result = session.exec(hog, 60, workdir="/")
        assert result.exit_code == 137 and "survived" not in result.output  # SIGKILL: OOM
        assert session.exec("echo alive", 30, workdir="/").output.strip() == "alive"
    # podman's conmon records an OOM kill in a file in its working directory: never the user's
    assert not os.path.exists("oom")


def test_tmp_is_a_size_limited_tmpfs(sandbox):
    with sandbox.session(SessionSpec(IMAGE)) as session:
        mounted = session.exec("grep ' /tmp ' /proc/mounts", 30, workdir="/").output
        assert mounted.split()[2] == "tmpfs" and "size=65536k" in mounted
        filled = session.exec("dd if=/dev/zero of=/tmp/f bs=1M count=100; echo rc=$?", 60, "/")
    assert "No space left on device" in filled.output and "rc=1" in filled.output


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


def test_reads_are_capped_and_never_follow_a_link(backend):
    cap = 1024 * 1024
    box = backend.sandbox(Limits(max_read_bytes=cap))
    try:
        with box.session(SessionSpec(IMAGE)) as session:
            made = (
                f"head -c {cap} /dev/urandom > /tmp/at_cap; "
                f"head -c {cap + 1} /dev/zero > /tmp/over; "
                "ln -s /tmp/at_cap /tmp/link; mkfifo /tmp/fifo; mkdir /tmp/dir"
            )
            assert session.exec(made, 30, workdir="/").exit_code == 0
            at_cap = session.read_file_checked("/tmp/at_cap")
            assert at_cap.problem == "" and at_cap.data is not None and len(at_cap.data) == cap
            over = session.read_file_checked("/tmp/over")
            assert (over.problem, over.data, over.size) == (TOO_LARGE, None, cap + 1)
            for path in ("/tmp/link", "/tmp/fifo", "/tmp/dir", "/dev/zero"):
                assert session.read_file_checked(path).problem == NOT_A_FILE, path
            assert session.read_file_checked("/tmp/none").problem == MISSING
            assert session.read_file_checked("/tmp/none/deeper").problem == MISSING
    finally:
        box.close()


def test_commit_makes_an_image_of_the_session(backend):
    tag = f"trajforge-test-commit:{uuid.uuid4().hex[:8]}"
    box = backend.sandbox()  # its own: closing it removes every container of the new image
    try:
        with box.session(SessionSpec(IMAGE)) as session:
            made = session.exec("mkdir /venv && echo committed > /venv/marker", 30, workdir="/")
            assert made.exit_code == 0, made.output  # / is writable by root, as in Docker
            image_id = session.commit(tag)
        assert image_id.startswith("sha256:") and box.has_image(tag)
        with box.session(SessionSpec(tag)) as session:
            assert session.read_file("/venv/marker") == b"committed\n"
    finally:
        box.close()
        backend.cli("rmi", tag, check=False)
    assert not box.has_image(tag)


def test_the_janitor_command_sweeps_each_engine(backend, tmp_path):
    leftover = backend.labelled(IMAGE, f"{os.uname().nodename}:999998", None)
    try:
        done = run_cli("janitor", "--sandbox", backend.name, cwd=tmp_path)
        assert done.returncode == 0, done.stderr
        assert done.stdout.startswith(f"{backend.name}: removed ")
        assert not backend.exists(leftover)
    finally:
        backend.remove(leftover)


def test_janitor_removes_leftovers_of_a_dead_run(backend):
    leftover = backend.labelled(IMAGE, f"{os.uname().nodename}:999999", None)
    try:
        assert backend.sweep().removed >= 1
        assert not backend.exists(leftover)
    finally:
        backend.remove(leftover)
