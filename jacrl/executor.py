"""Run untrusted Jac source fast and in isolation.

A warm *fork server* (`python -m jacrl.executor --serve`) imports jaclang once, warms it by running a
small graph program, then forks one child per job. The caller (a trainer with threads and an
accelerator) never forks: it talks to the server as a client (`Executor`) over JSON lines.

Each job gets: a fresh temp dir as cwd (outside any repo), its own process group, rlimits (address
space, CPU, file size, process count, no core), a wall-clock deadline that kills the whole group, a
minimal environment, stdin from /dev/null and capped stdout/stderr. When the server runs as root,
jobs run as an unprivileged uid of their own slot, so they can neither signal the server nor write
its files, and every process a job leaves behind is killed after it.

`run_subprocess` is the plain `jac run` backend, used only to check parity with the fork server.
"""

from __future__ import annotations

import argparse
import ctypes
import dataclasses
import hashlib
import io
import json
import os
import re
import resource
import selectors
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import types
from collections import OrderedDict

# When the server is root, job slot i runs as uid/gid JOB_UID_BASE + block*SLOTS_PER_BLOCK + i: uids
# no real user has, and a block held (flock) by one server only, so killing "everything this uid
# owns" after a job kills exactly that job's leftovers, even with several servers on one machine.
JOB_UID_BASE = 200000
SLOTS_PER_BLOCK = 16
UID_BLOCKS = 1024
LOCK_DIR = "/run/lock" if os.path.isdir("/run/lock") else tempfile.gettempdir()
STATUS_MAX = 1 << 16
HAVE_PIDFD = hasattr(os, "pidfd_open")  # Linux; macOS polls


@dataclasses.dataclass(frozen=True)
class Limits:
    """Per-job resource limits."""

    mem_mb: int = 1024  # address space on top of the server's own (children inherit its mappings)
    fsize_mb: int = 16  # largest file a job may write (also caps its stdout/stderr files)
    nproc: int = 32  # processes a job may have at once (its uid's count when it runs unprivileged)
    max_output: int = 1 << 20  # bytes of stdout kept
    stderr_lines: int = 40  # lines of stderr kept in the verdict


@dataclasses.dataclass(frozen=True)
class Verdict:
    """What happened to one program. `compiled` is jaclang's compile phase (no type check); `ran`
    is exit code 0, as under `jac run`."""

    compiled: bool
    ran: bool
    exit_code: int | None
    stdout: str
    stderr: str
    timed_out: bool
    seconds: float
    status: str  # ok | compile_error | runtime_error | exit | timeout | killed:<SIG>
    cached: bool = False

    def to_json(self) -> dict:
        return dataclasses.asdict(self)


class ExecutorError(RuntimeError):
    """Infrastructure failure (the server died or misbehaved). Never a score."""


def minimal_env(home: str) -> dict[str, str]:
    """The only environment a job sees: no tokens, keys or user settings leak into model code."""
    return {"PATH": os.defpath + ":" + os.path.dirname(sys.executable), "LANG": "C.UTF-8",
            "HOME": home}


def _first_lines(text: str, n: int) -> str:
    lines = text.splitlines(keepends=True)
    return "".join(lines[:n])


# ----------------------------------------------------------------------------------------------
# fork server (runs in its own process)
# ----------------------------------------------------------------------------------------------

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


def _set_pdeathsig() -> None:
    """Linux: the job is SIGKILLed if the server dies, so no job outlives it."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


PRIVATE_DIRS = ("/tmp", "/var/tmp", "/dev/shm")  # world-writable: every job gets its own, empty


def _private_tmp(work: str) -> bool:
    """Linux, as root: give the job a mount namespace in which the world-writable directories are
    fresh tmpfs mounts that vanish with it, so a job cannot leave files behind or read another
    job's. Its own work dir is bind-mounted back in at the same path. False when unavailable."""
    libc = ctypes.CDLL(None, use_errno=True)
    ms_bind, ms_rec, ms_private, ms_nosuid, ms_nodev = 0x1000, 0x4000, 0x40000, 0x2, 0x4
    try:
        os.unshare(os.CLONE_NEWNS)
    except (AttributeError, OSError):
        return False
    if libc.mount(None, b"/", None, ms_rec | ms_private, None) != 0:
        return False
    for d in PRIVATE_DIRS:
        if os.path.isdir(d) and libc.mount(b"tmpfs", d.encode(), b"tmpfs", ms_nosuid | ms_nodev,
                                           b"size=64m,mode=1777") != 0:
            return False
    os.makedirs(work, exist_ok=True)  # inside the new tmpfs; the cwd is still the real dir
    if libc.mount(b".", work.encode(), None, ms_bind, None) != 0:
        return False
    os.chdir(work)
    return True


def _import_compiler() -> None:
    """Import every module of jaclang's compiler and runtime now. jaclang loads some lazily (e.g.
    `jac0core.diagnostic_utils` for inherited archetypes), and a job running as an unprivileged uid
    cannot read the server's module cache (~/.cache/jac): a lazy load inside a job then fails with
    "No module named ...". Importing up front costs ~0.5 s once and makes the first job of each
    kind as fast as the rest."""
    import importlib

    import jaclang

    root = os.path.dirname(jaclang.__file__)
    for sub in ("jac0core", "compiler", "runtimelib"):
        for dirpath, dirnames, files in os.walk(os.path.join(root, sub)):
            dirnames[:] = sorted(d for d in dirnames
                                 if d not in ("impl", "tests") and not d.endswith(".impl"))
            for f in sorted(files):
                if not f.endswith(".jac") or f.count(".") > 1:  # skip .impl/.na/.cl/.test annexes
                    continue
                rel = os.path.relpath(os.path.join(dirpath, f[:-4]), os.path.dirname(root))
                try:
                    importlib.import_module(rel.replace(os.sep, "."))
                except Exception:  # noqa: BLE001  (an optional backend, e.g. native, may be absent)
                    pass


class _Reaper:
    """A small root helper, forked before jaclang is imported: for a job uid it forks a child that
    becomes that uid and kills every process the uid owns (kill(-1) kills all processes the caller
    may signal). Forking it is far cheaper than forking the warm server. It accepts only uids of
    this server's block."""

    def __init__(self, uid_base: int, slots: int):
        req_r, self._req = os.pipe()
        self._ack, ack_w = os.pipe()
        self.pid = os.fork()
        if self.pid == 0:
            os.close(self._req)
            os.close(self._ack)
            _set_pdeathsig()
            try:
                while len(data := os.read(req_r, 4)) == 4:
                    uid = int.from_bytes(data, "little")
                    if uid_base <= uid < uid_base + slots:
                        child = os.fork()
                        if child == 0:
                            try:
                                os.setgid(uid)
                                os.setuid(uid)
                                os.kill(-1, signal.SIGKILL)
                            finally:
                                os._exit(0)
                        os.waitpid(child, 0)
                    os.write(ack_w, b"k")
            finally:
                os._exit(0)
        os.close(req_r)
        os.close(ack_w)

    def kill_all(self, uid: int) -> None:
        os.write(self._req, uid.to_bytes(4, "little"))
        os.read(self._ack, 1)

    def close(self) -> None:
        for fd in (self._req, self._ack):
            try:
                os.close(fd)
            except OSError:
                pass


def _fresh_main() -> types.ModuleType:
    """`jac run` executes a program inside the `jac` console script's __main__, which already holds
    `re`, `sys` and `start_cli`; give every job a fresh module seeded the same way (parity)."""
    from jaclang.jac0core.cli_boot import start_cli

    main = types.ModuleType("__main__")
    main.__dict__.update(re=re, sys=sys, start_cli=start_cli)
    return main


def _run_like_cli(path: str, on_compiled) -> dict:
    """`jac run <path>` (jaclang 0.16.7, cli/commands/impl/execution.impl.jac) split into an
    explicit compile phase and an exec phase, printing errors exactly as the CLI does."""
    from jaclang.cli.commands import execution as ex
    from jaclang.cli.console import console
    from jaclang.jac0core.helpers import dump_traceback
    from jaclang.jac0core.runtime import JacRuntime as Jac

    ex._discover_config_from_file(path)
    sys.argv = [path]
    base, mod = os.path.split(path)
    mach = Jac.create_j_context(user_root=None, base_path_dir=Jac.get_base_path_dir(),
                                full_target_path=Jac.get_full_target_path())
    Jac.set_context(mach)
    prog = Jac.get_program()
    try:
        prog.compile(file_path=path)
    except Exception as e:  # a compiler crash on odd input is a compile error
        console.error(dump_traceback(e))
        return {"compiled": False, "exit_code": 1, "status": "compile_error"}
    if prog.errors_had:
        for err in prog.errors_had:
            console.error(err.pretty_print())
        mach.close()
        return {"compiled": False, "exit_code": 1, "status": "compile_error"}
    on_compiled()
    try:
        Jac.jac_import(target=mod[:-4], base_path=base, override_name="__main__", lng="jac")
    except Exception as e:
        if Jac.program.errors_had:
            for err in Jac.program.errors_had:
                console.error(err.pretty_print())
        else:
            console.error(dump_traceback(e))
        mach.close()
        return {"compiled": True, "exit_code": 1, "status": "runtime_error"}
    errors = Jac.program.errors_had
    for err in errors:
        console.error(err.pretty_print())
    mach.close()
    return {"compiled": True, "exit_code": 1 if errors else 0,
            "status": "runtime_error" if errors else "ok"}


class ForkServer:
    """Single-threaded: imports and warms jaclang, then forks one child per job."""

    def __init__(self, limits: Limits, scratch: str):
        self.limits = limits
        self.scratch = scratch
        self.privileged = os.geteuid() == 0
        self.uid_base = self._claim_uid_block() if self.privileged else os.getuid()
        # before jaclang makes this process big: forking the reaper's helpers stays cheap
        self._reaper = _Reaper(self.uid_base, SLOTS_PER_BLOCK) if self.privileged else None
        import jaclang  # noqa: F401  (installs the import hook)
        from jaclang.cli.commands import execution  # noqa: F401
        from jaclang.jac0core.helpers import dump_traceback  # noqa: F401

        _import_compiler()
        self._warm()
        self.base_vm = _vm_size()
        # A normal user's process count includes their whole session: the job's cap is on top.
        self.nproc_base = 0 if self.privileged or not os.path.isdir("/proc") else sum(
            1 for p in os.listdir("/proc") if p.isdigit() and _owned_by_me(p))

    def _claim_uid_block(self) -> int:
        import fcntl

        for block in range(UID_BLOCKS):
            fd = os.open(os.path.join(LOCK_DIR, f"jacrl-uids-{block}.lock"), os.O_RDWR | os.O_CREAT,
                         0o600)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                os.close(fd)
                continue
            self._uid_lock = fd  # held (and inherited by no job: closed in children) until exit
            os.set_inheritable(fd, False)
            return JOB_UID_BASE + block * SLOTS_PER_BLOCK
        raise RuntimeError(f"all {UID_BLOCKS} job uid blocks are in use")

    def _warm(self) -> None:
        """Run a representative program here, then reset every piece of state it touched, so
        children inherit compiled machinery but no program state."""
        from jaclang.jac0core.program import JacProgram
        from jaclang.jac0core.runtime import JacRuntime as Jac

        saved = dict(main=sys.modules.get("__main__"), argv=list(sys.argv), cwd=os.getcwd(),
                     path=list(sys.path), stdout=sys.stdout, stderr=sys.stderr,
                     base=Jac.get_base_path_dir(), target=Jac.get_full_target_path(),
                     ctx=Jac.exec_ctx, loaded=dict(Jac.loaded_modules))
        work = tempfile.mkdtemp(prefix="warm_", dir=self.scratch)
        try:
            os.chdir(work)
            Jac.set_base_path(work)
            path = os.path.join(work, "snippet.jac")
            with open(path, "w") as fh:
                fh.write(WARM_PROGRAM)
            sys.modules["__main__"] = _fresh_main()
            sys.stdout = sys.stderr = io.StringIO()
            info = _run_like_cli(path, lambda: None)
            if info["exit_code"] != 0:
                raise RuntimeError(f"warm-up program failed: {sys.stdout.getvalue()[-500:]}")
        finally:
            sys.stdout, sys.stderr = saved["stdout"], saved["stderr"]
            os.chdir(saved["cwd"])
            shutil.rmtree(work, ignore_errors=True)
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

    # ---- child ---------------------------------------------------------------------------
    def _child(self, source: str, timeout: float, jobdir: str, slot: int, wfd: int) -> None:
        """Runs in the forked child; never returns."""
        code = 70
        try:
            os.setpgid(0, 0)
            _set_pdeathsig()
            for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGPIPE, signal.SIGCHLD):
                signal.signal(sig, signal.SIG_DFL)
            lim = self.limits
            if self.base_vm:  # macOS does not enforce RLIMIT_AS
                mem = self.base_vm + lim.mem_mb * 2**20
                resource.setrlimit(resource.RLIMIT_AS, (mem, mem))
            cpu = int(timeout) + 2
            resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 1))
            fsize = lim.fsize_mb * 2**20
            resource.setrlimit(resource.RLIMIT_FSIZE, (fsize, fsize))
            resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
            work = os.path.join(jobdir, "work")
            os.chdir(work)
            null = os.open(os.devnull, os.O_RDONLY)
            out = os.open(os.path.join(jobdir, "stdout"), os.O_WRONLY | os.O_CREAT, 0o600)
            err = os.open(os.path.join(jobdir, "stderr"), os.O_WRONLY | os.O_CREAT, 0o600)
            for fd, target in ((null, 0), (out, 1), (err, 2)):
                os.dup2(fd, target)
                os.close(fd)
            # Fresh streams: the server flushed before forking, so no buffered text is duplicated.
            sys.stdout = io.TextIOWrapper(io.FileIO(1, "w", closefd=False), encoding="utf-8")
            sys.stderr = io.TextIOWrapper(io.FileIO(2, "w", closefd=False), encoding="utf-8",
                                          errors="backslashreplace", line_buffering=True)
            sys.stdin = io.TextIOWrapper(io.FileIO(0, "r", closefd=False), encoding="utf-8")
            if self.privileged:
                if not _private_tmp(work):
                    raise RuntimeError("could not give the job a private /tmp")
                os.close(self._uid_lock)
                self._reaper.close()  # a job must never be able to ask the reaper anything
                uid = self.uid_base + slot
                os.setgroups([])
                os.setgid(uid)
                os.setuid(uid)
            nproc = self.nproc_base + lim.nproc
            if self.privileged or self.nproc_base:  # macOS counts differently: no cap there
                resource.setrlimit(resource.RLIMIT_NPROC, (nproc, nproc))
            os.environ.clear()
            os.environ.update(minimal_env(work))
            path = os.path.join(work, "snippet.jac")
            with open(path, "w") as fh:
                fh.write(source)
            sys.modules["__main__"] = _fresh_main()
            from jaclang.jac0core.runtime import JacRuntime as Jac

            # jaclang seeds the graph store's location from the cwd at import time (in the server),
            # so every job would share one persisted root graph. A run's graph need not outlive it:
            # keep it in memory (no sqlite file; ~20% faster per job, same stdout).
            Jac.set_base_path(None)
            Jac.set_full_target_path(None)
            # under the `jac` console script sys.path[0] is the interpreter's bin dir
            sys.path[:] = [os.path.dirname(sys.executable)] + [
                p for p in sys.path if p and os.path.abspath(p) != os.getcwd()]
            try:
                info = _run_like_cli(path, lambda: os.write(wfd, b"C\n"))
            except SystemExit as e:  # the program called exit(): `jac run` exits with that code
                if e.code is None or isinstance(e.code, int):
                    exit_code = e.code or 0
                else:
                    print(e.code, file=sys.stderr)
                    exit_code = 1
                info = {"compiled": True, "exit_code": exit_code, "status": "exit"}
            for stream in (sys.stdout, sys.stderr):
                try:
                    stream.flush()
                except BaseException:  # noqa: BLE001  (e.g. the file-size limit)
                    pass
            os.write(wfd, json.dumps(info).encode())
            code = 0
        except BaseException as e:  # noqa: BLE001
            try:
                os.write(wfd, json.dumps({"status": "crashed", "error": repr(e)[:300]}).encode())
            except BaseException:  # noqa: BLE001
                pass
        finally:
            os._exit(code)

    # ---- parent --------------------------------------------------------------------------
    def _spawn(self, source: str, timeout: float, slot: int) -> dict:
        if threading.active_count() != 1:
            raise RuntimeError("the fork server must be single-threaded")
        jobdir = tempfile.mkdtemp(prefix="job_", dir=self.scratch)
        work = os.path.join(jobdir, "work")
        os.mkdir(work, 0o700)
        if self.privileged:
            os.chmod(jobdir, 0o711)  # the job may traverse to its cwd, not list its siblings
            os.chown(work, self.uid_base + slot, self.uid_base + slot)
        rfd, wfd = os.pipe()
        sys.stdout.flush()
        sys.stderr.flush()
        t0 = time.perf_counter()
        pid = os.fork()
        if pid == 0:
            os.close(rfd)
            self._child(source, timeout, jobdir, slot, wfd)
        os.close(wfd)
        try:
            os.setpgid(pid, pid)
        except OSError:
            pass
        os.set_blocking(rfd, False)
        # Wait on process exit (pidfd), not pipe EOF: a job can close its pipe and keep running.
        return dict(pid=pid, rfd=rfd, pfd=os.pidfd_open(pid) if HAVE_PIDFD else None,
                    jobdir=jobdir, t0=t0,
                    deadline=t0 + timeout, buf=b"", slot=slot)

    def _drain(self, job: dict) -> None:
        while True:
            try:
                chunk = os.read(job["rfd"], 65536)
            except BlockingIOError:
                return
            if not chunk:
                return
            if len(job["buf"]) < STATUS_MAX:
                job["buf"] += chunk

    def _kill_leftovers(self, job: dict) -> None:
        try:
            os.killpg(job["pid"], signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        if self._reaper:  # processes that left the group (setsid, double fork) share the uid
            self._reaper.kill_all(self.uid_base + job["slot"])

    def _read(self, path: str, cap: int) -> str:
        try:
            with open(path, "rb") as fh:
                return fh.read(cap).decode("utf-8", errors="replace")
        except OSError:
            return ""

    def _finish(self, job: dict, wstatus: int, timed_out: bool) -> dict:
        seconds = time.perf_counter() - job["t0"]
        self._drain(job)
        os.close(job["rfd"])
        if job["pfd"] is not None:
            os.close(job["pfd"])
        self._kill_leftovers(job)
        stdout = self._read(os.path.join(job["jobdir"], "stdout"), self.limits.max_output)
        stderr = self._read(os.path.join(job["jobdir"], "stderr"), 64 * 1024)
        shutil.rmtree(job["jobdir"], ignore_errors=True)
        buf = job["buf"]
        compiled_early = buf.startswith(b"C\n")
        if compiled_early:
            buf = buf[2:]
        try:
            info = json.loads(buf.decode()) if buf else {}
        except ValueError:
            info = {}
        compiled = bool(info.get("compiled", compiled_early))
        if timed_out:
            status, exit_code = "timeout", None
        elif os.WIFSIGNALED(wstatus):
            status, exit_code = f"killed:{signal.Signals(os.WTERMSIG(wstatus)).name}", None
        else:
            status, exit_code = info.get("status", "crashed"), info.get("exit_code")
        return dict(compiled=compiled, ran=exit_code == 0, exit_code=exit_code, stdout=stdout,
                    stderr=_first_lines(stderr, self.limits.stderr_lines), timed_out=timed_out,
                    seconds=round(seconds, 6), status=status)

    def run_many(self, jobs: list[tuple[str, float]], concurrency: int) -> list[dict]:
        results: list[dict | None] = [None] * len(jobs)
        free_slots = list(range(max(1, min(concurrency, SLOTS_PER_BLOCK))))
        running: dict[int, dict] = {}  # by pid
        sel = selectors.DefaultSelector()
        nxt = 0
        while nxt < len(jobs) or running:
            while nxt < len(jobs) and free_slots:
                job = self._spawn(*jobs[nxt], slot=free_slots.pop())
                job["idx"] = nxt
                nxt += 1
                running[job["pid"]] = job
                if job["pfd"] is not None:
                    sel.register(job["pfd"], selectors.EVENT_READ, job)
            wait = max(0.0, min(j["deadline"] for j in running.values()) - time.perf_counter())
            if HAVE_PIDFD:
                sel.select(timeout=wait)  # a pidfd turns readable when its process exits
            else:  # macOS: poll
                time.sleep(min(wait, 0.002))
            now = time.perf_counter()
            for pid, job in list(running.items()):
                done, wstatus = os.waitpid(pid, os.WNOHANG)
                timed_out = not done and now >= job["deadline"]
                if timed_out:
                    try:
                        os.killpg(pid, signal.SIGKILL)
                    except ProcessLookupError:
                        pass
                    _, wstatus = os.waitpid(pid, 0)
                if done or timed_out:
                    if job["pfd"] is not None:
                        sel.unregister(job["pfd"])
                    del running[pid]
                    results[job["idx"]] = self._finish(job, wstatus, timed_out)
                    free_slots.append(job["slot"])
        sel.close()
        return results  # type: ignore[return-value]


def _owned_by_me(pid: str) -> bool:
    try:
        return os.stat(f"/proc/{pid}").st_uid == os.getuid()
    except OSError:
        return False


def serve(argv: list[str] | None = None) -> None:
    """JSON-lines loop: one request line {"jobs": [[source, timeout], ...], "concurrency": c}
    gets one response line {"results": [...]}."""
    ap = argparse.ArgumentParser(prog="python -m jacrl.executor")
    ap.add_argument("--serve", action="store_true", required=True)
    ap.add_argument("--limits", default="{}", help="JSON of Limits fields")
    args = ap.parse_args(argv)
    limits = Limits(**json.loads(args.limits))
    proto = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)  # keep jaclang's own chatter off the protocol channel
    sys.stdout = io.TextIOWrapper(io.FileIO(1, "w", closefd=False), encoding="utf-8",
                                  line_buffering=True)
    scratch = tempfile.mkdtemp(prefix="jacrl-exec-")
    os.chmod(scratch, 0o711)
    try:
        server = ForkServer(limits, scratch)
        proto.write(json.dumps({"ready": True, "scratch": scratch, "pid": os.getpid(),
                                "privileged": server.privileged, "uid_base": server.uid_base})
                    + "\n")
        proto.flush()
        for line in sys.stdin:
            req = json.loads(line)
            results = server.run_many([tuple(j) for j in req["jobs"]], int(req["concurrency"]))
            proto.write(json.dumps({"results": results}) + "\n")
            proto.flush()
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


# ----------------------------------------------------------------------------------------------
# client
# ----------------------------------------------------------------------------------------------

class Executor:
    """Client of a fork server. Dedups identical programs (exact source + timeout) within a batch
    and across calls; timeouts and kills are not cached (they depend on load)."""

    def __init__(self, limits: Limits = Limits(), concurrency: int | None = None,
                 cache_size: int = 100_000, hash_seed: int | None = None):
        self.limits = limits
        # Children inherit the server's string-hash seed, so set order is fixed per server (it
        # varies per `jac run`); servers with different seeds expose order-dependent output.
        self.hash_seed = hash_seed
        self.concurrency = concurrency or max(1, min(4, os.cpu_count() or 1))
        self.cache: OrderedDict[str, Verdict] | None = OrderedDict() if cache_size else None
        self.cache_size = cache_size
        self.jobs_executed = 0
        self._proc: subprocess.Popen | None = None
        self.hello: dict = {}

    # -- server lifecycle --
    def _start(self) -> None:
        env = minimal_env(os.path.expanduser("~"))
        env["PYTHONPATH"] = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        if self.hash_seed is not None:
            env["PYTHONHASHSEED"] = str(self.hash_seed)
        self._proc = subprocess.Popen(
            [sys.executable, "-m", "jacrl.executor", "--serve", "--limits",
             json.dumps(dataclasses.asdict(self.limits))],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
            env=env, cwd=tempfile.gettempdir(), start_new_session=True)
        line = self._proc.stdout.readline()
        if not line:
            self._kill_server()
            raise ExecutorError("fork server failed to start (run `python -m jacrl.executor "
                                "--serve` to see why)")
        self.hello = json.loads(line)

    def _kill_server(self) -> None:
        proc, self._proc = self._proc, None
        if proc is None:
            return
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        proc.wait()
        for stream in (proc.stdin, proc.stdout):
            try:
                stream.close()
            except OSError:
                pass
        if self.hello.get("scratch"):  # a killed server cannot clean up after itself
            shutil.rmtree(self.hello["scratch"], ignore_errors=True)

    @property
    def server_pid(self) -> int | None:
        return self._proc.pid if self._proc else None

    def close(self) -> None:
        if self._proc is not None:
            try:
                self._proc.stdin.close()
                self._proc.wait(timeout=10)
            except (OSError, subprocess.TimeoutExpired):
                pass
            self._kill_server()

    def __enter__(self) -> Executor:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:  # noqa: BLE001
            pass

    # -- running --
    @staticmethod
    def key(source: str, timeout: float) -> str:
        return hashlib.sha256(f"{timeout!r}\0{source}".encode()).hexdigest()

    def _exchange(self, jobs: list[tuple[str, float]]) -> list[Verdict]:
        if self._proc is None or self._proc.poll() is not None:
            self._kill_server()
            self._start()
        try:
            self._proc.stdin.write(json.dumps({"jobs": jobs, "concurrency": self.concurrency})
                                   + "\n")
            self._proc.stdin.flush()
            line = self._proc.stdout.readline()
            results = json.loads(line)["results"]
        except (OSError, ValueError, KeyError) as e:
            self._kill_server()  # the next call starts a fresh server
            raise ExecutorError(f"fork server died during a batch of {len(jobs)} jobs: "
                                f"{type(e).__name__}") from e
        self.jobs_executed += len(jobs)
        return [Verdict(**r) for r in results]

    def run_many(self, sources: list[str], timeout: float = 20.0) -> list[Verdict]:
        out: list[Verdict | None] = [None] * len(sources)
        first: dict[str, int] = {}
        todo: list[int] = []
        for i, src in enumerate(sources):
            k = self.key(src, timeout)
            if self.cache is not None and k in self.cache:
                self.cache.move_to_end(k)
                out[i] = dataclasses.replace(self.cache[k], cached=True, seconds=0.0)
            elif k not in first:
                first[k] = i
                todo.append(i)
        if todo:
            for i, v in zip(todo, self._exchange([(sources[i], float(timeout)) for i in todo])):
                out[i] = v
                if self.cache is not None and not v.timed_out and not v.status.startswith("killed"):
                    self.cache[self.key(sources[i], timeout)] = v
                    if len(self.cache) > self.cache_size:
                        self.cache.popitem(last=False)
        for i, src in enumerate(sources):
            if out[i] is None:
                out[i] = dataclasses.replace(out[first[self.key(src, timeout)]], cached=True)
        return out  # type: ignore[return-value]

    def run(self, source: str, timeout: float = 20.0) -> Verdict:
        return self.run_many([source], timeout)[0]


# ----------------------------------------------------------------------------------------------
# plain subprocess backend (parity checks only)
# ----------------------------------------------------------------------------------------------

def _jac_bin() -> str:
    return os.path.join(os.path.dirname(sys.executable), "jac")


def _run_cli(args: list[str], cwd: str, timeout: float) -> tuple[int | None, str, str, bool]:
    proc = subprocess.Popen([_jac_bin(), *args], cwd=cwd, env=minimal_env(cwd),
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, start_new_session=True)
    try:
        out, err = proc.communicate(timeout=timeout)
        return proc.returncode, out.decode("utf-8", "replace"), err.decode("utf-8", "replace"), False
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
        return None, out.decode("utf-8", "replace"), err.decode("utf-8", "replace"), True


def run_subprocess(source: str, timeout: float = 20.0, limits: Limits = Limits()) -> Verdict:
    """`jac run snippet.jac` in a fresh temp dir; when it fails, `jac check -p` says whether it
    compiled (the reference harness's two-process way)."""
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="jacrl-sub-") as work:
        with open(os.path.join(work, "snippet.jac"), "w") as fh:
            fh.write(source)
        code, out, err, timed_out = _run_cli(["run", "snippet.jac"], work, timeout)
        compiled = code == 0
        if not compiled:
            left = max(1.0, timeout - (time.perf_counter() - t0))
            check_code, _, _, _ = _run_cli(["check", "-p", "snippet.jac"], work, min(left, 15.0))
            compiled = check_code == 0
    if timed_out:
        status = "timeout"
    elif code == 0:
        status = "ok"
    elif code is not None and code < 0:
        status = f"killed:{signal.Signals(-code).name}"
    else:
        status = "runtime_error" if compiled else "compile_error"
    return Verdict(compiled=compiled, ran=code == 0, exit_code=code,
                   stdout=out.encode()[:limits.max_output].decode("utf-8", "replace"),
                   stderr=_first_lines(err, limits.stderr_lines), timed_out=timed_out,
                   seconds=round(time.perf_counter() - t0, 6), status=status)


if __name__ == "__main__":
    serve()
