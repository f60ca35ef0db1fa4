"""The client side of the executor: run untrusted Jac source fast and in isolation.

A warm *fork server* (`server.py` and `child.py` in this package, see there) imports jaclang once,
warms it, then forks one job per program. It runs inside a bubblewrap sandbox (`sandbox.py`) and
gives every job namespaces of its own. The caller (a trainer with threads and an accelerator)
never forks: it is a client (`Executor`) of the server over JSON lines, with a deadline of its own
— a batch yields a result at least every (largest wall backstop + SLACK) seconds, whatever the
server or its jobs do. A job's timeout is CPU time, with a wall-clock backstop (server.py). A
server fault (it died, went silent past that deadline, or broke the protocol) is
not a verdict: the server is replaced and only the jobs still without a verdict are resubmitted, at
most `retries` times (each one a `ExecutorRetryWarning` and `Executor.restarts` + 1); then the
batch raises `ExecutorError`. A fault never becomes a score.

The server receives programs only; expected outputs stay here. A verdict is what the server
observed: wait status, captured stdout/stderr, its own clock, and whether jaclang compiled the
program (reported before any of the program's code runs).

`compiled` means the program passes jaclang's parse check, `jac check -p` (lexer, parser and the
passes before type checking and code generation). It is True for every program that ran, and also
for one that parses but cannot be turned into bytecode (e.g. `await` in a plain `def`, `nonlocal`
of an unknown name): `jac run` rejects those before running, and the status is then
`compile_error`. Both backends use this definition.

`jacrl.executor.plain.run_subprocess` is the plain `jac run` backend, for parity checks.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import os
import select
import signal
import subprocess
import sys
import tempfile
import time
import warnings
from collections import OrderedDict
from collections.abc import Sequence
from pathlib import Path

from jacrl.executor import policy, sandbox
from jacrl.executor.budget import fit_concurrency
from jacrl.executor.child import wall_limit
from jacrl.executor.jac_cache import jac_cache

# the server script, then the file it loads from its own folder (both shown in the sandbox)
SERVER_FILES = tuple(
    str(Path(__file__).with_name(f)) for f in ("server.py", "child.py", "warm.py", "budget.py")
)
SLACK = 3.0  # seconds past a job's wall backstop before the client declares the server hung
START_TIMEOUT = 180.0  # importing and warming jaclang on a loaded 2-core machine


@dataclasses.dataclass(frozen=True)
class Limits:
    """Per-job resource limits."""

    mem_mb: int = 1024  # the whole job's memory: processes and tmpfs (budget.process_budget)
    fsize_mb: int = 16  # largest file a job may write (also caps its stdout/stderr files)
    nproc: int = 3  # processes and threads a job may have at once (in its own user namespace)
    max_output: int = 1 << 20  # bytes of stdout kept
    stderr_lines: int = 40  # lines of stderr kept in the verdict


@dataclasses.dataclass(frozen=True)
class Verdict:
    """What happened to one program. `compiled`: passes the parse check (see the module doc);
    `ran`: compiled to bytecode and exited with code 0, as under `jac run`."""

    compiled: bool
    ran: bool
    exit_code: int | None
    stdout: str
    stderr: str
    timed_out: bool
    seconds: float
    status: str  # ok | compile_error | runtime_error | timeout | killed:<SIG>
    cpu_seconds: float = 0.0  # the job's CPU time (its processes, reaped): unlike `seconds`, not
    # inflated by a busy machine; 0.0 where unmeasured (the plain `jac run` backend)
    cached: bool = False

    def to_json(self) -> dict:
        return dataclasses.asdict(self)


class ExecutorError(RuntimeError):
    """Infrastructure failure (the server died, hung or misbehaved). Never a score."""


class ExecutorRetryWarning(RuntimeWarning):
    """A server fault during a batch: the server was replaced and the jobs without a verdict were
    resubmitted (`Executor.retries`)."""


def minimal_env(home: str) -> dict[str, str]:
    """The only environment a `jac run` subprocess sees: no tokens or keys leak into model code."""
    return {
        "PATH": os.defpath + ":" + os.path.dirname(sys.executable),
        "LANG": "C.UTF-8",
        "HOME": home,
    }


@functools.cache
def job_policy() -> bytes:
    """Every job's syscall policy as BPF (`policy.build`, once a process); b"" where libseccomp
    is not to be had (`policy.why_none` says why)."""
    return b"" if policy.why_none() else policy.build()


class _Server:
    """One running fork server: the process and a line reader with deadlines."""

    def __init__(self, limits: Limits, hash_seed: int | None, want: str | None):
        args = ["--limits", json.dumps(dataclasses.asdict(limits))]
        if want == "rlimits-only":  # resource limits only: no namespaces, no syscall policy
            args.append("--no-namespaces")
        else:
            args += ["--policy", job_policy().hex()]
        self.level = "rlimits-only"
        self.note = sandbox.why_unsandboxed() or (f"{want} requested" if want else None)
        self._buf = b""
        self._err = tempfile.TemporaryFile()
        if self.note is None:
            launch = sandbox.Launch(SERVER_FILES, args, hash_seed, jac_cache())
            try:
                self.proc = subprocess.Popen(
                    launch.argv,
                    stdin=subprocess.PIPE,
                    stdout=subprocess.PIPE,
                    stderr=self._err,
                    pass_fds=launch.fds,
                    env={"PATH": os.defpath, "LANG": "C.UTF-8"},
                    cwd="/",
                    start_new_session=True,
                )
            finally:
                launch.close()
        else:
            env = minimal_env(tempfile.gettempdir())
            if hash_seed is not None:
                env["PYTHONHASHSEED"] = str(hash_seed)
            self.proc = subprocess.Popen(
                [sys.executable, "-s", "-B", SERVER_FILES[0], *args],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=self._err,
                env=env,
                cwd=tempfile.gettempdir(),
                start_new_session=True,
            )
        os.set_blocking(self.proc.stdin.fileno(), False)  # `send` has a deadline too
        try:
            self.hello = self.read(START_TIMEOUT)
        except ExecutorError as e:
            why = self.stderr_tail() or str(e)
            self.kill()
            raise ExecutorError(f"fork server failed to start: {why}") from e
        if self.hello.get("namespaces"):
            self.level = "sandbox" if self.note is None else "namespaces"

    def stderr_tail(self) -> str:
        self._err.seek(0)
        lines = self._err.read().decode("utf-8", "replace").strip().splitlines()
        return lines[-1] if lines else ""

    def read(self, timeout: float) -> dict:
        """The next JSON line, or ExecutorError after `timeout` seconds without one."""
        deadline = time.monotonic() + timeout
        fd = self.proc.stdout.fileno()
        while b"\n" not in self._buf:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([fd], [], [], left)[0]:
                raise ExecutorError(f"no answer from the fork server within {timeout:.1f} s")
            chunk = os.read(fd, 1 << 20)
            if not chunk:
                try:
                    code = self.proc.wait(timeout=1)
                except subprocess.TimeoutExpired:
                    code = None
                raise ExecutorError(f"the fork server exited (status {code})")
            self._buf += chunk
        line, self._buf = self._buf.split(b"\n", 1)
        try:
            return json.loads(line)
        except ValueError as e:
            raise ExecutorError("the fork server sent a malformed line") from e

    def send(self, obj: dict, timeout: float) -> None:
        """Write one JSON line, or ExecutorError after `timeout` seconds of a full pipe (a stopped
        server does not read: a request larger than the pipe's buffer would block forever)."""
        view = memoryview((json.dumps(obj) + "\n").encode())
        fd = self.proc.stdin.fileno()
        deadline = time.monotonic() + timeout
        try:
            while view:
                left = deadline - time.monotonic()
                if left <= 0 or not select.select([], [fd], [], left)[1]:
                    raise ExecutorError(f"the fork server took no request within {timeout:.1f} s")
                try:
                    view = view[os.write(fd, view) :]
                except BlockingIOError:
                    continue
        except OSError as e:
            raise ExecutorError(f"the fork server is gone ({type(e).__name__})") from e

    def kill(self) -> None:
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        self.proc.wait()
        for stream in (self.proc.stdin, self.proc.stdout):
            try:
                stream.close()
            except OSError:
                pass
        self._err.close()

    def close(self) -> None:
        try:
            self.proc.stdin.close()
            self.proc.wait(timeout=10)
        except (OSError, subprocess.TimeoutExpired):
            pass
        self.kill()


class Executor:
    """Client of a fork server. Dedups identical programs (exact source + timeout) within a batch
    and across calls; timeouts and kills are not cached (they depend on load).

    A server fault during a batch (the server died, said nothing for the batch's largest timeout
    + SLACK, or broke the protocol) starts a fresh server and resubmits only the jobs that have no
    verdict yet; the verdicts that arrived are kept. Up to `retries` times per batch (each with an
    `ExecutorRetryWarning`; `restarts` counts them), then `ExecutorError` naming every attempt —
    so a batch takes at most (retries + 1) x (server start + deadline) before it raises. A job's
    own failure (timeout, crash, kill) is a verdict, never a retry; a job that kills the server
    itself every time it runs ends as `ExecutorError` after the last attempt. `jobs_executed`
    counts the verdicts received from servers (each job once; cached and deduplicated ones not).

    Refuses to start below the `sandbox` isolation level unless `allow_unsandboxed` (default: the
    JACRL_ALLOW_UNSANDBOXED environment variable), and then warns, naming the risk. `isolation`
    asks for a lower level on purpose (benchmarks, and tests that show what the sandbox stops)."""

    def __init__(
        self,
        limits: Limits = Limits(),
        concurrency: int | None = None,
        cache_size: int = 100_000,
        hash_seed: int | None = None,
        allow_unsandboxed: bool | None = None,
        isolation: str | None = None,
        retries: int = 2,
    ):
        if isolation not in (None, *sandbox.LEVELS):
            raise ValueError(f"unknown isolation {isolation!r}; choose from {sandbox.LEVELS}")
        if not isinstance(retries, int) or retries < 0:
            raise ValueError(f"retries must be an int >= 0, not {retries!r}")
        self.retries = retries
        self.restarts = 0  # fresh servers started to finish a batch after a server fault
        self.want = None if isolation == "sandbox" else isolation
        self.limits = limits
        # Children inherit the server's string-hash seed, so set order is fixed per server (it
        # varies per `jac run`); servers with different seeds expose order-dependent output.
        self.hash_seed = hash_seed
        self.concurrency = fit_concurrency(
            concurrency or max(1, min(4, os.cpu_count() or 1)), limits.mem_mb
        )
        self.cache: OrderedDict[str, Verdict] | None = OrderedDict() if cache_size else None
        self.cache_size = cache_size
        self.allow_unsandboxed = (
            sandbox.allowed_unsandboxed() if allow_unsandboxed is None else allow_unsandboxed
        )
        self.jobs_executed = 0
        self._server: _Server | None = None

    # -- server lifecycle --
    def _ensure_server(self) -> _Server:
        if self._server is not None and self._server.proc.poll() is None:
            return self._server
        self._drop_server()
        reason = (
            sandbox.why_unsandboxed()
            or (f"isolation {self.want!r} requested" if self.want else None)
            or policy.why_none()
        )
        if reason and not self.allow_unsandboxed:
            raise sandbox.refuse(reason)
        self._server = _Server(self.limits, self.hash_seed, self.want)
        if self._server.level != "sandbox":
            warnings.warn(
                f"jacrl executor isolation is {self._server.level!r} "
                f"({self._server.note or 'no user namespaces'}): {sandbox.RISK}",
                stacklevel=3,
            )
        elif not self._server.hello.get("policy"):
            why = policy.why_none() or "the kernel refused the seccomp filter"
            if not self.allow_unsandboxed:
                self._drop_server()
                raise sandbox.refuse(why)
            warnings.warn(
                f"jacrl executor: jobs run without their syscall policy ({why}): kernel state "
                "(page cache, per-user quotas, IPC) can carry data between jobs",
                stacklevel=3,
            )
        return self._server

    def _drop_server(self) -> None:
        server, self._server = self._server, None
        if server is not None:
            server.kill()

    @property
    def isolation(self) -> str:
        """`sandbox`, `namespaces` or `rlimits-only` (starts the server when needed)."""
        return self._ensure_server().level

    @property
    def syscall_policy(self) -> str:
        """`seccomp` when every job runs under the syscall policy (`policy.py`), else `none`
        (starts the server when needed)."""
        return "seccomp" if self._ensure_server().hello.get("policy") else "none"

    @property
    def hello(self) -> dict:
        return self._server.hello if self._server else {}

    @property
    def server_pid(self) -> int | None:
        """The pid of the server's outermost process (bubblewrap when sandboxed)."""
        return self._server.proc.pid if self._server else None

    def close(self) -> None:
        server, self._server = self._server, None
        if server is not None:
            server.close()

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
        text = f"{timeout!r}\0{source}"  # a lone surrogate must key, not raise
        return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()

    def _attempt(
        self, jobs: list[tuple[str, float]], pending: list[int], results: list[Verdict | None]
    ) -> None:
        """Send jobs[pending] to the server (started when needed) and fill `results` from its
        replies; ExecutorError, with the server dropped, on any fault. The deadline is the largest
        wall backstop among them (`child.wall_limit`) + SLACK between two messages."""
        server = self._ensure_server()
        sub = [jobs[i] for i in pending]
        patience = max(wall_limit(t) for _, t in sub) + SLACK
        try:
            server.send({"jobs": sub, "concurrency": self.concurrency}, patience)
            got = 0
            while True:
                msg = server.read(patience)
                if "done" in msg:
                    break
                k = int(msg["i"])
                if not 0 <= k < len(sub) or results[pending[k]] is not None:
                    raise ExecutorError(
                        f"the fork server sent a verdict for job {msg['i']!r} "
                        f"of {len(sub)} twice or out of range"
                    )
                results[pending[k]] = Verdict(**msg["result"])
                self.jobs_executed += 1
                got += 1
            if got < len(sub):
                raise ExecutorError(f"the fork server skipped {len(sub) - got} jobs")
        except (ExecutorError, KeyError, TypeError, ValueError, IndexError) as e:
            why = server.stderr_tail()
            self._drop_server()  # the next attempt (or call) starts a fresh server
            what = (
                e
                if isinstance(e, ExecutorError)
                else (f"the fork server broke the protocol ({type(e).__name__}: {e})")
            )
            raise ExecutorError(f"{what}" + (f" ({why})" if why else "")) from e

    def _exchange(
        self, jobs: list[tuple[str, float]], results: list[Verdict | None] | None = None
    ) -> list[Verdict]:
        """Every job's verdict, retrying server faults on fresh servers (see the class doc).
        `results` (one None per job) is filled as verdicts arrive, also when this raises."""
        results = [None] * len(jobs) if results is None else results
        failures: list[str] = []
        last: ExecutorError | None = None
        for attempt in range(self.retries + 1):
            pending = [i for i, r in enumerate(results) if r is None]
            if attempt:
                self.restarts += 1
                warnings.warn(
                    f"jacrl executor: {failures[-1]}; starting a fresh fork server and "
                    f"resubmitting the {len(pending)} of {len(jobs)} jobs without a "
                    f"verdict (retry {attempt} of {self.retries})",
                    ExecutorRetryWarning,
                    stacklevel=3,
                )
            try:
                self._attempt(jobs, pending, results)
                return results  # type: ignore[return-value]
            except ExecutorError as e:
                failures.append(str(e))
                last = e
        missing = sum(r is None for r in results)
        raise ExecutorError(
            f"fork server failed during a batch of {len(jobs)} jobs, {len(failures)} attempt"
            f"{'s' if len(failures) > 1 else ''} (retries={self.retries}), {missing} jobs without "
            "a verdict: " + "; ".join(f"attempt {n}: {why}" for n, why in enumerate(failures, 1))
        ) from last

    def run_many(
        self, sources: list[str], timeout: float | Sequence[float] = 20.0
    ) -> list[Verdict]:
        """A verdict per source, in order. timeout: one for all, or one per source (CPU seconds,
        see server.py); identical (source, timeout) pairs run once."""
        timeouts = (
            [float(timeout)] * len(sources)
            if isinstance(timeout, (int, float))
            else [float(t) for t in timeout]
        )
        if len(timeouts) != len(sources):
            raise ValueError(f"{len(timeouts)} timeouts for {len(sources)} programs")
        keys = [self.key(src, t) for src, t in zip(sources, timeouts, strict=True)]
        out: list[Verdict | None] = [None] * len(sources)
        first: dict[str, int] = {}
        todo: list[int] = []
        for i, k in enumerate(keys):
            if self.cache is not None and k in self.cache:
                self.cache.move_to_end(k)
                out[i] = dataclasses.replace(self.cache[k], cached=True, seconds=0.0)
            elif k not in first:
                first[k] = i
                todo.append(i)
        if todo:
            got: list[Verdict | None] = [None] * len(todo)
            try:
                self._exchange([(sources[i], timeouts[i]) for i in todo], got)
            finally:  # what arrived is cached even when the batch finally raised
                for i, v in zip(todo, got, strict=True):
                    if v is None:
                        continue
                    out[i] = v
                    if (
                        self.cache is not None
                        and not v.timed_out
                        and not v.status.startswith("killed")
                    ):
                        self.cache[keys[i]] = v
                        if len(self.cache) > self.cache_size:
                            self.cache.popitem(last=False)
        for i, k in enumerate(keys):
            if out[i] is None:
                out[i] = dataclasses.replace(out[first[k]], cached=True)
        return out  # type: ignore[return-value]

    def run(self, source: str, timeout: float = 20.0) -> Verdict:
        return self.run_many([source], timeout)[0]
