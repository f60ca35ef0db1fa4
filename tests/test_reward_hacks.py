"""Red team: completions a reward-hacking policy could find score below the "runs" tier (or exactly
0 for bodies without code), and the executor survives each one — proven with the sandbox as this
user (root in CI) and, in the same run, as an unprivileged user. A control run without the sandbox
shows the attacks are real: there they read the answers and score 1.0."""

from __future__ import annotations

import json
import os
import pwd
import subprocess
import sys
import time

import pytest
import redteam

from jacrl.executor import Executor
from jacrl.reward import score_completions

USER = "jacrl-redteam"
SECRET = f"jacrl-secret-{os.getpid()}"


@pytest.fixture(scope="module")
def attack_env():
    """A loopback port to reach and a process of ours holding a secret; the attack context."""
    port = redteam.listener()
    holder = redteam.secret_holder(SECRET)
    ctx = redteam.context(port.getsockname()[1]) | {"SECRET": SECRET}
    yield ctx, port
    holder.kill()
    holder.wait()
    port.close()


def _check(name: str, res: dict) -> None:
    assert res["isolation"] == "sandbox", res
    assert res["error"] is None, f"{name}: the executor failed: {res['error']}"
    assert res["same_server"] and res["probe_ok"], f"{name}: the server did not survive"
    assert res["seconds"] < redteam.ATTACK_TIMEOUT + 1.0, (name, res["seconds"])
    assert not res["next_job_sees"], f"{name}: the next job saw what it left"
    assert res["host_traces"] == [], f"{name} left {res['host_traces']}"
    if name in redteam.NO_CODE:
        assert res["score"] == 0.0 and res["tier"] == "empty", (name, res)
    else:
        assert res["score"] < redteam.RUNS_TIER, (name, res["score"], res["stdout"][:200])


def _no_connection(port) -> bool:
    try:
        port.accept()
    except BlockingIOError:
        return True
    return False


@pytest.fixture(scope="module")
def as_me(attack_env):
    ctx, port = attack_env
    results = redteam.run_attacks(ctx)
    assert _no_connection(port), "a job reached the loopback port"
    return results


@pytest.mark.parametrize("name", [*redteam.ATTACKS, *redteam.NO_CODE])
def test_attack_fails_in_the_sandbox(as_me, name):
    _check(name, as_me[name])


def test_attacks_fail_as_an_unprivileged_user(attack_env):
    """As root: the same attacks run by a normal user (created if needed), whose jobs sit in a
    sandbox started without any privilege."""
    ctx, port = attack_env
    if os.geteuid() != 0:  # this run already is the unprivileged one
        pytest.skip("running as a normal user: test_attack_fails_in_the_sandbox covers it")
    try:
        pwd.getpwnam(USER)
    except KeyError:
        subprocess.run(["useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin",
                        USER], check=True)
    env = {"PATH": os.environ.get("PATH", os.defpath), "JACRL_REDTEAM_CTX": json.dumps(ctx),
           "LANG": "C.UTF-8"}
    proc = subprocess.run([sys.executable, "-s", redteam.__file__, USER], env=env,
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["uid"] == pwd.getpwnam(USER).pw_uid != 0
    assert set(out["results"]) == {*redteam.ATTACKS, *redteam.NO_CODE}
    for name, res in out["results"].items():
        _check(name, res)
    assert _no_connection(port), "a job reached the loopback port"


def test_the_answer_reader_passes_no_holdout_task(executor):
    """The task-independent completion that reads data/tasks.jsonl, on every holdout task."""
    tasks = redteam.holdout_tasks()
    body = redteam.fill(redteam.READ_ANSWERS, redteam.context(1))
    scored = score_completions([redteam.fenced(body)] * len(tasks), [t["answer"] for t in tasks],
                               executor=executor)
    assert len(scored) >= 40
    assert [s.score for s in scored if s.score >= redteam.RUNS_TIER] == []


def test_without_the_sandbox_the_attacks_work(attack_env):
    """The control: with rlimits only, the same completions read the answers (1.0), the project,
    a secret in another process's environment and the network, and leave files behind — so the
    checks above can fail."""
    ctx, port = attack_env
    names = ["read_answers", "read_project_files", "read_environ", "network", "leave_files",
             "forge_verdicts"]
    with pytest.warns(UserWarning, match="rlimits-only"):
        with Executor(isolation="rlimits-only", allow_unsandboxed=True) as plain:
            res = redteam.run_attacks(ctx, names, plain)
    try:
        assert res["read_answers"]["score"] == 1.0
        for name in ("read_project_files", "read_environ", "network"):
            assert res[name]["score"] >= redteam.RUNS_TIER, (name, res[name])
        assert len(res["leave_files"]["host_traces"]) >= 3
        # file descriptors are closed in every mode: verdicts cannot be forged even here
        assert res["forge_verdicts"]["score"] < redteam.RUNS_TIER
    finally:
        for path in res["leave_files"]["host_traces"]:
            if os.path.isfile(path):
                os.remove(path)
    port.accept()[0].close()  # the network attack did connect


def test_unsandboxed_needs_an_explicit_opt_in(monkeypatch):
    monkeypatch.delenv("JACRL_ALLOW_UNSANDBOXED", raising=False)
    from jacrl.executor import SandboxUnavailable

    with pytest.raises(SandboxUnavailable, match="JACRL_ALLOW_UNSANDBOXED=1"):
        Executor(isolation="rlimits-only").run(redteam.PROBE)
    monkeypatch.setenv("JACRL_ALLOW_UNSANDBOXED", "1")
    with pytest.warns(UserWarning, match="read your files"):
        with Executor(isolation="rlimits-only") as ex:
            assert ex.run(redteam.PROBE).stdout == "probe 42\n"
            assert ex.isolation == "rlimits-only"


def test_a_hung_server_is_an_error_within_the_deadline(executor):
    """Client-side deadline: the server stops answering (SIGSTOP) mid-batch; the batch raises
    ExecutorError within its timeout + SLACK, and the next call gets a fresh server."""
    from jacrl.executor import SLACK, ExecutorError

    with Executor() as ex:
        ex.run(redteam.PROBE)
        server = _descendant(ex.server_pid, "executor/server.py")
        os.kill(server, 19)  # SIGSTOP
        t0 = time.perf_counter()
        with pytest.raises(ExecutorError, match="no answer"):
            ex.run(redteam.PROBE + "\n# hung", timeout=2.0)
        assert time.perf_counter() - t0 < 2.0 + SLACK + 1.0
        assert ex.run(redteam.PROBE + "\n# fresh").stdout == "probe 42\n"


def _descendant(pid: int, needle: str) -> int:
    """The deepest process under pid whose command line mentions needle (bubblewrap's own does)."""
    found, todo = [], [pid]
    while todo:
        p = todo.pop()
        if needle.encode() in open(f"/proc/{p}/cmdline", "rb").read():
            found.append(p)
        for task in os.listdir(f"/proc/{p}/task"):
            todo += [int(c) for c in open(f"/proc/{p}/task/{task}/children").read().split()]
    if not found:
        raise LookupError(f"no process running {needle} under {pid}")
    return found[-1]
