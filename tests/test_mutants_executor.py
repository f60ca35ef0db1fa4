"""Contracts of the executor's client (jacrl.executor.client) that mutants of
bench/mutation.py survived (docs/mutation.md): the environment a program sees, who decides to
run without a sandbox, the isolation level reported, and cached verdicts marked as such."""

from __future__ import annotations

import os
import re
import sys

import pytest

from jacrl.executor import sandbox
from jacrl.executor.client import Executor, minimal_env


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
    import subprocess

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
