"""Go's per-test time limit, one clock for validate's run and the grader's (``time_limits.py``
on the host says why this policy).

A ``Clock`` reads a test binary's progress line by line, either as ``go test -json`` events
(validate) or as the binary's own ``-test.v`` lines (the grader), and says when a test has run
past the limit: it is running (not paused by ``t.Parallel``), none of its subtests is running,
and nothing happened to it or its subtests for ``limit`` seconds. The caller then kills that
test binary; the test reads as FAILED (it started and never ended), the package's finished
tests keep their statuses.

As a program (validate's command: ``python3 -I go_watch.py LIMIT go test -json ...``) it runs
the go command, copies its events to stdout unchanged, kills the binary of a test that runs
past ``LIMIT`` (found by its folder under the go command) and exits with the go command's
status. Standard library only; runs on Python 3.9.
"""

import contextlib
import json
import os
import re
import select
import signal
import subprocess
import sys
import threading
import time

_VERBOSE = re.compile(r"^\s*(=== RUN|=== PAUSE|=== CONT|--- PASS:|--- FAIL:|--- SKIP:)\s+(\S+)")
_ACTIONS = {"=== RUN": "run", "=== PAUSE": "pause", "=== CONT": "cont", "--- PASS:": "pass",
            "--- FAIL:": "fail", "--- SKIP:": "skip"}  # fmt: skip
_ENDS = ("pass", "fail", "skip")
_TRACKED = 100000  # tests kept per clock at most (a stream is the tests' own output)


class Clock:
    """Running tests per package and when each last made progress.

    A verbose stream (and go 1.19's ``-json``, made from it) prints a subtest's result only
    when its parent ends, so ends are also inferred: a sequential test has ended when a
    sibling starts, and every subtest when its parent ends. Resumed parallel tests end
    silently; each is allowed the limit once per resumed sibling still open."""

    def __init__(self, limit_s):
        self.limit_s = float(limit_s)
        self.running = {}  # (package, test) -> [since, state: run | pause | cont]
        self.lock = threading.Lock()  # the grader feeds it from its pump's thread

    def see(self, line, now, package=""):
        """Take one line of the stream (an event, a verbose line, or anything else)."""
        if isinstance(line, bytes):
            line = line.decode("utf-8", "replace")
        found = _event(line[:4096])
        if found is None:
            return
        action, test, said_package = found
        with self.lock:
            self._move(action, said_package or package, test, now)

    def _move(self, action, package, test, now):
        parent = _parent(test)
        for (p, t), entry in list(self.running.items()):
            if p != package:
                continue
            if test.startswith(t + "/"):  # an ancestor's progress is its subtest's
                entry[0] = now
            elif action == "run" and entry[1] == "run" and _under(t, parent) and t != test:
                del self.running[(p, t)]  # a sequential sibling (or its subtest) ended
            elif action in _ENDS and t.startswith(test + "/"):
                del self.running[(p, t)]  # a subtest ends before its parent
        key = (package, test)
        if action in ("run", "cont"):
            if key in self.running or len(self.running) < _TRACKED:
                self.running[key] = [now, action]
        elif action == "pause" and key in self.running:
            self.running[key][1] = "pause"
        elif action in _ENDS:
            self.running.pop(key, None)

    def overdue(self, now):
        """(package, test) of a test past the limit, or None."""
        with self.lock:
            return self._overdue(now)

    def _overdue(self, now):
        for (package, test), (since, state) in self.running.items():
            if state == "pause":
                continue
            allowed = self.limit_s
            if state == "cont":  # resumed parallel tests end silently: their group's time
                allowed *= sum(1 for (p, t), e in self.running.items() if p == package
                               and e[1] == "cont" and _parent(t) == _parent(test))  # fmt: skip
            if now - since <= allowed:
                continue
            inner = any(p == package and t.startswith(test + "/") and e[1] != "pause"
                        for (p, t), e in self.running.items())  # fmt: skip
            if not inner:
                return package, test
        return None

    def forget(self, package):
        """The package's binary ended: none of its tests runs any more."""
        with self.lock:
            for key in [k for k in self.running if k[0] == package]:
                del self.running[key]


def _parent(test):
    return test.rsplit("/", 1)[0] if "/" in test else None


def _under(test, parent):
    """Whether ``test`` is a child of ``parent`` (None: a top-level test) or below one."""
    return True if parent is None else test.startswith(parent + "/")


def _event(line):
    """(action, test, package) of a line that moves a test; None for any other."""
    if line.startswith("{"):
        try:
            event = json.loads(line)
        except ValueError:
            return None
        if not isinstance(event, dict):
            return None
        action, test, package = (event.get(k) for k in ("Action", "Test", "Package"))
        if action in ("run", "pause", "cont", *_ENDS) and isinstance(test, str) and test:
            return action, test, package if isinstance(package, str) else ""
        return None
    verbose = _VERBOSE.match(line)
    if verbose is None:
        return None
    return _ACTIONS[verbose.group(1)], verbose.group(2), ""


def _module_path():
    try:
        with open("go.mod", encoding="utf-8", errors="replace") as handle:
            found = re.search(r"^\s*module\s+\"?([^\s\"]+)", handle.read(), re.MULTILINE)
    except OSError:
        return ""
    return found.group(1) if found else ""


def _children():
    """pid -> its children's pids, from /proc."""
    tree: dict = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", encoding="ascii", errors="replace") as handle:
                parent = int(handle.read().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        tree.setdefault(parent, []).append(int(entry))
    return tree


def _below(tree, pid):
    out, todo = [], list(tree.get(pid, ()))
    while todo:
        child = todo.pop()
        out.append(child)
        todo += tree.get(child, ())
    return out


def _stop_binary(go_pid, package):
    """Kill the test binary of ``package`` under the go command (and what it started): the
    one whose folder is the package's, else the one named after it."""
    module = _module_path()
    rest = package[len(module) :].lstrip("/") if module and package.startswith(module) else None
    folder = os.path.realpath(os.path.join(os.getcwd(), rest)) if rest is not None else ""
    name = package.rsplit("/", 1)[-1] + ".test"
    tree = _children()
    binaries = []
    for pid in _below(tree, go_pid):
        try:
            exe = os.path.basename(os.readlink(f"/proc/{pid}/exe"))
            cwd = os.readlink(f"/proc/{pid}/cwd")
        except OSError:
            continue
        if exe.endswith(".test") and (cwd == folder or (not folder and exe == name)):
            binaries.append(pid)
    for pid in binaries:
        for victim in [pid, *_below(tree, pid)]:
            with contextlib.suppress(OSError):
                os.kill(victim, signal.SIGKILL)
    return bool(binaries)


def main(argv):
    limit = float(argv[0])
    go = subprocess.Popen(argv[1:], stdout=subprocess.PIPE)
    clock, pending, out = Clock(limit), b"", sys.stdout.buffer
    if go.stdout is None:  # never: stdout is a pipe
        return go.wait()
    source = go.stdout.fileno()
    while True:
        ready, _, _ = select.select([source], [], [], 0.25)
        if ready:
            chunk = os.read(source, 65536)
            if not chunk:
                break
            lines = (pending + chunk).split(b"\n")
            pending = lines.pop()  # whole lines only: a note never lands inside one
            if lines:
                out.write(b"\n".join(lines) + b"\n")
                out.flush()
            for line in lines:
                clock.see(line, time.monotonic())
        late = clock.overdue(time.monotonic())
        if late is not None:
            package, test = late
            clock.forget(package)
            if _stop_binary(go.pid, package):
                note = f"trajforge: {test} ran over the per-test limit of {limit:g}s; its test " \
                       "binary was stopped\n"  # fmt: skip
                event = {"Action": "output", "Package": package, "Test": test, "Output": note}
                out.write((json.dumps(event) + "\n").encode())
                out.flush()
    out.write(pending)
    out.flush()
    return go.wait()


if __name__ == "__main__":
    if len(sys.argv) < 3:
        sys.exit("usage: go_watch.py LIMIT_S COMMAND...")
    sys.exit(main(sys.argv[1:]))
