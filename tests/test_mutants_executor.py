"""Contracts of the executor's client (jacrl.executor.client) that mutants of
bench/mutation.py survived (docs/mutation.md): the environment a program sees, who decides to
run without a sandbox, the isolation level reported, and cached verdicts marked as such."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
import time

import pytest

from jacrl.executor import client, sandbox
from jacrl.executor.client import Executor, ExecutorError, minimal_env


def test_a_program_sees_only_path_lang_and_home():
    """minimal_env: exactly PATH (the system's and this Python's), LANG=C.UTF-8 and HOME."""
    assert minimal_env("/tmp/h") == {
        "PATH": os.defpath + ":" + os.path.dirname(sys.executable),
        "LANG": "C.UTF-8",
        "HOME": "/tmp/h",
    }


def test_an_explicit_allow_unsandboxed_wins_over_the_environment(monkeypatch):
    """Executor(allow_unsandboxed=...): the argument decides; only when it is None does
    JACRL_ALLOW_UNSANDBOXED (no server is started by either)."""
    monkeypatch.setenv(sandbox.ALLOW_ENV, "1")
    assert Executor(allow_unsandboxed=False).allow_unsandboxed is False
    assert Executor().allow_unsandboxed is True
    monkeypatch.delenv(sandbox.ALLOW_ENV)
    assert Executor(allow_unsandboxed=True).allow_unsandboxed is True
    assert Executor().allow_unsandboxed is False


def test_a_lower_isolation_asked_for_is_refused_with_its_reason(monkeypatch):
    """_ensure_server: isolation below the sandbox, asked for without allow_unsandboxed, is
    refused before any server starts, the error naming what was asked."""
    monkeypatch.delenv(sandbox.ALLOW_ENV, raising=False)
    ex = Executor(isolation="rlimits-only", allow_unsandboxed=False)
    why = sandbox.why_unsandboxed() or "isolation 'rlimits-only' requested"
    with pytest.raises(sandbox.SandboxUnavailable, match="^" + re.escape(why + "; ")):
        ex.run("with entry { print(1); }")
    assert ex.server_pid is None


def test_the_isolation_level_is_the_one_in_force(executor):
    """isolation: 'sandbox' where bubblewrap runs the server in namespaces, 'rlimits-only'
    when that was asked for (and allowed)."""
    if sandbox.why_unsandboxed() is None:
        assert executor.isolation == "sandbox"
    with Executor(isolation="rlimits-only", allow_unsandboxed=True, cache_size=0) as ex:
        with pytest.warns(UserWarning, match="rlimits-only"):
            assert ex.isolation == "rlimits-only"
        assert ex.run("with entry { print(2); }").stdout == "2\n"


def test_a_verdict_from_the_cache_says_so(executor):
    """run_many: a program run before comes from the cache, marked cached, 0 seconds."""
    src = 'with entry { print("cache me 7"); }'
    first = executor.run(src)
    again = executor.run(src)
    assert not first.cached and again.cached and again.seconds == 0.0
    assert again.stdout == first.stdout == "cache me 7\n"


def test_an_unsandboxed_server_keeps_the_hash_seed_it_is_given():
    """_Server without namespaces: hash_seed reaches the server as PYTHONHASHSEED, so its
    programs' string hashes are Python's under that seed (set order fixed per seed)."""
    src = 'with entry { print(hash("jacrl")); }'
    want = subprocess.run(
        [sys.executable, "-c", 'print(hash("jacrl"))'],
        env={"PYTHONHASHSEED": "5"},
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    with pytest.warns(UserWarning, match="rlimits-only"):
        with Executor(
            isolation="rlimits-only", allow_unsandboxed=True, cache_size=0, hash_seed=5
        ) as ex:
            assert ex.run(src).stdout == want


# -- a server that breaks the protocol: its replies rewritten on the way in ----------------------

JOBS = [f'with entry {{ print("proto {k}"); }}  # {{tag}}' for k in range(3)]


def _jobs(tag: str) -> list[str]:
    return [j.replace("{tag}", tag) for j in JOBS]


def _rewrite_replies(monkeypatch, rewrite):
    """Every reply of every server passes through rewrite(server, msg) -> the message to use."""
    read = client._Server.read
    monkeypatch.setattr(client._Server, "read", lambda s, t: rewrite(s, read(s, t)))


def test_a_skipped_verdict_is_a_fault_and_the_job_is_resubmitted(monkeypatch):
    """The server says `done` one verdict short: a fault (retried on a fresh server, which
    runs the one job left), never a batch with a job without a verdict."""
    dropped: list[int] = []
    read = client._Server.read

    def rewrite(server, timeout):
        msg = read(server, timeout)
        if not dropped and "i" in msg:
            dropped.append(msg["i"])
            msg = read(server, timeout)  # the next line instead: this verdict never arrives
        return msg

    monkeypatch.setattr(client._Server, "read", rewrite)
    tag = f"skip-{time.time_ns()}"
    with Executor(cache_size=0) as ex:
        with pytest.warns(client.ExecutorRetryWarning, match="skipped 1 jobs") as rec:
            out = ex.run_many(_jobs(tag), timeout=10.0)
        assert "resubmitting the 1 of 3 jobs" in str(rec[0].message)
        assert [v.stdout for v in out] == [f"proto {k}\n" for k in range(3)]
        assert ex.restarts == 1 and ex.jobs_executed == 3


def test_a_verdict_for_a_job_one_past_the_last_is_a_fault(monkeypatch):
    """Job numbers run 0..n-1: a verdict for job n is out of range (said so, then retried)."""
    lied: list[int] = []

    def rewrite(server, msg):
        if not lied and "i" in msg:
            lied.append(msg["i"])
            return {**msg, "i": 3}
        return msg

    _rewrite_replies(monkeypatch, rewrite)
    tag = f"past-{time.time_ns()}"
    with Executor(cache_size=0) as ex:
        with pytest.warns(client.ExecutorRetryWarning, match="verdict for job 3 of 3 twice or out"):
            out = ex.run_many(_jobs(tag), timeout=10.0)
        assert [v.stdout for v in out] == [f"proto {k}\n" for k in range(3)]


def test_two_failed_attempts_are_counted_in_the_plural(monkeypatch):
    _rewrite_replies(monkeypatch, lambda s, msg: {**msg, "i": -1} if "i" in msg else msg)
    with Executor(cache_size=0, retries=1) as ex:
        with pytest.warns(client.ExecutorRetryWarning):
            with pytest.raises(ExecutorError, match=r"3 jobs, 2 attempts \(retries=1\)"):
                ex.run_many(_jobs(f"plural-{time.time_ns()}"), timeout=10.0)


def test_one_timeout_per_program_or_an_error_saying_how_many():
    with pytest.raises(ValueError, match="^2 timeouts for 3 programs$"):
        Executor().run_many(["a", "b", "c"], timeout=[1.0, 2.0])


# -- the server process ----------------------------------------------------------------------


def test_the_server_leads_its_own_session_and_kill_takes_its_tree(executor):
    """A Ctrl-C at the terminal (its process group) does not reach the server, and `kill`
    signals the server's whole group at once."""
    executor.run('with entry { print("alive"); }')
    pid = executor.server_pid
    assert os.getsid(pid) == pid != os.getsid(0) and os.getpgid(pid) == pid
    server = client._Server(
        client.Limits(), None, None if executor.isolation == "sandbox" else "rlimits-only"
    )
    t0 = time.monotonic()
    server.kill()  # a live server: SIGKILL to its group, then reaped
    assert server.proc.returncode is not None and time.monotonic() - t0 < 10


def test_a_server_that_fails_to_start_is_named_by_its_last_stderr_line():
    """A limit the server cannot use: it dies while starting, and the error quotes why (the
    last line it wrote on stderr), not only that it exited."""
    with pytest.raises(ExecutorError, match="failed to start: RuntimeError: the zygote exited"):
        client._Server(client.Limits(nproc="three"), None, None)


def _bare_server(script: str) -> client._Server:
    """A _Server around any process (here a shell script standing in for a faulty server)."""
    server = object.__new__(client._Server)
    server._buf, server._err = b"", tempfile.TemporaryFile()
    server.proc = subprocess.Popen(
        ["sh", "-c", script],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=server._err,
        start_new_session=True,
    )
    os.set_blocking(server.proc.stdin.fileno(), False)
    return server


def test_a_server_that_closes_its_output_but_lingers_is_reported_without_waiting_for_it():
    server = _bare_server("exec 1>&-; sleep 60")
    try:
        t0 = time.monotonic()
        with pytest.raises(ExecutorError, match=r"the fork server exited \(status None\)"):
            server.read(30.0)
        assert time.monotonic() - t0 < 10  # it waited ~1 s for an exit status, not 60
    finally:
        server.kill()


def test_a_request_to_a_server_that_never_reads_times_out():
    """A request larger than the pipe's buffer to a server that does not read: ExecutorError
    after the time-out, not a busy wait or a blocked write."""
    server = _bare_server("sleep 60")
    try:
        t0 = time.monotonic()
        with pytest.raises(ExecutorError, match=r"took no request within 0\.5 s"):
            server.send({"jobs": "x" * (1 << 18)}, 0.5)
        assert time.monotonic() - t0 < 5
    finally:
        server.kill()
