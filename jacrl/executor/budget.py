"""What one job may use, counted for the whole job: its memory (`process_budget`: the address
space each of its processes may add, so that processes and tmpfs together stay within the cap),
its CPU time (`tree_cpu`: the job's whole process tree, read from outside it), and how many jobs
fit the machine's memory at once (`fit_concurrency`).

Standalone (stdlib only) like `server.py`, which loads it by path inside the sandbox; the client
imports it as `jacrl.executor.budget`.
"""

from __future__ import annotations

import os
import warnings

MIN_PROCESS_MB = 64  # the least new memory one process of a job may have


def vm(field: str) -> int:
    """A `Vm*` size of this process in bytes (Linux); 0 without /proc (no RLIMIT_AS then)."""
    try:
        with open("/proc/self/status") as fh:
            for line in fh:
                if line.startswith(field + ":"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def process_budget(mem_mb: int, nproc: int, data: int, tmpfs: int) -> int:
    """Bytes of address space each process of a job may add to what it inherits, so that the
    whole job stays within mem_mb: each of its at most `nproc` processes (threads count; its shim
    and init counted as if they were the job's) holds at most that plus a private copy of the
    zygote's writable memory (`data`: VmData + VmStk), and its private tmpfs (`tmpfs` bytes) count
    in full.
    RLIMIT_AS is per process; without a delegated cgroup (no cgroup v2 memory.max is delegated to
    us) this sum is the strongest per-job bound."""
    per = (mem_mb * 2**20 - tmpfs) // nproc - data
    if per < MIN_PROCESS_MB * 2**20:
        need = (tmpfs + nproc * (data + MIN_PROCESS_MB * 2**20)) // 2**20 + 1
        raise ValueError(
            f"mem_mb={mem_mb} is too small for {nproc} processes a job: give at least {need}"
        )
    return per


TICK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def tree_cpu(pid: int) -> float | None:
    """CPU seconds of a process and all its descendants, live ones and those reaped by them
    (/proc stat utime+stime+cutime+cstime); None where /proc cannot tell (macOS)."""
    total, stack, seen = 0, [pid], set()
    while stack:
        p = stack.pop()
        if p in seen:
            continue
        seen.add(p)
        try:
            with open(f"/proc/{p}/stat", "rb") as fh:
                fields = fh.read().rsplit(b")", 1)[1].split()
            total += sum(int(f) for f in fields[11:15])  # utime stime cutime cstime
            for tid in os.listdir(f"/proc/{p}/task"):
                with open(f"/proc/{p}/task/{tid}/children", "rb") as fh:
                    stack += [int(c) for c in fh.read().split()]
        except (OSError, IndexError, ValueError):
            if p == pid:
                return None
    return total / TICK


def _mem_available() -> int | None:
    """MemAvailable in bytes (Linux), else None."""
    try:
        with open("/proc/meminfo") as fh:
            return next(int(ln.split()[1]) * 1024 for ln in fh if ln.startswith("MemAvailable:"))
    except (OSError, StopIteration):
        return None


def fit_concurrency(concurrency: int, mem_mb: int) -> int:
    """Concurrent jobs x their memory cap within the machine's available memory: never an OOM of
    the host. Lowered (with a warning) when they do not fit; one job that does not fit: an error."""
    avail = _mem_available()
    if avail is None:
        return concurrency
    fit = avail // (mem_mb * 2**20)
    if fit < 1:
        raise ValueError(
            f"a job's memory cap mem_mb={mem_mb} exceeds the machine's available "
            f"memory ({avail // 2**20} MiB)"
        )
    if concurrency > fit:
        warnings.warn(
            f"jacrl executor: concurrency {concurrency} x mem_mb={mem_mb} exceeds the "
            f"available memory ({avail // 2**20} MiB): concurrency {fit}",
            stacklevel=3,
        )
    return min(concurrency, fit)


def owned_by_me(pid: str) -> bool:
    """Whether /proc/<pid> is a process of this user (the jobs' processes counted against nproc)."""
    try:
        return os.stat(f"/proc/{pid}").st_uid == os.getuid()
    except OSError:
        return False
