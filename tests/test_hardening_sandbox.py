"""Hardening of the sandbox and of verdicts (issue 12), in real containers on real repositories.

Owners and the janitor, a container killed under a rerun, a huge JUnit file, a disk filler and a
JUnit path replaced by a symlink: each is an infrastructure failure (never a cached verdict) or
the suite's own doing (a rejection with its reason), and never a dead stage or a full host. Each
test runs against Docker and against podman (the ``backend`` fixture, tests/conftest.py).
"""

from __future__ import annotations

import dataclasses
import os
import socket
import subprocess
import sys
import textwrap
import threading
import time
import tracemalloc

import apache_beam as beam
import pytest
from apache_beam.runners.portability.fn_api_runner import FnApiRunner
from apache_beam.testing.test_pipeline import TestPipeline as BeamTestPipeline
from apache_beam.testing.util import assert_that
from sandbox_backends import Backend, container_id, tar_of
from trajforge.generators.environments.base_image import base_image_tag
from trajforge.generators.environments.image import build_env_image
from trajforge.generators.languages.python.profile import JUNIT_PATH, detect_profile
from trajforge.pipelines.runtime.stage_fn import REJECTED, SandboxFn
from trajforge.schemas.candidate import Candidate
from trajforge.schemas.params import EnvironmentParams, Params, ValidateParams
from trajforge.schemas.storage import ContentCache
from trajforge.verifiers.sandbox.base import (
    MISSING,
    NOT_A_FILE,
    TOO_LARGE,
    Limits,
    SandboxBroken,
    SessionSpec,
)
from trajforge.verifiers.sandbox.containers import OWNER_LABEL, process_start
from trajforge.verifiers.sandbox.docker import _single_file
from trajforge.verifiers.test_runner import (
    JUNIT_NOT_A_FILE,
    JUNIT_TOO_LARGE,
    RunContext,
    run_problem,
    run_tests,
)
from trajforge.verifiers.validation import candidate as validation
from trajforge.verifiers.validation.rule import suite_failure

pytestmark = [pytest.mark.docker]

IMAGE = base_image_tag("3.11")
HOST = socket.gethostname()


@pytest.fixture(scope="module")
def sandbox(backend: Backend):
    box = backend.sandbox()
    yield box
    box.close()


# --- 1. owners, the janitor, a vanished container ------------------------------------------------

OWNER_SCRIPT = textwrap.dedent(
    """
    import sys
    from trajforge.schemas.params import Params
    from trajforge.verifiers.sandbox.base import SessionSpec
    from trajforge.verifiers.sandbox.factory import make_sandbox
    params = Params()
    params.sandbox.kind = sys.argv[1]
    box = make_sandbox(params)
    with box.session(SessionSpec(sys.argv[2])) as session:
        print(getattr(session, "cid", None) or session.container.id, flush=True)
        sys.stdin.read()
    """
)


def test_janitor_reaps_only_dead_owners(sandbox, backend):
    other = subprocess.Popen(  # a second live run: another process with its own sandbox
        [sys.executable, "-c", OWNER_SCRIPT, backend.name, IMAGE],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
    )
    finished = subprocess.Popen(["true"])
    finished.wait()
    made = [
        backend.labelled(IMAGE, f"{HOST}:{finished.pid}", "1"),  # its owner exited
        backend.labelled(IMAGE, f"{HOST}:{os.getpid()}", "1"),  # a live pid, another process's
        backend.labelled(IMAGE, "elsewhere.invalid:1", "1"),  # another host's: not ours to judge
        backend.labelled(IMAGE, f"{HOST}:{os.getpid()}", None),  # an older label: the pid alone
    ]
    dead, reused, elsewhere, legacy = made
    try:
        assert other.stdout is not None
        others = other.stdout.readline().decode().strip()
        assert others, "the second owner did not start a session"
        assert process_start(os.getpid()) == sandbox.owner_start != ""
        with sandbox.session(SessionSpec(IMAGE)) as session:
            mine = container_id(session)
            swept = backend.sweep()
            assert backend.exists(mine) and backend.exists(others)  # live runs keep theirs
            assert backend.exists(legacy) and backend.exists(elsewhere)
            assert not backend.exists(dead) and not backend.exists(reused)
            assert swept.live >= 3 and swept.other_hosts >= 1
            assert "of other hosts" in swept.line()
            other.kill()  # the second run dies without cleaning up
            other.wait()
            backend.sweep()
            assert not backend.exists(others)  # now a dead run's leftover: reaped
            assert backend.exists(mine)
    finally:
        other.kill()
        for cid in made:
            backend.remove(cid)


def test_a_vanished_container_is_a_sandbox_error_not_a_dead_stage(sandbox, backend):
    with sandbox.session(SessionSpec(IMAGE)) as session:
        backend.remove(container_id(session))
        for call in (
            lambda: session.exec("true", 30),
            lambda: session.read_file_checked("/etc/hostname"),
            lambda: session.put_archive(tar_of({"repo/x.txt": b"x"})),
        ):
            with pytest.raises(SandboxBroken):
                call()
    # In a stage: the element is rejected as sandbox_error and the stage goes on.
    params = Params()
    params.sandbox.kind = backend.name
    with BeamTestPipeline(runner=FnApiRunner()) as pipeline:
        out = (
            pipeline
            | beam.Create(["first", "second"])
            | beam.ParDo(VanishingFn(params)).with_outputs(REJECTED, main="kept")
        )
        assert_that(out[REJECTED] | beam.Map(lambda r: (r.input, r.reason)), _is_rejected)
        assert_that(out.kept, lambda kept: _equal(sorted(kept), ["second"]), label="Kept")


def _is_rejected(rejections):
    assert rejections == [("first", "sandbox_error")], rejections


def _equal(got, expected):
    assert got == expected, got


class VanishingFn(SandboxFn):
    """The first element's container is removed under it; the second runs normally."""

    STAGE = "hardening"

    def process(self, element: str):
        assert self.sandbox is not None
        with self.sandbox.session(SessionSpec(IMAGE)) as session:
            if element == "first":
                Backend(self.params.sandbox.kind).remove(container_id(session))
            session.exec("true", 30)
        yield element


# --- 2. a container killed mid-rerun -------------------------------------------------------------


@pytest.fixture(scope="module")
def calc_env(calc_repo, sandbox, tmp_path_factory):
    """The calc repository's real environment image, and its fix_add candidate."""
    path, shas = calc_repo
    base, fix = shas["initial"], shas["fix_add"]
    # A stable identity: the image is built once and reused by later runs of these tests.
    profile = detect_profile(str(path), base, "local/calc", source="tests/hardening-sandbox/calc")
    logs = str(tmp_path_factory.mktemp("build-logs"))
    built = build_env_image(sandbox, profile, str(path), EnvironmentParams(), logs)
    assert built.status == "built", built.log

    def diff(*paths: str) -> str:
        args = ["git", "-C", str(path), "diff", base, fix, "--", *paths]
        return subprocess.run(args, capture_output=True, text=True, check=True).stdout

    candidate = Candidate(
        "fix-add", "local/calc", str(path), base, diff("calc"), diff("tests"), "commit", "2024"
    )
    return str(path), built, candidate


def _validate(sandbox, calc_env, cache: ContentCache, test_cmd: str):
    path, profile, candidate = calc_env
    profile = dataclasses.replace(profile, test_cmd=test_cmd)
    base = validation.TestTree.at(path, candidate.base_commit, [candidate.test_patch])
    gold = validation.TestTree.at(
        path, candidate.base_commit, [candidate.test_patch, candidate.patch]
    )
    params = ValidateParams(reruns=1, test_timeout_s=60)
    return validation.validate_candidate(
        sandbox, candidate, profile, base, gold, params, JUNIT_PATH, cache
    )


class Killer(threading.Thread):
    """`docker kill`s (or `podman kill`s) up to ``times`` of the sandbox's containers while their
    tests sleep."""

    def __init__(self, backend: Backend, owner: str, times: int) -> None:
        super().__init__(daemon=True)
        self.backend = backend
        self.owner, self.times, self.killed = owner, times, 0
        self.stop = threading.Event()

    def run(self) -> None:
        mine = ["--filter", f"label={OWNER_LABEL}={self.owner}", "--filter", "status=running"]
        while not self.stop.is_set() and self.killed < self.times:
            for cid in self.backend.cli("ps", "--quiet", "--no-trunc", *mine).split():
                processes = self.backend.cli("top", cid, check=False).splitlines()
                if any(line.rstrip().endswith(" sleep 4") for line in processes):
                    self.backend.cli("kill", cid, check=False)
                    self.killed += 1
                    break
            time.sleep(0.1)


def test_a_container_killed_mid_rerun_is_never_a_cached_verdict(
    sandbox, backend, calc_env, tmp_path
):
    cache = ContentCache(str(tmp_path / "cache"), "validate")
    # The main run marks its container; the rerun in it sleeps first: that is when it is killed.
    marked = "if [ -e /tmp/main-done ]; then sleep 4; fi; touch /tmp/main-done; "
    test_cmd = marked + calc_env[1].test_cmd

    killer = Killer(backend, sandbox.owner, times=2)  # the run and its retry both killed
    killer.start()
    broken = _validate(sandbox, calc_env, cache, test_cmd)
    killer.stop.set()
    killer.join()
    assert killer.killed == 2
    assert broken.task is None and broken.rejection is not None
    assert broken.rejection.reason == "infra_failure", broken.rejection
    assert not broken.cached and not list((tmp_path / "cache").rglob("*.json"))  # not cached

    killer = Killer(backend, sandbox.owner, times=1)  # killed once: a retry in fresh containers
    killer.start()
    retried = _validate(sandbox, calc_env, cache, test_cmd)
    killer.stop.set()
    killer.join()
    assert killer.killed == 1
    assert retried.task is not None, retried.rejection
    assert retried.task.FAIL_TO_PASS == ("tests/test_ops.py::test_add",)
    assert retried.task.flaky_tests == ()

    again = _validate(sandbox, calc_env, cache, test_cmd)  # the stage's rerun: from the cache
    assert again.cached and again.task == retried.task


# --- 3. host resources: a huge JUnit file, a disk filler -----------------------------------------


def test_a_huge_junit_file_is_never_read_whole(sandbox):
    ctx = RunContext("huge", "p", "head -c 300M /dev/zero > /tmp/junit.xml; exit 1", "/tmp/j", 120)
    ctx = dataclasses.replace(ctx, junit_path="/tmp/junit.xml")
    cap = sandbox.limits.max_read_bytes
    assert cap == 64 * 1024 * 1024
    with sandbox.session(SessionSpec(IMAGE)) as session:
        session.put_archive(tar_of({"repo/.keep": b""}))
        tracemalloc.start()
        try:
            run = run_tests(session, ctx, "base", attempt=0)
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
    assert peak < cap // 4  # refused from its size: none of the 300 MiB came to the host
    assert not run.suite_ran and run.tests == ()
    assert run_problem(run) is not None and run_problem(run)[0] == JUNIT_TOO_LARGE
    failure = suite_failure(run)
    assert failure is not None and failure.reason == JUNIT_TOO_LARGE
    # A file that grows past the cap after its size was taken: the stream stops at the cap.
    chunks = _Counted(tar_of({"junit.xml": b"x" * (3 * 1024 * 1024)}), 256 * 1024)
    read = _single_file(iter(chunks), 1024 * 1024, size=10)
    assert read.problem == TOO_LARGE and read.data is None
    assert chunks.pulled <= 1024 * 1024 + 64 * 1024 + 256 * 1024


def test_a_padded_archive_past_one_pipe_read_arrives_whole(sandbox):
    """tarfile pads an archive to a whole 10 KiB record after its end blocks. podman's copy from
    a pipe stops reading at those blocks and failed ("read/write on closed pipe") when the
    padding ran past a 32 KiB read: here the end blocks close at 31,744 bytes, the padding runs
    to 40,960. Every caller sends tarfile's bytes as they are; the backend copes."""
    data = tar_of({"repo/big.bin": b"x" * 30_000})
    assert len(data) == 40_960 and data[31_744 - 1024 :] == bytes(40_960 - 31_744 + 1024)
    with sandbox.session(SessionSpec(IMAGE)) as session:
        session.put_archive(data)
        run = session.exec("wc -c < big.bin", timeout_s=30)
    assert run.exit_code == 0 and run.output.strip() == "30000", run.output


def test_a_disk_filler_hits_the_tmpfs_not_the_host(backend):
    box = backend.sandbox(Limits(tmp_size="64m"))
    try:
        with box.session(SessionSpec(IMAGE)) as session:
            filled = session.exec(
                "dd if=/dev/zero of=/tmp/fill bs=1M count=200; echo rc=$?", 60, "/"
            )
            assert "No space left on device" in filled.output and "rc=1" in filled.output
            written = session.exec("du -sm /tmp/fill | cut -f1", 30, "/").output.strip()
            assert int(written) <= 64
            layer = backend.rw_size(container_id(session))
            assert layer < 1024 * 1024  # nothing of it reached the host's disk
        if backend.layer_cannot_be_capped():
            assert box.layer_limit is False  # this driver cannot cap the writable layer
        print(f"disk guarantees here: {box.disk_limits()}")
    finally:
        box.close()


# --- 4. a JUnit path replaced by a symlink -------------------------------------------------------


def test_a_symlinked_junit_is_the_suites_doing_never_followed(sandbox, calc_env, tmp_path):
    with sandbox.session(SessionSpec(IMAGE)) as session:
        session.exec("ln -s /etc/passwd /tmp/link; mkdir /tmp/dir", 30, "/")
        assert session.read_file_checked("/tmp/link").problem == NOT_A_FILE
        assert session.read_file_checked("/tmp/dir").problem == NOT_A_FILE
        assert session.read_file_checked("/tmp/none").problem == MISSING
        assert session.read_file("/tmp/link") is None

    cache = ContentCache(str(tmp_path / "cache"), "validate")
    linked = f"ln -sf /etc/passwd {JUNIT_PATH}"
    test_cmd = f'f() {{ {calc_env[1].test_cmd} "$@"; rm -f {JUNIT_PATH}; {linked}; }}; f'
    result = _validate(sandbox, calc_env, cache, test_cmd)
    assert result.rejection is not None and result.rejection.reason == JUNIT_NOT_A_FILE
    assert "not followed" in result.rejection.detail and "root:" not in result.rejection.detail
    assert _validate(sandbox, calc_env, cache, test_cmd).cached  # a verdict: cached


# --- helpers -------------------------------------------------------------------------------------


class _Counted:
    """A byte string handed out in chunks, counting how much was pulled."""

    def __init__(self, data: bytes, chunk: int) -> None:
        self.data, self.chunk, self.pulled = data, chunk, 0

    def __iter__(self):
        for start in range(0, len(self.data), self.chunk):
            piece = self.data[start : start + self.chunk]
            self.pulled += len(piece)
            yield piece
