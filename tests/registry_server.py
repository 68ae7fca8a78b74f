"""A real registry for tests: Debian's docker-registry on a free 127.0.0.1 port."""

from __future__ import annotations

import shutil
import socket
import subprocess
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path

import pytest


@dataclass
class Registry:
    """One docker-registry process serving ``host`` (127.0.0.1:PORT) from a temporary folder."""

    host: str
    process: subprocess.Popen

    @property
    def namespace(self) -> str:
        return f"{self.host}/trajforge-test"

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            self.process.wait(timeout=30)


def start_registry(root: Path) -> Registry:
    """``docker-registry serve`` with its own config: storage under ``root``, a free port."""
    if shutil.which("docker-registry") is None:
        pytest.fail("docker-registry is not installed; run `make setup`")
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    config = root / "registry.yml"
    config.write_text(
        "version: 0.1\nlog:\n  level: error\n"
        f"storage:\n  filesystem:\n    rootdirectory: {root / 'storage'}\n"
        f"http:\n  addr: 127.0.0.1:{port}\n"
    )
    log = open(root / "registry.log", "wb")  # noqa: SIM115  (the process holds it)
    process = subprocess.Popen(["docker-registry", "serve", str(config)], stdout=log, stderr=log)
    found = Registry(f"127.0.0.1:{port}", process)
    for _ in range(100):
        try:
            with urllib.request.urlopen(f"http://{found.host}/v2/", timeout=2) as answer:
                if answer.status == 200:
                    return found
        except OSError:
            time.sleep(0.1)
    found.stop()
    pytest.fail(f"docker-registry did not answer on {found.host}: {(root / 'registry.log')}")
