"""A job's limits hold for the whole job, from outside it: its memory (all its processes and its
tmpfs together) stays within `Limits.mem_mb`, and its CPU time (all its processes) within a
sub-second time-out, whatever the job does to its own signals."""

from __future__ import annotations

import base64

import pytest

from jacrl.executor import Executor, Limits
from jacrl.executor.budget import fit_concurrency

CAP_MB = 768

# Plain Python run by `exec` from a Jac program: fork up to 4 children (none under the syscall
# policy, which denies fork), each (and then the parent)
# holds as much touched memory as it can get; then fill the private tmpfs with 8 MiB files. Prints
# the children it got and the MiB held in all.
GRAB = r"""
import os, time
def grab():
    held, n = [], 0
    try:
        while True:
            b = bytearray(8 << 20)
            b[::4096] = b"\1" * len(range(0, len(b), 4096))  # touched: resident, not just mapped
            held.append(b); n += 8
    except MemoryError:
        if held:  # room to report in
            held.pop(); n -= 8
    return n, held
pipes = []
for _ in range(4):
    try:  # the syscall policy denies both (EPERM): then the job is one process
        r, w = os.pipe()
        pid = os.fork()
    except OSError:
        break
    if pid == 0:
        try:
            n, held = grab()
            os.write(w, str(n).encode().ljust(16)); time.sleep(60)
        finally:
            os._exit(0)
    pipes.append(r)
total = sum(int(os.read(r, 16) or 0) for r in pipes)
n, held = grab()
files = 0
for d in ("/tmp", "/var/tmp"):
    for i in range(64):
        try:
            with open(os.path.join(d, f"fill{i}"), "wb") as fh:
                fh.write(b"x" * (8 << 20))
            files += 8
        except OSError:
            break
print(len(pipes), total + n + files, flush=True)
"""


def pyjob(code: str) -> str:
    b64 = base64.b64encode(code.encode()).decode()
    return f'with entry {{ exec(__import__("base64").b64decode("{b64}").decode()); }}'


def test_a_job_with_forked_children_holds_no_more_than_its_cap():
    with Executor(Limits(mem_mb=CAP_MB)) as ex:
        if ex.isolation != "sandbox":
            pytest.skip(f"no sandbox here ({ex.isolation})")
        (v,) = ex.run_many([pyjob(GRAB)], timeout=20)
        policy = ex.syscall_policy
    assert v.stdout, v
    kids, held = map(int, v.stdout.split())
    print(f"\n{kids} children, {held} MiB held in all (cap {CAP_MB} MiB)")
    assert v.ran and (kids == 0) == (policy == "seccomp"), (policy, v)  # forks: without it
    assert held <= CAP_MB, (kids, held)


SPIN = r"""
import hashlib, os, signal, threading
signal.signal(signal.SIGXCPU, signal.SIG_IGN)  # the job's own handlers change nothing
def spin():  # hashing a large buffer releases the GIL: threads spin on every core
    data = bytes(1 << 20)
    while True:
        hashlib.sha256(data)
try:
    os.fork()
except OSError:  # the syscall policy denies fork: a thread spins beside it instead
    threading.Thread(target=spin, daemon=True).start()
spin()
"""


@pytest.mark.parametrize("timeout", [0.2, 0.5])
def test_a_sub_second_cpu_limit_is_enforced_from_outside(executor, timeout):
    """Two spinning processes (threads, under the syscall policy) that ignore SIGXCPU: killed at
    the limit (to the clock tick and the zygote's check), not at the next whole second."""
    (v,) = executor.run_many([pyjob(SPIN)], timeout=timeout)
    assert v.status == "timeout" and v.timed_out, v
    assert timeout <= v.cpu_seconds < timeout + 0.1, v  # not the wall backstop, nor 1 s


def test_concurrency_is_fitted_to_the_machines_memory():
    with open("/proc/meminfo") as fh:
        avail_mb = next(int(ln.split()[1]) // 1024 for ln in fh if ln.startswith("MemAvailable"))
    with pytest.warns(UserWarning, match="exceeds the available memory"):
        assert fit_concurrency(4, avail_mb // 2) <= 2
    with pytest.raises(ValueError, match="exceeds the machine's available memory"):
        fit_concurrency(1, avail_mb * 2)
