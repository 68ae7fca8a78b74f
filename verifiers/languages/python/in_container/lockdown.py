"""The tests' process keeps its memory to itself: no path to it through the kernel.

``launch.py`` calls ``lock`` first, before pytest or any file of the repository loads. The seal
(``seal.py``) refuses opening ``/proc/*/mem`` by name, but a name is not the file: a symlink in
``/tmp`` to ``/proc/self/mem`` opened, and a write at ``id(obj)`` landed (checked 2026-11-30,
unprivileged, capabilities dropped). So the process is made non-dumpable instead
(``prctl(PR_SET_DUMPABLE, 0)``): the kernel then gives its ``/proc/<pid>/`` files to root, so
every path to its ``mem`` is refused to the tests' user, and no other process of that user (a
child the tests start) can open it, ``ptrace`` it or use ``process_vm_writev`` on it.

Any process may make itself dumpable again, so a seccomp filter, which no process can remove and
every child inherits, refuses ``prctl(PR_SET_DUMPABLE, non-zero)`` (and every system call of
another ABI, through which the same ``prctl`` has another number). Both need no privilege:
``PR_SET_NO_NEW_PRIVS`` is set first, as seccomp requires of an unprivileged process.

Left to the tests: ``/proc/self/status``, ``maps``, ``fd`` and ``/dev/stdout`` read as before;
``/proc/self/environ`` and ``mem`` are refused. A machine this cannot lock (no seccomp, an
architecture not below) gets no graded run: ``lock`` raises, and the run ends unresolved.

Standard library only. Loaded by path, like the seal.
"""

import ctypes
import os
import struct

PR_SET_DUMPABLE, PR_SET_SECCOMP, PR_SET_NO_NEW_PRIVS = 4, 22, 38
SECCOMP_MODE_FILTER = 2
# machine -> (the audit architecture seccomp reports, prctl's system call number there)
ARCHES = {"x86_64": (0xC000003E, 157), "aarch64": (0xC00000B7, 167)}
X32_BIT = 0x40000000  # x86_64's x32 ABI: the same prctl under another number
# classic BPF: load a word of seccomp_data, compare and jump, return
LOAD, JUMP_EQ, JUMP_GE, RETURN = 0x20, 0x15, 0x35, 0x06
ALLOW, REFUSE = 0x7FFF0000, 0x00050000 | 1  # SECCOMP_RET_ALLOW, SECCOMP_RET_ERRNO | EPERM
# offsets in seccomp_data: nr, arch, then ip (8 bytes) and args[6] (8 bytes each, low half first)
NR, ARCH, OPTION, VALUE = 0, 4, 16, 24


class Unlockable(Exception):
    """The tests' process could not be locked: it must not run graded tests."""


def program(arch, prctl):
    """The filter: refuse other ABIs and ``prctl(PR_SET_DUMPABLE, v != 0)``, allow the rest.
    (prctl reads its option as an int and rejects a value other than 0 or 1, so the low halves
    of both arguments decide.)"""
    return [
        (LOAD, 0, 0, ARCH),
        (JUMP_EQ, 1, 0, arch),
        (RETURN, 0, 0, REFUSE),
        (LOAD, 0, 0, NR),
        (JUMP_GE, 0, 1, X32_BIT),
        (RETURN, 0, 0, REFUSE),
        (JUMP_EQ, 0, 5, prctl),
        (LOAD, 0, 0, OPTION),
        (JUMP_EQ, 0, 3, PR_SET_DUMPABLE),
        (LOAD, 0, 0, VALUE),
        (JUMP_EQ, 1, 0, 0),
        (RETURN, 0, 0, REFUSE),
        (RETURN, 0, 0, ALLOW),
    ]


class _Program(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


def lock():
    """Non-dumpable, then the filter that keeps it so; raises ``Unlockable`` saying why."""
    machine = os.uname().machine
    if machine not in ARCHES:
        raise Unlockable(f"no system call filter for this machine ({machine})")
    libc = ctypes.CDLL(None, use_errno=True)

    def prctl(*args):
        if libc.prctl(*args, *[0] * (5 - len(args))) != 0:
            raise Unlockable(f"prctl{args[:1]} failed: {os.strerror(ctypes.get_errno())}")

    prctl(PR_SET_NO_NEW_PRIVS, 1)
    prctl(PR_SET_DUMPABLE, 0)
    instructions = program(*ARCHES[machine])
    code = ctypes.create_string_buffer(b"".join(struct.pack("HBBI", *i) for i in instructions))
    fprog = _Program(len(instructions), ctypes.addressof(code))
    prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.byref(fprog))
