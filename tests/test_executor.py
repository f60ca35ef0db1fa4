"""Adversarial suite for the fork server: every hostile job ends within its timeout + 1 s, the
server survives, the next job's output is right, nothing leaks between jobs or stays on disk.
Then the client's contracts (the environment a program sees, who decides to run without a
sandbox, the isolation level in force, cached verdicts, a server that breaks the protocol, fails
to start or stops reading) and the server's judging of how a job ended. (Reward-hacking attacks
on the sandbox itself: test_reward_hacks.py; faults under load: test_executor_faults.py.)"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from jacrl.executor import Executor, ExecutorError, Limits, client, sandbox
from jacrl.executor.child import wall_limit
from jacrl.executor.client import minimal_env

HANG = "def f() {\n    has\n    x in y {\n"  # jaclang 0.16.7's parser loops and grows on this
PROBE = 'with entry { print("probe", 6 * 7); }'
TIMEOUT = 3.0

HOSTILE = {
    "parser_hang": HANG,
    "busy_loop": 'with entry { print("start"); while True { } }',
    "sleep": "import time;\nwith entry { time.sleep(1000); }",
    "kill_parent": "import os;\nimport signal;\nwith entry { os.kill(os.getppid(), "
    'signal.SIGKILL); print("still here"); }',
    "kill_all": "import os;\nimport signal;\nwith entry { os.kill(-1, signal.SIGKILL); }",
    "flood": 'with entry { while True { print("x" * 10000); } }',
    "fork_sleep": 'import subprocess;\nwith entry { subprocess.Popen(["sleep", "60"]); '
    'print("forked"); }',
    "setsid_escape": "import os;\nimport time;\nwith entry {\n    if os.fork() == 0 {\n"
    "        os.setsid();\n        time.sleep(60);\n    }\n"
    '    print("parent");\n}',
    "read_stdin": "with entry { x = input(); print(x); }",
    "write_files": 'import os;\nwith entry {\n    open("out.txt", "w").write("a");\n'
    '    os.makedirs("sub/dir", exist_ok=True);\n'
    '    open("sub/dir/f.txt", "w").write("b");\n'
    '    open("/tmp/jacrl_escape_probe.txt", "w").write("c");\n'
    '    print("wrote");\n}',
    "memory_hog": "with entry { x = bytearray(8 * 1024 * 1024 * 1024); print(len(x)); }",
    "recursion": "def f(n: int) -> int { return f(n + 1); }\nwith entry { print(f(0)); }",
    "exit_3": "import sys;\nwith entry { sys.exit(3); }",
}


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_hostile_job_is_contained(executor, name):
    executor.run(PROBE)  # make sure a server is up
    pid = executor.server_pid
    t0 = time.perf_counter()
    v = executor.run(HOSTILE[name], timeout=TIMEOUT)
    elapsed = time.perf_counter() - t0
    assert elapsed < wall_limit(TIMEOUT) + 1.0, (name, elapsed)
    assert executor.server_pid == pid, f"{name} killed the server"
    # a fresh job after the hostile one
    probe = executor.run(PROBE + f"\n# {name} {time.time_ns()}")
    assert probe.ran and probe.stdout == "probe 42\n"
    assert not os.path.exists("/tmp/jacrl_escape_probe.txt")
    assert not v.ran or name in (
        "kill_parent",
        "fork_sleep",
        "setsid_escape",
        "write_files",
        "kill_all",
    )
    if name == "parser_hang":
        # a parse that grows without bound: stopped at its CPU limit or at the job's memory cap
        # (jacrl.executor.budget), never compiled, never a server fault
        assert not v.compiled and (v.timed_out or v.status != "ok"), v
    if name in ("busy_loop", "sleep"):
        assert v.timed_out and v.compiled and v.exit_code is None
    if name == "flood":
        assert len(v.stdout.encode()) <= Limits().max_output
    if name == "read_stdin":
        assert v.status == "runtime_error" and not v.timed_out
    if name == "exit_3":
        assert v.exit_code == 3 and v.status == "runtime_error"
    if name == "memory_hog":
        assert "MemoryError" in v.stderr or not v.ran


def test_environment_is_minimal(executor, monkeypatch):
    monkeypatch.setenv("HF_TOKEN", "secret-token-value")
    with Executor() as fresh:  # started with the secret in the caller's environment
        v = fresh.run(
            "import os;\nwith entry {\n    print(sorted(os.environ.keys()));\n"
            "    try { print(open('/proc/self/environ').read().count('secret')); }\n"
            "    except OSError { print(0); }\n}"
        )
    assert v.ran
    assert v.stdout.splitlines()[0] == "['HOME', 'LANG', 'PATH']"
    assert v.stdout.splitlines()[1] == "0"


def test_nothing_leaks_between_jobs(executor):
    writer = (
        "import os;\nimport json;\nglob counter: int = 41;\nnode Box { has n: int = 1; }\n"
        "with entry {\n    root ++> Box(n=5);\n    json.LEAK = 1;\n"
        "    os.environ['LEAKED'] = 'yes';\n    print(len([root -->]));\n}"
    )
    reader = (
        "import os;\nimport json;\nnode Box { has label: str = 'x'; }\n"
        "with entry {\n    print(len([root -->]), hasattr(json, 'LEAK'), "
        "'LEAKED' in os.environ, 'counter' in globals());\n}"
    )
    for k in range(2):  # twice each, distinct sources so nothing is served from the cache
        a = executor.run(writer + f"\n# {k}")
        b = executor.run(reader + f"\n# {k}")
        assert a.stdout == "1\n", a
        assert b.stdout == "0 False False False\n", b


def test_same_archetype_names_defined_differently(executor):
    one = (
        "node Profile { has name: str; }\nwalker W { has out: list[str] = [];\n"
        "  can go with Root entry { visit [-->]; }\n"
        "  can see with Profile entry { self.out.append(here.name); } }\n"
        "with entry { root ++> Profile(name='ann'); print((root spawn W()).out); }"
    )
    two = (
        "node Profile { has age: int; }\nwalker W { has total: int = 0;\n"
        "  can go with Root entry { visit [-->]; }\n"
        "  can see with Profile entry { self.total += here.age; } }\n"
        "with entry { root ++> Profile(age=3); root ++> Profile(age=4); "
        "print((root spawn W()).total); }"
    )
    results = executor.run_many([one, two, one + "\n#", two + "\n#"])
    assert [r.stdout for r in results] == ["['ann']\n", "7\n", "['ann']\n", "7\n"]


def test_dedup_cache_runs_identical_programs_once(executor):
    src = 'with entry { print("dedup-probe-%d"); }' % time.time_ns()
    before = executor.jobs_executed
    results = executor.run_many([src] * 5 + [src + " "])
    assert executor.jobs_executed - before == 2
    assert [r.cached for r in results] == [False, True, True, True, True, False]
    again = executor.run(src)
    assert again.cached and again.stdout == results[0].stdout
    assert executor.jobs_executed - before == 2


def test_timeouts_are_not_cached(executor):
    src = "with entry { while True { } }"
    a = executor.run(src, timeout=1.0)
    b = executor.run(src, timeout=1.0)
    assert a.timed_out and b.timed_out and not b.cached


def test_server_death_is_an_error_then_recovers():
    """Without retries, the server dying mid-batch makes that batch raise (never a score); the
    next call starts afresh. (With retries, the default: test_executor_faults.py.)"""
    import threading

    with Executor(retries=0) as ex:
        assert ex.run(PROBE).ran
        idle = _descendants(ex.server_pid)
        killer = threading.Thread(target=_kill_once_running, args=(ex.server_pid, idle))
        killer.start()
        with pytest.raises(ExecutorError):
            ex.run("import time;\nwith entry { time.sleep(5); }", timeout=10)
        killer.join()
        assert ex.run(PROBE + "\n# recovered").stdout == "probe 42\n"


def _descendants(pid: int) -> set[int]:
    out, todo = set(), [pid]
    while todo:
        p = todo.pop()
        try:
            kids = Path(f"/proc/{p}/task/{p}/children").read_text().split()
        except OSError:  # gone meanwhile
            continue
        out |= {int(k) for k in kids}
        todo += [int(k) for k in kids]
    return out


def _kill_once_running(server: int, idle: set[int], timeout: float = 30) -> None:
    """SIGKILL the server once a job runs under it (a process it did not have idle)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and not _descendants(server) - idle:
        time.sleep(0.02)
    os.kill(server, 9)


# Modules with side effects on import (a browser, a banner, a GUI) or that never import here;
# Tk (`_tkinter`, and the X11 libraries under it) is not in the jobs' tree (`executor.tree`).
NOT_IMPORTED = {
    "_tkinter",
    "antigravity",
    "this",
    "idlelib",
    "turtledemo",
    "tkinter",
    "turtle",
    "__hello__",
    "__phello__",
}
IMPORTS_CHECK = r"""
import json, subprocess, sys
from jacrl.executor import Executor
names = json.loads(sys.argv[1])
with Executor() as ex:
    prog = ("import importlib;\nwith entry {\n    bad = [];\n    for n in " + json.dumps(names)
            + " {\n        try { importlib.import_module(n); }\n"
            + "        except BaseException as e { bad.append(n + ': ' + str(e)[:80]); }\n    }\n"
            + "    print(len(bad), bad);\n}")
    v = ex.run(prog, timeout=120)
    print(json.dumps({"isolation": ex.isolation, "prefix": sys.prefix, "stdout": v.stdout,
                      "stderr": v.stderr[-2000:]}))
"""


def _importable_outside(py: str) -> list[str]:
    """Every stdlib module, jaclang and what it requires that `jac run`'s interpreter imports."""
    code = (
        "import importlib, json, sys\nskip = set(json.loads(sys.argv[1]))\nok = []\n"
        "for n in sorted(sys.stdlib_module_names - skip) + ['jaclang', 'llvmlite.binding']:\n"
        "    try:\n        importlib.import_module(n)\n"
        "        ok.append(n)\n    except BaseException:\n        pass\n"
        "print(json.dumps(ok))"
    )
    out = subprocess.run(
        [py, "-c", code, json.dumps(sorted(NOT_IMPORTED))],
        capture_output=True,
        text=True,
        check=True,
        cwd="/",
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_every_module_jac_run_imports_imports_in_a_job_even_from_a_venv_under_tmp(tmp_path):
    """The false negatives of a job uid that cannot read a 0700 home, or of a /tmp that hides the
    venv: every stdlib module and jaclang (with what it requires) importable by the interpreter
    imports in a sandboxed job, with the venv where it is and with the same venv mounted under
    /tmp. (The venv's other packages are not shown: tests/test_allowlist.py.)"""
    import sys

    if os.geteuid() != 0:
        pytest.skip("mounting the venv under /tmp needs root (CI runs as root)")
    names = _importable_outside(sys.executable)
    assert len(names) > 150 and "wave" in names and "llvmlite.binding" in names
    venv_tmp = tmp_path / "venv"
    venv_tmp.mkdir()
    script = tmp_path / "check.py"
    script.write_text(IMPORTS_CHECK)
    root = Path(__file__).resolve().parent.parent
    for py, wrap in (
        (sys.executable, ""),
        (f"{venv_tmp}/bin/python", f"mount --bind {sys.prefix} {venv_tmp} && "),
    ):
        cmd = f'{wrap}exec {py} -s {script} "$0"'
        out = subprocess.run(
            ["unshare", "--mount", "--propagation", "private", "sh", "-c", cmd, json.dumps(names)],
            capture_output=True,
            text=True,
            cwd=root,
            env={**os.environ, "PYTHONPATH": str(root)},
        )
        assert out.returncode == 0, out.stderr[-2000:]
        res = json.loads(out.stdout.strip().splitlines()[-1])
        assert res["isolation"] == "sandbox"
        assert res["prefix"] == (str(venv_tmp) if wrap else sys.prefix)
        assert res["stdout"].startswith("0 []"), (py, res["stdout"][:2000], res["stderr"])


def test_the_timeout_is_cpu_time_with_a_wall_backstop(executor):
    """A loop is stopped by its CPU limit (RLIMIT_CPU: at least its time-out in CPU seconds, so
    at least that long on the wall), or by the wall backstop on a machine too busy to give it that
    CPU; a sleeper (no CPU) by the backstop; ignoring SIGXCPU does not help; a finished job
    reports its CPU time. (rusage's CPU seconds run below RLIMIT_CPU's on a VM: steal time.)"""
    tag = f"\n# cpu {time.time_ns()}"
    busy, sleeper, stubborn, quick = executor.run_many(
        [
            "with entry { while True { } }" + tag,
            "import time;\nwith entry { time.sleep(60); }" + tag,
            "import signal;\nwith entry {\n    signal.signal(signal.SIGXCPU, signal.SIG_IGN);\n"
            "    while True { }\n}" + tag,
            PROBE + tag,
        ],
        timeout=1.0,
    )
    for v in (busy, sleeper, stubborn):
        assert v.status == "timeout" and v.timed_out and not v.ran, v
        assert 1.0 <= v.seconds < wall_limit(1.0) + 0.5, v
    assert sleeper.cpu_seconds < 0.5 and sleeper.seconds >= wall_limit(1.0) - 0.05, sleeper
    assert quick.ran and 0 < quick.cpu_seconds < quick.seconds + 0.05, quick


def test_one_timeout_per_program(executor):
    """run_many takes a time-out per program; the same source under two time-outs is two jobs,
    and the longer one runs longer."""
    loop = "with entry { while True { } }" + f"\n# per-job {time.time_ns()}"
    before = executor.jobs_executed
    short, long_, again = executor.run_many([loop, loop, loop], timeout=[1.0, 2.0, 1.0])
    assert executor.jobs_executed - before == 2 and again.cached
    assert short.timed_out and long_.timed_out
    assert 1.0 <= short.seconds < wall_limit(1.0) + 0.5 and long_.seconds >= 2.0, (short, long_)
    with pytest.raises(ValueError, match="2 timeouts for 3 programs"):
        executor.run_many([loop] * 3, timeout=[1.0, 2.0])


def _tree(d: Path) -> dict[str, bytes]:
    return {str(p.relative_to(d)): p.read_bytes() for p in sorted(d.rglob("*")) if p.is_file()}


def test_jaclangs_cache_is_built_once_and_read_only_to_jobs(tmp_path, monkeypatch):
    """A fresh cache folder is built by the first server start (jaclang's own modules only),
    shown to the sandbox read-only (a job can read it, not write or replace a file in it), left
    as it was by jobs and by plain `jac run`s (each gets its own copy); a gone install's cache is
    pruned; when it cannot be built, the executor runs as before, without it."""
    from jacrl.executor import jac_cache, run_subprocess

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    dead = tmp_path / "xdg" / "jacrl" / "jaclang-0123456789abcdef"  # a deleted venv's: pruned
    dead.mkdir(parents=True)
    (dead / jac_cache.SOURCE).write_text(json.dumps({"jaclang": str(tmp_path / "gone")}))
    with Executor() as ex:
        if ex.isolation != "sandbox":
            pytest.skip("no bubblewrap sandbox here")
        built = Path(jac_cache.jac_cache())
        assert built.parent == tmp_path / "xdg" / "jacrl" and built == jac_cache.location()
        before = _tree(built)
        jirs = [k for k in before if k.endswith(".jir")]
        site = Path(json.loads(before["jacrl-source.json"])["jaclang"]).parent
        installed = {p.name.split(".")[0] for p in site.rglob("*.jac")}
        cached = {Path(k).name.split(".")[0] for k in before if k.endswith((".jir", ".jbc"))}
        assert len(jirs) > 50 and cached <= installed, cached - installed  # jaclang's own only
        shown = "/run/jacrl/jac-cache"
        v = ex.run(
            "import os;\nwith entry {\n"
            f"    print(len(os.listdir('{shown}/jac/jir/modules')) > 50);\n"
            f"    for p in ['{shown}/x.txt', '{shown}/{jirs[0]}'] {{\n"
            "        try { open(p, 'w').write('forged'); print('wrote', p); }\n"
            "        except OSError as e { print('refused', e.errno); }\n    }\n}"
        )
        assert v.stdout.splitlines() == ["True", "refused 30", "refused 30"], v  # EROFS
        assert not [p for p in (tmp_path / "xdg" / "jacrl").iterdir() if p != built]
    assert run_subprocess('with entry { print("plain", 6 * 7); }').stdout == "plain 42\n"
    assert _tree(built) == before  # nothing of the jobs or the plain run landed in it
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "a-file"))
    (tmp_path / "a-file").write_text("")
    assert jac_cache.jac_cache() is None
    with Executor() as ex:
        assert ex.run(PROBE).stdout == "probe 42\n"


# -- the client: environment, sandbox choice, isolation, cache -------------------------------------


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


# -- the executor server's judging (its verdict code runs in the collector, outside the zygote) --


def _server():
    from jacrl.executor import server

    return server


def _exited(code: int) -> int:
    return code << 8  # a wait status: exited with `code`


def _judge(sealed=b"C", wstatus=0, timed_out=False, completed=True, stderr="", **kw):
    s = _server()
    return s.verdict(
        s.child.COMPILED if sealed == b"C" else sealed,
        wstatus,
        timed_out,
        completed,
        kw.pop("stdout", "out\n"),
        stderr,
        kw.pop("seconds", 0.5),
        kw.pop("stderr_lines", 40),
        **kw,
    )


def test_a_job_that_compiled_and_completed_is_ok():
    v = _judge(seconds=1.23456789, cpu_seconds=0.98765432)
    assert v == dict(
        compiled=True,
        ran=True,
        exit_code=0,
        stdout="out\n",
        stderr="",
        timed_out=False,
        seconds=1.234568,
        status="ok",
        cpu_seconds=0.987654,
    )
    assert _judge()["cpu_seconds"] == 0.0  # not measured: zero


def test_each_way_a_job_ends_has_its_status():
    assert _judge(completed=False)["status"] == "early_exit"  # exit 0 but entry never returned
    v = _judge(wstatus=_exited(3))
    assert (v["status"], v["exit_code"], v["ran"], v["compiled"]) == (
        "runtime_error",
        3,
        False,
        True,
    )
    parsed = _judge(sealed=_server().child.PARSED, wstatus=_exited(1), completed=False)
    assert (parsed["status"], parsed["compiled"], parsed["exit_code"]) == ("compile_error", True, 1)
    # nothing sealed: did not even parse, whatever its exit
    for code in (0, 1):
        v = _judge(sealed=b"", wstatus=_exited(code), completed=False)
        assert (v["status"], v["compiled"], v["ran"]) == ("compile_error", False, False)
    v = _judge(wstatus=9)  # killed by SIGKILL
    assert (v["status"], v["exit_code"], v["ran"]) == ("killed:SIGKILL", None, False)
    v = _judge(wstatus=9, timed_out=True)  # killed for its time: a time-out, not a kill
    assert (v["status"], v["exit_code"], v["timed_out"], v["ran"]) == ("timeout", None, True, False)
    assert _judge(wstatus=0, timed_out=True)["status"] == "timeout"


def test_the_verdict_keeps_the_first_stderr_lines_only():
    assert _judge(stderr="a\nb\nc\n", stderr_lines=2)["stderr"] == "a\nb\n"
    assert _judge(stderr="a\nb", stderr_lines=5)["stderr"] == "a\nb"


def test_a_job_is_over_its_cpu_only_when_killed_for_it():
    s = _server()
    job = {"timeout": 1.0, "cpu": 0.2}
    assert not s._over_cpu(_exited(0), {**job, "over_cpu": True})  # it exited by itself
    assert s._over_cpu(signal.SIGXCPU, job)  # RLIMIT_CPU's backstop
    assert s._over_cpu(signal.SIGTERM, {**job, "over_cpu": True})  # the zygote's own kill
    assert not s._over_cpu(signal.SIGTERM, job)
    assert not s._over_cpu(signal.SIGKILL, job)  # killed, but under its CPU limit
    assert s._over_cpu(signal.SIGKILL, {**job, "cpu": 1.0})  # at the limit
    assert s._over_cpu(signal.SIGKILL, {**job, "cpu": 1.5})
    assert not s._over_cpu(signal.SIGKILL, {**job, "cpu": 0.999})
