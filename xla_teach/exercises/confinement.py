"""Fencing in the process that runs a student's code: resource limits, Landlock and seccomp.

The autograder runs each submission in a child process of its own (see :mod:`sandbox`). Before
that child loads the student's file it closes the doors it will not need, with three tools the
Linux kernel offers to any process, privileged or not:

* **resource limits** (``setrlimit``): address space (memory), CPU seconds, the size of any file
  it writes, open files. Going past one ends in ``MemoryError``, ``SIGXCPU`` or ``SIGXFSZ``;
* **Landlock** (Linux 5.13+): the process gives up file-system rights for good. It may read
  only where Python, its packages and the system libraries live, and its own folder; it may
  write, create, rename or delete only inside its own folder;
* **seccomp**: a small BPF program the kernel runs on every system call. Here it refuses
  ``fork``/``vfork``, ``clone`` of a new process (threads still start), ``clone3``, ``execve``
  and sockets other than Unix ones (so no network, no other programs, no fork bombs).

Each returns what it managed to do; where the kernel lacks a feature the child says so and the
grading report repeats it. Nothing here needs root.
"""

from __future__ import annotations

import ctypes
import os
import platform
import resource
import struct
import sys
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

_libc = ctypes.CDLL(None, use_errno=True)
_libc.syscall.restype = ctypes.c_long
_libc.prctl.restype = ctypes.c_int

PR_SET_NO_NEW_PRIVS = 38
PR_SET_SECCOMP = 22
SECCOMP_MODE_FILTER = 2


@dataclass(frozen=True)
class Limits:
    """What one submission may use."""

    seconds_per_case: float = 20.0  # wall clock, per case
    cpu_seconds: int = 900  # CPU time of the whole child (all cases)
    memory_bytes: int = 6 << 30  # address space; LLVM and NumPy reserve a good deal of it
    file_bytes: int = 64 << 20  # the largest file it may write
    open_files: int = 256


def apply_resource_limits(limits: Limits) -> list[str]:
    """``setrlimit`` on the calling process (call it in the child)."""
    done = []
    for name, which, value in (("memory", resource.RLIMIT_AS, limits.memory_bytes),
                               ("CPU time", resource.RLIMIT_CPU, limits.cpu_seconds),
                               ("file size", resource.RLIMIT_FSIZE, limits.file_bytes),
                               ("open files", resource.RLIMIT_NOFILE, limits.open_files)):
        _, hard = resource.getrlimit(which)
        soft = value if hard == resource.RLIM_INFINITY else min(value, hard)
        resource.setrlimit(which, (soft, soft if hard == resource.RLIM_INFINITY else hard))
        done.append(name)
    return done


# ---- Landlock ---------------------------------------------------------------------------------------
_SYS_LANDLOCK_CREATE_RULESET, _SYS_LANDLOCK_ADD_RULE, _SYS_LANDLOCK_RESTRICT_SELF = 444, 445, 446
_LANDLOCK_CREATE_RULESET_VERSION = 1
_LANDLOCK_RULE_PATH_BENEATH = 1
_EXECUTE, _WRITE_FILE, _READ_FILE, _READ_DIR = 1 << 0, 1 << 1, 1 << 2, 1 << 3
_REMOVE_DIR, _REMOVE_FILE, _MAKE_CHAR, _MAKE_DIR = 1 << 4, 1 << 5, 1 << 6, 1 << 7
_MAKE_REG, _MAKE_SOCK, _MAKE_FIFO, _MAKE_BLOCK, _MAKE_SYM = 1 << 8, 1 << 9, 1 << 10, 1 << 11, 1 << 12
_REFER, _TRUNCATE = 1 << 13, 1 << 14  # ABI 2, ABI 3
_READ = _EXECUTE | _READ_FILE | _READ_DIR
_FILE_READ = _EXECUTE | _READ_FILE  # rights that apply to a file (not a directory)


def landlock_abi() -> int:
    """The kernel's Landlock ABI version (0: not available)."""
    version = _libc.syscall(_SYS_LANDLOCK_CREATE_RULESET, None, ctypes.c_size_t(0),
                            ctypes.c_uint32(_LANDLOCK_CREATE_RULESET_VERSION))
    return max(int(version), 0)


def readable_roots(extra: Iterable[Path] = ()) -> list[Path]:
    """Where the child must still read: Python's library and installed packages, xla_teach's
    own package folder (not the checkout around it: teachers keep solutions there), the system
    libraries and configuration, and the parts of ``/proc`` and ``/sys`` a process reads about
    itself and the CPU (not other processes' ``/proc/<pid>``: their environments)."""
    import site
    import sysconfig

    import xla_teach

    roots = {Path(p) for p in sysconfig.get_paths().values()}
    roots |= {Path(p) for p in site.getsitepackages()} | {Path(sys.base_prefix) / "lib"}
    roots |= {Path(xla_teach.__file__).parent, Path("/usr"), Path("/lib"), Path("/lib64"), Path("/etc"),
              Path("/dev"), Path("/proc/self").resolve(), Path("/proc/cpuinfo"), Path("/proc/meminfo"),
              Path("/proc/stat"), Path("/sys/devices/system/cpu"), Path("/sys/fs/cgroup")}
    roots |= set(extra)
    return sorted(p for p in roots if p.exists())


def restrict_files(own_folder: Path, read_also: Iterable[Path] = ()) -> str:
    """Landlock: read only under :func:`readable_roots`, write only under ``own_folder``.

    Returns a line for the report: what is enforced, or why nothing is."""
    abi = landlock_abi()
    if abi < 1:
        return "no Landlock in this kernel: file access is limited only by the user's rights"
    handled = _READ | _WRITE_FILE | _REMOVE_DIR | _REMOVE_FILE | _MAKE_CHAR | _MAKE_DIR | _MAKE_REG | _MAKE_SOCK \
        | _MAKE_FIFO | _MAKE_BLOCK | _MAKE_SYM | (_REFER if abi >= 2 else 0) | (_TRUNCATE if abi >= 3 else 0)
    attr = struct.pack("=Q", handled)  # struct landlock_ruleset_attr (handled_access_fs only)
    ruleset = _libc.syscall(_SYS_LANDLOCK_CREATE_RULESET, ctypes.c_char_p(attr), ctypes.c_size_t(len(attr)),
                            ctypes.c_uint32(0))
    if ruleset < 0:
        return f"Landlock refused a ruleset ({os.strerror(ctypes.get_errno())}): file access not confined"
    try:
        rules = [(p, _READ) for p in readable_roots(read_also)] + [(own_folder, handled), (Path("/dev/null"),
                                                                                           _READ | _WRITE_FILE)]
        for path, access in rules:
            try:
                fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
            except OSError:
                continue
            if not os.path.isdir(path):
                access &= _FILE_READ | _WRITE_FILE | (_TRUNCATE if abi >= 3 else 0)
            rule = struct.pack("=Qi", access, fd)  # struct landlock_path_beneath_attr (packed)
            result = _libc.syscall(_SYS_LANDLOCK_ADD_RULE, ctypes.c_int(ruleset),
                                   ctypes.c_int(_LANDLOCK_RULE_PATH_BENEATH), ctypes.c_char_p(rule), ctypes.c_uint32(0))
            os.close(fd)
            if result < 0:
                return f"Landlock refused a rule for {path} ({os.strerror(ctypes.get_errno())}): not confined"
        if _libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
            return "cannot set no_new_privs: file access not confined"
        if _libc.syscall(_SYS_LANDLOCK_RESTRICT_SELF, ctypes.c_int(ruleset), ctypes.c_uint32(0)) < 0:
            return f"Landlock could not restrict the process ({os.strerror(ctypes.get_errno())}): not confined"
    finally:
        os.close(ruleset)
    return f"files: reads only where Python lives, writes only in its own folder (Landlock ABI {abi})"


# ---- seccomp ------------------------------------------------------------------------------------------
# System call numbers and the audit architecture of the two 64-bit targets xla_teach runs on.
_SYSCALLS = {
    "x86_64": {"arch": 0xC000003E, "clone": 56, "fork": 57, "vfork": 58, "execve": 59, "execveat": 322,
               "clone3": 435, "socket": 41},
    "aarch64": {"arch": 0xC00000B7, "clone": 220, "execve": 221, "execveat": 281, "clone3": 435, "socket": 198},
}
_CLONE_THREAD = 0x00010000
_AF_UNIX = 1
_RET_ALLOW, _RET_ERRNO = 0x7FFF0000, 0x00050000
_EPERM, _ENOSYS = 1, 38
_LD_W_ABS, _JEQ, _JSET, _RET = 0x20, 0x15, 0x45, 0x06


def _seccomp_program(numbers: dict[str, int]) -> list[tuple[int, int, int, int]]:
    """The BPF filter, as (code, jump if true, jump if false, constant) instructions.

    It reads ``seccomp_data``: the architecture at offset 4, the call number at 0, the first
    argument's low 32 bits at 16 (``clone``'s flags, ``socket``'s family)."""
    deny = [n for n in ("fork", "vfork", "execve", "execveat") if n in numbers]
    prog: list[tuple[int, int, int, int]] = [(_LD_W_ABS, 0, 0, 4), (_JEQ, 1, 0, numbers["arch"]),
                                              (_RET, 0, 0, _RET_ERRNO | _EPERM), (_LD_W_ABS, 0, 0, 0)]
    # Each denied call: "if nr == N return EPERM".
    for name in deny:
        prog += [(_JEQ, 0, 1, numbers[name]), (_RET, 0, 0, _RET_ERRNO | _EPERM)]
    prog += [(_JEQ, 0, 1, numbers["clone3"]), (_RET, 0, 0, _RET_ERRNO | _ENOSYS)]  # libc falls back to clone
    # clone: allowed only for a thread (CLONE_THREAD in its flags).
    prog += [(_JEQ, 0, 4, numbers["clone"]), (_LD_W_ABS, 0, 0, 16), (_JSET, 1, 0, _CLONE_THREAD),
             (_RET, 0, 0, _RET_ERRNO | _EPERM), (_RET, 0, 0, _RET_ALLOW)]
    # socket: only AF_UNIX.
    prog += [(_JEQ, 0, 4, numbers["socket"]), (_LD_W_ABS, 0, 0, 16), (_JEQ, 1, 0, _AF_UNIX),
             (_RET, 0, 0, _RET_ERRNO | _EPERM), (_RET, 0, 0, _RET_ALLOW)]
    prog += [(_RET, 0, 0, _RET_ALLOW)]
    return prog


def forbid_processes_and_network() -> str:
    """seccomp: no new processes, no programs, no sockets but Unix ones. Returns a report line."""
    numbers = _SYSCALLS.get(platform.machine().lower())
    if numbers is None:
        return f"no seccomp filter for {platform.machine()}: forks and network are not blocked"
    program = _seccomp_program(numbers)
    filters = b"".join(struct.pack("=HBBI", *instruction) for instruction in program)
    buffer = ctypes.create_string_buffer(filters)

    class SockFprog(ctypes.Structure):
        _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]

    fprog = SockFprog(len(program), ctypes.addressof(buffer))
    if _libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        return "cannot set no_new_privs: forks and network are not blocked"
    if _libc.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.byref(fprog), 0, 0) != 0:
        return f"seccomp refused the filter ({os.strerror(ctypes.get_errno())}): forks and network are not blocked"
    return "no new processes, programs or network sockets (seccomp)"
