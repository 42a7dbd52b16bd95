"""Fencing in the process that runs a student's code: resource limits, Landlock and seccomp.

The autograder runs each submission in a child process of its own (see :mod:`sandbox`). Before
that child loads the student's file it closes the doors it will not need, with three tools the
Linux kernel offers to any process, privileged or not:

* **resource limits** (``setrlimit``): address space (memory), CPU seconds, the size of any file
  it writes, open files. Going past one ends in ``MemoryError``, ``SIGXCPU`` or ``SIGXFSZ``;
* **Landlock** (Linux 5.13+): the process gives up file-system rights for good. It may read
  only where Python, its packages and the system libraries live, and its own folder; it may
  write, create, rename or delete only inside its own folder;
* **seccomp**: a small BPF program the kernel runs on every system call, on every thread of the
  process (``SECCOMP_FILTER_FLAG_TSYNC``). It is an allow-list (:data:`ALLOWED`): files, memory,
  threads, signals to itself, time -- anything else fails. So no new process (``clone`` only of
  a thread), no program, no socket and no ``io_uring`` (no network), no namespaces, no tracing or
  signalling other processes (the grader included), no memory writable and executable at once;
* **thread count**: ``RLIMIT_NPROC`` caps how many more threads it may start (not for root).

The fences hold for every thread only if they are set while the process has one: the child's
environment sets every BLAS/OpenMP thread count to 1 before NumPy is imported
(:func:`~xla_teach.exercises.sandbox.child_environment`), and the child reports how many threads
it had when fenced. Each returns what it managed to do; where the kernel lacks a feature the
child says so and the grading report repeats it. Nothing here needs root.
"""

from __future__ import annotations

import ctypes
import os
import platform
import struct
import sys
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

try:
    import resource
except ImportError:  # Windows: no setrlimit (and the grader itself refuses to run there)
    resource = None  # type: ignore[assignment]

# Landlock, seccomp and prctl are Linux's. Elsewhere (macOS) every fence below says it is absent,
# and the report's "isolation incomplete" line lists what did not apply.
LINUX = platform.system() == "Linux"
_libc = ctypes.CDLL(None, use_errno=True) if LINUX else None
if _libc is not None:
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
    if resource is None:
        return []
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
    if _libc is None:
        return 0
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

    package = Path(__file__).resolve().parents[1]  # xla_teach/
    roots = {Path(p) for p in sysconfig.get_paths().values()}
    roots |= {Path(p) for p in site.getsitepackages()} | {Path(sys.base_prefix) / "lib"}
    roots |= {package, Path("/usr"), Path("/lib"), Path("/lib64"), Path("/etc"),
              Path("/dev"), Path("/proc/self").resolve(), Path("/proc/cpuinfo"), Path("/proc/meminfo"),
              Path("/proc/stat"), Path("/sys/devices/system/cpu"), Path("/sys/fs/cgroup")}
    roots |= set(extra)
    return sorted(p for p in roots if p.exists())


def read_rules(roots: Iterable[Path], hidden: Iterable[Path] = ()) -> list[tuple[Path, int]]:
    """(path, rights) rules that let the process read under ``roots`` except the ``hidden`` files.
    Landlock rules only add rights, so a root holding a hidden file is granted piece by piece: its
    other entries whole, and the folders on the way down only the right to list them."""
    hidden = {Path(h).resolve() for h in hidden}
    keep = {a for h in hidden for a in h.parents}  # folders that hold a hidden file, somewhere below
    rules: list[tuple[Path, int]] = []

    def grant(path: Path) -> None:
        resolved = path.resolve()
        if resolved in hidden:
            return
        if resolved not in keep:
            rules.append((path, _READ))
            return
        rules.append((path, _READ_DIR))
        for child in sorted(path.iterdir()):
            grant(child)

    for root in roots:
        grant(root)
    return rules


def restrict_files(own_folder: Path, read_also: Iterable[Path] = (), hidden: Iterable[Path] = ()) -> str:
    """Landlock: read only under :func:`readable_roots` (never the ``hidden`` files), write only
    under ``own_folder``.

    Returns a line for the report: what is enforced, or why nothing is."""
    abi = landlock_abi()
    if abi < 1:
        where = "this kernel" if LINUX else platform.system() or "this system"
        return f"no Landlock in {where}: file access is limited only by the user's rights"
    handled = _READ | _WRITE_FILE | _REMOVE_DIR | _REMOVE_FILE | _MAKE_CHAR | _MAKE_DIR | _MAKE_REG | _MAKE_SOCK \
        | _MAKE_FIFO | _MAKE_BLOCK | _MAKE_SYM | (_REFER if abi >= 2 else 0) | (_TRUNCATE if abi >= 3 else 0)
    attr = struct.pack("=Q", handled)  # struct landlock_ruleset_attr (handled_access_fs only)
    ruleset = _libc.syscall(_SYS_LANDLOCK_CREATE_RULESET, ctypes.c_char_p(attr), ctypes.c_size_t(len(attr)),
                            ctypes.c_uint32(0))
    if ruleset < 0:
        return f"Landlock refused a ruleset ({os.strerror(ctypes.get_errno())}): file access not confined"
    try:
        hidden = list(hidden)
        rules = read_rules(readable_roots(read_also), hidden) + [(own_folder, handled),
                                                                 (Path("/dev/null"), _READ | _WRITE_FILE)]
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
    withheld = f" (except the source of what the exercise asks for: {len(hidden)} file(s))" if hidden else ""
    return f"files: reads only where Python lives{withheld}, writes only in its own folder (Landlock ABI {abi})"


# ---- seccomp: an allow-list ----------------------------------------------------------------------------
# What the child may still ask the kernel for once the student's code runs (the imports are done
# by then): files (which Landlock narrows to its folder), memory, threads, signals to itself,
# time, and its own pipes. Every other call fails with ENOSYS ("no such call", which libraries
# handle), a few named ones with EPERM: no new processes or programs, no sockets, no io_uring
# (whose queues would carry socket calls past this filter), no namespaces, no reading or
# tracing other processes.
ALLOWED = (
    # files and descriptors
    "read", "write", "readv", "writev", "pread64", "pwrite64", "preadv", "pwritev", "preadv2", "pwritev2",
    "open", "openat", "openat2", "close", "close_range", "lseek", "fstat", "stat", "lstat", "newfstatat", "statx",
    "fstatfs", "statfs", "access", "faccessat", "faccessat2", "readlink", "readlinkat", "getdents64", "getcwd",
    "chdir", "fchdir", "mkdir", "mkdirat", "rmdir", "unlink", "unlinkat", "rename", "renameat", "renameat2",
    "link", "linkat", "symlink", "symlinkat", "chmod", "fchmod", "fchmodat", "truncate", "ftruncate",
    "fallocate", "fsync", "fdatasync", "fcntl", "dup", "dup2", "dup3", "pipe", "pipe2", "ioctl", "flock",
    "fadvise64", "utimensat", "umask", "poll", "ppoll", "select", "pselect6", "epoll_create1", "epoll_ctl",
    "epoll_wait", "epoll_pwait", "eventfd2", "memfd_create",
    # memory (mmap, mprotect: never writable and executable at once, see below)
    "munmap", "mremap", "madvise", "brk", "mlock", "munlock", "mincore", "msync",
    # threads
    "futex", "set_robust_list", "get_robust_list", "rseq", "set_tid_address", "sched_yield",
    "sched_getaffinity", "getcpu", "membarrier", "exit", "exit_group",
    # signals, timers, time
    "rt_sigaction", "rt_sigprocmask", "rt_sigreturn", "rt_sigsuspend", "rt_sigpending", "rt_sigtimedwait",
    "sigaltstack", "restart_syscall", "setitimer", "getitimer", "alarm", "timer_create", "timer_settime",
    "timer_gettime", "timer_delete", "timer_getoverrun", "nanosleep", "clock_nanosleep", "clock_gettime",
    "clock_getres", "gettimeofday", "time",
    # about itself
    "getpid", "gettid", "getppid", "getuid", "geteuid", "getgid", "getegid", "getgroups", "getresuid",
    "getresgid", "getpgrp", "getpgid", "getsid", "getrlimit", "prlimit64", "getrusage", "times", "uname",
    "sysinfo", "getrandom", "prctl", "arch_prctl",
)
DENIED = ("fork", "vfork", "execve", "execveat", "socket", "socketpair", "connect", "bind", "listen", "accept",
          "accept4", "io_uring_setup", "io_uring_enter", "io_uring_register", "unshare", "setns", "ptrace",
          "process_vm_readv", "process_vm_writev", "pidfd_open", "pidfd_send_signal", "pidfd_getfd", "tkill",
          "kcmp", "userfaultfd", "perf_event_open", "bpf", "mount", "keyctl", "add_key", "request_key")
SIGNALS_TO = ("kill", "tgkill", "rt_sigqueueinfo", "rt_tgsigqueueinfo")  # allowed only to this process
PROTECTED = ("mmap", "mprotect", "pkey_mprotect")  # never PROT_WRITE and PROT_EXEC together
_ARCH = {"x86_64": 0xC000003E, "aarch64": 0xC00000B7}
_SECCOMP_SYSCALL = {"x86_64": 317, "aarch64": 277}
_CLONE_THREAD = 0x00010000
_PROT_WRITE_EXEC = 0x2 | 0x4
_RET_ALLOW, _RET_ERRNO = 0x7FFF0000, 0x00050000
_EPERM, _ENOSYS = 1, 38
_LD_W_ABS, _JEQ, _JSET, _RET, _AND = 0x20, 0x15, 0x45, 0x06, 0x54
_SECCOMP_SET_MODE_FILTER, _SECCOMP_FILTER_FLAG_TSYNC = 1, 1


def seccomp_names() -> set[str]:
    """Every system call the filter names (scripts/gen_syscall_numbers.py writes their numbers)."""
    return set(ALLOWED) | set(DENIED) | set(SIGNALS_TO) | set(PROTECTED) | {"clone", "clone3"}


def seccomp_program(numbers: dict[str, int], pid: int) -> list[tuple[int, int, int, int]]:
    """The BPF filter, as (code, jump if true, jump if false, constant) instructions.

    It reads ``seccomp_data``: the architecture at offset 4, the call number at 0, the low 32
    bits of argument k at 16 + 8k (``clone``'s flags, the pid a signal goes to, ``mmap``'s
    protection). ``pid`` is the process being fenced: signals may go to it (or its group, 0)."""
    allow, deny = (_RET, 0, 0, _RET_ALLOW), (_RET, 0, 0, _RET_ERRNO | _EPERM)
    prog: list[tuple[int, int, int, int]] = [(_LD_W_ABS, 0, 0, 4), (_JEQ, 1, 0, numbers["arch"]), deny,
                                              (_LD_W_ABS, 0, 0, 0)]
    for name in DENIED:
        if name in numbers:
            prog += [(_JEQ, 0, 1, numbers[name]), deny]
    prog += [(_JEQ, 0, 1, numbers["clone3"]), (_RET, 0, 0, _RET_ERRNO | _ENOSYS)]  # libc falls back to clone
    # clone: a thread only (CLONE_THREAD in its flags), never a process.
    prog += [(_JEQ, 0, 4, numbers["clone"]), (_LD_W_ABS, 0, 0, 16), (_JSET, 1, 0, _CLONE_THREAD), deny, allow]
    # Signals: to this process (or its own group: it leads it) only -- not the grader, not kill(-1).
    for name in SIGNALS_TO:
        if name in numbers:
            prog += [(_JEQ, 0, 6, numbers[name]), (_LD_W_ABS, 0, 0, 16), (_JEQ, 3, 0, pid), (_JEQ, 2, 0, 0),
                     (_JEQ, 1, 0, (-pid) & 0xFFFFFFFF), deny, allow]
    # Memory that is writable and executable at once would let code rewrite itself past any check.
    for name in PROTECTED:
        if name in numbers:
            prog += [(_JEQ, 0, 5, numbers[name]), (_LD_W_ABS, 0, 0, 32), (_AND, 0, 0, _PROT_WRITE_EXEC),
                     (_JEQ, 1, 0, _PROT_WRITE_EXEC), allow, deny]
    for name in ALLOWED:
        if name in numbers:
            prog += [(_JEQ, 0, 1, numbers[name]), allow]
    prog += [(_RET, 0, 0, _RET_ERRNO | _ENOSYS)]
    return prog


def threads_now() -> int:
    """How many threads this process has (a fence set up now must hold for all of them)."""
    try:
        return len(os.listdir("/proc/self/task"))
    except OSError:
        return 0


def forbid_processes_and_network() -> str:
    """seccomp, on every thread of the process at once (TSYNC): only the calls of :data:`ALLOWED`
    (memory never writable and executable at once, signals only to itself, threads but no
    processes); no programs, sockets, io_uring, namespaces or tracing. Returns a report line."""
    from xla_teach.exercises.syscall_numbers import NUMBERS

    machine = platform.machine().lower()
    if _libc is None:
        return f"no seccomp on {platform.system() or 'this system'}: forks and network are not blocked"
    if machine not in NUMBERS:
        return f"no seccomp filter for {machine}: forks and network are not blocked"
    numbers = {**NUMBERS[machine], "arch": _ARCH[machine]}
    program = seccomp_program(numbers, os.getpid())
    filters = b"".join(struct.pack("=HBBI", *instruction) for instruction in program)
    buffer = ctypes.create_string_buffer(filters)

    class SockFprog(ctypes.Structure):
        _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]

    fprog = SockFprog(len(program), ctypes.addressof(buffer))
    if _libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        return "cannot set no_new_privs: forks and network are not blocked"
    result = _libc.syscall(_SECCOMP_SYSCALL[machine], _SECCOMP_SET_MODE_FILTER, _SECCOMP_FILTER_FLAG_TSYNC,
                           ctypes.byref(fprog))
    if result != 0:
        return (f"seccomp refused the filter ({os.strerror(ctypes.get_errno()) if result < 0 else f'thread {result}'}"
                "): forks and network are not blocked")
    return (f"system calls: an allow-list of {sum(n in numbers for n in ALLOWED)} on every thread (seccomp, TSYNC): "
            "no processes, programs, sockets, io_uring or namespaces; signals only to itself; no memory both "
            "writable and executable")


def limit_threads(extra: int = 256) -> str:
    """RLIMIT_NPROC: at most ``extra`` more threads and processes than the user runs now (a thread
    bomb would otherwise exhaust the machine's PIDs). The kernel does not apply it to root."""
    if resource is None or not LINUX:
        return f"threads: not limited on {platform.system() or 'this system'} (the count needs Linux's /proc)"
    if os.geteuid() == 0:
        return "not enforced: the thread limit (RLIMIT_NPROC) does not apply to root; run the grader as a user"
    uid, count = os.geteuid(), 0
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            try:
                if entry.stat().st_uid == uid:
                    count += len(os.listdir(f"/proc/{entry.name}/task"))
            except OSError:
                continue
    limit = count + extra
    _, hard = resource.getrlimit(resource.RLIMIT_NPROC)
    if hard != resource.RLIM_INFINITY:
        limit = min(limit, hard)
    resource.setrlimit(resource.RLIMIT_NPROC, (limit, limit))
    return f"threads: at most {extra} more (RLIMIT_NPROC)"
