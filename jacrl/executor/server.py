"""The fork server that runs untrusted Jac programs: `python server.py --limits JSON`.

Standalone on purpose (stdlib + jaclang only, never `jacrl`): `jacrl.executor` starts it inside a
bubblewrap sandbox in which the project tree is not visible, only this file and its sibling
`child.py` (what runs in the forked processes), the interpreter, its stdlib and site-packages.

Two processes, so that no job inherits another job's data:

    client ──JSON lines──▶ collector ──(job dir, timeout)──▶ zygote ──fork──▶ shim ──▶ init ──▶ job

- The *collector* (this script's first process) speaks the protocol, writes each program into a
  job directory of its own, reads back what the job left and judges it. It never forks a job, so
  the sources and outputs it holds in its heap reach no program.
- The *zygote* is forked by the collector before any request arrives; it imports and warms jaclang
  and then only ever receives job *directories* and timeouts. The job's own process reads its
  program from its directory (see `child.py`). Every job is therefore forked from a process that
  never held a program or an output: freed buffers, frames and caches hold none to scan.

The server never sees an expected output: it reports what it observed. A verdict comes from the
wait status, the captured stdout/stderr, the zygote's clock, one byte the job writes *before* any
of its code runs (compiled or parsed) on a pipe it closes before running the program, and the job's
completion token: a per-job secret the job's runner writes to a file after the driver's entry code
returned normally — `os._exit` patches, `sys.exit(0)` or a signal to itself do not produce it, so
"ran" is not the program's to claim.

A job's timeout is CPU time (`child.cpu_limit`, to the clock tick), enforced from outside the job:
the zygote reads the CPU time of the job's whole process tree (`tree_cpu`) when the job could
have reached its limit and kills it there — nothing the job runs can cancel that. RLIMIT_CPU
(whole seconds, a second later) is only a backstop; a wall-clock backstop (`child.wall_limit`)
ends a job that sleeps or blocks; all are "timeout" verdicts. The verdict reports the job's CPU
seconds (its processes' rusage, or the last reading of its tree) beside its wall seconds.

Protocol (JSON lines): request {"jobs": [[source, timeout], ...], "concurrency": c}; one line
{"i": index, "result": {...}} per job as it finishes, then {"done": n}.
"""

from __future__ import annotations

import argparse
import importlib.util
import io
import json
import os
import resource
import selectors
import shutil
import signal
import sys
import tempfile
import threading
import time
import types
from collections.abc import Callable, Iterator
from typing import NoReturn

HAVE_PIDFD = hasattr(os, "pidfd_open")  # Linux; macOS polls
# the defaults of `jacrl.executor.client.Limits` (this file cannot import it)
DEFAULT_LIMITS = dict(mem_mb=1024, fsize_mb=16, nproc=3, max_output=1 << 20, stderr_lines=40)
RUNNERS = 2  # processes of each job's user namespace that run none of its code: shim and init
JOB_FILES, JOB_SIGNALS = 64, 64  # a job's open files and queued signals (RLIMIT_NOFILE, ...)
STDERR_READ = 64 * 1024  # bytes of a job's stderr read back (the verdict keeps its first lines)


def _sibling(name: str) -> types.ModuleType:
    """`<name>.py` from this file's folder, loaded by path and not registered in sys.modules: a
    job's `import child` fails, as it does under `jac run`."""
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), f"{name}.py")
    spec = importlib.util.spec_from_file_location(f"_jacrl_executor_{name}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


child = _sibling("child")
warming = _sibling("warm")
budget = _sibling("budget")
MIN_CHECK = 0.005  # seconds between two readings of a job's CPU time near its limit


def _read(path: str, cap: int) -> str:
    try:
        with open(path, "rb") as fh:
            return fh.read(cap).decode("utf-8", errors="replace")
    except OSError:
        return ""


def _kill(pid: int) -> None:
    """SIGKILL to the process and its group (the shim dies, its init and job with it by
    pdeathsig, then the job's pid namespace)."""
    for kill in (os.kill, os.killpg):
        try:
            kill(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass


def _over_cpu(wstatus: int, job: dict) -> bool:
    """Killed for its CPU time: by the zygote at its limit, or by RLIMIT_CPU's backstop."""
    if not os.WIFSIGNALED(wstatus):
        return False
    return (
        job.get("over_cpu", False)
        or os.WTERMSIG(wstatus) == signal.SIGXCPU
        or (
            os.WTERMSIG(wstatus) == signal.SIGKILL and job["cpu"] >= child.cpu_limit(job["timeout"])
        )
    )


# ---- verdicts (the collector) ---------------------------------------------------------------


def verdict(
    sealed: bytes,
    wstatus: int,
    timed_out: bool,
    completed: bool,
    stdout: str,
    stderr: str,
    seconds: float,
    stderr_lines: int,
    cpu_seconds: float = 0.0,
) -> dict:
    """What the server observed of one job, as the client's `Verdict` fields. `completed`: the
    job's completion token was right (its entry code returned normally)."""
    compiled = sealed == child.COMPILED  # produced runnable code; PARSED: passed the parse check
    exit_code = None
    if timed_out:
        status = "timeout"
    elif os.WIFSIGNALED(wstatus):
        status = f"killed:{signal.Signals(os.WTERMSIG(wstatus)).name}"
    else:
        exit_code = os.WEXITSTATUS(wstatus)
        status = (
            "compile_error"
            if not compiled
            else "runtime_error"
            if exit_code
            else "ok"
            if completed
            else "early_exit"
        )
    lines = stderr.splitlines(keepends=True)[:stderr_lines]
    return dict(
        compiled=compiled or sealed == child.PARSED,
        ran=status == "ok",
        exit_code=exit_code,
        stdout=stdout,
        stderr="".join(lines),
        timed_out=timed_out,
        seconds=round(seconds, 6),
        status=status,
        cpu_seconds=round(cpu_seconds, 6),
    )


def _token(path: str) -> str:
    try:
        with open(path, "rb") as fh:
            return fh.read(64).decode("ascii", "replace")
    except OSError:
        return ""


# ---- the zygote -----------------------------------------------------------------------------


class Zygote:
    """Single-threaded: imports and warms jaclang, then forks a shim (and its job) per job
    directory. Holds no program and no output: it sees paths, timeouts and wait statuses."""

    def __init__(
        self, limits: dict, scratch: str, namespaces: bool = True, keep=(), policy: bytes = b""
    ):
        self.keep = list(keep)  # [kept path, real path] of Python dirs under /tmp (see sandbox)
        # every job's syscall policy (BPF; b"": none, or one this kernel refuses)
        self.policy = policy if policy and child.policy_works(policy) else b""
        self.limits = {**DEFAULT_LIMITS, **limits}
        self.scratch = scratch
        warming.import_compiler()
        warming.warm(scratch, child)
        self.base_vm = budget.vm("VmSize")
        tmpfs = len(child.PRIVATE_DIRS) * child.TMPFS_MB * 2**20
        nproc = self.limits["nproc"] + RUNNERS
        self.process_mem = budget.process_budget(
            self.limits["mem_mb"], nproc, budget.vm("VmData") + budget.vm("VmStk"), tmpfs
        )
        self.namespaces = namespaces and child.namespaces_work(self.keep)
        # A job must not ptrace or read the memory of this process even if it could name it.
        child.prctl(child.PR_SET_DUMPABLE, 0)
        # Without namespaces a normal user's process count includes their whole session.
        self.nproc_base = (
            0
            if self.namespaces or not os.path.isdir("/proc")
            else sum(1 for p in os.listdir("/proc") if p.isdigit() and budget.owned_by_me(p))
        )
        self.rlimits = self._rlimits()
        # how fast a job's CPU time can grow: all its processes (threads count) on all cores
        self.rate = min(self.limits["nproc"] + RUNNERS, os.cpu_count() or 1)

    def _rlimits(self) -> dict[int, int]:
        """The resource limits of every job (its CPU time comes from its own timeout)."""
        lim, out = self.limits, {}
        if self.base_vm:  # macOS does not enforce RLIMIT_AS
            out[resource.RLIMIT_AS] = self.base_vm + self.process_mem
        out[resource.RLIMIT_FSIZE] = lim["fsize_mb"] * 2**20
        out[resource.RLIMIT_CORE] = 0
        # per-user counters a job could fill for another to see (docs/threat-model.md): open
        # files bound its epoll watches and socket buffers, and its queued signals are its own
        out[resource.RLIMIT_NOFILE] = JOB_FILES
        out[resource.RLIMIT_SIGPENDING] = JOB_SIGNALS
        if self.namespaces or self.nproc_base:  # counted per user namespace (Linux >= 5.14)
            out[resource.RLIMIT_NPROC] = self.nproc_base + lim["nproc"] + RUNNERS
        return out

    def run_many(
        self, jobs: list[tuple[str, float]], concurrency: int, emit: Callable[[int, dict], None]
    ) -> None:
        """Runs the jobs (job dir, timeout), `concurrency` at a time; `emit(index, event)` as each
        one ends."""
        running: dict[int, dict] = {}  # by pid
        nxt = 0
        with selectors.DefaultSelector() as sel:
            while nxt < len(jobs) or running:
                while nxt < len(jobs) and len(running) < max(1, concurrency):
                    job = self._spawn(*jobs[nxt])
                    job["idx"] = nxt
                    nxt += 1
                    running[job["pid"]] = job
                    if job["pfd"] is not None:
                        sel.register(job["pfd"], selectors.EVENT_READ, job)
                self._wait(sel, running)
                for job, wstatus, timed_out in self._ended(running):
                    if job["pfd"] is not None:
                        sel.unregister(job["pfd"])
                    emit(job["idx"], self._finish(job, wstatus, timed_out))

    def _wait(self, sel: selectors.BaseSelector, running: dict[int, dict]) -> None:
        """Until a job may have ended: one exits, the earliest deadline passes, or a job may have
        reached its CPU limit."""
        wait = max(
            0.0, min(min(j["deadline"], j["check"]) for j in running.values()) - time.perf_counter()
        )
        if HAVE_PIDFD:
            sel.select(timeout=wait)  # a pidfd turns readable when its process exits
        else:  # macOS: poll
            time.sleep(min(wait, 0.002))

    def _check_cpu(self, pid: int, job: dict, now: float) -> None:
        """At a job's check time: its tree's CPU time; past the limit, kill it; else the next
        check when it could reach the limit, using every process it may have on every core."""
        used = budget.tree_cpu(pid)
        if used is None:  # no /proc: RLIMIT_CPU alone
            job["check"] = float("inf")
            return
        job["cpu_seen"] = used
        left = child.cpu_limit(job["timeout"]) - used
        if left <= 0:
            job["over_cpu"] = True  # `_ended` kills it
        else:
            job["check"] = now + max(MIN_CHECK, left / self.rate)

    def _ended(self, running: dict[int, dict]) -> Iterator[tuple[dict, int, bool]]:
        """(job, wait status, timed out) of each job that exited, reached its CPU limit or ran past
        its deadline (then killed), removed from `running`; job["cpu"]: the CPU seconds it used."""
        now = time.perf_counter()
        for pid, job in list(running.items()):
            done, wstatus, usage = os.wait4(pid, os.WNOHANG)
            if not done and now >= job["check"]:
                self._check_cpu(pid, job, now)
            past_wall = not done and now >= job["deadline"]
            if past_wall or job.get("over_cpu"):
                _kill(pid)
                _, wstatus, usage = os.wait4(pid, 0)
                done = pid
            if done:
                del running[pid]
                # the shim's CPU time includes its init's and so the job's, each reaped by its
                # parent: the job's own cost, which a busy machine does not inflate (killed, its
                # children are not reaped: then the last reading of its tree)
                job["cpu"] = max(usage.ru_utime + usage.ru_stime, job.get("cpu_seen", 0.0))
                yield job, wstatus, past_wall or _over_cpu(wstatus, job)

    def _spawn(self, jobdir: str, timeout: float) -> dict:
        """Forks the job's process (the shim, or the job itself without namespaces)."""
        if threading.active_count() != 1:
            raise RuntimeError("the fork server must be single-threaded")
        fds = [
            os.open(os.path.join(jobdir, name), os.O_RDWR | os.O_CREAT, 0o600)
            for name in ("stdout", "stderr", "done")
        ]
        seal_r, seal_w = os.pipe()
        sys.stdout.flush()
        sys.stderr.flush()
        t0 = time.perf_counter()
        pid = os.fork()
        if pid == 0:
            os.close(seal_r)
            self._child(child.Job(jobdir, timeout, fds[0], fds[1], seal_w, fds[2]))
        for fd in (*fds, seal_w):
            os.close(fd)
        os.set_blocking(seal_r, False)
        # Wait on process exit (pidfd), not pipe EOF: a job can close its pipe and keep running.
        return dict(
            pid=pid,
            seal=seal_r,
            pfd=os.pidfd_open(pid) if HAVE_PIDFD else None,
            t0=t0,
            deadline=t0 + child.wall_limit(timeout),
            timeout=timeout,
            check=t0 + child.cpu_limit(timeout) / self.rate,
        )

    def _child(self, job: child.Job) -> NoReturn:
        try:
            if self.namespaces:
                child.run_shim(job, self.keep, self.rlimits, self.policy)
            child.run_job(job, os.path.join(job.jobdir, "work"), self.rlimits, None, self.policy)
        finally:  # never back into the zygote's loop, whatever went wrong
            os._exit(child.EXIT_SHIM_FAILED)

    def _finish(self, job: dict, wstatus: int, timed_out: bool) -> dict:
        """The seal byte and the end of the job; closes what it held of it."""
        seconds = time.perf_counter() - job["t0"]
        try:
            sealed = os.read(job["seal"], 2)
        except BlockingIOError:
            sealed = b""
        os.close(job["seal"])
        if job["pfd"] is not None:
            os.close(job["pfd"])
        if not self.namespaces:  # with them the job's pid namespace died with it
            try:
                os.killpg(job["pid"], signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        return dict(
            sealed=sealed.decode("latin-1"),
            wstatus=wstatus,
            timed_out=timed_out,
            seconds=seconds,
            cpu=job["cpu"],
        )


def zygote_main(args: argparse.Namespace, scratch: str, commands: int, events: int) -> NoReturn:
    """The zygote's life: warm up, say ready, run the job directories it is sent."""
    code = 0
    try:
        out = os.fdopen(events, "w")
        send = lambda obj: (out.write(json.dumps(obj) + "\n"), out.flush())  # noqa: E731
        child.prctl(child.PR_SET_PDEATHSIG, signal.SIGKILL)  # dies with the collector
        zygote = Zygote(
            json.loads(args.limits),
            scratch,
            not args.no_namespaces,
            json.loads(args.keep),
            bytes.fromhex(args.policy),
        )
        send(
            {
                "ready": True,
                "namespaces": zygote.namespaces,
                "policy": bool(zygote.policy),
                "uid": os.getuid(),
                "limits": zygote.limits,
            }
        )
        for line in os.fdopen(commands):
            req = json.loads(line)
            zygote.run_many(
                [(str(d), float(t)) for d, t in req["jobs"]],
                int(req["concurrency"]),
                lambda i, ev: send({"i": i, **ev}),
            )
            send({"done": len(req["jobs"])})
    except BaseException as e:  # noqa: BLE001  (say why on stderr; the collector reports it)
        print(f"jacrl zygote failed: {e!r}", file=sys.stderr, flush=True)
        code = 1
    os._exit(code)


# ---- the collector --------------------------------------------------------------------------


class Collector:
    """Talks to the client and to its zygote; writes programs into job dirs and judges what the
    jobs left there. Never forks a job."""

    def __init__(self, args: argparse.Namespace, scratch: str):
        self.scratch = scratch
        cmd_r, self._cmd_w = os.pipe()
        self._ev_r, ev_w = os.pipe()
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            os.close(self._cmd_w)
            os.close(self._ev_r)
            zygote_main(args, scratch, cmd_r, ev_w)
        os.close(cmd_r)
        os.close(ev_w)
        self.zygote_pid = pid
        self._cmds = os.fdopen(self._cmd_w, "w")
        self._events = os.fdopen(self._ev_r)
        child.prctl(child.PR_SET_DUMPABLE, 0)
        self.hello = self._event()
        self.limits = self.hello["limits"]

    def _event(self) -> dict:
        line = self._events.readline()
        if not line:
            raise RuntimeError("the zygote exited")
        return json.loads(line)

    def run_many(
        self, jobs: list[tuple[str, float]], concurrency: int, emit: Callable[[int, dict], None]
    ) -> None:
        made = [self._job_dir(source) for source, _ in jobs]  # (dir, secret)
        self._cmds.write(
            json.dumps(
                {
                    "jobs": [[d, t] for (d, _), (_, t) in zip(made, jobs, strict=True)],
                    "concurrency": concurrency,
                }
            )
            + "\n"
        )
        self._cmds.flush()
        while "done" not in (ev := self._event()):
            i = int(ev["i"])
            emit(i, self._judge(*made[i], ev))

    def _job_dir(self, source: str) -> tuple[str, str]:
        """A fresh dir with the program and its completion secret (the job reads and removes it);
        (the dir, the secret)."""
        jobdir = tempfile.mkdtemp(prefix="job_", dir=self.scratch)
        os.mkdir(os.path.join(jobdir, "work"), 0o700)  # the cwd where there are no namespaces
        secret = os.urandom(16).hex()
        for name, text in ((child.PROGRAM, source), (child.SECRET, secret)):
            fd = os.open(os.path.join(jobdir, name), os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "w", encoding="utf-8", errors="surrogatepass") as fh:
                fh.write(text)
        return jobdir, secret

    def _judge(self, jobdir: str, secret: str, ev: dict) -> dict:
        completed = _token(os.path.join(jobdir, "done")) == secret
        stdout = _read(os.path.join(jobdir, "stdout"), self.limits["max_output"])
        stderr = _read(os.path.join(jobdir, "stderr"), STDERR_READ)
        shutil.rmtree(jobdir, ignore_errors=True)
        return verdict(
            ev["sealed"].encode("latin-1"),
            ev["wstatus"],
            ev["timed_out"],
            completed,
            stdout,
            stderr,
            ev["seconds"],
            self.limits["stderr_lines"],
            ev["cpu"],
        )


def serve(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(allow_abbrev=False, prog="server.py")
    ap.add_argument("--limits", default="{}", help="JSON of limit fields")
    ap.add_argument("--no-namespaces", action="store_true", help="jobs without namespaces")
    ap.add_argument("--keep", default="[]", help="JSON [[kept path, real path], ...]")
    ap.add_argument("--policy", default="", help="every job's syscall policy: BPF, in hex")
    args = ap.parse_args(argv)
    proto = os.fdopen(os.dup(1), "w")
    os.set_inheritable(proto.fileno(), False)
    os.dup2(2, 1)  # keep jaclang's own chatter off the protocol channel
    sys.stdout = io.TextIOWrapper(
        io.FileIO(1, "w", closefd=False), encoding="utf-8", line_buffering=True
    )
    here = os.path.dirname(os.path.abspath(__file__))
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != here]  # not for jobs
    scratch = tempfile.mkdtemp(prefix="jacrl-exec-")
    os.chmod(scratch, 0o700)

    def send(obj: dict) -> None:
        proto.write(json.dumps(obj) + "\n")
        proto.flush()

    try:
        collector = Collector(args, scratch)
        send(
            {
                "ready": True,
                "pid": os.getpid(),
                "zygote": collector.zygote_pid,
                "namespaces": collector.hello["namespaces"],
                "policy": collector.hello["policy"],
                "uid": collector.hello["uid"],
            }
        )
        for line in sys.stdin:
            req = json.loads(line)
            jobs = [(str(s), float(t)) for s, t in req["jobs"]]
            collector.run_many(
                jobs, int(req["concurrency"]), lambda i, r: send({"i": i, "result": r})
            )
            send({"done": len(jobs)})
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    serve()
