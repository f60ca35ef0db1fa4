"""What runs in the fork server's children: the shim that gives a job namespaces of its own, the
job itself, and jaclang's `jac run` split into a compile phase and an exec phase.

Standalone like `server.py` (stdlib + jaclang only, never `jacrl`): the sandbox shows both files
and nothing else of the project, and the server loads this one from its own directory. jaclang is
imported inside the functions, never at import time: the server first moves its own stdout off the
protocol pipe, so that jaclang's chatter cannot reach the client.

    zygote ──fork──▶ shim ──unshare(user, mount, pid, ipc), fork──▶ init (pid 1) ──fork──▶ job

The job's own process reads its program (and its completion secret) from the job directory the
collector wrote: the zygote it is forked from never holds a program or an output (see server.py).

The shim gives the job namespaces of its own: it cannot see or signal the server, the client or
other jobs (own pid namespace; /proc is covered), it has a net namespace of its own (only a down
loopback: no abstract unix socket or loopback port of another job), no SysV IPC left by others,
its /tmp and /var/tmp are fresh tmpfs that vanish with it (the sandbox's /dev is read-only,
`sandbox.minimal_dev`), and when it exits every
process it left behind dies with its pid namespace. A tiny init is pid 1 there, so the job is an
ordinary process (a signal it sends itself acts as under `jac run`; pid 1 would ignore it). The job
keeps no capability and no file descriptor but 0/1/2 and its completion file once its code runs,
and runs under its syscall policy (`install_policy`: no new process, no IPC, no page-cache advice;
`jacrl.executor.policy` builds it).

Before any of the program's code runs, the job writes one byte (COMPILED or PARSED, or nothing)
to the seal pipe and closes it: code from the model can never write to the server. After the
driver's entry code returned normally, the runner writes the job's secret to its completion file;
an exit by any other path (a raise, `sys.exit`, a patched `os._exit`, a signal) leaves it empty.
"""

from __future__ import annotations

import contextlib
import ctypes
import io
import math
import os
import re
import resource
import signal
import sys
import types
from typing import NamedTuple, NoReturn

CLONE_JOB = 0
if sys.platform.startswith("linux") and hasattr(os, "unshare"):
    CLONE_JOB = (
        os.CLONE_NEWUSER | os.CLONE_NEWNS | os.CLONE_NEWPID | os.CLONE_NEWIPC | os.CLONE_NEWNET
    )
PRIVATE_DIRS = ("/tmp", "/var/tmp")  # world-writable: every job gets its own, empty
TMPFS_MB = 64  # each private dir's size: counted in the job's memory bound (server.py)
JOB_CWD = "/tmp/job"
COMPILED, PARSED = b"C", b"P"  # the byte written before the program runs
PR_SET_PDEATHSIG, PR_SET_DUMPABLE = 1, 4  # prctl(2) options
MS_NOSUID, MS_NODEV, MS_NOEXEC = 0x2, 0x4, 0x8  # mount(2) flags
MS_RDONLY, MS_BIND, MS_REC, MS_PRIVATE = 0x1, 0x1000, 0x4000, 0x40000
PR_SET_NO_NEW_PRIVS = 38
PR_SET_SECCOMP, SECCOMP_MODE_FILTER = 22, 2
EXIT_JOB_FAILED, EXIT_SHIM_FAILED = 70, 71  # the job's or the shim's own setup failed

_libc = ctypes.CDLL(None, use_errno=True)


PROGRAM, SECRET = "program.jac", "secret"  # in the job dir, written by the collector


class Job(NamedTuple):
    """One job: its directory (program and secret in it) and where its results go: the captured
    stdout and stderr files, the write end of the seal pipe, the completion file (descriptors)."""

    jobdir: str
    timeout: float
    out: int
    err: int
    seal: int
    done: int


def load_program(jobdir: str) -> tuple[str, str]:
    """(source, secret) of the job, read by the job's own process; the secret file is removed at
    once, so the program cannot find it on disk where there are no namespaces."""
    with open(os.path.join(jobdir, PROGRAM), encoding="utf-8", errors="surrogateescape") as fh:
        source = fh.read()
    path = os.path.join(jobdir, SECRET)
    with open(path) as fh:
        secret = fh.read()
    os.unlink(path)
    return source, secret


# ---- system calls ---------------------------------------------------------------------------


def prctl(option: int, arg: int) -> None:
    try:
        _libc.prctl(option, arg, 0, 0, 0)
    except AttributeError:  # macOS
        pass


def mount(
    src: bytes | None, target: bytes, fstype: bytes | None, flags: int, data: bytes | None
) -> None:
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


def enter_job_namespaces(uid: int, gid: int, keep: list) -> None:
    """In the shim: new user/mount/pid/ipc/net namespaces; the job's first child is pid 1 there.
    The private mounts are made here, then every capability is dropped before the job forks.
    keep: [kept path, real path] of Python dirs that live under a private dir (see the sandbox).
    The net namespace is the job's own (~0.7 ms a job): abstract unix sockets and loopback ports
    are per net namespace, so concurrent jobs cannot reach each other."""
    os.unshare(CLONE_JOB)
    _write("/proc/self/setgroups", "deny")
    _write("/proc/self/uid_map", f"{uid} {uid} 1")
    _write("/proc/self/gid_map", f"{gid} {gid} 1")
    mount(None, b"/", None, MS_REC | MS_PRIVATE, None)
    for d in PRIVATE_DIRS:
        if os.path.isdir(d):
            mount(
                b"tmpfs",
                d.encode(),
                b"tmpfs",
                MS_NOSUID | MS_NODEV,
                f"size={TMPFS_MB}m,mode=1777".encode(),
            )
    for src, path in keep:  # a venv or interpreter under /tmp: back on top, read-only as it was
        os.makedirs(path, exist_ok=True)
        mount(src.encode(), path.encode(), None, MS_BIND | MS_REC, None)
    # The job has a pid namespace of its own, but the /proc it inherits still lists the server's:
    # cover it (a fresh procfs cannot be mounted under bubblewrap's locked /proc/sys).
    mount(
        b"tmpfs",
        b"/proc",
        b"tmpfs",
        MS_NOSUID | MS_NODEV | MS_NOEXEC | MS_RDONLY,
        b"size=4k,mode=555",
    )
    os.makedirs(JOB_CWD, mode=0o700)
    prctl(PR_SET_NO_NEW_PRIVS, 1)  # no exec can give capabilities back
    _drop_capabilities()


class _Fprog(ctypes.Structure):  # struct sock_fprog
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


def install_policy(bpf: bytes) -> None:
    """The job's syscall policy (classic BPF from `jacrl.executor.policy`, built by libseccomp in
    the client), installed on this process for good: every thread it starts inherits it and no
    call can remove it (no_new_privs first, as seccomp requires without capabilities)."""
    if not bpf:
        return
    prctl(PR_SET_NO_NEW_PRIVS, 1)
    buf = ctypes.create_string_buffer(bpf, len(bpf))
    prog = _Fprog(len(bpf) // 8, ctypes.cast(buf, ctypes.c_void_p))
    if _libc.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.byref(prog), 0, 0) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"seccomp: {os.strerror(err)}")


def policy_works(bpf: bytes) -> bool:
    """Whether this kernel takes the policy: try it in a child."""
    pid = os.fork()
    if pid == 0:
        try:
            install_policy(bpf)
            os._exit(0)
        except BaseException:  # noqa: BLE001
            os._exit(1)
    return os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) == 0


def namespaces_work(keep: list) -> bool:
    """Whether per-job namespaces work here (Linux with user namespaces): try in a child."""
    if not CLONE_JOB:
        return False
    pid = os.fork()
    if pid == 0:
        try:
            enter_job_namespaces(os.getuid(), os.getgid(), keep)
            os._exit(0)
        except BaseException:  # noqa: BLE001
            os._exit(1)
    return os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) == 0


# ---- jaclang --------------------------------------------------------------------------------


def fresh_main() -> types.ModuleType:
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
        prog.compile(
            file_path=path,
            options=CompileOptions(type_check=False, no_cgen=True, force_target_program=True),
        )
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
    mach = Jac.create_j_context(
        user_root=None,
        base_path_dir=Jac.get_base_path_dir(),
        full_target_path=Jac.get_full_target_path(),
    )
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


# ---- the shim and the job (forked; never return) --------------------------------------------


def run_shim(job: Job, keep: list, rlimits: dict[int, int], policy: bytes = b"") -> NoReturn:
    """Enters the job's namespaces, forks their init (pid 1 there, which forks the job) and
    mirrors the job's end: exit code or the signal that killed it. Runs no code of the program's."""
    try:
        prctl(PR_SET_PDEATHSIG, signal.SIGKILL)  # dies with the zygote
        prctl(PR_SET_DUMPABLE, 1)  # off in the zygote: needed to write its own id maps
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        program = load_program(job.jobdir)
        enter_job_namespaces(os.getuid(), os.getgid(), keep)
        status_r, status_w = os.pipe()
        pid = os.fork()
        if pid == 0:
            os.close(status_r)
            _run_init(job, program, rlimits, status_w, policy)
        for fd in (job.out, job.err, job.seal, job.done, status_w):
            os.close(fd)
        os.waitpid(pid, 0)
        reported = os.read(status_r, 32)
        if not reported:
            raise RuntimeError("the job's init reported no status")
        status = int(reported)
    except BaseException as e:  # noqa: BLE001  (an infrastructure failure: say what it was)
        os.write(job.err, f"jacrl job shim failed: {e!r}\n".encode())
        os._exit(EXIT_SHIM_FAILED)
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        try:
            resource.setrlimit(resource.RLIMIT_CORE, (0, 0))  # SIGXCPU's default dumps core
            if sig not in (signal.SIGKILL, signal.SIGSTOP):  # those have no handler to reset
                signal.signal(sig, signal.SIG_DFL)
            os.kill(os.getpid(), sig)
        finally:
            os._exit(128 + sig)
    os._exit(os.WEXITSTATUS(status))


def _run_init(
    job: Job, program: tuple[str, str], rlimits: dict[int, int], status_w: int, policy: bytes
) -> NoReturn:
    """pid 1 of the job's namespace: forks the job, reaps whatever is reparented to it until the
    job ends, and writes its wait status to the shim. Not dumpable: the job cannot ptrace it."""
    try:
        prctl(PR_SET_PDEATHSIG, signal.SIGKILL)  # dies with the shim
        pid = os.fork()
        if pid == 0:
            os.close(status_w)
            run_job(job, JOB_CWD, rlimits, program, policy)
        prctl(PR_SET_DUMPABLE, 0)  # after the fork: the job stays an ordinary, dumpable process
        for fd in (job.out, job.err, job.seal, job.done):
            os.close(fd)
        while True:
            done, status = os.wait()
            if done == pid:
                break
        os.write(status_w, str(status).encode())
    except BaseException:  # noqa: BLE001  (the shim reports the missing status)
        os._exit(EXIT_SHIM_FAILED)
    os._exit(0)


def run_job(
    job: Job,
    work: str,
    rlimits: dict[int, int],
    program: tuple[str, str] | None = None,
    policy: bytes = b"",
) -> NoReturn:
    """The job: its own session, resource limits, stdio on the capture files, a minimal
    environment, its syscall policy (`install_policy`; before jaclang compiles the program), then
    the program in `work`. Exits with the program's exit code (70 when the job's own setup
    failed). program: (source, secret), when the shim already read them."""
    code = EXIT_JOB_FAILED
    try:
        source, secret = program or load_program(job.jobdir)
        del program
        _detach()
        _limit(rlimits, job.timeout)
        _redirect(work, job)
        path = _write_program(source, work)
        del source
        install_policy(policy)
        code = _run_program(path, job.seal, job.done, secret)
    except BaseException:  # noqa: BLE001
        code = EXIT_JOB_FAILED
    finally:
        os._exit(code & 0xFF)


def _detach() -> None:
    os.setsid()  # no signal to its process group or session reaches the server
    prctl(PR_SET_PDEATHSIG, signal.SIGKILL)  # dies with the shim (or the server)
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGPIPE, signal.SIGCHLD):
        signal.signal(sig, signal.SIG_DFL)


def cpu_limit(timeout: float) -> float:
    """A job's time-out proper, in CPU seconds of its whole process tree, enforced by the zygote
    (server.py): a busy machine stretches wall time, not CPU time, so load does not cut a correct
    answer off."""
    return max(0.01, timeout)


def wall_limit(timeout: float) -> float:
    """The wall-clock backstop, for a job that sleeps or blocks: 1 s past its CPU limit."""
    return cpu_limit(timeout) + 1.0


def _limit(rlimits: dict[int, int], timeout: float) -> None:
    """The server's limits, and RLIMIT_CPU as a backstop only (whole seconds, per process): the
    zygote kills the job at its CPU limit first."""
    cpu = math.ceil(cpu_limit(timeout)) + 1
    resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 1))
    for which, value in rlimits.items():
        resource.setrlimit(which, (value, value))


def _redirect(work: str, job: Job) -> None:
    """cwd `work`; stdin /dev/null, stdout and stderr the capture files; every other file
    descriptor closed but the seal pipe and the completion file."""
    os.chdir(work)
    null = os.open(os.devnull, os.O_RDONLY)
    for fd, target in ((null, 0), (job.out, 1), (job.err, 2)):
        os.dup2(fd, target)
    low, high = sorted((job.seal, job.done))
    for a, b in ((3, low), (low + 1, high), (high + 1, 1 << 20)):
        os.closerange(a, b)
    sys.stdout = io.TextIOWrapper(io.FileIO(1, "w", closefd=False), encoding="utf-8")
    sys.stderr = io.TextIOWrapper(
        io.FileIO(2, "w", closefd=False),
        encoding="utf-8",
        errors="backslashreplace",
        line_buffering=True,
    )
    sys.stdin = io.TextIOWrapper(io.FileIO(0, "r", closefd=False), encoding="utf-8")
    # the environment `jacrl.executor.client.minimal_env` gives a `jac run` subprocess
    os.environ.clear()
    os.environ.update(
        PATH=os.defpath + ":" + os.path.dirname(sys.executable), LANG="C.UTF-8", HOME=work
    )


def _write_program(source: str, work: str) -> str:
    """snippet.jac in `work`, with __main__, jaclang's paths and sys.path as under `jac run`."""
    from jaclang.jac0core.runtime import JacRuntime as Jac

    path = os.path.join(work, "snippet.jac")
    with open(path, "w", errors="surrogateescape") as fh:
        fh.write(source)
    sys.modules["__main__"] = fresh_main()
    # jaclang seeds the graph store's location from the cwd at import time (in the server),
    # so every job would share one persisted root graph. A run's graph need not outlive it:
    # keep it in memory (no sqlite file; ~20% faster per job, same stdout).
    Jac.set_base_path(None)
    Jac.set_full_target_path(None)
    # under the `jac` console script sys.path[0] is the interpreter's bin dir
    sys.path[:] = [os.path.dirname(sys.executable)] + [
        p for p in sys.path if p and os.path.abspath(p) != os.getcwd()
    ]
    return path


def _run_program(path: str, seal_w: int, done: int, secret: str) -> int:
    """Runs the program; its exit code as `jac run` would give it. The secret goes to `done` only
    when the driver's entry code returned normally with nothing left to report as an error."""

    def seal(byte: bytes) -> None:
        if byte:
            os.write(seal_w, byte)
        os.close(seal_w)  # from here on nothing the job runs can reach the server

    completed = False
    try:
        code = run_like_cli(path, seal)
        completed = code == 0
    except SystemExit as e:  # the program called exit(): `jac run` exits with that code
        if e.code is None or isinstance(e.code, int):
            code = e.code or 0
        else:
            print(e.code, file=sys.stderr)
            code = 1
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(BaseException):  # e.g. the file-size limit
            stream.flush()
    if completed:
        os.write(done, secret.encode())
    return code
