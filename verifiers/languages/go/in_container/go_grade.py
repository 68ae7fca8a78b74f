"""The grader's Go run: test binaries built by root, run as the tests' user, read by root.

Runs as root beside the supervisor (``supervisor.py``, whose helpers it loads from its own
folder: changing user, opening the tree, killing a user's processes, draining a pipe), under
``python -I``, in /repo. ``go_grade.py UID TIMEOUT_S SPEC``; SPEC is a JSON file in the grader's
``out/`` folder, which only root can read: for each graded package its folder, import path,
module folder, ``-test.run`` pattern and the files planted for its build (the grader's sentinel
test file, graded test files with twins appended: base64); the per-test limit.

For each package: the planted files are written, ``go test -c`` builds its test binary as root
into a folder the tests' user can only enter, and the planted files are put back as they were
(the sentinels' source never lies where the tests' user can read it). Then the tree is opened
up (``guard``: test files, testdata, go.mod/go.sum stay read-only with their folders), and each
binary runs as ``UID`` in its package's folder with ``-test.v=true`` (go 1.19's binaries have no
test2json mode) and ``-test.timeout`` the run's remaining time; its output goes to a
pipe root drains, whose lines a clock reads (``go_watch.py``, validate's too): a test past the
per-test limit has the binary killed (``stopped``, its name). When it exits, every process of
that user is killed. Root then appends the
package's final line as the go command would (``ok``/``FAIL`` from the exit status root saw)
and converts the stream with ``go tool test2json``. ``out/result.json``: per package its exit
status, whether the testing package printed its own final ``PASS``/``FAIL``, the converted
events and the raw output (the host reads and checks them: ``verifiers/languages/go/runs.py``).

Standard library only; runs on Python 3.9.
"""

import base64
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import threading
import time

ROOT = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(ROOT, "out")
BIN = os.path.join(ROOT, "bin")
OUTPUT_CAP = 16 * 1024 * 1024  # one package's output kept at most
BUILD_TIMEOUT_S = 600


def _beside(name, file):
    """A program shipped beside this one, loaded as a module."""
    spec = importlib.util.spec_from_file_location(name, os.path.join(ROOT, file))
    if spec is None or spec.loader is None:
        sys.exit(f"trajforge go grader: {file} is not beside it")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _go(repo):
    """The image's go, found on its PATH outside the repository (never a go the tree holds)."""
    for folder in os.environ.get("PATH", "").split(os.pathsep):
        full = os.path.realpath(os.path.join(folder, "go"))
        outside = folder and not (full + "/").startswith(repo + "/")
        if outside and os.path.isfile(full) and os.access(full, os.X_OK):
            return full
    sys.exit("trajforge go grader: no go on the image's PATH")


def _root_env():
    env = dict(os.environ)
    env["GOPROXY"] = "off"  # nothing is fetched at grading time; GOFLAGS are the image's
    env.pop("GOENV", None)
    return env


def _plant(repo, planted, saved):
    """Write the planted files, recording in ``saved`` what puts the tree back (originals, or
    removal). OSError when a path holds anything but a plain file (a link, a folder the tree
    put where the grader's file goes): that package does not build."""
    for rel, data in planted.items():
        full = os.path.join(repo, rel)
        if os.path.islink(full) or (os.path.exists(full) and not os.path.isfile(full)):
            raise OSError(f"{rel} is not a plain file in the tree")
        original = None
        if os.path.exists(full):
            with open(full, "rb") as handle:
                original = handle.read()
        with open(full, "wb") as handle:
            saved[full] = original
            handle.write(base64.b64decode(data))


def _restore(saved):
    for full, data in saved.items():
        if data is None:
            os.unlink(full)
        else:
            with open(full, "wb") as handle:
                handle.write(data)


def _build(go, repo, package, number, env):
    """The package's test binary (root's, executable by all, readable by none but root), or
    None with the build's output printed."""
    binary = os.path.join(BIN, f"p{number}.test")
    module = os.path.join(repo, package["module"])
    rel = os.path.relpath(os.path.join(repo, package["dir"]), module)
    target = "./" + rel if rel != "." else "."
    saved: dict = {}
    try:
        _plant(repo, package.get("planted", {}), saved)
        done = subprocess.run(
            [go, "test", "-c", "-vet=off", "-o", binary, target],
            cwd=module,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            timeout=BUILD_TIMEOUT_S,
            check=False,
        )
        said = done.stdout
        ok = done.returncode == 0 and os.path.isfile(binary)
    except subprocess.TimeoutExpired:
        said, ok = b"the build timed out\n", False
    except OSError as exc:
        said, ok = f"the grader's files cannot be planted: {exc}\n".encode(), False
    finally:
        _restore(saved)
    if not ok:
        sys.stdout.buffer.write(
            b"trajforge: the test binary of "
            + package["dir"].encode()
            + b" did not build:\n"
            + said
        )
        sys.stdout.flush()
        return None
    os.chmod(binary, 0o711)
    return binary


def _run_binary(sup, uid, binary, args, cwd, env, deadline, clock):
    """(exit status, output bytes, timed out, leftovers, overflow, stopped) of one test binary
    run as ``uid``; ``clock`` reads its lines, and a test it finds past the per-test limit
    (``stopped``, its name) has every process of ``uid`` killed."""
    read, write = os.pipe()
    guard = sup._lockdown()["guard"]()  # the supervisor's filter, in every runner's process
    pid = os.fork()
    if pid == 0:
        try:
            os.close(read)
            sup._as_user(uid)
            guard()
            devnull = os.open(os.devnull, os.O_RDONLY)
            os.dup2(devnull, 0)
            os.dup2(write, 1)
            os.dup2(write, 2)
            os.chdir(cwd)
            os.execve(binary, [binary, *args], env)
        except BaseException as exc:
            os.write(2, (f"trajforge go grader: cannot start the tests: {exc!r}\n").encode())
        os._exit(127)
    os.close(write)
    store = {"data": b"", "overflow": False}
    pump = threading.Thread(
        target=sup._pump,
        args=(read, None, OUTPUT_CAP, store, lambda line: clock.see(line, time.monotonic())),
    )
    pump.start()
    timed_out = False
    status = None
    stopped = ""
    while status is None:
        done, raw = os.waitpid(pid, os.WNOHANG)
        late = None if done else clock.overdue(time.monotonic())
        if done:
            status = raw
        elif time.monotonic() > deadline or late is not None:
            timed_out = late is None
            stopped = late[1] if late is not None else ""
            sup._kill_user(uid)
            _, status = os.waitpid(pid, 0)
        else:
            time.sleep(0.02)
    leftovers = sup._kill_user(uid)
    pump.join(30)
    code = os.WEXITSTATUS(status) if os.WIFEXITED(status) else -os.WTERMSIG(status)
    overflow = store["overflow"] or pump.is_alive()
    return code, store["data"], timed_out, leftovers, overflow, stopped


def _ended(output):
    """Whether the testing package printed its own last line (``PASS`` or ``FAIL``)."""
    lines = output.rstrip(b"\n").split(b"\n")
    return bool(lines) and lines[-1].rstrip(b"\r") in (b"PASS", b"FAIL")


def _convert(go, import_path, output, code, env):
    """The stream as ``go test -json`` gives it: the go command's final line appended from
    the exit status root saw, converted by the image's test2json (as root)."""
    final = "ok  \t%s\t0.000s\n" if code == 0 else "FAIL\t%s\t0.000s\n"
    tail = b"" if output.endswith(b"\n") or not output else b"\n"
    text = output + tail + (final % import_path).encode()
    done = subprocess.run(
        [go, "tool", "test2json", "-p", import_path],
        input=text,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        timeout=BUILD_TIMEOUT_S,
        check=False,
    )
    return done.stdout.decode("utf-8", "replace")


def main(uid, timeout_s, spec_path):
    with open(spec_path, encoding="utf-8") as handle:
        spec = json.load(handle)
    sup = _beside("trajforge_supervisor", "supervisor.py")
    watch = _beside("trajforge_go_watch", "go_watch.py")
    repo = os.getcwd()
    go = _go(repo)
    env = _root_env()
    os.makedirs(BIN, mode=0o711, exist_ok=True)
    os.chmod(BIN, 0o711)
    binaries = [_build(go, repo, p, n, env) for n, p in enumerate(spec["packages"])]
    deadline = time.monotonic() + timeout_s  # the tests' time: the builds are the grader's
    privileged = os.geteuid() == 0 and uid >= 0
    if not privileged:
        sys.exit("trajforge go grader: runs as root, with a user to run the tests as")
    sup._open_up_guarded(repo, set(spec.get("guard", ())))
    os.chmod("/tmp", 0o1777)
    scratch = os.path.join("/tmp", ".trajforge-go-" + os.urandom(8).hex())
    os.mkdir(scratch)
    os.chmod(scratch, 0o1777)  # the tests' GOCACHE and temporary files (root may not chown)
    test_env = dict(env)
    test_env.update(GOCACHE=scratch + "/cache", GOTMPDIR=scratch, TMPDIR=scratch,
                    HOME=scratch)  # fmt: skip
    packages, worst, timed_out, leftovers = [], 0, False, False
    for number, package in enumerate(spec["packages"]):
        binary = binaries[number]  # (no zip(strict=): runs on 3.9)
        said = {"dir": package["dir"], "built": binary is not None}
        if binary is None or timed_out:
            said.update(exit_code=1 if binary is None else -9, events="", output="", ended=False)
            packages.append(said)
            worst = worst or 1
            continue
        left = max(1, int(deadline - time.monotonic()))
        args = ["-test.v=true", "-test.count=1", "-test.paniconexit0",
                f"-test.timeout={left}s"]  # fmt: skip
        if package.get("run"):
            args.append("-test.run=" + package["run"])
        cwd = os.path.join(repo, package["dir"])
        clock = watch.Clock(spec["per_test_s"])
        code, output, late, left_over, overflow, stopped = _run_binary(
            sup, uid, binary, args, cwd, test_env, deadline + 5, clock
        )
        sys.stdout.buffer.write(output)
        if stopped:
            note = f"\ntrajforge: {stopped} ran over the per-test limit of " \
                   f"{spec['per_test_s']}s; its test binary was stopped\n"  # fmt: skip
            sys.stdout.buffer.write(note.encode("utf-8", "replace"))
        sys.stdout.flush()
        timed_out = timed_out or late
        leftovers = leftovers or left_over
        said.update(
            exit_code=code, ended=_ended(output), overflow=overflow, stopped=stopped,
            output=output.decode("utf-8", "replace"),
            events=_convert(go, package["import_path"], output, code, env),
        )  # fmt: skip
        packages.append(said)
        if code != 0:
            worst = 1
    shutil.rmtree(scratch, ignore_errors=True)
    result = {"exit_code": worst, "timed_out": timed_out, "leftovers": leftovers,
              "packages": packages}  # fmt: skip
    os.makedirs(OUT, mode=0o700, exist_ok=True)
    temp = OUT + "/result.json.tmp"
    with open(temp, "w", encoding="utf-8") as handle:
        json.dump(result, handle)
    os.replace(temp, OUT + "/result.json")


if __name__ == "__main__":
    if len(sys.argv) != 4:
        sys.exit("usage: go_grade.py UID TIMEOUT_S SPEC_JSON")
    main(int(sys.argv[1]), float(sys.argv[2]), sys.argv[3])
