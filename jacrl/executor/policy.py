"""The system-call policy of every job: a deny-by-default seccomp filter built with libseccomp
(through `pyseccomp`, a ctypes binding of Debian's `libseccomp2`), compiled once here, in the
client, to classic BPF that each job installs on itself before any of the program's code runs
(`child.install_policy`).

Only the calls in ALLOWED (and, for those whose arguments decide it, ALLOWED_IF) pass; every other
call fails with EPERM, and clone3 with ENOSYS, so that glibc falls back to clone, whose flags the
filter can see. The set is what a job of the warm fork server makes (strace of every gold answer
and every empty-body template of data/ and learnable/data/, error paths, threads, asyncio: 24
distinct calls) and what Python needs around it (signal returns, thread exit, files in the job's
own tmpfs), each with why it is needed and why it reaches nothing another job can see
(docs/threat-model.md says the same as a table). EPERM, not a kill: Python and glibc treat a
refused call as an error they report or work around (rseq, statx, clone3), and the program fails
as a runtime error naming what it tried, instead of dying of SIGSYS with no trace.
"""

from __future__ import annotations

import errno
import sys
import tempfile

# Allowed whatever their arguments: name -> (why a job needs it, why it cannot reach state another
# job sees). A job's writable files are its own tmpfs (/tmp, /var/tmp); everything else it sees is
# read-only, and its pid, ipc, net, user and mount namespaces are its own (child.py).
OWN_FILES = "paths resolve in its own mount namespace: writes land only in its own tmpfs"
OWN_FDS = "acts on its own descriptors only"
OWN_MEMORY = "its own address space, inside RLIMIT_AS"
OWN_PROCESS = "its own process, threads or signal state (its own pid namespace)"
ALLOWED = {
    # files: Python's imports, open(), os.* on its own tmpfs
    "read": ("all input", OWN_FDS),
    "write": ("all output", OWN_FDS),
    "readv": ("buffered I/O", OWN_FDS),
    "writev": ("buffered I/O", OWN_FDS),
    "pread64": ("os.pread, zipimport", OWN_FDS),
    "pwrite64": ("os.pwrite", OWN_FDS),
    "preadv": ("os.preadv", OWN_FDS),
    "pwritev": ("os.pwritev", OWN_FDS),
    "lseek": ("file objects' tell/seek", OWN_FDS),
    "close": ("every file", OWN_FDS),
    "close_range": ("os.closerange", OWN_FDS),
    "dup": ("os.dup", OWN_FDS),
    "dup2": ("os.dup2", OWN_FDS),
    "dup3": ("os.dup2(inheritable=False)", OWN_FDS),
    "open": ("open() (legacy number)", OWN_FILES),
    "openat": ("open(), imports", OWN_FILES),
    "stat": ("os.stat (legacy number)", OWN_FILES),
    "lstat": ("os.lstat (legacy number)", OWN_FILES),
    "fstat": ("os.fstat", OWN_FDS),
    "newfstatat": ("os.stat, the import system", OWN_FILES),
    "statx": ("os.stat on newer glibc", OWN_FILES),
    "access": ("os.access (legacy number)", OWN_FILES),
    "faccessat": ("os.access", OWN_FILES),
    "faccessat2": ("os.access", OWN_FILES),
    "readlink": ("os.readlink, realpath", OWN_FILES),
    "readlinkat": ("os.readlink", OWN_FILES),
    "getdents64": ("os.listdir, os.scandir, the import system", OWN_FDS),
    "getcwd": ("os.getcwd, jaclang's paths", OWN_PROCESS),
    "chdir": ("os.chdir", OWN_FILES),
    "fchdir": ("os.fchdir", OWN_FDS),
    "mkdir": ("os.mkdir (legacy number)", OWN_FILES),
    "mkdirat": ("os.mkdir", OWN_FILES),
    "rmdir": ("os.rmdir", OWN_FILES),
    "unlink": ("os.unlink (legacy number)", OWN_FILES),
    "unlinkat": ("os.unlink", OWN_FILES),
    "rename": ("os.rename (legacy number)", OWN_FILES),
    "renameat": ("os.rename", OWN_FILES),
    "renameat2": ("os.rename", OWN_FILES),
    "symlink": ("os.symlink (legacy number)", OWN_FILES),
    "symlinkat": ("os.symlink", OWN_FILES),
    "link": ("os.link (legacy number)", OWN_FILES),
    "linkat": ("os.link", OWN_FILES),
    "ftruncate": ("file truncate()", OWN_FDS),
    "truncate": ("os.truncate", OWN_FILES),
    "fsync": ("os.fsync (a no-op on tmpfs)", OWN_FDS),
    "fdatasync": ("os.fdatasync, sqlite (a no-op on tmpfs)", OWN_FDS),
    "chmod": ("os.chmod (legacy number)", OWN_FILES),
    "fchmod": ("os.fchmod", OWN_FDS),
    "fchmodat": ("os.chmod", OWN_FILES),
    "utimensat": ("os.utime", OWN_FILES),
    "umask": ("os.umask", OWN_PROCESS),
    # waiting on its own descriptors: asyncio, selectors, subprocess-free sleeps
    "select": ("select.select", OWN_FDS),
    "pselect6": ("select.select", OWN_FDS),
    "poll": ("select.poll", OWN_FDS),
    "ppoll": ("select.poll", OWN_FDS),
    "epoll_create": ("selectors (legacy number)", OWN_FDS),
    "epoll_create1": ("asyncio's event loop", OWN_FDS),
    "epoll_ctl": ("asyncio's event loop", OWN_FDS),
    "epoll_wait": ("asyncio's event loop", OWN_FDS),
    "epoll_pwait": ("asyncio's event loop", OWN_FDS),
    "epoll_pwait2": ("asyncio's event loop", OWN_FDS),
    # unix sockets (socket/socketpair are filtered to AF_UNIX below): asyncio's self-pipe; the
    # abstract namespace is per net namespace and every bindable path is in its own tmpfs
    "bind": ("unix sockets", "its own net namespace and tmpfs"),
    "listen": ("unix sockets", "its own net namespace and tmpfs"),
    "accept": ("unix sockets", "its own net namespace and tmpfs"),
    "accept4": ("unix sockets", "its own net namespace and tmpfs"),
    "connect": ("unix sockets", "its own net namespace and tmpfs"),
    "getsockname": ("asyncio's self-pipe", OWN_FDS),
    "getpeername": ("unix sockets", OWN_FDS),
    "getsockopt": ("unix sockets", OWN_FDS),
    "setsockopt": ("unix sockets", OWN_FDS),
    "shutdown": ("unix sockets", OWN_FDS),
    "sendto": ("socket.send (asyncio)", OWN_FDS + " (sendmsg, which passes descriptors: no)"),
    "recvfrom": ("socket.recv (asyncio)", OWN_FDS),
    "recvmsg": ("socket.recvmsg", OWN_FDS + " (nothing can send it a descriptor)"),
    # memory (madvise is filtered below)
    "brk": ("malloc", OWN_MEMORY),
    "mmap": ("obmalloc arenas, large objects, imports of extension modules", OWN_MEMORY),
    "munmap": ("freeing them", OWN_MEMORY),
    "mremap": ("realloc of large blocks", OWN_MEMORY),
    "mprotect": ("thread stacks' guard pages, the dynamic loader", OWN_MEMORY),
    # threads (clone is filtered below), futexes (filtered below), signals, time
    "set_robust_list": ("every new thread (glibc)", OWN_PROCESS),
    "set_tid_address": ("every new thread (glibc)", OWN_PROCESS),
    "rseq": ("every new thread (glibc)", OWN_PROCESS),
    "sched_yield": ("lock hand-offs", OWN_PROCESS),
    "sched_getaffinity": ("os.cpu_count", OWN_PROCESS),
    "exit": ("a thread's end", OWN_PROCESS),
    "exit_group": ("the job's end", OWN_PROCESS),
    "rt_sigaction": ("signal.signal", OWN_PROCESS),
    "rt_sigprocmask": ("signal masks, thread start", OWN_PROCESS),
    "rt_sigreturn": ("the return from any signal handler", OWN_PROCESS),
    "rt_sigpending": ("signal.sigpending", OWN_PROCESS),
    "rt_sigsuspend": ("signal.pause", OWN_PROCESS),
    "rt_sigtimedwait": ("signal.sigtimedwait", OWN_PROCESS),
    "sigaltstack": ("faulthandler", OWN_PROCESS),
    "restart_syscall": ("a sleep interrupted by a signal", OWN_PROCESS),
    "kill": ("os.kill of itself: acts as under `jac run`", OWN_PROCESS),
    "tgkill": ("signal.pthread_kill, raise()", OWN_PROCESS),
    "tkill": ("raise() (older glibc)", OWN_PROCESS),
    "alarm": ("signal.alarm", OWN_PROCESS),
    "setitimer": ("signal.setitimer", OWN_PROCESS),
    "getitimer": ("signal.getitimer", OWN_PROCESS),
    "nanosleep": ("time.sleep", "waits; reads no shared state"),
    "clock_nanosleep": ("time.sleep", "waits; reads no shared state"),
    "clock_gettime": ("time.* (when the vDSO does not answer)", "the clocks every process reads"),
    "clock_getres": ("time.get_clock_info", "a constant"),
    "gettimeofday": ("time.time (when the vDSO does not answer)", "the wall clock"),
    "time": ("time(2) (legacy number)", "the wall clock"),
    "getrandom": ("hash seeds, random, uuid4", "fresh random bytes: nothing to read back"),
    # who am I: constants of its own namespaces
    "getpid": ("os.getpid", OWN_PROCESS),
    "getppid": ("os.getppid", OWN_PROCESS),
    "gettid": ("threading.get_native_id", OWN_PROCESS),
    "getuid": ("os.getuid", "the sandbox uid, the same for every job"),
    "geteuid": ("os.geteuid", "the sandbox uid, the same for every job"),
    "getgid": ("os.getgid", "the sandbox gid, the same for every job"),
    "getegid": ("os.getegid", "the sandbox gid, the same for every job"),
    "getresuid": ("os.getresuid", "the sandbox uid, the same for every job"),
    "getresgid": ("os.getresgid", "the sandbox gid, the same for every job"),
    "getgroups": ("os.getgroups", "none"),
    "getpgrp": ("os.getpgrp", OWN_PROCESS),
    "getpgid": ("os.getpgid", OWN_PROCESS),
    "getsid": ("os.getsid", OWN_PROCESS),
    "uname": ("platform, os.uname", "the server's uts namespace: fixed, no job can set it"),
    "getrlimit": ("resource.getrlimit (legacy number)", OWN_PROCESS),
    "getrusage": ("resource.getrusage, time.process_time", OWN_PROCESS + ": it has no children"),
}

# Allowed only with these arguments: name -> (rules, each a tuple of comparisons that must all
# hold: (arg index, op, value) or (arg index, "MASKED_EQ", mask, value); why the rest is refused).
MADV_ALLOWED = {0: "NORMAL", 4: "DONTNEED", 8: "FREE", 14: "HUGEPAGE", 15: "NOHUGEPAGE"}
F_ALLOWED = {0: "F_DUPFD", 1: "F_GETFD", 2: "F_SETFD", 3: "F_GETFL", 4: "F_SETFL", 1030: "DUPFD_CX"}
IOCTL_ALLOWED = {0x5401: "TCGETS", 0x5413: "TIOCGWINSZ", 0x5421: "FIONBIO", 0x5450: "FIONCLEX",
                 0x5451: "FIOCLEX", 0x541B: "FIONREAD"}  # fmt: skip
PR_ALLOWED = {15: "PR_SET_NAME", 16: "PR_GET_NAME", 3: "PR_GET_DUMPABLE"}
AF_UNIX = 1
RWF_NOWAIT = 0x8  # preadv2/pwritev2: only if the pages are cached (a residency probe)
FUTEX_PRIVATE = 128  # a futex of the process's own memory
FUTEX_CMD = 0x7F
FUTEX_WAITS = (0, 9)  # FUTEX_WAIT, FUTEX_WAIT_BITSET: pthread_join's wait on a thread's id
CLONE_THREAD = 0x10000
CLONE_NEW = 0x7E020000  # every CLONE_NEW* namespace flag
ALLOWED_IF = {
    "madvise": (
        [((2, "EQ", a),) for a in MADV_ALLOWED],
        "malloc's advice only; WILLNEED, COLD, PAGEOUT, POPULATE_* load or drop page-cache pages, "
        "MERGEABLE offers pages to KSM (merged across jobs, which a write's time shows)",
    ),
    "fcntl": (
        [((1, "EQ", c),) for c in F_ALLOWED],
        "descriptor flags only: locks and leases are seen by a job beside it, F_SETPIPE_SZ grows a "
        "per-user quota, F_SETOWN/F_NOTIFY reach other processes",
    ),
    "ioctl": (
        [((1, "EQ", c),) for c in IOCTL_ALLOWED],
        "isatty and non-blocking flags only: every other request is a driver's attack surface",
    ),
    "prctl": (
        [((0, "EQ", o),) for o in PR_ALLOWED],
        "thread names only: PR_SET_MEMORY_MERGE (KSM), PR_SET_MM and the rest change more",
    ),
    "socket": (
        [((0, "EQ", AF_UNIX),)],
        "unix only: its net namespace has only a down loopback, vsock reaches the host",
    ),
    "socketpair": ([((0, "EQ", AF_UNIX),)], "unix only"),
    "futex": (
        [((1, "MASKED_EQ", FUTEX_PRIVATE, FUTEX_PRIVATE),)]
        + [((1, "MASKED_EQ", FUTEX_CMD, w),) for w in FUTEX_WAITS],
        "private futexes, and waits: a shared futex on a page of a read-only file every job maps "
        "is one key for all of them, so a wake would pass a bit to a job beside it",
    ),
    "clone": (
        [((0, "MASKED_EQ", CLONE_THREAD | CLONE_NEW, CLONE_THREAD),)],
        "threads only: a new process escapes the CPU count and has its own RLIMIT_AS; no new "
        "namespace",
    ),
    "preadv2": ([((5, "MASKED_EQ", RWF_NOWAIT, 0),)], "RWF_NOWAIT probes page-cache residency"),
    "pwritev2": ([((5, "MASKED_EQ", RWF_NOWAIT, 0),)], "RWF_NOWAIT probes page-cache residency"),
    "prlimit64": (
        [((0, "EQ", 0),)],
        "its own limits only (lowering them; raising past the hard limit fails anyway)",
    ),
}

# Not in the table, so refused: named here because a red team used them or the denylist this
# replaced named them (tests/test_kernel_channels.py calls each inside a job).
REFUSED = {
    "native AIO: a page-cache residency probe, and aio-max-nr is one quota for the machine": (
        "io_setup",
        "io_submit",
        "io_getevents",
        "io_pgetevents",
        "io_destroy",
        "io_cancel",
    ),
    "extended attributes: kernel memory no limit counts": (
        "setxattr",
        "lsetxattr",
        "fsetxattr",
        "getxattr",
        "lgetxattr",
        "fgetxattr",
        "listxattr",
        "llistxattr",
        "flistxattr",
        "removexattr",
        "lremovexattr",
        "fremovexattr",
        "setxattrat",
        "getxattrat",
        "listxattrat",
        "removexattrat",
    ),
    "FIFOs and device nodes: pipes where pipe() is refused": ("mknod", "mknodat"),
    "machine-global counters (load, free memory, process count, uptime)": ("sysinfo", "times"),
    "priorities per user: setpriority(PRIO_USER) is seen by every job of the sandbox uid": (
        "setpriority",
        "getpriority",
        "ioprio_set",
        "ioprio_get",
    ),
    "the page cache": ("fadvise64", "readahead", "mincore", "cachestat", "process_madvise"),
    "memory outside the cap, IPC, kernel objects": (
        "memfd_create",
        "memfd_secret",
        "userfaultfd",
        "shmget",
        "shmat",
        "shmctl",
        "msgget",
        "msgsnd",
        "msgrcv",
        "semget",
        "semop",
        "semtimedop",
        "mq_open",
        "mq_timedsend",
        "mq_timedreceive",
        "io_uring_setup",
        "io_uring_enter",
        "io_uring_register",
        "bpf",
        "perf_event_open",
        "keyctl",
        "add_key",
        "request_key",
    ),
    "per-user counters": (
        "pipe",
        "pipe2",
        "sendmsg",
        "sendmmsg",
        "inotify_init",
        "inotify_init1",
        "fanotify_init",
        "flock",
    ),
    "processes and namespaces": ("fork", "vfork", "execve", "unshare", "setns", "ptrace"),
    "shared futexes beyond a wait": ("futex_waitv",),
    "disk-wide": ("statfs", "fstatfs", "sync", "syncfs"),
}


class PolicyUnavailable(RuntimeError):
    """libseccomp cannot be loaded here: jobs run without the syscall policy."""


def why_none() -> str | None:
    """None when the policy can be built here, else the one-line reason."""
    if not sys.platform.startswith("linux"):
        return f"no seccomp on {sys.platform}"
    try:
        import pyseccomp  # noqa: F401
    except ImportError as e:  # the module, or libseccomp.so.2 under it
        return f"no libseccomp ({e}; Debian: apt-get install libseccomp2, pip install pyseccomp)"
    return None


def build() -> bytes:
    """The policy as classic BPF (struct sock_filter[]), for `child.install_policy`."""
    why = why_none()
    if why:
        raise PolicyUnavailable(why)
    import pyseccomp as sc

    f = sc.SyscallFilter(sc.ERRNO(errno.EPERM))  # deny by default
    f.set_attr(sc.Attr.ACT_BADARCH, sc.ERRNO(errno.EPERM))  # another ABI (int 0x80, x32)
    f.set_attr(sc.Attr.CTL_OPTIMIZE, 2)  # a binary tree: a call's check is O(log n), not a list
    native = sc.Arch.NATIVE

    def known(name: str) -> bool:  # a name this architecture lacks (`open` on aarch64): skipped
        return sc.resolve_syscall(native, name) >= 0

    for name in ALLOWED:
        if known(name):
            f.add_rule(sc.ALLOW, name)
    for name, (rules, _) in ALLOWED_IF.items():
        if known(name):
            for rule in rules:
                args = [sc.Arg(i, getattr(sc, op), *vals) for i, op, *vals in rule]
                f.add_rule(sc.ALLOW, name, *args)
    f.add_rule(sc.ERRNO(errno.ENOSYS), "clone3")  # its flags are behind a pointer: glibc falls back
    with tempfile.TemporaryFile() as fh:
        f.export_bpf(fh)
        fh.seek(0)
        return fh.read()
