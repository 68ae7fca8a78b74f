"""A pytest fork server for bug runs, shipped into the container as ``trajforge_fork``.

On a fast suite most of a bug's run is Python's and pytest's start (toolz: 0.3 s of a 0.5 s run
of two tests). ``serve`` (started once per clean workspace, in the repository, with the test
runs' environment) imports pytest and forks a child per run; the child takes the caller's
stdin/stdout/stderr, working directory, environment and arguments and runs ``python -m pytest``
as runpy does. The caller (``python -m trajforge_fork ARGS``, which stands where the test command
said ``python -m pytest``) hands over its request and exits with the child's status. It runs
pytest itself (exec) whenever the server is not there or started differently from it
(interpreter, flags, ``sys.path`` which covers the working directory and ``PYTHONPATH``, any
``PYTHON*`` variable): a run never depends on the server.

What a child inherits that a fresh process would not have: pytest already imported (the same
modules a fresh run imports first) and the server's hash seed. The server refuses to serve if
importing pytest imported anything from the repository (pytest's or pluggy's own repository),
since a child would then test the clean copy. Every run of a workspace goes through the server,
the confirmation at clean included, so a test that the shared seed makes fail fails at clean too
and is dropped as flaky, never kept as FAIL_TO_PASS.

Handing over: the caller writes its request to ``req-<pid>``, creates the FIFO ``status-<pid>``
and wakes the server through the ``wake`` FIFO. A supervisor forked by the server claims the
request by renaming it (the caller takes it back by unlinking it, so exactly one side runs the
tests), forks the child, reports ``S`` (started) and ``E<code>`` (ended), and kills the child's
process group if the caller dies first (coreutils ``timeout`` kills only the caller).

The server imports nothing but what a fresh pytest run imports too (pytest and the standard
library modules pytest itself imports).
"""

from __future__ import annotations

import contextlib
import os
import sys

DIR = "/tmp/trajforge/fork"
WAKE = f"{DIR}/wake"
READY = f"{DIR}/ready"  # the server's startup key, written once it serves
LOG = f"{DIR}/served"  # one line per run the server ran (for tests and debugging)
CLAIM_WAIT_S = 30.0  # how long a caller waits for a live server to claim its request
POLL_S = 0.01
EX_SOFTWARE = 70  # the caller's exit when the supervisor died during the run
STDIO = ((0, os.O_RDONLY), (1, os.O_WRONLY), (2, os.O_WRONLY))


def startup_key() -> bytes:
    """What decides how a fresh ``python -m pytest`` would start: a caller whose key differs
    from the server's runs pytest itself."""
    env = sorted((k, v) for k, v in os.environb.items() if k.startswith(b"PYTHON"))
    parts = (sys.executable, sys.flags, sys.path, os.getcwd(), env)
    return repr(parts).encode("utf-8", "surrogateescape")


def imported_from(root: str) -> list[str]:
    """Modules loaded from under ``root``: a server with any would run the clean code."""
    prefix = os.path.join(os.path.realpath(root), "")
    found = []
    for name, module in list(sys.modules.items()):
        path = getattr(module, "__file__", None)
        if isinstance(path, str) and os.path.realpath(path).startswith(prefix):
            found.append(name)
    return sorted(found)


def _request() -> bytes:
    cwd = os.getcwdb()
    args = [os.fsencode(a) for a in sys.argv[1:]]
    env = [k + b"=" + v for k, v in os.environb.items()]
    return b"\0".join([cwd, str(len(args)).encode(), *args, *env])


# -- the caller ---------------------------------------------------------------------------------


def call() -> None:
    """Run pytest through the server, or as ``python -m pytest`` where it cannot."""
    pid = os.getpid()
    try:
        with open(READY, "rb") as ready:
            served = ready.read() == startup_key()
    except OSError:
        served = False
    if served:
        code = _handed_over(pid)
        if code is not None:
            os._exit(code)
    os.execv(sys.executable, [sys.executable, "-m", "pytest", *sys.argv[1:]])


def _handed_over(pid: int) -> int | None:
    """The child's exit code, or None where no child ran (the caller then runs pytest)."""
    request, status = f"{DIR}/req-{pid}", f"{DIR}/status-{pid}"
    try:
        with open(request + ".tmp", "wb") as out:
            out.write(_request())
        os.rename(request + ".tmp", request)
        os.mkfifo(status)
        reader = os.open(status, os.O_RDONLY | os.O_NONBLOCK)
        wake = os.open(WAKE, os.O_WRONLY | os.O_NONBLOCK)  # ENXIO: no server reads it
        os.write(wake, f"{pid}\n".encode())
        os.close(wake)
    except OSError:
        _take_back(request)
        _remove(status)
        return None
    try:
        return _outcome(reader, request)
    finally:
        _remove(status)


def _outcome(reader: int, request: str) -> int | None:
    """``S`` then ``E<code>``: the child ran; ``R``, or an end before ``S``: nothing ran."""
    import time

    received = _read(reader, time.monotonic() + CLAIM_WAIT_S)
    if received is None:  # no supervisor yet: take the request back, unless one just claimed it
        if _take_back(request):
            return None
        received = _read(reader, None)
    if not received or not received.startswith(b"S"):
        return None
    while not received.endswith(b"\n"):
        more = _read(reader, None)
        if not more:
            return EX_SOFTWARE  # the supervisor died during the run: no status
        received += more
    return int(received[received.index(b"E") + 1 :].strip())


def _read(fd: int, deadline: float | None) -> bytes | None:
    """Some bytes (b"" at the end), or None when ``deadline`` passed first."""
    import select
    import time

    wait = None if deadline is None else max(0.0, deadline - time.monotonic())
    if not select.select([fd], [], [], wait)[0]:
        return None
    return os.read(fd, 64)


def _take_back(request: str) -> bool:
    """True once the request is the caller's again: no supervisor will ever run it."""
    try:
        os.unlink(request)
    except FileNotFoundError:
        return False  # claimed by a supervisor
    except OSError:
        return False
    return True


def _remove(path: str) -> None:
    with contextlib.suppress(OSError):
        os.unlink(path)


# -- the server ---------------------------------------------------------------------------------


def serve() -> None:
    key = startup_key()
    import pytest  # noqa: F401  (the point: imported once, before any fork)

    if imported_from(os.getcwd()):
        return  # no READY file: every caller runs pytest itself
    os.makedirs(DIR, exist_ok=True)
    if not os.path.exists(WAKE):
        os.mkfifo(WAKE)
    wake = os.open(WAKE, os.O_RDWR)  # read and write: never an end of file between callers
    with open(READY + ".tmp", "wb") as out:
        out.write(key)
    os.rename(READY + ".tmp", READY)
    pending = b""
    while True:
        while True:  # reap finished supervisors
            try:
                done, _ = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                break
            if not done:
                break
        pending += os.read(wake, 4096)
        while b"\n" in pending:
            line, pending = pending.split(b"\n", 1)
            if line.isdigit() and os.fork() == 0:
                os.close(wake)
                _supervise(int(line))  # only the test process comes back from here


def _supervise(caller: int) -> None:
    """Claim the caller's request, run it in a child, report; returns only in the child."""
    request, status = f"{DIR}/req-{caller}", f"{DIR}/status-{caller}"
    claimed = f"{DIR}/run-{caller}"
    try:
        os.rename(request, claimed)  # exactly one of this and the caller's take-back wins
    except OSError:
        os._exit(0)
    try:
        writer = os.open(status, os.O_WRONLY | os.O_NONBLOCK)
    except OSError:  # the caller is gone
        _remove(claimed)
        os._exit(0)
    try:
        with open(claimed, "rb") as handle:
            fields = handle.read().split(b"\0")
        stdio = [os.open(f"/proc/{caller}/fd/{fd}", mode) for fd, mode in STDIO]
        _remove(claimed)
        os.write(writer, b"S")  # from here the caller waits for this run's end
    except OSError:  # e.g. stdio that cannot be reopened: the caller runs pytest itself
        _remove(claimed)
        with contextlib.suppress(OSError):
            os.write(writer, b"R")
        os._exit(0)
    child = os.fork()
    if child == 0:
        os.close(writer)
        _become_pytest(stdio, fields)
        return
    with contextlib.suppress(OSError):
        os.setpgid(child, child)  # also set in the child: whichever runs first
    for fd in stdio:
        os.close(fd)
    _settle(caller, child, writer)
    _remove(status)  # the caller's own removal is lost when a timeout kills it
    os._exit(0)


def _settle(caller: int, child: int, writer: int) -> None:
    """Wait for the child; kill its process group if the caller dies first; report."""
    import signal
    import time

    while True:
        done, state = os.waitpid(child, os.WNOHANG)
        if done:
            break
        try:
            os.kill(caller, 0)
        except ProcessLookupError:  # the caller was killed (a timeout): so are the tests
            with contextlib.suppress(OSError):
                os.killpg(child, signal.SIGKILL)
        time.sleep(POLL_S)
    # a shell's status (128 + the signal for a killed child); the project's Python may be 3.8,
    # which has no os.waitstatus_to_exitcode (a supervisor dead on it read as exit 70 for
    # every bug run, and every bug as breaks_collection)
    code = 128 + os.WTERMSIG(state) if os.WIFSIGNALED(state) else os.WEXITSTATUS(state)
    with contextlib.suppress(OSError), open(LOG, "a", encoding="utf-8") as log:
        log.write(f"{caller} {code}\n")
    with contextlib.suppress(OSError):
        os.write(writer, f"E{code}\n".encode())


def _become_pytest(stdio: list[int], fields: list[bytes]) -> None:
    """The child: the caller's stdio, directory, environment and arguments, then pytest as
    ``python -m pytest`` runs it; its SystemExit ends this interpreter as it ends a fresh one."""
    import runpy

    os.setpgid(0, 0)  # the supervisor kills the whole group on a timeout
    for fd, opened in enumerate(stdio):
        os.dup2(opened, fd)
    os.closerange(3, 65536)
    cwd, count = fields[0], int(fields[1])
    args = [os.fsdecode(a) for a in fields[2 : 2 + count]]
    env = dict(item.split(b"=", 1) for item in fields[2 + count :] if b"=" in item)
    os.chdir(cwd)
    os.environb.clear()
    os.environb.update(env)
    sys.argv[:] = [sys.argv[0], *args]
    runpy.run_module("pytest", run_name="__main__", alter_sys=True)
    raise SystemExit(0)


def main() -> None:
    if sys.argv[1:2] == ["--trajforge-serve"]:
        del sys.argv[1]
        serve()
    else:
        call()


if __name__ == "__main__":
    main()
