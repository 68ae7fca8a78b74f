"""The grader inside a Harbor task's container: ``tests/test.sh`` runs this, as root.

``trajforge export --format harbor`` copies it into every task's ``tests/trajforge/`` beside the
graded run's files (``programs/``: the supervisor, its lockdown, the launcher, the seal, the
reporter and ``trajforge_pytest`` plugins, as ``supervised.grader_files`` lists them) and the
modules that decide a verdict (``channel.py``, ``sentinels.py``, ``patch_policy.py``,
``test_ids.py``), with ``task.json`` (what the export decided: graded tests, the task's starting
tree by digest, its pytest options, limits) and ``clean.tar`` (the task's own test files and test
configuration, test patch applied). It does what ``verifiers/patch_verifier.py`` does on the
host, in the same order:

1. The agent's tree: ``/logs/artifacts/trajforge-repo.tar`` (Harbor's separate verifier: the
   agent's container tarred ``/repo`` and this is a fresh container of the same image), else
   ``/repo`` itself (a verifier that shares the agent's container).
2. What changed against the starting tree (by digest; files the image's install generated are
   not changes). Start-up and metadata files refuse the patch (``forbidden_file``); test files,
   conftests and test configuration are reset to the task's own (``test_ids.is_grading_path``,
   the test patch's files, the graded tests' files); nothing else changed is
   ``no_source_changes``; a new top-level module that shadows a name the image can import
   (probed from the image) is ``forbidden_file``.
3. ``/repo`` becomes the task's tree with the agent's kept changes; sentinels are planted into
   the graded test files with fresh randomness, and the supervisor runs pytest as an
   unprivileged user (no new privileges: a set-user-id program gives nothing back), each report
   on a pipe; the verdict is ``rules.verdict``, the host's rule.
4. ``/logs/verifier/reward.txt`` is 1 only for ``resolved``; ``grading.json`` says why, and
   ``tests.log`` holds the run's output. Anything unexpected is reward 0 with its reason.

Standard library only; runs on Python 3.9 (the oldest base image). The functions above ``main``
and the rules (``rules.py``) are the host's own files, copied beside this one.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import stat
import subprocess
import sys
import tarfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
GRADER_FILES = "programs"  # here: the graded run's files, laid out as in the grader's folder
SYMLINK, EXECUTABLE, REGULAR = "120000", "100755", "100644"
VERIFIER = "/logs/verifier"


class Refused(Exception):
    """The agent's tree cannot be graded: reward 0 with this reason."""

    def __init__(self, reason: str, detail: str = "") -> None:
        super().__init__(f"{reason}: {detail}")
        self.reason = reason
        self.detail = detail


# ---- trees as {path: (mode, sha256)}: what a starting tree, an agent's tree and a tar hold ----


def digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def tar_index(path: str, limit: int) -> dict:
    """path -> (mode, sha256) of the files and symlinks of the tar at ``path`` (an uncompressed
    tar of a tree, members relative to its root). A member that leaves the root, a device, a
    hard link or a tar over ``limit`` bytes is a ``Refused``."""
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
    with os.fdopen(fd, "rb") as handle:
        if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):
            raise Refused("unreadable_tree", "the agent's tree is not a regular file")
        if os.fstat(handle.fileno()).st_size > limit:
            raise Refused("tree_too_large", f"the agent's tree is over {limit} bytes")
        found = {}
        try:
            with tarfile.open(fileobj=handle, mode="r:") as tar:
                for member in tar:
                    name = member_path(member.name)
                    if name is None:
                        continue
                    if member.issym():
                        found[name] = (SYMLINK, digest(member.linkname.encode("utf-8", "replace")))
                    elif member.isfile():
                        data = tar.extractfile(member)
                        content = data.read() if data is not None else b""
                        found[name] = (mode_of(member.mode), digest(content))
                    elif not member.isdir():
                        raise Refused("unreadable_tree", f"{name}: not a file, folder or link")
        except tarfile.TarError as exc:
            raise Refused("unreadable_tree", f"the agent's tree is not a tar ({exc})") from None
    return found


def member_path(name: str):
    """A tar member's path relative to the tree's root; None for the root itself. One that
    leaves the root is a ``Refused``."""
    parts = [p for p in name.split("/") if p not in ("", ".")]
    if name.startswith("/") or ".." in parts:
        raise Refused("unreadable_tree", f"{name}: outside the tree")
    return "/".join(parts) or None


def mode_of(mode: int) -> str:
    return EXECUTABLE if mode & 0o111 else REGULAR


def walk_index(root: str, skip=()) -> dict:
    """path -> (mode, sha256) of the files and symlinks under ``root`` (links not followed)."""
    found = {}
    for folder, dirs, files in os.walk(root):
        rel_folder = os.path.relpath(folder, root)
        kept_dirs = []
        for name in dirs:
            full = os.path.join(folder, name)
            if os.path.islink(full):
                files.append(name)
            elif os.path.normpath(os.path.join(rel_folder, name)) not in skip:
                kept_dirs.append(name)
        dirs[:] = kept_dirs
        for name in files:
            full = os.path.join(folder, name)
            rel = os.path.normpath(os.path.join(rel_folder, name))
            info = os.lstat(full)
            if stat.S_ISLNK(info.st_mode):
                found[rel] = (SYMLINK, digest(os.readlink(full).encode("utf-8", "replace")))
            elif stat.S_ISREG(info.st_mode):
                with open(full, "rb") as handle:
                    found[rel] = (mode_of(info.st_mode), digest(handle.read()))
    return found


def changed_paths(start: dict, agent: dict, generated: dict):
    """(changed, added): paths where the agent's tree differs from the starting tree, sorted;
    a file the install generated (in the image, not in the tree) is a change only when the
    agent's differs from the image's."""
    changed = []
    added = []
    for path in sorted(set(start) | set(agent)):
        theirs = agent.get(path)
        if path in start:
            if theirs != tuple(start[path]):
                changed.append(path)
        elif theirs is not None and theirs != generated.get(path):
            changed.append(path)
            added.append(path)
    return changed, added


# ---- the graded tree: the task's own, with the agent's kept changes ----


def place(repo: str, path: str, source) -> None:
    """Make ``repo/path`` what ``source`` says: None removes it; (mode, bytes) writes a file,
    ("120000", target) a symlink. Never writes through a link: any parent that is not a real
    folder is replaced by one."""
    parts = path.split("/")
    folder = repo
    for part in parts[:-1]:
        folder = os.path.join(folder, part)
        if os.path.lexists(folder) and (os.path.islink(folder) or not os.path.isdir(folder)):
            if source is None:
                return  # nothing to remove below a file or a link
            os.unlink(folder)
        if not os.path.lexists(folder):
            os.mkdir(folder, 0o755)
    target = os.path.join(folder, parts[-1])
    if os.path.lexists(target):
        if os.path.isdir(target) and not os.path.islink(target):
            shutil.rmtree(target)
        else:
            os.unlink(target)
    if source is None:
        return
    mode, data = source
    if mode == SYMLINK:
        os.symlink(data, target)
        return
    fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0))
    with os.fdopen(fd, "wb") as handle:
        handle.write(data)
    os.chmod(target, 0o755 if mode == EXECUTABLE else 0o644)


def tar_contents(path: str, wanted) -> dict:
    """path -> (mode, bytes or link target) of the ``wanted`` members of the tar at ``path``."""
    found: dict[str, tuple[str, str | bytes]] = {}
    with tarfile.open(path, mode="r:") as tar:
        for member in tar:
            name = member_path(member.name)
            if name is None or name not in wanted:
                continue
            if member.issym():
                found[name] = (SYMLINK, member.linkname)
            elif member.isfile():
                data = tar.extractfile(member)
                found[name] = (mode_of(member.mode), data.read() if data is not None else b"")
    return found


def file_contents(root: str, wanted) -> dict:
    found: dict[str, tuple[str, str | bytes]] = {}
    for path in wanted:
        full = os.path.join(root, path)
        if os.path.islink(full):
            found[path] = (SYMLINK, os.readlink(full))
        elif os.path.isfile(full):
            with open(full, "rb") as handle:
                found[path] = (mode_of(os.lstat(full).st_mode), handle.read())
    return found


# ---- the run ----


def no_new_privileges() -> bool:
    """PR_SET_NO_NEW_PRIVS for this process and every child: a set-user-id or file-capability
    program gives the tests' user nothing (Docker's no-new-privileges, which trajforge's own
    sandbox sets and Harbor's containers do not)."""
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(38, 1, 0, 0, 0) == 0  # PR_SET_NO_NEW_PRIVS
    except (OSError, AttributeError, ImportError):
        return False


def strip_set_id_bits() -> int:
    """Without no_new_privs: no file on the root file system keeps set-user/group-id."""
    stripped = 0
    for folder, dirs, files in os.walk("/"):
        if folder == "/":
            dirs[:] = [d for d in dirs if d not in ("proc", "sys", "dev")]
        for name in files:
            full = os.path.join(folder, name)
            try:
                info = os.lstat(full)
                if stat.S_ISREG(info.st_mode) and info.st_mode & (stat.S_ISUID | stat.S_ISGID):
                    os.chmod(full, stat.S_IMODE(info.st_mode) & ~(stat.S_ISUID | stat.S_ISGID))
                    stripped += 1
            except OSError:
                continue
    return stripped


def install_grader(root: str) -> None:
    """The grader's programs under ``root``, root's and read-only to everyone else; whatever was
    there (a link or a folder someone planted) goes first."""
    if os.path.lexists(root):
        if os.path.isdir(root) and not os.path.islink(root):
            shutil.rmtree(root)
        else:
            os.unlink(root)
    os.makedirs(os.path.dirname(root), exist_ok=True)
    os.mkdir(root, 0o755)
    os.mkdir(os.path.join(root, "plugins"), 0o755)
    os.mkdir(os.path.join(root, "out"), 0o700)
    shipped = os.path.join(HERE, GRADER_FILES)
    for folder, _, names in os.walk(shipped):
        for name in names:
            target = os.path.join(root, os.path.relpath(os.path.join(folder, name), shipped))
            os.makedirs(os.path.dirname(target), 0o755, exist_ok=True)
            shutil.copyfile(os.path.join(folder, name), target)
            os.chmod(target, 0o644)
    for folder in (root, os.path.join(root, "plugins"), os.path.join(root, "out")):
        os.chown(folder, 0, 0)


def write_result(verdict: dict, log: str = "") -> None:
    os.makedirs(VERIFIER, exist_ok=True)
    with open(os.path.join(VERIFIER, "grading.json"), "w", encoding="utf-8") as handle:
        json.dump(verdict, handle, indent=2, sort_keys=True)
    if log:
        with open(os.path.join(VERIFIER, "tests.log"), "w", encoding="utf-8") as handle:
            handle.write(log)
    with open(os.path.join(VERIFIER, "reward.txt"), "w", encoding="utf-8") as handle:
        handle.write("1\n" if verdict.get("resolved") else "0\n")


def grade(config: dict) -> tuple:
    """(verdict dict, log) of the agent's tree; raises Refused for a tree that cannot be graded."""
    sys.path.insert(0, HERE)
    import channel
    import patch_policy
    import rules
    import sentinels
    import test_ids

    repo, root = config["repo"], config["root"]
    graded = [*config["FAIL_TO_PASS"], *config["PASS_TO_PASS"]]
    tree_tar = config["agent_tree"]
    from_tar = os.path.lexists(tree_tar)
    agent = tar_index(tree_tar, config["max_tree_bytes"]) if from_tar else walk_index(repo)
    generated = walk_index(config["generated"]) if os.path.isdir(config["generated"]) else {}
    start = {p: tuple(v) for p, v in config["start"].items()}
    changed, added = changed_paths(start, agent, generated)
    base = {"dropped": [], "test_report": {}, "trusted": True}
    if not changed:
        return {**base, "resolved": False, "reason": "empty_patch"}, ""
    startup = [why for p in changed if (why := patch_policy.startup_file(p))]
    if startup:
        return {**base, "resolved": False, "reason": "forbidden_file", "detail": startup[:5]}, ""
    task_tests = set(config["task_tests"])
    dropped = [p for p in changed if p in task_tests or test_ids.is_grading_path(p)]
    kept = [p for p in changed if p not in dropped]
    base["dropped"] = dropped
    if not kept:
        return {**base, "resolved": False, "reason": "no_source_changes"}, ""
    install_grader(root)
    python = config["interpreter"]
    env = dict(config["env"])
    probe = subprocess.run(
        [python, "-I", os.path.join(root, "supervisor.py"), "probe", repo],
        cwd="/", env=env, capture_output=True, timeout=config["probe_timeout_s"],
    )  # fmt: skip
    try:
        facts = json.loads((probe.stdout.decode().strip().splitlines() or [""])[-1])
    except ValueError:
        raise Refused(
            "grader_error", f"probing the image failed: {probe.stderr[-300:]!r}"
        ) from None
    # The graded tree: the agent's kept changes, then the task's own tests and configuration.
    contents = tar_contents(tree_tar, set(kept)) if from_tar else file_contents(repo, kept)
    for path in sorted(kept, key=lambda p: p in contents):  # removals first
        place(repo, path, contents.get(path))
    clean_tar = os.path.join(HERE, "clean.tar")
    resets = sorted(set(dropped) | set(config["test_patch_paths"]))
    clean = tar_contents(clean_tar, set(resets))
    for path in sorted(resets, key=lambda p: p in clean):
        place(repo, path, clean.get(path))
    task_paths = sorted(set(start) | set(config["test_patch_paths"]))  # the task's own tree
    dirs = patch_policy.import_dirs(config["graded_files"], task_paths)
    names = patch_policy.top_level_names(task_paths, dirs)
    new = sorted(set(added) & set(kept))
    refused = [w for p in new if (w := patch_policy.new_top_level_module(p, names))]
    if refused:
        return {**base, "resolved": False, "reason": "forbidden_file", "detail": refused[:5]}, ""
    originals = file_contents(repo, config["graded_files"])
    planted, planted_sentinels = sentinels.plant(
        {p: b for p, (_, b) in originals.items()},
        tuple(config["FAIL_TO_PASS"]),
        (*config["FAIL_TO_PASS"], *config["PASS_TO_PASS"]),
    )
    for path, data in planted.items():
        place(repo, path, (originals[path][0], data))
    selection = config["selection"]
    run_selection = [*selection, *(s.test_id for s in planted_sentinels)] if selection else []
    args = rules.pytest_args(
        config["options"], config["own"], config["blocked_plugins"],
        [tuple(p) for p in facts["plugins"]], run_selection,
    )  # fmt: skip
    timeout_s = config["timeout_s"]
    spec_path = os.path.join(root, "out", "run.json")  # root's: the ids never on a command line
    guard = sorted({test_ids.test_file(t) for t in graded} | set(config["test_patch_paths"]))
    spec = {"args": args, "graded": [*graded, *(s.test_id for s in planted_sentinels)]}
    with open(spec_path, "w", encoding="utf-8") as handle:
        json.dump({**spec, "guard": sorted(set(guard) | set(planted)), "stop_at": []}, handle)
    command = [python, "-I", os.path.join(root, "supervisor.py"), "run", str(config["uid"])]
    command += [f"{timeout_s:g}", spec_path]
    started = time.monotonic()
    try:
        ran = subprocess.run(
            command, cwd=repo, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
            timeout=timeout_s + config["grace_s"],
        )  # fmt: skip
        log = ran.stdout.decode("utf-8", "replace")
    except subprocess.TimeoutExpired:
        return {**base, "resolved": False, "reason": "timed_out"}, ""
    log = log[-config["max_log_bytes"] :]
    result_path = os.path.join(root, "out", "result.json")
    try:
        with open(result_path, encoding="utf-8") as handle:
            said = json.load(handle)
    except (OSError, ValueError) as exc:
        raise Refused("grader_error", f"the supervisor left no result ({exc})") from None
    evidence = channel.read_records(str(said["records"]))
    tampering = list(evidence.tampering)
    if said.get("records_overflow"):
        tampering.append("the records outgrew the channel")
    resolved, reason, trusted = rules.verdict(
        evidence.statuses, tampering, evidence.finished, int(said["exit_code"]),
        bool(said["timed_out"]), graded, [(s.test_id, s.expected) for s in planted_sentinels],
    )  # fmt: skip
    verdict = {
        **base,
        "resolved": resolved,
        "reason": reason,
        "trusted": trusted,
        "test_report": {t: evidence.statuses.get(t, "MISSING") for t in graded},
        "tampering": tampering,
        "privileged": bool(said.get("privileged")),  # the tests ran as the unprivileged user
        "seconds": round(time.monotonic() - started, 3),
    }
    return verdict, log


def main(argv) -> int:
    os.umask(0o022)
    write_result({"resolved": False, "reason": "grader_error", "detail": "did not finish"})
    try:
        with open(argv[1], encoding="utf-8") as handle:
            config = json.load(handle)
        os.chmod(os.path.dirname(os.path.abspath(argv[1])), 0o700)
        os.chmod(os.path.dirname(HERE), 0o700)  # /tests: the tests' user reads none of it
        guarded = no_new_privileges()
        stripped = 0 if guarded else strip_set_id_bits()
        verdict, log = grade(config)
        verdict["no_new_privileges"] = guarded
        verdict["set_id_bits_stripped"] = stripped
        verdict["instance_id"] = config.get("instance_id", "")
    except Refused as exc:
        verdict, log = {"resolved": False, "reason": exc.reason, "detail": exc.detail}, ""
    except Exception as exc:  # anything unexpected is no reward, said
        verdict, log = {"resolved": False, "reason": "grader_error", "detail": repr(exc)}, ""
    write_result(verdict, log)
    print(f"trajforge: {verdict['reason']}, reward {1 if verdict['resolved'] else 0}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
