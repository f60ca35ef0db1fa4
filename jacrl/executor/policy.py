"""The system-call policy of every job: a seccomp filter built with libseccomp (through
`pyseccomp`, a ctypes binding of Debian's `libseccomp2`), compiled once here, in the client, to
classic BPF that each job installs on itself before any of the program's code runs
(`child.install_policy`).

It denies what no Jac program under test needs and what would make the kernel's own state a
channel between jobs (docs/threat-model.md has the table: each entry, why, what a program that
calls it gets). A denied call fails with EPERM (clone3 with ENOSYS, so that glibc falls back to
clone, whose flags a filter can see); nothing is killed. jaclang itself makes none of these calls
(notes/jac-syscalls.md; every task's gold runs the same under the policy, tests/test_policy.py).
"""

from __future__ import annotations

import errno
import sys
import tempfile

# madvise advice that reads file pages in, or drops or pages them out (page-cache residency):
# WILLNEED, REMOVE, COLD, PAGEOUT, POPULATE_READ, POPULATE_WRITE; and MERGEABLE, which offers pages
# to KSM, whose merging across processes a write's time reveals (prctl's PR_SET_MEMORY_MERGE too)
MADVICE = (3, 9, 12, 20, 21, 22, 23)
PR_SET_MEMORY_MERGE = 67
# socket families a job may open: unix, IPv4, IPv6 (in its own net namespace) and netlink (glibc's
# getaddrinfo); every other (vsock reaches the host, whatever the namespace) is refused
SOCKET_FAMILIES = (1, 2, 10, 16)
AF_MAX = 46
RWF_NOWAIT = 0x8  # preadv2/pwritev2: only if the pages are cached (a residency probe)
F_SETPIPE_SZ = 1031  # fcntl: grow a pipe into the per-user pipe-buffer quota
# fcntl: record locks (GETLK SETLK SETLKW, their OFD forms), leases and directory notices: a lock
# on a file every job can read is seen by another job (flock too)
F_LOCKS = (5, 6, 7, 36, 37, 38, 1024, 1025, 1026)
CLONE_THREAD = 0x10000
CLONE_NEW = {  # namespace flags: never with a thread
    "CLONE_NEWNS": 0x20000,
    "CLONE_NEWCGROUP": 0x2000000,
    "CLONE_NEWUTS": 0x4000000,
    "CLONE_NEWIPC": 0x8000000,
    "CLONE_NEWUSER": 0x10000000,
    "CLONE_NEWPID": 0x20000000,
    "CLONE_NEWNET": 0x40000000,
}

# syscall names denied whatever their arguments, by class (a name this kernel's architecture
# lacks, e.g. `fork` on aarch64, is skipped)
DENIED = {
    "page cache": (
        "fadvise64",
        "fadvise64_64",
        "readahead",
        "mincore",
        "cachestat",
        "process_madvise",
    ),  # fmt: skip
    "SysV IPC": (
        "shmget",
        "shmat",
        "shmdt",
        "shmctl",
        "msgget",
        "msgsnd",
        "msgrcv",
        "msgctl",
        "semget",
        "semop",
        "semtimedop",
        "semctl",
        "ipc",
    ),  # fmt: skip
    "POSIX message queues": (
        "mq_open",
        "mq_unlink",
        "mq_timedsend",
        "mq_timedreceive",
        "mq_notify",
        "mq_getsetattr",
    ),  # fmt: skip
    "memory outside the address-space cap": ("memfd_create", "memfd_secret", "userfaultfd"),
    "kernel interfaces": (
        "io_uring_setup",
        "io_uring_enter",
        "io_uring_register",
        "bpf",
        "perf_event_open",
    ),  # fmt: skip
    "keys": ("keyctl", "add_key", "request_key"),
    # pipes' buffers are counted per user (pipe-user-pages-soft) and sit outside the memory cap;
    # descriptors in flight over a unix socket (sendmsg's SCM_RIGHTS) are counted per user
    "per-user counters": (
        "inotify_init",
        "inotify_init1",
        "fanotify_init",
        "pipe",
        "pipe2",
        "sendmsg",
        "sendmmsg",
    ),  # fmt: skip
    "namespaces": ("unshare", "setns"),
    "file locks": ("flock",),
    "processes": ("fork", "vfork"),
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

    deny = sc.ERRNO(errno.EPERM)
    f = sc.SyscallFilter(sc.ALLOW)
    f.set_attr(sc.Attr.ACT_BADARCH, deny)  # another ABI's calls (int 0x80, x32): refused
    native = sc.Arch.NATIVE

    def rule(action: int, name: str, *args) -> None:
        if sc.resolve_syscall(native, name) >= 0:
            f.add_rule(action, name, *args)

    for names in DENIED.values():
        for name in names:
            rule(deny, name)
    for advice in MADVICE:
        rule(deny, "madvise", sc.Arg(2, sc.EQ, advice))
    for name in ("preadv2", "pwritev2"):
        rule(deny, name, sc.Arg(5, sc.MASKED_EQ, RWF_NOWAIT, RWF_NOWAIT))
    rule(deny, "prctl", sc.Arg(0, sc.EQ, PR_SET_MEMORY_MERGE))
    for family in range(AF_MAX):
        if family not in SOCKET_FAMILIES:
            rule(deny, "socket", sc.Arg(0, sc.EQ, family))
    for cmd in (F_SETPIPE_SZ, *F_LOCKS):
        rule(deny, "fcntl", sc.Arg(1, sc.EQ, cmd))
    # threads only: a clone without CLONE_THREAD is a new process (fork), and no namespace flag
    rule(deny, "clone", sc.Arg(0, sc.MASKED_EQ, CLONE_THREAD, 0))
    for flag in CLONE_NEW.values():
        rule(deny, "clone", sc.Arg(0, sc.MASKED_EQ, flag, flag))
    rule(sc.ERRNO(errno.ENOSYS), "clone3")  # its flags are behind a pointer: glibc falls back
    with tempfile.TemporaryFile() as fh:
        f.export_bpf(fh)
        fh.seek(0)
        return fh.read()
