"""What only the podman backend has to prove: choosing it, its images (build, inspect, list,
remove, push and pull against a real registry), its rlimits, and a clear error without podman.

The promises both backends share (no network, no capabilities, limits, timeouts, capped reads,
leftovers) are checked for podman too by tests/test_docker_sandbox.py and
tests/test_hardening_sandbox.py, which run each test against Docker and podman.
"""

from __future__ import annotations

import resource
import socket
import subprocess
import sys
import time
import uuid

import pytest
from registry_server import start_registry
from sandbox_backends import tar_of
from trajforge.generators.environments.base_image import base_image_tag, ensure_podman_base_image
from trajforge.schemas.errors import ParamsError, SandboxUnavailable
from trajforge.schemas.params import Params
from trajforge.verifiers.sandbox.base import (
    ImageBuild,
    ImageStore,
    Limits,
    RegistryError,
    SessionSpec,
)
from trajforge.verifiers.sandbox.factory import make_sandbox
from trajforge.verifiers.sandbox.podman import PodmanSandbox, ulimits

pytestmark = [pytest.mark.docker, pytest.mark.podman]

IMAGE = base_image_tag("3.11")
LABEL = "trajforge.test.podman"

RECIPE = """\
ARG BASE={base}
FROM ${{BASE}} AS build
ARG GREETING=
COPY data/hello.txt /tmp/hello.txt
RUN mkdir -p /venv && cp /tmp/hello.txt /venv/hello.txt && echo "$GREETING" > /venv/greeting

FROM ${{BASE}}
ARG GREETING=
COPY --from=build /venv /venv
ENV TRAJFORGE_TEST=1
LABEL {label}="${{GREETING}}"
"""


def _podman(*args: str, check: bool = True) -> str:
    proc = subprocess.run(["podman", *args], capture_output=True, text=True, check=False)
    assert proc.returncode == 0 or not check, proc.stderr
    return proc.stdout


@pytest.fixture(scope="module")
def sandbox(podman_engine) -> PodmanSandbox:
    box = PodmanSandbox(Limits(memory="512m", pids=128))
    yield box
    box.close()


def test_without_podman_the_sandbox_is_unavailable_with_one_line(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))  # a PATH with no podman on it
    with pytest.raises(SandboxUnavailable) as raised:
        PodmanSandbox()
    message = str(raised.value)
    assert "\n" not in message and "podman" in message and "make setup" in message
    assert raised.value.reason == "sandbox_unavailable"


def test_params_choose_podman(podman_engine):
    params = Params()
    params.sandbox.kind = "podman"
    params.sandbox.memory, params.sandbox.pids = "1500m", 99
    params.check()
    box = make_sandbox(params)
    try:
        assert isinstance(box, PodmanSandbox) and isinstance(box, ImageStore)
        assert box.name == "podman" and box.limits.memory == "1500m" and box.limits.pids == 99
    finally:
        box.close()
    params.sandbox.kind = "lxc"
    with pytest.raises(ParamsError, match=r"sandbox\.kind"):
        params.check()


def test_the_base_image_is_in_podmans_store(podman_engine):
    assert ensure_podman_base_image("3.11", say=lambda _line: None) == IMAGE
    names = _podman("image", "inspect", "--format", "{{json .RepoTags}}", IMAGE)
    assert f"localhost/{IMAGE}" in names  # the short name resolves to podman's localhost/ name


def test_rlimits_stay_within_the_hosts_hard_limits(sandbox):
    """runc cannot set an rlimit above the host's hard one: each is capped by it."""
    with sandbox.session(SessionSpec(IMAGE)) as session:
        limits = session.exec("cat /proc/self/limits", 30, workdir="/").output.splitlines()
    soft = {line[:26].strip(): line[26:].split()[0] for line in limits[1:]}
    files, processes = int(soft["Max open files"]), int(soft["Max processes"])
    assert 1024 <= files <= resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    assert 1024 <= processes <= resource.getrlimit(resource.RLIMIT_NPROC)[1]
    expected = [f"nofile={files}:{files}", f"nproc={processes}:{processes}"]
    assert ulimits()[1::2] == expected


def test_build_inspect_list_and_remove_an_image(podman_engine):
    tag = f"trajforge-test-build:{uuid.uuid4().hex[:8]}"
    greeting = f"hi-{uuid.uuid4().hex[:6]}"
    build = ImageBuild(
        tag=tag,
        dockerfile=RECIPE.format(base=IMAGE, label=LABEL),
        context=tar_of({"data/hello.txt": b"hello from the context\n"}),
        build_args={"GREETING": greeting},
        timeout_s=300,
    )
    sandbox = PodmanSandbox()  # its own: closing it waits until its containers are gone
    try:
        built = sandbox.build_image(build)
        assert built.ok and not built.timed_out, built.log
        assert "STEP" in built.log and "--> " not in built.log  # podman's layer ids are dropped
        assert sandbox.has_image(tag)

        info = sandbox.image_info(tag)
        base = sandbox.image_info(IMAGE)
        assert info is not None and base is not None
        assert info.image_id.startswith("sha256:") and len(info.image_id) == 71
        assert info.labels[LABEL] == greeting
        assert info.repo_digests == ()  # built here: no registry has it
        assert info.layers[0] == base.layers[0]  # the base layer, then COPY --from's
        assert len(info.layers) == 2 and 0 < info.layers[1][1] < 64 * 1024
        assert base.layers[0][1] > 100 * 1024 * 1024  # a whole Debian
        assert sandbox.list_images(LABEL) == [tag]  # named as tagged, without localhost/

        with sandbox.session(SessionSpec(tag)) as session:
            assert session.read_file("/venv/hello.txt") == b"hello from the context\n"
            assert session.read_file("/venv/greeting") == f"{greeting}\n".encode()
            assert session.exec("echo $TRAJFORGE_TEST", 30, "/").output.strip() == "1"
            assert info.image_id in sandbox.container_image_ids()  # in use: never pruned
    finally:
        sandbox.close()
    sandbox.remove_image(tag)
    assert not sandbox.has_image(tag) and sandbox.image_info(tag) is None
    sandbox.remove_image(tag)  # gone already: nothing to do


def test_a_failing_build_and_a_build_past_its_time(sandbox):
    failing = ImageBuild(
        tag=f"trajforge-test-fail:{uuid.uuid4().hex[:8]}",
        dockerfile=f"FROM {IMAGE}\nRUN echo about to fail && exit 3\n",
        context=b"",
    )
    failed = sandbox.build_image(failing)
    assert not failed.ok and not failed.timed_out
    assert "about to fail" in failed.log and "exit status 3" in failed.log
    assert not sandbox.has_image(failing.tag)

    # A FROM name of its own: the build's leftover working container is found by it below.
    alias = f"trajforge-test-slow-{uuid.uuid4().hex[:8]}"
    _podman("tag", IMAGE, f"{alias}:1")
    marker = f"sleep 3{uuid.uuid4().int % 1000:03d}"
    slow = ImageBuild(f"{alias}:2", f"FROM {alias}:1\nRUN {marker}\n", b"", timeout_s=5)
    try:
        started = time.monotonic()
        late = sandbox.build_image(slow)
        assert late.timed_out and not late.ok and "timed out after 5 s" in late.log
        assert time.monotonic() - started < 60
        time.sleep(0.5)
        running = subprocess.run(["pgrep", "-f", f"^{marker}$"], capture_output=True, check=False)
        assert running.returncode == 1, "the RUN step outlived its build"
        assert not sandbox.has_image(slow.tag)
    finally:
        working = _podman("ps", "-aq", "--external", "--filter", f"name={alias}", check=False)
        for cid in working.split():
            _podman("rm", "--force", cid, check=False)
        _podman("rmi", f"{alias}:1", check=False)


@pytest.fixture(scope="module")
def registry(tmp_path_factory, podman_engine) -> str:
    """A real registry (Debian's docker-registry) on a free port of this host."""
    server = start_registry(tmp_path_factory.mktemp("registry"))
    yield server.host
    server.stop()


def test_push_and_pull_through_a_local_registry(sandbox, registry, tmp_path):
    root = tmp_path / "rootfs"
    root.mkdir()
    (root / "payload.txt").write_text(uuid.uuid4().hex)  # a tiny image, unique to this run
    image = f"{registry}/trajforge-test/env:{uuid.uuid4().hex[:8]}"
    tar = subprocess.run(["tar", "-C", str(root), "-c", "."], capture_output=True, check=True)
    subprocess.run(
        ["podman", "import", "-", image], input=tar.stdout, capture_output=True, check=True
    )
    try:
        pushed = sandbox.push_image(image)  # plain HTTP: --tls-verify=false for 127.0.0.1 only
        repository = image.rpartition(":")[0]
        assert pushed.startswith(f"{repository}@sha256:") and len(pushed.rpartition("@")[2]) == 71
        sandbox.remove_image(image)
        assert not sandbox.has_image(image)

        assert sandbox.pull_image(image)
        info = sandbox.image_info(image)
        assert info is not None and pushed in info.repo_digests  # the registry's own digest
        assert not sandbox.pull_image(f"{repository}:no-such-tag")
    finally:
        sandbox.remove_image(image)

    with pytest.raises(RegistryError, match="no registry host"):
        sandbox.pull_image("trajforge-env:abc")  # never looked up anywhere
    with pytest.raises(RegistryError, match="no such image here"):
        sandbox.push_image(f"{registry}/trajforge-test/env:never-built")
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        dead = probe.getsockname()[1]
    with pytest.raises(RegistryError) as raised:
        sandbox.pull_image(f"127.0.0.1:{dead}/trajforge-test/env:x")
    assert "\n" not in str(raised.value) and "registry" in str(raised.value)


def test_leftovers_of_this_sandbox_go_when_its_owner_dies(podman_engine):
    script = (
        "import sys\n"
        "from trajforge.verifiers.sandbox.base import SessionSpec\n"
        "from trajforge.verifiers.sandbox.podman import PodmanSandbox\n"
        f"with PodmanSandbox().session(SessionSpec({IMAGE!r})) as session:\n"
        "    print(session.cid, flush=True)\n"
        "    sys.stdin.read()\n"
    )
    owner = subprocess.Popen(
        [sys.executable, "-c", script], stdin=subprocess.PIPE, stdout=subprocess.PIPE
    )
    assert owner.stdout is not None
    cid = owner.stdout.readline().decode().strip()
    assert cid and _podman("ps", "-q", "--no-trunc", "--filter", f"id={cid}").strip() == cid
    owner.kill()  # dies holding its session: the container is a leftover now
    owner.wait()
    box = PodmanSandbox()  # a new run sweeps before its first session
    try:
        assert not _podman("ps", "-aq", "--no-trunc", "--filter", f"id={cid}").strip()
    finally:
        box.close()
