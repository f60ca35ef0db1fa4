"""The job's syscall policy is an allowlist (`jacrl.executor.policy`): inside a sandboxed job, calls
outside its table are refused with EPERM (the ones red teams used, and a number no table lists);
where an argument decides, the good argument passes and the bad one is refused; the machine-wide
counters a job could read or move are closed; and a job sees only the packages jaclang needs.
(Every gold of data/ and learnable/data/ runs exact under it: tests/test_timeouts.py.)"""

from __future__ import annotations

import base64
import json

import pytest

from jacrl.executor import Executor, policy

# Plain Python, run by `exec` from a Jac program: each check's errno name, or "ok".
PROBE = r"""
import ctypes, errno, fcntl, json, mmap, os, platform, socket, struct, threading
libc = ctypes.CDLL(None, use_errno=True)
NR = {"x86_64": dict(io_setup=206, sysinfo=99, times=100, getpriority=140, setpriority=141,
                     statfs=137, futex=202, prctl=157, prlimit64=302, unlisted=1000,
                     ioctl=16),
      "aarch64": dict(io_setup=0, sysinfo=179, times=153, getpriority=141, setpriority=140,
                      statfs=43, futex=98, prctl=167, prlimit64=261, unlisted=1000,
                      ioctl=29)}[platform.machine()]
out = {}
def check(name, fn):
    try:
        ret = fn()
        if ret == -1:
            raise OSError(ctypes.get_errno(), "")
        out[name] = "ok"
    except OSError as e:
        out[name] = errno.errorcode.get(e.errno, str(e.errno))
def sc(*args):
    return libc.syscall(*[ctypes.c_long(a) if isinstance(a, int) else a for a in args])
buf = ctypes.create_string_buffer(512)
with open("/tmp/f", "w") as fh:
    fh.write("x" * 8192)
fd = os.open("/tmp/f", os.O_RDWR)
# calls outside the table
check("io_setup", lambda: sc(NR["io_setup"], 1, ctypes.byref(ctypes.c_ulong(0))))
check("setxattr", lambda: os.setxattr("/tmp/f", "user.k", b"v"))
check("mkfifo", lambda: os.mkfifo("/tmp/fifo"))
check("sysinfo", lambda: sc(NR["sysinfo"], buf))
check("times", lambda: sc(NR["times"], buf))
check("setpriority user", lambda: os.setpriority(os.PRIO_USER, 0, 5))
check("statfs", lambda: os.statvfs("/"))
check("unlisted", lambda: sc(NR["unlisted"], 0))
check("fork", lambda: os.fork())
check("execve", lambda: os.execv("/bin/true", ["true"]))
check("pipe", lambda: os.pipe())
# argument filters: the good argument, then the bad one
m = mmap.mmap(-1, 4 * mmap.PAGESIZE)
check("madvise DONTNEED", lambda: m.madvise(mmap.MADV_DONTNEED))
check("madvise WILLNEED", lambda: m.madvise(mmap.MADV_WILLNEED))
check("madvise MERGEABLE", lambda: m.madvise(12))
check("fcntl F_GETFL", lambda: fcntl.fcntl(fd, fcntl.F_GETFL))
check("fcntl F_SETLK", lambda: fcntl.lockf(fd, fcntl.LOCK_SH | fcntl.LOCK_NB))
check("fcntl F_SETPIPE_SZ", lambda: fcntl.fcntl(fd, 1031, 1 << 20))
check("ioctl FIONBIO", lambda: sc(NR["ioctl"], fd, 0x5421, ctypes.byref(ctypes.c_int(0))))
check("ioctl TIOCSTI", lambda: sc(NR["ioctl"], 0, 0x5412, ctypes.byref(ctypes.c_char(b"x"))))
check("prctl PR_GET_NAME", lambda: sc(NR["prctl"], 16, buf, 0, 0, 0))
check("prctl PR_SET_MEMORY_MERGE", lambda: sc(NR["prctl"], 67, 1, 0, 0, 0))
check("socket unix", lambda: socket.socket(socket.AF_UNIX).close())
check("socket inet", lambda: socket.socket(socket.AF_INET).close())
word = ctypes.c_int(0)
check("futex private wake", lambda: sc(NR["futex"], ctypes.byref(word), 1 | 128, 1, 0, 0, 0))
check("futex shared wake", lambda: sc(NR["futex"], ctypes.byref(word), 1, 1, 0, 0, 0))
check("thread", lambda: (lambda t: (t.start(), t.join()))(threading.Thread(target=len, args=[""])))
check("preadv2", lambda: os.preadv(fd, [bytearray(8)], 0, os.RWF_DSYNC))
check("preadv2 RWF_NOWAIT", lambda: os.preadv(fd, [bytearray(8)], 0, os.RWF_NOWAIT))
check("prlimit own", lambda: sc(NR["prlimit64"], 0, 7, 0, buf))
check("prlimit pid 1", lambda: sc(NR["prlimit64"], 1, 7, 0, buf))
# machine-wide counters a job could read: /proc and /sys are not there
for p in ("/proc/loadavg", "/proc/meminfo", "/proc/stat", "/proc/uptime", "/proc/self/stat",
          "/sys/fs/cgroup", "/sys/kernel"):
    check(p, lambda: os.stat(p))
# packages jaclang does not need are not shown
for n in ("numpy", "pygments", "mlx", "jacrl"):
    try:
        __import__(n)
        out["import " + n] = "ok"
    except ImportError:
        out["import " + n] = "ImportError"
print(json.dumps(out))
"""


def program(code: str) -> str:
    b64 = base64.b64encode(code.encode()).decode()
    return f'with entry {{ exec(__import__("base64").b64decode("{b64}").decode()); }}'


@pytest.fixture(scope="module")
def seen():
    with Executor() as ex:
        if ex.isolation != "sandbox" or ex.syscall_policy != "seccomp":
            pytest.skip(f"no sandboxed policy here ({ex.isolation}, {ex.syscall_policy})")
        (v,) = ex.run_many([program(PROBE)], timeout=5)
    assert v.stdout, v
    return json.loads(v.stdout)


REFUSED = ["io_setup", "setxattr", "mkfifo", "sysinfo", "times", "setpriority user", "statfs",
           "unlisted", "fork", "execve", "pipe"]  # fmt: skip


def test_calls_outside_the_table_are_refused(seen):
    """Native AIO (a residency probe and a machine-wide quota), xattrs (uncounted kernel memory),
    FIFOs (pipes where pipe() is refused), sysinfo and times (machine-wide counters), per-user
    priorities, statfs, and a syscall number no table lists: EPERM, each."""
    assert {n: seen[n] for n in REFUSED} == dict.fromkeys(REFUSED, "EPERM")


def test_argument_filters_pass_the_good_argument_and_refuse_the_bad(seen):
    pairs = {
        "madvise DONTNEED": "madvise WILLNEED",
        "fcntl F_GETFL": "fcntl F_SETLK",
        "ioctl FIONBIO": "ioctl TIOCSTI",
        "prctl PR_GET_NAME": "prctl PR_SET_MEMORY_MERGE",
        "socket unix": "socket inet",
        "futex private wake": "futex shared wake",
        "thread": "fork",
        "preadv2": "preadv2 RWF_NOWAIT",
        "prlimit own": "prlimit pid 1",
    }
    assert {good: seen[good] for good in pairs} == dict.fromkeys(pairs, "ok")
    bad = [*pairs.values(), "madvise MERGEABLE", "fcntl F_SETPIPE_SZ"]
    assert {b: seen[b] for b in bad} == dict.fromkeys(bad, "EPERM")


def test_machine_wide_counters_are_not_readable(seen):
    """What the kernel counts for the whole machine (load, free and shared memory, the process
    count, uptime, CPU times) is out of reach: sysinfo and times are refused (above), /proc is an
    empty tmpfs in the job and /sys is not there (docs/threat-model.md, global state)."""
    paths = [k for k in seen if k.startswith(("/proc", "/sys"))]
    assert len(paths) == 7 and {p: seen[p] for p in paths} == dict.fromkeys(paths, "ENOENT")


def test_a_job_sees_only_the_packages_jaclang_needs(seen):
    imports = {k: v for k, v in seen.items() if k.startswith("import ")}
    assert imports == dict.fromkeys(imports, "ImportError") and len(imports) == 4


def test_the_table_says_why_for_every_call():
    """Every allowed call names why a job needs it and why it reaches no shared state; no refused
    call is also allowed."""
    for name, (need, why) in policy.ALLOWED.items():
        assert need and why, name
    for name, (rules, why) in policy.ALLOWED_IF.items():
        assert rules and why, name
    refused = {n for names in policy.REFUSED.values() for n in names}
    assert not refused & (set(policy.ALLOWED) | set(policy.ALLOWED_IF))
