"""The grader's supervisor: runs the tests as another user and keeps what they report.

Runs as root (with CAP_SETUID/CAP_SETGID only, every other capability dropped) under
``python -I``, from a folder only root can write (the grader's root, given by where this file
is), in the working directory /repo. Three modes:

- ``probe REPO``: what the image offers, read from its site-packages only (never REPO): the
  pytest plugins its distributions declare.
- ``run UID TIMEOUT SPEC``: make /repo writable for the tests except what decides them, start
  pytest (``launch.py``) as ``uid`` with its output on a pipe (forwarded to our stdout), hand it
  what to run on a one-shot pipe, read its keyed records on a second pipe; when pytest exits (or
  the time is up), kill every process left of that user, read the records to the end, and write
  them to ``out/result.json`` under the grader's root, which the tests cannot open. SPEC is a
  JSON file of root's (unreadable to the tests): ``args`` (pytest's, the selected ids among
  them: never on a command line, where ``ps`` shows them), ``graded`` (the ids the seal checks),
  ``guard`` (repository files the tests' user may not write, beyond the names pytest imports
  by: every file the graded run collects from) and ``stop_at``: the tests whose first failure
  or skip ends the run at once (fail-fast): every process of the tests' user is killed and the
  result says which test stopped it (``stopped``). A stop reads only a failure; it can make a
  reward lower, never higher (the host never resolves a stopped run), so a record the tests
  forged to stop early costs them their own reward, and one they hide leaves the run to its
  end, judged as before.
- ``exec UID TIMEOUT GUARD -- PROGRAM ARGS``: the same for another language's runner (node's),
  started as PROGRAM (found in the system's folders, never the repository's). The repository
  paths listed in the file GUARD (its tests and the runner's configuration) stay read-only, and
  so do their folders and every ``node_modules``. The runner's reporter has no plugin hook in
  our process, and the tests' processes share its user, so its records carry a key: read once
  from a pipe the reporter drains when it loads, before any test runs; a record without it is
  kept marked, which the host reads as tampering. ``TRAJFORGE_WORKDIR`` in our environment (a
  monorepo's tested package, relative to /repo) is the runner's working directory; the runner
  gets /repo as ``TRAJFORGE_REPO``, so its ids stay repository paths. PROGRAM's file loses its
  read bits for everyone but root first (``_execute_only``): the kernel makes a process started
  from a file its user cannot read non-dumpable, so the runner and every worker it starts from
  the same binary keep their memory to themselves (pytest's process does it itself:
  ``lockdown.py``).

Standard library only; runs on Python 3.9.
"""

import json
import os
import stat
import sys
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(ROOT, "out")
LAUNCH = os.path.join(ROOT, "launch.py")
LOCKDOWN = os.path.join(ROOT, "lockdown.py")
RECORDS_CAP = 64 * 1024 * 1024


def probe(repo):
    import importlib.metadata

    outside = (repo, ROOT)
    paths = [p for p in sys.path if p and not p.startswith(outside) and os.path.isdir(p)]
    plugins = set()
    for dist in importlib.metadata.distributions(path=paths):
        for entry in dist.entry_points:
            if entry.group == "pytest11":
                plugins.add((entry.name, entry.value.split(":", 1)[0]))
    json.dump({"plugins": sorted(plugins)}, sys.stdout)


TEST_DIRS = ("test", "tests", "testing", "__tests__")
CONFIG_FILES = ("pytest.ini", ".pytest.ini", "tox.ini", "setup.cfg", "pyproject.toml")


def _test_module(folder, name):
    """A module pytest imports by name from its folder: a test module or a conftest."""
    stem, suffix = os.path.splitext(name)
    in_tests = any(part in TEST_DIRS for part in folder.split(os.sep))
    is_test = stem.startswith("test_") or stem.endswith("_test") or stem == "conftest"
    return suffix == ".py" and (is_test or in_tests)


def _open_up(path, guard=frozenset()):
    """Let the tests' user write the tree, except what decides the tests.

    Root owns the tree (the engine put it there) and may change its modes. Test modules,
    conftests and pytest's configuration stay read-only, by name and by the grader's list
    (``guard``: every file the graded run collects from, a Django-style ``tests.py`` or a
    doctest's module too), and so do the folders that hold them: nothing can be added beside
    one (a compiled module that an import by name would load in its place).
    Every other folder is writable and sticky, so nobody removes or renames what root owns, and
    gets a ``__pycache__`` only root can write (bytecode is never written, and none can be
    planted).
    """
    for folder, dirs, files in os.walk(path):
        dirs[:] = [d for d in dirs if not os.path.islink(os.path.join(folder, d))]
        guarded = False
        for name in files:
            full = os.path.join(folder, name)
            if os.path.islink(full):
                continue
            if _test_module(folder, name) or os.path.relpath(full, path) in guard:
                guarded = True
                os.chmod(full, 0o644)
            elif name in CONFIG_FILES:
                os.chmod(full, 0o644)
            else:
                os.chmod(full, os.stat(full).st_mode | 0o666)
        cache = os.path.join(folder, "__pycache__")
        if os.path.basename(folder) == "__pycache__":
            guarded = True
        elif not os.path.lexists(cache):
            os.mkdir(cache, 0o755)
        os.chmod(folder, 0o755 if guarded else 0o1777)


def _open_up_guarded(path, guard):
    """Like ``_open_up``, with the grader's list instead of pytest's names: ``guard`` (repository
    paths: the tests, the runner's configuration and the files it names) and the folders holding
    them stay read-only; ``node_modules`` (the installed packages) is nobody's to write but
    root's; every other folder is writable and sticky."""
    guarded_dirs = {os.path.dirname(os.path.join(path, p)) for p in guard}
    for folder, dirs, files in os.walk(path):
        dirs[:] = [d for d in dirs if not os.path.islink(os.path.join(folder, d))]
        if "node_modules" in dirs:
            dirs.remove("node_modules")
            _read_only(os.path.join(folder, "node_modules"))
        for name in files:
            full = os.path.join(folder, name)
            if os.path.islink(full):
                continue
            if os.path.relpath(full, path) in guard:
                os.chmod(full, 0o644)
            else:
                os.chmod(full, os.stat(full).st_mode | 0o666)
        os.chmod(folder, 0o755 if folder in guarded_dirs or folder == path else 0o1777)


def _read_only(path):
    """No write bit but the owner's (root's) anywhere under ``path``."""
    for folder, dirs, files in os.walk(path):
        for name in [*dirs, *files]:
            full = os.path.join(folder, name)
            if not os.path.islink(full):
                mode = os.stat(full).st_mode
                if mode & 0o022:
                    os.chmod(full, mode & ~0o022)
    mode = os.stat(path).st_mode
    os.chmod(path, mode & ~0o022)


def _program(name):
    """``name`` from the system's folders only (the repository's are never searched)."""
    for folder in ("/usr/local/bin", "/usr/bin", "/bin"):
        full = os.path.join(folder, name)
        if os.path.isfile(full) and os.access(full, os.X_OK):
            return full
    return name


def _lockdown():
    """``lockdown.py``'s names, executed from the grader's root (``-I`` puts no folder of ours
    on ``sys.path``)."""
    namespace = {"__name__": "trajforge_lockdown", "__file__": LOCKDOWN}
    try:
        with open(LOCKDOWN, encoding="utf-8") as handle:
            source = handle.read()
    except OSError as exc:
        sys.exit(f"trajforge supervisor: lockdown.py is not beside it, no test runs ({exc})")
    exec(compile(source, LOCKDOWN, "exec", dont_inherit=True), namespace)
    return namespace


def _execute_only(program):
    """``program``'s file (a symlink followed) readable by root alone, when root owns it. A
    process of the tests' user started from it is then non-dumpable: its ``/proc/<pid>/``
    files are root's, so no other process of that user (a jest worker, a test's child) can
    open its memory, where the reporter's key lives, nor attach to it, and neither can it
    open its own; its workers, started from the same file (``process.execPath``), are the
    same. Node has no ``prctl`` of its own to undo it. Nothing else changes: running a
    program needs only its execute bit."""
    full = os.path.realpath(program)
    try:
        info = os.stat(full)
    except OSError:
        return
    if stat.S_ISREG(info.st_mode) and info.st_uid == 0:
        os.chmod(full, stat.S_IMODE(info.st_mode) & ~(stat.S_IRGRP | stat.S_IROTH))


def _keyed(data, key):
    """The records that carry ``key``, without it; any other line marked, so it never reads as
    a record (the host counts it as tampering)."""
    prefix = (key + " ").encode()
    lines = []
    for line in data.split(b"\n"):
        if not line:
            continue
        lines.append(line[len(prefix) :] if line.startswith(prefix) else b"unkeyed " + line)
    return b"".join(line + b"\n" for line in lines)


def _feed(fd, data):
    """Write ``data`` to the pipe ``fd`` and close it (in a thread: the reader starts later)."""
    try:
        while data:
            data = data[os.write(fd, data) :]
    except OSError:
        pass
    finally:
        os.close(fd)


def _as_user(uid):
    os.setgroups([])
    os.setgid(uid)
    os.setuid(uid)


def _kill_user(uid):
    """SIGKILL every process of ``uid``: a child that becomes the user and kills all it may
    (kill(-1) spares the caller). True when there was one to kill, read from /proc first:
    kill(-1) succeeds when any process exists, even one it may not signal (this supervisor)."""
    leftovers = _has_processes(uid)
    pid = os.fork()
    if pid == 0:
        try:
            _as_user(uid)
            os.kill(-1, 9)
            os._exit(1)
        except ProcessLookupError:
            os._exit(0)
        except BaseException:
            os._exit(2)
    os.waitpid(pid, 0)
    return leftovers


def _has_processes(uid):
    """Whether a process of ``uid`` is alive (its /proc folder is owned by its uid)."""
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                if os.stat("/proc/" + entry).st_uid == uid:
                    return True
            except OSError:  # it ended while we looked
                continue
    return False


def _pump(source, sink, cap, store, watch=None):
    """Read ``source`` to its end; forward to ``sink`` or keep up to ``cap`` bytes in ``store``.
    ``watch``: called with each whole line kept (the records' stop rule)."""
    scanned = 0
    while True:
        try:
            chunk = os.read(source, 65536)
        except OSError:
            break
        if not chunk:
            break
        if sink is not None:
            sink.write(chunk)
            sink.flush()
        elif len(store["data"]) + len(chunk) <= cap:
            store["data"] += chunk
            if watch is not None:
                end = store["data"].rfind(b"\n") + 1
                for line in store["data"][scanned:end].split(b"\n"):
                    watch(line)
                scanned = max(scanned, end)
        else:
            store["overflow"] = True
    os.close(source)


def _stop_rule(stop_at, store, stop, key):
    """A watcher that sets ``stop`` at the first keyed record saying a test of ``stop_at`` did
    not pass (failed in any phase, or skipped), and keeps that test's id in ``store``. Anything
    that is not such a record is passed over: the host reads the records as before."""
    prefix = (key + " ").encode()

    def watch(line):
        if stop.is_set() or not line.startswith(prefix):
            return
        try:
            record = json.loads(line[len(prefix) :])
        except ValueError:
            return
        if not isinstance(record, dict) or record.get("t") != "report":
            return
        test_id, outcome = record.get("id"), record.get("outcome")
        if not isinstance(test_id, str) or test_id not in stop_at:
            return
        if outcome == "failed" or (outcome == "skipped" and record.get("sub") is False):
            store["stopped"] = test_id
            stop.set()

    return watch


def _read_spec(path):
    with open(path, encoding="utf-8") as handle:
        return json.load(handle)


def run(uid, timeout_s, spec):
    """pytest through ``launch.py``, sealed. ``uid`` -1: stay who we are (a sandbox with no users
    to change to: no isolation)."""
    repo = os.getcwd()
    privileged = os.geteuid() == 0 and uid >= 0
    if privileged:
        _open_up(repo, frozenset(spec.get("guard", ())))
    env = dict(os.environ)
    env["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"
    env.pop("PYTEST_PLUGINS", None)
    env.pop("PYTEST_ADDOPTS", None)
    key = os.urandom(16).hex()
    told = {"args": spec["args"], "graded": spec.get("graded", []), "key": key, "repo": repo}

    def launch(records_fd):
        return json.dumps({**told, "records_fd": records_fd}).encode()

    argv = [sys.executable, "-I", "-B", LAUNCH]
    stop_at = frozenset(spec.get("stop_at", ()))
    _supervise(uid, timeout_s, argv, env, privileged, key, stop_at=stop_at, launch=launch)


def exec_runner(uid, timeout_s, guard_file, program, args):
    """Another language's runner, its records keyed (see the module doc)."""
    repo = os.getcwd()
    privileged = os.geteuid() == 0 and uid >= 0
    with open(guard_file, encoding="utf-8") as handle:
        guard = {line for line in handle.read().split("\n") if line}
    if privileged:
        _open_up_guarded(repo, guard)
    key = os.urandom(16).hex()
    argv = [_program(program), *list(args)]
    if privileged:
        _execute_only(argv[0])
    env = dict(os.environ)
    workdir = os.path.realpath(os.path.join(repo, env.pop("TRAJFORGE_WORKDIR", "") or "."))
    if workdir != repo and not workdir.startswith(repo + os.sep):
        sys.exit(f"trajforge supervisor: the working folder {workdir} is outside {repo}")
    env["TRAJFORGE_REPO"] = repo
    _supervise(uid, timeout_s, argv, env, privileged, key, workdir)


def _supervise(
    uid, timeout_s, argv, env, privileged, key, workdir=None, stop_at=frozenset(), launch=None
):
    """Start ``argv`` as ``uid`` in ``workdir`` (default: the repository), drain its output
    and records, kill what it leaves, write the result. ``key``: the records' key, handed over
    on a pipe of its own, or inside ``launch(records_fd)``'s bytes, which go on a one-shot pipe
    named by ``TRAJFORGE_LAUNCH_FD`` (pytest's launcher). ``stop_at``: tests whose first failure
    stops the run (pytest's records)."""
    repo = os.getcwd()
    if privileged:
        os.chmod(tempfile.gettempdir(), 0o1777)
    records_r, records_w = os.pipe()
    output_r, output_w = os.pipe()
    key_r = launch_r = None
    if launch is not None:
        launch_r, launch_w = os.pipe()
        threading.Thread(target=_feed, args=(launch_w, launch(records_w)), daemon=True).start()
        env["TRAJFORGE_LAUNCH_FD"] = str(launch_r)
    else:
        env["TRAJFORGE_RESULT_FD"] = str(records_w)
    if key is not None and launch is None:
        key_r, key_w = os.pipe()
        os.write(key_w, key.encode())
        os.close(key_w)
        env["TRAJFORGE_KEY_FD"] = str(key_r)
    lockdown = _lockdown()
    try:
        guard = lockdown["guard"]()  # made here: the child only calls it
    except lockdown["Unlockable"] as why:
        sys.exit(f"trajforge supervisor: the tests' processes cannot be locked, none runs ({why})")
    pid = os.fork()
    if pid == 0:
        try:
            os.close(records_r)
            os.close(output_r)
            for handed in (key_r, launch_r):
                if handed is not None:
                    os.set_inheritable(handed, True)
            if privileged:
                _as_user(uid)
            guard()  # no process of the run may make itself dumpable again (lockdown.py)
            devnull = os.open(os.devnull, os.O_RDONLY)
            os.dup2(devnull, 0)
            os.dup2(output_w, 1)
            os.dup2(output_w, 2)
            os.set_inheritable(records_w, True)
            os.chdir(workdir or repo)
            os.execve(argv[0], argv, env)
        except BaseException as exc:
            os.write(2, (f"trajforge supervisor: cannot start the tests: {exc!r}\n").encode())
        os._exit(127)
    os.close(records_w)
    os.close(output_w)
    for handed in (key_r, launch_r):
        if handed is not None:
            os.close(handed)
    store: dict = {"data": b"", "overflow": False, "stopped": ""}
    stop = threading.Event()
    watch = _stop_rule(stop_at, store, stop, key) if stop_at else None
    out = threading.Thread(target=_pump, args=(output_r, sys.stdout.buffer, 0, None))
    rec = threading.Thread(target=_pump, args=(records_r, None, RECORDS_CAP, store, watch))
    out.start()
    rec.start()
    deadline = time.monotonic() + timeout_s
    timed_out = False
    status = None
    while status is None:
        done, raw = os.waitpid(pid, os.WNOHANG)
        if done:
            status = raw
        elif stop.is_set() or time.monotonic() > deadline:
            timed_out = not stop.is_set()
            if privileged:
                _kill_user(uid)
            else:
                os.kill(pid, 9)
            _, status = os.waitpid(pid, 0)
        else:
            stop.wait(0.02)
    leftovers = _kill_user(uid) if privileged else False
    rec.join(30)
    out.join(30)
    exit_code = os.WEXITSTATUS(status) if os.WIFEXITED(status) else -os.WTERMSIG(status)
    result = {
        "exit_code": exit_code,
        "timed_out": timed_out,
        "leftovers": leftovers,
        "privileged": privileged,
        "records_overflow": store["overflow"] or rec.is_alive(),
        "stopped": store["stopped"] if stop.is_set() else "",
        "records": _keyed(store["data"], key).decode("utf-8", "replace"),
    }
    os.makedirs(OUT, mode=0o700, exist_ok=True)
    temp = OUT + "/result.json.tmp"
    with open(temp, "w", encoding="utf-8") as handle:
        json.dump(result, handle)
    os.replace(temp, OUT + "/result.json")


if __name__ == "__main__":
    if sys.argv[1:2] == ["probe"] and len(sys.argv) == 3:
        probe(sys.argv[2])
    elif sys.argv[1:2] == ["run"] and len(sys.argv) == 5:
        run(int(sys.argv[2]), float(sys.argv[3]), _read_spec(sys.argv[4]))
    elif sys.argv[1:2] == ["exec"] and sys.argv[5:6] == ["--"] and len(sys.argv) > 6:
        exec_runner(int(sys.argv[2]), float(sys.argv[3]), sys.argv[4], sys.argv[6], sys.argv[7:])
    else:
        sys.exit(
            "usage: supervisor.py probe REPO | run UID TIMEOUT_S SPEC_JSON"
            " | exec UID TIMEOUT_S GUARD -- PROGRAM ARGS"
        )
