"""The executor: runs untrusted Jac programs and reports what happened, never what was expected.

- `client.py`: `Executor` (the client of a fork server: dedup cache, deadline, retries on a
  server fault, isolation level), `Verdict`, `Limits`.
- `plain.py`: `run_subprocess` (plain `jac run`, for parity checks and the benchmark's baseline).
- `server.py`: the fork server (stdlib + jaclang only, run as a script): a collector that writes
  programs and judges what jobs left, and a warmed zygote that forks the jobs.
- `child.py`: what runs in its forked children: the shim's namespaces, the job's limits and
  environment, `jac run` split into compile and exec.
- `sandbox.py`: the bubblewrap sandbox the server runs in; isolation levels and the opt-in.
- `tree.py`: the read-only files jobs see (what the interpreter and jaclang need), copied once
  per client process onto a tmpfs, so that their page cache carries nothing between jobs.
- `policy.py`: every job's syscall policy (a seccomp allowlist, built with libseccomp), in the
  client.
"""

from jacrl.executor.client import (
    SLACK,
    Executor,
    ExecutorError,
    ExecutorRetryWarning,
    Limits,
    Verdict,
    minimal_env,
)
from jacrl.executor.plain import run_subprocess
from jacrl.executor.sandbox import ALLOW_ENV, LEVELS, SandboxUnavailable

__all__ = [
    "ALLOW_ENV",
    "LEVELS",
    "SLACK",
    "Executor",
    "ExecutorError",
    "ExecutorRetryWarning",
    "Limits",
    "SandboxUnavailable",
    "Verdict",
    "minimal_env",
    "run_subprocess",
]
