"""The fork server that runs untrusted Jac programs: `python server.py --limits JSON`.

Standalone on purpose (stdlib + jaclang only, never `jacrl`): `jacrl.executor` starts it inside a
bubblewrap sandbox in which the project tree is not visible, only this file and its sibling
`child.py` (what runs in the forked processes), the interpreter, its stdlib and site-packages. It
imports and warms jaclang once, then forks a shim and a job per program (see `child.py`).

The server never sees an expected output: it receives programs and reports what it observed. A
verdict comes only from the wait status, the captured stdout/stderr and the server's clock, plus
one byte the job writes *before* any of its code runs (compiled or parsed) on a pipe it closes
before running the program — code from the model can never write to the server.

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
DEFAULT_LIMITS = dict(mem_mb=1024, fsize_mb=16, nproc=32, max_output=1 << 20, stderr_lines=40)
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

WARM_PROGRAM = '''
enum Mood { CALM, BUSY }
obj Note { has text: str; has tags: list[str] = []; }
node City { has name: str; has size: int = 0; }
edge Road { has km: int = 1; }
walker Tour {
    has seen: list[str] = [];
    has total: int = 0;
    can start with Root entry { visit [-->]; }
    can step with City entry {
        self.seen.append(here.name);
        for e in [edge here ->:Road:->] { self.total += e.km; }
        visit [->:Road:->];
    }
    can done with Root exit { report sorted(self.seen); }
}
def describe(n: Note) -> str {
    match len(n.tags) {
        case 0: return f"{n.text}: {{}}";
        case _: return n.text + "," + ",".join(n.tags);
    }
}
with entry {
    a = City(name="a", size=3);
    b = City(name="b");
    root ++> a;
    a +>:Road(km=4):+> b;
    r = root spawn Tour();
    try { _ = int("x"); } except ValueError { print("caught"); }
    print(r.total, len(r.reports), describe(Note(text="n")), Mood.BUSY.name);
}
'''


def _vm_size() -> int:
    """The server's address-space size (Linux); 0 where /proc is absent (no RLIMIT_AS then)."""
    try:
        with open("/proc/self/status") as fh:
            for line in fh:
                if line.startswith("VmSize:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def _owned_by_me(pid: str) -> bool:
    try:
        return os.stat(f"/proc/{pid}").st_uid == os.getuid()
    except OSError:
        return False


def _read(path: str, cap: int) -> str:
    try:
        with open(path, "rb") as fh:
            return fh.read(cap).decode("utf-8", errors="replace")
    except OSError:
        return ""


def _kill(pid: int) -> None:
    """SIGKILL to the process and its group (the shim dies, its job with it by pdeathsig, then
    the job's pid namespace)."""
    for kill in (os.kill, os.killpg):
        try:
            kill(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass


# ---- warming --------------------------------------------------------------------------------

def warm(scratch: str) -> None:
    """Run a representative program here, then reset every piece of state it touched, so
    children inherit compiled machinery but no program state."""
    from jaclang.jac0core.runtime import JacRuntime as Jac

    saved = _save_state()
    work = tempfile.mkdtemp(prefix="warm_", dir=scratch)
    try:
        os.chdir(work)
        Jac.set_base_path(work)
        path = os.path.join(work, "snippet.jac")
        with open(path, "w") as fh:
            fh.write(WARM_PROGRAM)
        sys.modules["__main__"] = child.fresh_main()
        sys.stdout = sys.stderr = io.StringIO()
        if child.run_like_cli(path, lambda _: None) != 0:
            raise RuntimeError(f"warm-up program failed: {sys.stdout.getvalue()[-500:]}")
    finally:
        _restore_state(saved)
        shutil.rmtree(work, ignore_errors=True)


def _save_state() -> dict:
    from jaclang.jac0core.runtime import JacRuntime as Jac

    return dict(main=sys.modules.get("__main__"), argv=list(sys.argv), cwd=os.getcwd(),
                path=list(sys.path), stdout=sys.stdout, stderr=sys.stderr,
                base=Jac.get_base_path_dir(), target=Jac.get_full_target_path(),
                ctx=Jac.exec_ctx, loaded=dict(Jac.loaded_modules))


def _restore_state(saved: dict) -> None:
    from jaclang.jac0core.program import JacProgram
    from jaclang.jac0core.runtime import JacRuntime as Jac

    sys.stdout, sys.stderr = saved["stdout"], saved["stderr"]
    os.chdir(saved["cwd"])
    sys.modules["__main__"] = saved["main"]
    sys.argv[:] = saved["argv"]
    sys.path[:] = saved["path"]
    sys.modules.pop("snippet", None)
    Jac.set_base_path(saved["base"])
    Jac.set_full_target_path(saved["target"])
    Jac.exec_ctx = saved["ctx"]
    Jac.program = JacProgram()
    Jac.loaded_modules.clear()
    Jac.loaded_modules.update(saved["loaded"])


# ---- verdicts -------------------------------------------------------------------------------

def verdict(sealed: bytes, wstatus: int, timed_out: bool, stdout: str, stderr: str,
            seconds: float, stderr_lines: int) -> dict:
    """What the server observed of one job, as the client's `Verdict` fields."""
    compiled = sealed == child.COMPILED  # produced runnable code; PARSED: passed the parse check
    exit_code = None
    if timed_out:
        status = "timeout"
    elif os.WIFSIGNALED(wstatus):
        status = f"killed:{signal.Signals(os.WTERMSIG(wstatus)).name}"
    else:
        exit_code = os.WEXITSTATUS(wstatus)
        status = ("compile_error" if not compiled else "ok" if exit_code == 0
                  else "runtime_error")
    lines = stderr.splitlines(keepends=True)[:stderr_lines]
    return dict(compiled=compiled or sealed == child.PARSED, ran=compiled and exit_code == 0,
                exit_code=exit_code, stdout=stdout, stderr="".join(lines),
                timed_out=timed_out, seconds=round(seconds, 6), status=status)


# ---- the server -----------------------------------------------------------------------------

class ForkServer:
    """Single-threaded: imports and warms jaclang, then forks a shim (and its job) per job."""

    def __init__(self, limits: dict, scratch: str, namespaces: bool = True, keep=()):
        self.keep = list(keep)  # [kept path, real path] of Python dirs under /tmp (see sandbox)
        self.limits = {**DEFAULT_LIMITS, **limits}
        self.scratch = scratch
        child.import_compiler()
        warm(scratch)
        self.base_vm = _vm_size()
        self.namespaces = namespaces and child.namespaces_work(self.keep)
        # A job must not ptrace or read the memory of this process even if it could name it.
        child.prctl(child.PR_SET_DUMPABLE, 0)
        # Without namespaces a normal user's process count includes their whole session.
        self.nproc_base = 0 if self.namespaces or not os.path.isdir("/proc") else sum(
            1 for p in os.listdir("/proc") if p.isdigit() and _owned_by_me(p))
        self.rlimits = self._rlimits()

    def _rlimits(self) -> dict[int, int]:
        """The resource limits of every job (its CPU time comes from its own timeout)."""
        lim, out = self.limits, {}
        if self.base_vm:  # macOS does not enforce RLIMIT_AS
            out[resource.RLIMIT_AS] = self.base_vm + lim["mem_mb"] * 2**20
        out[resource.RLIMIT_FSIZE] = lim["fsize_mb"] * 2**20
        out[resource.RLIMIT_CORE] = 0
        if self.namespaces or self.nproc_base:  # counted per user namespace (Linux >= 5.14)
            out[resource.RLIMIT_NPROC] = self.nproc_base + lim["nproc"]
        return out

    def run_many(self, jobs: list[tuple[str, float]], concurrency: int,
                 emit: Callable[[int, dict], None]) -> None:
        """Runs the jobs, `concurrency` at a time; `emit(index, result)` as each one ends."""
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

    @staticmethod
    def _wait(sel: selectors.BaseSelector, running: dict[int, dict]) -> None:
        """Until a job may have ended: one exits, or the earliest deadline passes."""
        wait = max(0.0, min(j["deadline"] for j in running.values()) - time.perf_counter())
        if HAVE_PIDFD:
            sel.select(timeout=wait)  # a pidfd turns readable when its process exits
        else:  # macOS: poll
            time.sleep(min(wait, 0.002))

    @staticmethod
    def _ended(running: dict[int, dict]) -> Iterator[tuple[dict, int, bool]]:
        """(job, wait status, timed out) of each job that exited or ran past its deadline (then
        killed), removed from `running`."""
        now = time.perf_counter()
        for pid, job in list(running.items()):
            done, wstatus = os.waitpid(pid, os.WNOHANG)
            timed_out = not done and now >= job["deadline"]
            if timed_out:
                _kill(pid)
                _, wstatus = os.waitpid(pid, 0)
            if done or timed_out:
                del running[pid]
                yield job, wstatus, timed_out

    def _spawn(self, source: str, timeout: float) -> dict:
        """Forks the job's process (the shim, or the job itself without namespaces)."""
        if threading.active_count() != 1:
            raise RuntimeError("the fork server must be single-threaded")
        jobdir = tempfile.mkdtemp(prefix="job_", dir=self.scratch)
        os.mkdir(os.path.join(jobdir, "work"), 0o700)  # the cwd where there are no namespaces
        out = os.open(os.path.join(jobdir, "stdout"), os.O_RDWR | os.O_CREAT, 0o600)
        err = os.open(os.path.join(jobdir, "stderr"), os.O_RDWR | os.O_CREAT, 0o600)
        seal_r, seal_w = os.pipe()
        sys.stdout.flush()
        sys.stderr.flush()
        t0 = time.perf_counter()
        pid = os.fork()
        if pid == 0:
            os.close(seal_r)
            self._child(child.Job(source, timeout, out, err, seal_w), jobdir)
        for fd in (out, err, seal_w):
            os.close(fd)
        os.set_blocking(seal_r, False)
        # Wait on process exit (pidfd), not pipe EOF: a job can close its pipe and keep running.
        return dict(pid=pid, seal=seal_r, pfd=os.pidfd_open(pid) if HAVE_PIDFD else None,
                    jobdir=jobdir, t0=t0, deadline=t0 + timeout)

    def _child(self, job: child.Job, jobdir: str) -> NoReturn:
        if self.namespaces:
            child.run_shim(job, self.keep, self.rlimits)
        child.run_job(job, os.path.join(jobdir, "work"), self.rlimits)

    def _finish(self, job: dict, wstatus: int, timed_out: bool) -> dict:
        """Collects what the job left (seal byte, stdout, stderr), cleans up, and judges."""
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
        stdout = _read(os.path.join(job["jobdir"], "stdout"), self.limits["max_output"])
        stderr = _read(os.path.join(job["jobdir"], "stderr"), STDERR_READ)
        shutil.rmtree(job["jobdir"], ignore_errors=True)
        return verdict(sealed, wstatus, timed_out, stdout, stderr, seconds,
                       self.limits["stderr_lines"])


def serve(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="server.py")
    ap.add_argument("--limits", default="{}", help="JSON of limit fields")
    ap.add_argument("--no-namespaces", action="store_true", help="jobs without namespaces")
    ap.add_argument("--keep", default="[]", help="JSON [[kept path, real path], ...]")
    args = ap.parse_args(argv)
    proto = os.fdopen(os.dup(1), "w")
    os.set_inheritable(proto.fileno(), False)
    os.dup2(2, 1)  # keep jaclang's own chatter off the protocol channel
    sys.stdout = io.TextIOWrapper(io.FileIO(1, "w", closefd=False), encoding="utf-8",
                                  line_buffering=True)
    here = os.path.dirname(os.path.abspath(__file__))
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != here]  # not for jobs
    scratch = tempfile.mkdtemp(prefix="jacrl-exec-")
    os.chmod(scratch, 0o700)

    def send(obj: dict) -> None:
        proto.write(json.dumps(obj) + "\n")
        proto.flush()

    try:
        server = ForkServer(json.loads(args.limits), scratch, not args.no_namespaces,
                            json.loads(args.keep))
        send({"ready": True, "pid": os.getpid(), "namespaces": server.namespaces,
              "uid": os.getuid()})
        for line in sys.stdin:
            req = json.loads(line)
            jobs = [(str(s), float(t)) for s, t in req["jobs"]]
            server.run_many(jobs, int(req["concurrency"]),
                            lambda i, r: send({"i": i, "result": r}))
            send({"done": len(jobs)})
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    serve()
