"""The grader's supervisor: runs the tests as another user and keeps what they report.

Runs as root (with CAP_SETUID/CAP_SETGID only, every other capability dropped) under
``python -I``, from a folder only root can write (the grader's root, given by where this file
is), in the working directory /repo. Two modes:

- ``probe REPO``: what the image offers, read from its site-packages and standard library
  only (never REPO): the pytest plugins its distributions declare, every importable name.
- ``run UID TIMEOUT -- ARGS``: make /repo writable for the tests, start pytest as ``uid`` with
  its output on a pipe (forwarded to our stdout) and a second pipe for the reporter plugin's
  records; when pytest exits (or the time is up), kill every process left of that user, read
  the records to the end, and write them to ``out/result.json`` under the grader's root, which
  the tests cannot open.

Standard library only; runs on Python 3.9.
"""

import json
import os
import pkgutil
import sys
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(ROOT, "out")
LAUNCH = os.path.join(ROOT, "launch.py")
RECORDS_CAP = 64 * 1024 * 1024


def probe(repo):
    import importlib.metadata
    import sysconfig

    outside = (repo, ROOT)
    paths = [p for p in sys.path if p and not p.startswith(outside) and os.path.isdir(p)]
    plugins = set()
    for dist in importlib.metadata.distributions(path=paths):
        for entry in dist.entry_points:
            if entry.group == "pytest11":
                plugins.add((entry.name, entry.value.split(":", 1)[0]))
    names = set(sys.builtin_module_names)
    names |= set(getattr(sys, "stdlib_module_names", ()))
    stdlib = [sysconfig.get_paths()[k] for k in ("stdlib", "platstdlib")]
    for module in pkgutil.iter_modules(paths + stdlib):
        names.add(module.name)
    json.dump({"plugins": sorted(plugins), "importable": sorted(names)}, sys.stdout)


TEST_DIRS = ("test", "tests", "testing", "__tests__")
CONFIG_FILES = ("pytest.ini", ".pytest.ini", "tox.ini", "setup.cfg", "pyproject.toml")


def _test_module(folder, name):
    """A module pytest imports by name from its folder: a test module or a conftest."""
    stem, suffix = os.path.splitext(name)
    in_tests = any(part in TEST_DIRS for part in folder.split(os.sep))
    is_test = stem.startswith("test_") or stem.endswith("_test") or stem == "conftest"
    return suffix == ".py" and (is_test or in_tests)


def _open_up(path):
    """Let the tests' user write the tree, except what decides the tests.

    Root owns the tree (the engine put it there) and may change its modes. Test modules,
    conftests and pytest's configuration stay read-only, and so do the folders that hold test
    modules or conftests: nothing can be added beside one (a compiled module that an import by
    name would load in its place).
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
            if _test_module(folder, name):
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


def _as_user(uid):
    os.setgroups([])
    os.setgid(uid)
    os.setuid(uid)


def _kill_user(uid):
    """SIGKILL every process of ``uid``: a child that becomes the user and kills all it may
    (kill(-1) spares the caller). True when there was one to kill."""
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
    _, status = os.waitpid(pid, 0)
    return os.WEXITSTATUS(status) == 1


def _pump(source, sink, cap, store):
    """Read ``source`` to its end; forward to ``sink`` or keep up to ``cap`` bytes in ``store``."""
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
        else:
            store["overflow"] = True
    os.close(source)


def run(uid, timeout_s, args):
    """``uid`` -1: stay who we are (a sandbox with no users to change to: no isolation)."""
    repo = os.getcwd()
    privileged = os.geteuid() == 0 and uid >= 0
    if privileged:
        _open_up(repo)
        os.chmod(tempfile.gettempdir(), 0o1777)
    records_r, records_w = os.pipe()
    output_r, output_w = os.pipe()
    env = dict(os.environ)
    env["TRAJFORGE_RESULT_FD"] = str(records_w)
    env["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"
    env.pop("PYTEST_PLUGINS", None)
    env.pop("PYTEST_ADDOPTS", None)
    argv = [sys.executable, "-I", "-B", LAUNCH, repo, *list(args)]
    pid = os.fork()
    if pid == 0:
        try:
            os.close(records_r)
            os.close(output_r)
            if privileged:
                _as_user(uid)
            devnull = os.open(os.devnull, os.O_RDONLY)
            os.dup2(devnull, 0)
            os.dup2(output_w, 1)
            os.dup2(output_w, 2)
            os.set_inheritable(records_w, True)
            os.chdir(repo)
            os.execve(argv[0], argv, env)
        except BaseException as exc:
            os.write(2, (f"trajforge supervisor: cannot start the tests: {exc!r}\n").encode())
        os._exit(127)
    os.close(records_w)
    os.close(output_w)
    store: dict = {"data": b"", "overflow": False}
    out = threading.Thread(target=_pump, args=(output_r, sys.stdout.buffer, 0, None))
    rec = threading.Thread(target=_pump, args=(records_r, None, RECORDS_CAP, store))
    out.start()
    rec.start()
    deadline = time.monotonic() + timeout_s
    timed_out = False
    status = None
    while status is None:
        done, raw = os.waitpid(pid, os.WNOHANG)
        if done:
            status = raw
        elif time.monotonic() > deadline:
            timed_out = True
            if privileged:
                _kill_user(uid)
            else:
                os.kill(pid, 9)
            _, status = os.waitpid(pid, 0)
        else:
            time.sleep(0.02)
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
        "records": store["data"].decode("utf-8", "replace"),
    }
    os.makedirs(OUT, mode=0o700, exist_ok=True)
    temp = OUT + "/result.json.tmp"
    with open(temp, "w", encoding="utf-8") as handle:
        json.dump(result, handle)
    os.replace(temp, OUT + "/result.json")


if __name__ == "__main__":
    if sys.argv[1:2] == ["probe"] and len(sys.argv) == 3:
        probe(sys.argv[2])
    elif sys.argv[1:2] == ["run"] and sys.argv[4:5] == ["--"]:
        run(int(sys.argv[2]), float(sys.argv[3]), sys.argv[5:])
    else:
        sys.exit("usage: supervisor.py probe REPO | run UID TIMEOUT_S -- PYTEST_ARGS")
