"""The fork server that runs untrusted Jac programs: `python jobserver.py --limits JSON`.

Standalone on purpose (stdlib + jaclang only, never `jacrl`): `jacrl.executor` starts it inside a
bubblewrap sandbox in which the project tree is not visible, only this file, the interpreter, its
stdlib and site-packages. It imports and warms jaclang once, then per job forks:

    server ──fork──▶ shim ──unshare(user, mount, pid, ipc), fork──▶ job (pid 1 of its own ns)

The shim gives the job namespaces of its own: it cannot see or signal the server, the client or
other jobs (own pid namespace; /proc is covered), it has no network (the sandbox's net namespace
is empty; a namespace per job would cost ~3 ms a job for no gain), no SysV IPC left by others,
its /tmp, /var/tmp and /dev/shm are fresh tmpfs that vanish with it, and when it exits every
process it left behind dies with its pid namespace. The job keeps no capability and no file
descriptor but 0/1/2 once its own code runs.

The server never sees an expected output: it receives programs and reports what it observed. A
verdict comes only from the wait status, the captured stdout/stderr and the server's clock, plus
one byte the job writes *before* any of its code runs (compiled or parsed) on a pipe it closes
before running the program — code from the model can never write to the server.

Protocol (JSON lines): request {"jobs": [[source, timeout], ...], "concurrency": c}; one line
{"i": index, "result": {...}} per job as it finishes, then {"done": n}.
"""

from __future__ import annotations

import argparse
import ctypes
import io
import json
import os
import re
import resource
import selectors
import shutil
import signal
import sys
import tempfile
import threading
import time
import types

HAVE_PIDFD = hasattr(os, "pidfd_open")  # Linux; macOS polls
CLONE_JOB = 0
if sys.platform.startswith("linux") and hasattr(os, "unshare"):
    CLONE_JOB = os.CLONE_NEWUSER | os.CLONE_NEWNS | os.CLONE_NEWPID | os.CLONE_NEWIPC
PRIVATE_DIRS = ("/tmp", "/var/tmp", "/dev/shm")  # world-writable: every job gets its own, empty
JOB_CWD = "/tmp/job"
COMPILED, PARSED = b"C", b"P"  # the byte written before the program runs

DEFAULT_LIMITS = dict(mem_mb=1024, fsize_mb=16, nproc=32, max_output=1 << 20, stderr_lines=40)

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

_libc = ctypes.CDLL(None, use_errno=True)


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


def _prctl(option: int, arg: int) -> None:
    try:
        _libc.prctl(option, arg, 0, 0, 0)
    except AttributeError:  # macOS
        pass


def _mount(src: bytes | None, target: bytes, fstype: bytes | None, flags: int,
           data: bytes | None) -> None:
    if _libc.mount(src, target, fstype, flags, data) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"mount {target.decode()}: {os.strerror(err)}")


def _write(path: str, text: str) -> None:
    fd = os.open(path, os.O_WRONLY)
    try:
        os.write(fd, text.encode())
    finally:
        os.close(fd)


def _drop_capabilities() -> None:
    """capset(2) with empty sets: the job keeps no capability even inside its own namespaces, so
    it cannot unmount what covers /proc or remount anything."""
    header = (ctypes.c_uint32 * 2)(0x20080522, 0)  # _LINUX_CAPABILITY_VERSION_3, this thread
    data = (ctypes.c_uint32 * 6)()
    if _libc.syscall(126 if os.uname().machine in ("x86_64", "amd64") else 91, header, data) != 0:
        err = ctypes.get_errno()  # 126: x86_64; 91: aarch64 (the generic table)
        raise OSError(err, f"capset: {os.strerror(err)}")


def _enter_job_namespaces(uid: int, gid: int, keep: list) -> None:
    """In the shim: new user/mount/pid/ipc namespaces; the job's first child is pid 1 there.
    The private mounts are made here, then every capability is dropped before the job forks."""
    os.unshare(CLONE_JOB)
    _write("/proc/self/setgroups", "deny")
    _write("/proc/self/uid_map", f"{uid} {uid} 1")
    _write("/proc/self/gid_map", f"{gid} {gid} 1")
    ms_nosuid, ms_nodev, ms_noexec = 0x2, 0x4, 0x8
    ms_bind, ms_rec, ms_private = 0x1000, 0x4000, 0x40000
    _mount(None, b"/", None, ms_rec | ms_private, None)
    for d in PRIVATE_DIRS:
        if os.path.isdir(d):
            _mount(b"tmpfs", d.encode(), b"tmpfs", ms_nosuid | ms_nodev, b"size=64m,mode=1777")
    for src, path in keep:  # a venv or interpreter under /tmp: back on top, read-only as it was
        os.makedirs(path, exist_ok=True)
        _mount(src.encode(), path.encode(), None, ms_bind | ms_rec, None)
    # The job has a pid namespace of its own, but the /proc it inherits still lists the server's:
    # cover it (a fresh procfs cannot be mounted under bubblewrap's locked /proc/sys).
    _mount(b"tmpfs", b"/proc", b"tmpfs", ms_nosuid | ms_nodev | ms_noexec, b"size=4k,mode=555")
    os.makedirs(JOB_CWD, mode=0o700)
    _drop_capabilities()


def _import_compiler() -> None:
    """Import every module of jaclang's compiler and runtime now. jaclang loads some lazily (e.g.
    `jac0core.diagnostic_utils` for inherited archetypes); loaded here once, the first job of
    each kind is as fast as the rest and no job depends on a cache it cannot write."""
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


def _fresh_main() -> types.ModuleType:
    """`jac run` executes a program inside the `jac` console script's __main__, which already holds
    `re`, `sys` and `start_cli`; give every job a fresh module seeded the same way (parity)."""
    from jaclang.jac0core.cli_boot import start_cli

    main = types.ModuleType("__main__")
    main.__dict__.update(re=re, sys=sys, start_cli=start_cli)
    return main


def parses(path: str) -> bool:
    """`jac check -p`: jaclang's passes without type checking or code generation."""
    from jaclang.jac0core.compile_options import CompileOptions
    from jaclang.jac0core.program import JacProgram

    prog = JacProgram()
    try:
        prog.compile(file_path=path, options=CompileOptions(type_check=False, no_cgen=True,
                                                            force_target_program=True))
    except Exception:  # noqa: BLE001  (a compiler crash on odd input)
        return False
    return not prog.errors_had


def run_like_cli(path: str, seal) -> int:
    """`jac run <path>` (jaclang 0.16.7, cli/commands/impl/execution.impl.jac) split into a compile
    phase and an exec phase, printing errors exactly as the CLI does. `seal(byte)` is called once,
    between the phases (COMPILED) or after a failed compile (PARSED or nothing). Returns the exit
    code."""
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
        errors = list(prog.errors_had)
    except Exception as e:  # noqa: BLE001  (a compiler crash on odd input is a compile error)
        console.error(dump_traceback(e))
        errors = None
    if errors != []:
        for err in errors or ():
            console.error(err.pretty_print())
        seal(PARSED if parses(path) else b"")
        return 1
    seal(COMPILED)
    try:
        Jac.jac_import(target=mod[:-4], base_path=base, override_name="__main__", lng="jac")
    except Exception as e:  # noqa: BLE001
        if Jac.program.errors_had:
            for err in Jac.program.errors_had:
                console.error(err.pretty_print())
        else:
            console.error(dump_traceback(e))
        mach.close()
        return 1
    errors = Jac.program.errors_had
    for err in errors:
        console.error(err.pretty_print())
    mach.close()
    return 1 if errors else 0


class ForkServer:
    """Single-threaded: imports and warms jaclang, then forks a shim (and its job) per job."""

    def __init__(self, limits: dict, scratch: str, namespaces: bool = True, keep=()):
        self.keep = list(keep)  # [kept path, real path] of Python dirs under /tmp (see sandbox)
        self.limits = {**DEFAULT_LIMITS, **limits}
        self.scratch = scratch
        import jaclang  # noqa: F401  (installs the import hook)
        from jaclang.cli.commands import execution  # noqa: F401
        from jaclang.jac0core.helpers import dump_traceback  # noqa: F401

        _import_compiler()
        self._warm()
        self.base_vm = _vm_size()
        self.namespaces = namespaces and self._probe_namespaces()
        # A job must not ptrace or read the memory of this process even if it could name it.
        _prctl(4, 0)  # PR_SET_DUMPABLE
        # Without namespaces a normal user's process count includes their whole session.
        self.nproc_base = 0 if self.namespaces or not os.path.isdir("/proc") else sum(
            1 for p in os.listdir("/proc") if p.isdigit() and _owned_by_me(p))

    def _probe_namespaces(self) -> bool:
        """Whether per-job namespaces work here (Linux with user namespaces)."""
        if not CLONE_JOB:
            return False
        pid = os.fork()
        if pid == 0:
            try:
                _enter_job_namespaces(os.getuid(), os.getgid(), self.keep)
                os._exit(0)
            except BaseException:  # noqa: BLE001
                os._exit(1)
        return os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) == 0

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
            if run_like_cli(path, lambda _: None) != 0:
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

    # ---- shim and job (forked; never return) ---------------------------------------------
    def _shim(self, source: str, timeout: float, out: int, err: int, seal_w: int) -> None:
        """Enters the job's namespaces, forks the job (pid 1 there) and mirrors its end: exit code
        or the signal that killed it. Runs no code of the program's."""
        try:
            _prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG: dies with the server
            _prctl(4, 1)  # PR_SET_DUMPABLE, off in the server: needed to write its own id maps
            signal.signal(signal.SIGCHLD, signal.SIG_DFL)
            _enter_job_namespaces(os.getuid(), os.getgid(), self.keep)
            pid = os.fork()
            if pid == 0:
                self._job(source, timeout, JOB_CWD, out, err, seal_w)
            for fd in (out, err, seal_w):
                os.close(fd)
            _, status = os.waitpid(pid, 0)
        except BaseException as e:  # noqa: BLE001  (an infrastructure failure: say what it was)
            os.write(err, f"jacrl job shim failed: {e!r}\n".encode())
            os._exit(71)
        if os.WIFSIGNALED(status):
            sig = os.WTERMSIG(status)
            signal.signal(sig, signal.SIG_DFL)
            os.kill(os.getpid(), sig)
            os._exit(128 + sig)
        os._exit(os.WEXITSTATUS(status))

    def _job(self, source: str, timeout: float, work: str, out: int, err: int,
             seal_w: int) -> None:
        code = 70
        try:
            os.setsid()  # no signal to its process group or session reaches the server
            _prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG: dies with the shim (or the server)
            for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGPIPE, signal.SIGCHLD):
                signal.signal(sig, signal.SIG_DFL)
            lim = self.limits
            if self.base_vm:  # macOS does not enforce RLIMIT_AS
                mem = self.base_vm + lim["mem_mb"] * 2**20
                resource.setrlimit(resource.RLIMIT_AS, (mem, mem))
            cpu = int(timeout) + 2
            resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 1))
            fsize = lim["fsize_mb"] * 2**20
            resource.setrlimit(resource.RLIMIT_FSIZE, (fsize, fsize))
            resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
            if self.namespaces or self.nproc_base:  # counted per user namespace (Linux >= 5.14)
                nproc = self.nproc_base + lim["nproc"]
                resource.setrlimit(resource.RLIMIT_NPROC, (nproc, nproc))
            os.chdir(work)
            null = os.open(os.devnull, os.O_RDONLY)
            for fd, target in ((null, 0), (out, 1), (err, 2)):
                os.dup2(fd, target)
            # Nothing of the server's (its protocol pipe above all) stays open in the job.
            os.closerange(3, seal_w)
            os.closerange(seal_w + 1, 1 << 20)
            sys.stdout = io.TextIOWrapper(io.FileIO(1, "w", closefd=False), encoding="utf-8")
            sys.stderr = io.TextIOWrapper(io.FileIO(2, "w", closefd=False), encoding="utf-8",
                                          errors="backslashreplace", line_buffering=True)
            sys.stdin = io.TextIOWrapper(io.FileIO(0, "r", closefd=False), encoding="utf-8")
            os.environ.clear()
            os.environ.update(PATH=os.defpath + ":" + os.path.dirname(sys.executable),
                              LANG="C.UTF-8", HOME=work)
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

            def seal(byte: bytes) -> None:
                if byte:
                    os.write(seal_w, byte)
                os.close(seal_w)  # from here on nothing the job runs can reach the server

            try:
                code = run_like_cli(path, seal)
            except SystemExit as e:  # the program called exit(): `jac run` exits with that code
                if e.code is None or isinstance(e.code, int):
                    code = e.code or 0
                else:
                    print(e.code, file=sys.stderr)
                    code = 1
            for stream in (sys.stdout, sys.stderr):
                try:
                    stream.flush()
                except BaseException:  # noqa: BLE001  (e.g. the file-size limit)
                    pass
        except BaseException:  # noqa: BLE001
            code = 70
        finally:
            os._exit(code & 0xFF)

    # ---- parent --------------------------------------------------------------------------
    def _spawn(self, source: str, timeout: float) -> dict:
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
            if self.namespaces:
                self._shim(source, timeout, out, err, seal_w)
            self._job(source, timeout, os.path.join(jobdir, "work"), out, err, seal_w)
        for fd in (out, err, seal_w):
            os.close(fd)
        os.set_blocking(seal_r, False)
        # Wait on process exit (pidfd), not pipe EOF: a job can close its pipe and keep running.
        return dict(pid=pid, seal=seal_r, pfd=os.pidfd_open(pid) if HAVE_PIDFD else None,
                    jobdir=jobdir, t0=t0, deadline=t0 + timeout)

    def _read(self, path: str, cap: int) -> str:
        try:
            with open(path, "rb") as fh:
                return fh.read(cap).decode("utf-8", errors="replace")
        except OSError:
            return ""

    def _finish(self, job: dict, wstatus: int, timed_out: bool) -> dict:
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
        stdout = self._read(os.path.join(job["jobdir"], "stdout"), self.limits["max_output"])
        stderr = self._read(os.path.join(job["jobdir"], "stderr"), 64 * 1024)
        shutil.rmtree(job["jobdir"], ignore_errors=True)
        compiled = sealed == COMPILED  # produced runnable code; PARSED: passed the parse check
        exit_code = None
        if timed_out:
            status = "timeout"
        elif os.WIFSIGNALED(wstatus):
            status = f"killed:{signal.Signals(os.WTERMSIG(wstatus)).name}"
        else:
            exit_code = os.WEXITSTATUS(wstatus)
            status = ("compile_error" if not compiled else "ok" if exit_code == 0
                      else "runtime_error")
        lines = stderr.splitlines(keepends=True)[:self.limits["stderr_lines"]]
        return dict(compiled=compiled or sealed == PARSED, ran=compiled and exit_code == 0,
                    exit_code=exit_code, stdout=stdout, stderr="".join(lines),
                    timed_out=timed_out, seconds=round(seconds, 6), status=status)

    def run_many(self, jobs: list[tuple[str, float]], concurrency: int, emit) -> None:
        """Runs the jobs, `concurrency` at a time; `emit(index, result)` as each one ends."""
        running: dict[int, dict] = {}  # by pid
        sel = selectors.DefaultSelector()
        nxt = 0
        while nxt < len(jobs) or running:
            while nxt < len(jobs) and len(running) < max(1, concurrency):
                job = self._spawn(*jobs[nxt])
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
                if timed_out:  # the shim dies, its job with it (pdeathsig), then the namespace
                    for kill in (os.kill, os.killpg):
                        try:
                            kill(pid, signal.SIGKILL)
                        except (ProcessLookupError, PermissionError):
                            pass
                    _, wstatus = os.waitpid(pid, 0)
                if done or timed_out:
                    if job["pfd"] is not None:
                        sel.unregister(job["pfd"])
                    del running[pid]
                    emit(job["idx"], self._finish(job, wstatus, timed_out))
        sel.close()


def _owned_by_me(pid: str) -> bool:
    try:
        return os.stat(f"/proc/{pid}").st_uid == os.getuid()
    except OSError:
        return False


def serve(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="jobserver.py")
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
