"""Nothing a job does to the kernel's own state reaches another job, proven by class, not per
attack: a *writer* job tries every way it has to leave a mark in state the kernel shares between
jobs — files, the page cache of the files every job reads (dropping pages by a token's bits, and
paging them out), SysV and POSIX IPC, pipes and the per-user pipe-buffer quota, file descriptors
in flight, inotify, keys, new namespaces — and every way to use CPU or memory its limits do not
count (a child the kernel reaps itself, memfd and shared memory). A *reader* job, after it and
while it runs, on the same server and on a new one, looks for each mark (residency probes:
mincore, preadv2 with RWF_NOWAIT, cachestat) and finds none: under the syscall policy
(`jacrl.executor.policy`) each of those calls fails with EPERM, in the writer and in the reader.
Without the policy the writer's marks are made and a reader reads the token back. What the policy
cannot refuse, a read and a clock, finds nothing either: every file a job can read is a copy on a
tmpfs (`jacrl.executor.tree`), always resident."""

from __future__ import annotations

import base64
import json
import os
import secrets
import sys
import threading
import time

import pytest

from jacrl.executor import Executor, SandboxUnavailable, client, sandbox, tree

# Plain Python, run by `exec` from a Jac program. MODE "write": make every mark it can and say
# which ways were open; "read": say which marks it found. FILE, OFFSET: the pages the token's bits
# are stored in (a file in the venv, which every job can read; one bit a STRIDE bytes); TOKEN: 32
# bits.
PROBE = r"""
import ctypes, errno, fcntl, json, mmap, os, platform, signal, socket, struct, time
libc = ctypes.CDLL(None, use_errno=True)
NR = {"x86_64": dict(add_key=248, userfaultfd=323, bpf=321, perf_event_open=298, cachestat=451,
                     io_uring_setup=425, keyctl=250),
      "aarch64": dict(add_key=217, userfaultfd=282, bpf=280, perf_event_open=241, cachestat=451,
                      io_uring_setup=425, keyctl=219)}[platform.machine()]
PAGE = mmap.PAGESIZE
LOCK_QUERY = struct.pack("hhqqi", fcntl.F_WRLCK, 0, 0, 1, 0)  # struct flock: would a lock block?
opened, found = [], []
def c(ret):
    if ret == -1 or ret is None:
        raise OSError(ctypes.get_errno(), "")
    return ret
def attempt(name, fn):
    try:
        fn()
        opened.append(name)
        return True
    except OSError as e:
        if e.errno not in (errno.EPERM, errno.ENOSYS, errno.EACCES, errno.EROFS):
            opened.append(f"{name} ({errno.errorcode.get(e.errno, e.errno)})")  # not denied
        return False
fd = os.open(FILE, os.O_RDONLY)
def resident():  # the token's pages, as residency probes see them (None: no probe open)
    # mincore last: since Linux 5.0 it says "all resident" to a process that may not write the
    # file; the first probe that works is the reading
    for name, probe in (("preadv2 RWF_NOWAIT", by_nowait), ("cachestat", by_cachestat),
                        ("mincore", by_mincore)):
        try:
            bits = probe()
            opened.append(name)
            return bits
        except OSError:
            pass
    return None
def by_mincore():
    ptr = libc.mmap(None, 32 * STRIDE, mmap.PROT_READ, mmap.MAP_SHARED, fd, OFFSET)
    if ptr is None or ptr == ctypes.c_void_p(-1).value:
        raise OSError(ctypes.get_errno(), "")
    vec = (ctypes.c_ubyte * (32 * STRIDE // PAGE))()
    c(libc.mincore(ctypes.c_void_p(ptr), 32 * STRIDE, vec))
    return [vec[i * STRIDE // PAGE] & 1 for i in range(32)]
def by_nowait():
    out = []
    for i in range(32):
        try:
            os.preadv(fd, [bytearray(1)], OFFSET + i * STRIDE, os.RWF_NOWAIT)
            out.append(1)
        except BlockingIOError:
            out.append(0)
    return out
def by_cachestat():
    rng = (ctypes.c_uint64 * 2)(OFFSET, PAGE)
    out = []
    for i in range(32):
        rng[0] = OFFSET + i * STRIDE
        st = (ctypes.c_uint64 * 5)()
        c(libc.syscall(NR["cachestat"], fd, rng, st, 0))
        out.append(int(st[0] > 0))
    return out
def drop(i):
    os.posix_fadvise(fd, OFFSET + i * STRIDE, STRIDE, os.POSIX_FADV_DONTNEED)
libc.mmap.restype = ctypes.c_void_p
libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int,
                      ctypes.c_long]
time.sleep(WAIT)
if MODE == "write":
    attempt("readahead", lambda: c(libc.readahead(fd, ctypes.c_long(OFFSET), 4 * PAGE)))
    def pageout():
        m = mmap.mmap(fd, 32 * STRIDE, prot=mmap.PROT_READ, offset=OFFSET)
        m.madvise(21)  # MADV_PAGEOUT
    attempt("madvise PAGEOUT", pageout)
    bits = [(TOKEN >> i) & 1 for i in range(32)]
    for i in range(32):  # every chunk in; then drop the 0 bits' (whole chunks: large folios)
        os.pread(fd, STRIDE, OFFSET + i * STRIDE)
    zeros = [i for i, b in enumerate(bits) if not b]
    attempt("fadvise DONTNEED", lambda: [drop(i) for i in zeros])
    attempt("SysV shm", lambda: c(libc.shmget(0x4A41430 + TOKEN % 97, 1 << 20, 0o1666)))
    attempt("SysV msg", lambda: c(libc.msgget(0x4A41431, 0o1666)))
    attempt("SysV sem", lambda: c(libc.semget(0x4A41432, 1, 0o1666)))
    attempt("POSIX mq", lambda: c(libc.mq_open(b"/jacrl-" + str(TOKEN).encode(), 0o100 | 2,
                                                0o666, None)))
    def memfd():
        m = os.memfd_create("hold")
        os.write(m, b"x" * (64 << 20))  # 64 MiB no address space counts
    attempt("memfd", memfd)
    attempt("userfaultfd", lambda: c(libc.syscall(NR["userfaultfd"], 0)))
    attempt("io_uring", lambda: c(libc.syscall(NR["io_uring_setup"], 1,
                                               ctypes.create_string_buffer(120))))
    attempt("bpf", lambda: c(libc.syscall(NR["bpf"], 0, None, 0)))
    attempt("perf_event_open", lambda: c(libc.syscall(NR["perf_event_open"], None, 0, -1, -1, 0)))
    attempt("add_key", lambda: c(libc.syscall(NR["add_key"], b"user", b"jacrl", b"x", 1,
                                              ctypes.c_int(-3))))
    attempt("inotify", lambda: c(libc.inotify_init1(0)))
    held = []
    attempt("pipe", lambda: held.append(os.pipe()))
    attempt("F_SETPIPE_SZ", lambda: __import__("fcntl").fcntl(held[0][0], 1031, 1 << 20)
            if held else c(-1))
    def in_flight():
        a, b = socket.socketpair()
        held.append((a, b))
        socket.send_fds(a, [b"x"], [a.fileno()] * 8)
    attempt("fds in flight", in_flight)
    attempt("unshare", lambda: os.unshare(os.CLONE_NEWUSER))
    attempt("vsock", lambda: held.append(socket.socket(40, socket.SOCK_STREAM)))  # to the host
    attempt("KSM merge", lambda: mmap.mmap(-1, PAGE).madvise(12))  # MADV_MERGEABLE
    attempt("flock", lambda: fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB))
    attempt("fcntl lock", lambda: fcntl.lockf(fd, fcntl.LOCK_SH | fcntl.LOCK_NB, 1, 0))
    def cpu_outside():
        signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # the kernel reaps it: no cutime
        if os.fork() == 0:
            t = time.process_time()
            while time.process_time() - t < 1.0:
                pass
            os._exit(0)
        time.sleep(1.2)  # asleep (no CPU of its own) while the child burns its second
    attempt("fork", cpu_outside)
    with open(f"/tmp/jacrl-mark-{TOKEN}", "w") as fh:
        fh.write("x")
else:
    bits = resident()
    if bits is not None:
        got = sum(b << i for i, b in enumerate(bits))

        if got == TOKEN:
            found.append("page cache token")
    for name, fn in (("SysV shm", lambda: c(libc.shmget(0x4A41430 + TOKEN % 97, 0, 0))),
                     ("POSIX mq", lambda: c(libc.mq_open(b"/jacrl-" + str(TOKEN).encode(), 2)))):
        try:
            fn()
            found.append(name)
        except OSError:
            pass
    def held_lock():
        got = fcntl.fcntl(fd, fcntl.F_GETLK, LOCK_QUERY)
        return struct.unpack("hhqqi", got)[0] != fcntl.F_UNLCK  # it names another's lock
    for name, fn in (("flock", lambda: fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)),
                     ("fcntl lock", held_lock)):
        try:
            if fn():
                found.append(name)
        except BlockingIOError:
            found.append(name)  # held by the writer
        except OSError:
            pass
    if os.path.exists(f"/tmp/jacrl-mark-{TOKEN}"):
        found.append("file")
print(json.dumps(dict(opened=opened, found=found)), flush=True)
time.sleep(HOLD)
"""


def program(mode: str, token: int, path: str, offset: int, stride: int, hold=0.0, wait=0.0) -> str:
    code = (
        f"MODE, TOKEN, FILE, OFFSET, STRIDE, HOLD, WAIT = "
        f"{mode!r}, {token}, {path!r}, {offset}, {stride}, {hold}, {wait}\n" + PROBE
    )
    b64 = base64.b64encode(code.encode()).decode()
    return f'with entry {{ exec(__import__("base64").b64decode("{b64}").decode()); }}'


def report(v) -> dict:
    assert v.stdout, v
    return json.loads(v.stdout.splitlines()[0])


@pytest.fixture(scope="module")
def pages():
    """A file of 32 chunks of 2 MiB (a large folio, which the page cache drops whole or not at
    all) that every job can read and none maps: written into the venv as jobs see it (the tree the
    sandbox shows, `executor.tree`), then dropped from the page cache (a no-op on the tree's
    tmpfs: its pages are the file); (path in the sandbox, offset, chunk size)."""
    stride = 2 << 20
    name = f"jacrl-channel-{secrets.token_hex(4)}.bin"
    host = os.path.join(tree.tree() + os.path.realpath(sys.prefix), name)
    with open(host, "wb") as fh:
        for _ in range(32):
            fh.write(secrets.token_bytes(stride))
        fh.flush()
        os.fsync(fh.fileno())
        os.posix_fadvise(fh.fileno(), 0, 0, os.POSIX_FADV_DONTNEED)
    yield os.path.join(sys.prefix, name), 0, stride
    os.unlink(host)


@pytest.fixture(scope="module")
def ex():
    with Executor(concurrency=2) as e:
        if e.isolation != "sandbox":
            pytest.skip(f"no sandbox here ({e.isolation})")
        yield e


def test_every_way_to_mark_kernel_state_or_escape_the_limits_is_denied(ex, pages):
    token = secrets.randbits(32) | 1
    (w,) = ex.run_many([program("write", token, *pages)], timeout=5)
    assert ex.syscall_policy == "seccomp"
    assert report(w)["opened"] == [], report(w)


def test_a_reader_finds_nothing_after_on_the_same_and_a_new_server(ex, pages):
    """Each reader after its own writer: a residency probe loads what it probes (a page-cache
    miss starts its read even with RWF_NOWAIT), so one reading spends the token."""
    token = secrets.randbits(32) | 1
    ex.run_many([program("write", token, *pages)], timeout=5)
    with Executor() as fresh:
        (new,) = fresh.run_many([program("read", token, *pages)], timeout=5)
    ex.run_many([program("write", token, *pages)], timeout=5)
    (same,) = ex.run_many([program("read", token, *pages)], timeout=5)
    for r in (report(new), report(same)):
        assert r == {"opened": [], "found": []}, r


def test_a_reader_finds_nothing_while_the_writer_runs(ex, pages):
    token = secrets.randbits(32) | 1
    w, r = ex.run_many(
        [program("write", token, *pages, hold=2.0), program("read", token, *pages, wait=1.0)],
        timeout=5,
    )
    assert r.seconds < w.seconds, (r.seconds, w.seconds)  # it looked meanwhile
    assert report(r) == {"opened": [], "found": []}, report(r)


# Plain Python: the timing channel alone (no advice, no probe call: reads and a clock). One page
# in each chunk (chunks 2 MiB apart: a read-ahead from one does not reach the next); MODE "write":
# read the pages of the chunks whose bit of TOKEN is 1 (loading them into the page cache, were it
# a disk's); "read": time one read of each page, in ns.
TIMING = r"""
import json, os, time
fd = os.open(FILE, os.O_RDONLY)
time.sleep(WAIT)
times = []
for i in range(32):
    at = OFFSET + i * STRIDE + (i * 7919 % (STRIDE // 8192)) * 4096
    if MODE == "write":
        if TOKEN >> i & 1:
            os.pread(fd, 4096, at)
    else:
        t = time.perf_counter_ns()
        os.pread(fd, 4096, at)
        times.append(time.perf_counter_ns() - t)
print(json.dumps(times), flush=True)
time.sleep(HOLD)
"""
MISS_NS = 40_000  # a miss reads the disk (49-210 us here); a hit copies one page (1-30 us)


def timing(mode: str, token: int, path: str, offset: int, stride: int, hold=0.0, wait=0.0) -> str:
    code = (
        f"MODE, TOKEN, FILE, OFFSET, STRIDE, HOLD, WAIT = "
        f"{mode!r}, {token}, {path!r}, {offset}, {stride}, {hold}, {wait}\n" + TIMING
    )
    b64 = base64.b64encode(code.encode()).decode()
    return f'with entry {{ exec(__import__("base64").b64decode("{b64}").decode()); }}'


def test_a_token_in_the_page_cache_is_not_read_back_by_timing_beside_or_after_the_writer(ex, pages):
    """A writer loads the chunks of a token's 1 bits by reading them (all the policy leaves it);
    a reader on a new server, while the writer still runs, and another on a new server after it,
    time one read in each chunk and decode "fast" as 1. The tree is on a tmpfs, every page always
    resident: every read is fast and the decoded bits match the token's no better than chance (a
    token of sixteen 1 bits: 16 of 32). Before, with the venv itself shown (on a disk), the reader
    beside the writer decoded 31 of 32 bits (misses 49-210 us, hits 1-31 us)."""
    bits = secrets.SystemRandom().sample(range(32), 16)
    token = sum(1 << i for i in bits)

    def decoded(v) -> int:
        times = json.loads(report_line(v))
        assert len(times) == 32, v
        return sum(1 << i for i, t in enumerate(times) if t < MISS_NS)

    with Executor() as beside, Executor() as after:
        beside.run("with entry { print(1); }")  # started: the reader below begins at once
        done = {}

        def write() -> None:
            (done["w"],) = ex.run_many([timing("write", token, *pages, hold=4.0)], timeout=10)
            done["end"] = time.monotonic()

        writer = threading.Thread(target=write)
        writer.start()
        (during,) = beside.run_many([timing("read", token, *pages, wait=1.0)], timeout=10)
        read_end = time.monotonic()
        writer.join()
        (later,) = after.run_many([timing("read", token, *pages)], timeout=10)
    assert done["w"].ran and read_end < done["end"], done  # the reader ran beside the writer
    for v in (during, later):
        got = decoded(v)
        same = 32 - bin(got ^ token).count("1")
        assert got != token and same <= 26, (same, v.stdout)


def report_line(v) -> str:
    assert v.stdout, v
    return v.stdout.splitlines()[0]


LIMITS = r"""
import resource
print(*(resource.getrlimit(r)[0] for r in (resource.RLIMIT_NOFILE, resource.RLIMIT_SIGPENDING)))
"""


def test_the_per_user_counters_left_are_bounded_by_the_jobs_own_limits(ex):
    """Epoll watches (open files squared) and queued signals are counted per user: 64 open files
    and 64 queued signals a job keep any number of concurrent jobs far below the user's limits
    (docs/threat-model.md, per-user counters)."""
    b64 = base64.b64encode(LIMITS.encode()).decode()
    (v,) = ex.run_many(
        [f'with entry {{ exec(__import__("base64").b64decode("{b64}").decode()); }}'], timeout=5
    )
    assert v.stdout.split() == ["64", "64"], v


def test_no_policy_is_refused_unless_allowed(monkeypatch):
    """A policy the kernel refuses (here: one BPF instruction and no return) leaves jobs without
    it: the executor refuses to start, in one line, unless running unsandboxed was allowed."""
    monkeypatch.setattr(client, "job_policy", lambda: bytes(8))
    with Executor(allow_unsandboxed=False) as e:
        if sandbox.why_unsandboxed():
            pytest.skip(sandbox.why_unsandboxed())
        with pytest.raises(SandboxUnavailable, match="the kernel refused the seccomp filter") as x:
            e.run("with entry { print(1); }")
    assert "\n" not in str(x.value)


def test_everything_a_job_can_read_is_the_tree_on_a_tmpfs(ex):
    """Every directory the sandbox shows is a copy in the tree (`executor.tree`), and the tree is
    on a tmpfs; a copy left by a process that died is removed by the next one."""
    from jacrl.executor.jac_cache import jac_cache

    launch = sandbox.Launch(list(client.SERVER_FILES), [], None, jac_cache())
    launch.close()
    argv = launch.argv
    if argv[3].endswith("sandbox.py"):  # as root: the launcher's [uid, bubblewrap's argv]
        argv = json.loads(argv[4])[1]
    binds = [argv[i + 1] for i, a in enumerate(argv) if a == "--ro-bind"]
    root = tree.tree()
    assert binds and [b for b in binds if not b.startswith(root + "/")] == []
    assert tree._is_tmpfs(root)
    base = os.path.dirname(root)
    assert not os.path.exists("/proc/4194303")  # the last pid there can be: free here
    dead = os.path.join(base, f"{tree.PREFIX}4194303-test")
    os.makedirs(os.path.join(dead, "usr"))
    tree._prune(base)
    assert not os.path.exists(dead) and os.path.isdir(root)
