"""The tests' processes keep their memory to themselves: no path to it through the kernel.

A process's memory is open to any process of its user through ``/proc/<pid>/mem``, ``ptrace``
and ``process_vm_writev``, and to itself through ``/proc/self/mem`` by any name (the seal refuses
``/proc/*/mem`` by name, but a symlink in ``/tmp`` to it opened, and a write at ``id(obj)``
landed: checked 2026-11-30, unprivileged, capabilities dropped). A non-dumpable process has its
``/proc/<pid>/`` files owned by root, so the tests' user is refused every one of those paths.
A process becomes non-dumpable by ``prctl(PR_SET_DUMPABLE, 0)`` (pytest's, ``launch.py``) or
by being started from a file its user cannot read (node's: ``supervisor.py:_execute_only``).

Any process may make itself dumpable again, so ``guard`` installs a seccomp filter, which no
process can remove and every child inherits, that refuses ``prctl(PR_SET_DUMPABLE, non-zero)``
(and every system call of another ABI, through which the same ``prctl`` has another number).
The supervisor installs it in every runner's process before the runner starts. Neither needs
privilege: ``PR_SET_NO_NEW_PRIVS`` is set first, as seccomp requires of an unprivileged process.

Left to the tests: ``/proc/self/status``, ``maps``, ``fd`` and ``/dev/stdout`` read as before;
``/proc/self/environ`` and ``mem`` are refused. A machine this cannot lock (no seccomp, an
architecture not below) runs no graded test: ``Unlockable`` says why.

Standard library only; Python 3.9 and up. Loaded by path, like the seal.
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
    """The tests' processes could not be locked: they must not run graded tests."""


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


def guard():
    """A function that installs the filter in the process that calls it, made now: everything
    it needs is built here, so it may run in a child between ``fork`` and ``exec`` (where an
    import could wait on a lock another thread held). Raises ``Unlockable``, as does the
    function it returns."""
    machine = os.uname().machine
    if machine not in ARCHES:
        raise Unlockable(f"no system call filter for this machine ({machine})")
    libc = ctypes.CDLL(None, use_errno=True)
    instructions = program(*ARCHES[machine])
    code = ctypes.create_string_buffer(b"".join(struct.pack("HBBI", *i) for i in instructions))
    # the filter's bytes live as long as the function that installs it
    held = code, _Program(len(instructions), ctypes.addressof(code))

    def prctl(option, value, pointer=None):
        if libc.prctl(option, value, pointer, 0, 0) != 0:
            why = os.strerror(ctypes.get_errno())
            raise Unlockable(f"prctl({option}) failed: {why}")

    def install():
        prctl(PR_SET_NO_NEW_PRIVS, 1)
        prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.byref(held[1]))

    return install


def lock():
    """This process non-dumpable, under the filter that keeps it so (pytest's, before any
    file of the repository loads)."""
    install = guard()
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) != 0:
        raise Unlockable(f"prctl(PR_SET_DUMPABLE, 0) failed: {os.strerror(ctypes.get_errno())}")
    install()
