"""The plain `jac run` backend, for parity checks with the fork server (and the benchmark's
baseline): one `jac run` subprocess per program, and `jac check -p` when it fails."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import tempfile
import time

from jacrl.executor.client import Limits, Verdict, minimal_env
from jacrl.executor.jac_cache import private_copy


def _first_lines(text: str, n: int) -> str:
    lines = text.splitlines(keepends=True)
    return "".join(lines[:n])


def _own_env(work: str) -> dict[str, str]:
    """`minimal_env` with a warm copy of jaclang's compiled compiler of the run's own (else each
    run compiles jaclang again, ~1.5 s, which a `jac run` from a shell does not)."""
    env = minimal_env(work)
    cache = private_copy(work)
    if cache:
        env["XDG_CACHE_HOME"] = cache
    return env


def _jac_bin() -> str:
    return os.path.join(os.path.dirname(sys.executable), "jac")


def _run_cli(
    args: list[str], cwd: str, timeout: float, env: dict[str, str]
) -> tuple[int | None, str, str, bool]:
    proc = subprocess.Popen(
        [_jac_bin(), *args],
        cwd=cwd,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    try:
        out, err = proc.communicate(timeout=timeout)
        return (
            proc.returncode,
            out.decode("utf-8", "replace"),
            err.decode("utf-8", "replace"),
            False,
        )
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
        return None, out.decode("utf-8", "replace"), err.decode("utf-8", "replace"), True


def _compile_rejected(stderr: str) -> bool:
    """`jac run` reports what its compiler rejected as `error[E<code>]` diagnostics."""
    return re.search(r"^\S* ?Error: error\[E\d+\]", stderr, re.M) is not None


def run_subprocess(
    source: str, timeout: float = 20.0, limits: Limits = Limits(), env: dict[str, str] | None = None
) -> Verdict:
    """`jac run snippet.jac` in a fresh temp dir; when it fails, `jac check -p` (a second process)
    says whether it parses, which is what `compiled` means. The check has a budget of its own (the
    timeout, at most 15 s), so a load that timed the run out does not also decide `compiled`. env:
    the processes' environment (default: `minimal_env`; the benchmark passes the user's own, as a
    plain `jac run` from a shell has it)."""
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="jacrl-sub-") as work:
        with open(os.path.join(work, "snippet.jac"), "w") as fh:
            fh.write(source)
        env = env or _own_env(work)
        code, out, err, timed_out = _run_cli(["run", "snippet.jac"], work, timeout, env)
        compiled = code == 0
        if not compiled:
            check_code, _, _, _ = _run_cli(
                ["check", "-p", "snippet.jac"], work, min(timeout, 15.0), env
            )
            compiled = check_code == 0
    if timed_out:
        status = "timeout"
    elif code == 0:
        status = "ok"
    elif code is not None and code < 0:
        status = f"killed:{signal.Signals(-code).name}"
    else:  # jac run prints "Error:" lines for what the compiler rejected, a traceback otherwise
        status = "compile_error" if _compile_rejected(err) else "runtime_error"
    return Verdict(
        compiled=compiled,
        ran=code == 0,
        exit_code=code,
        stdout=out.encode()[: limits.max_output].decode("utf-8", "replace"),
        stderr=_first_lines(err, limits.stderr_lines),
        timed_out=timed_out,
        seconds=round(time.perf_counter() - t0, 6),
        status=status,
    )
