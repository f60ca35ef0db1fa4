"""Server faults are retried, job failures are not (issue 18, point 4).

A fork server killed (SIGKILL, as the OOM killer does) or stopped (SIGSTOP: silent) mid-batch is
replaced and only the jobs without a verdict are resubmitted; the batch returns every verdict
right. Bounded: after `retries` fresh servers the batch raises ExecutorError, never zeros. A job
that times out, crashes or is killed is a verdict and is never retried. The last two tests do the
same under a real GRPO run on jac-tiny: the run finishes with a reward for every iteration.

The server's process tree is looked up, not assumed: every python process running server.py under
bubblewrap (one today; a collector and a zygote that forks the jobs, or more, tomorrow). Their
pids are taken while the server is idle, so a job forked from one of them (same command line) is
never taken for the server; the outermost and the deepest are each the target of a test.
"""

from __future__ import annotations

import json
import os
import signal
import threading
import time

import pytest

from jacrl.executor import SLACK, Executor, ExecutorError, ExecutorRetryWarning
from jacrl.executor import client as executor_client
from jacrl.executor.child import wall_limit

PROBE = 'with entry { print("probe", 6 * 7); }'
SLOW = 'import time;\nwith entry {{ time.sleep(1.5); print("slow {tag}"); }}'
FAST = 'with entry {{ print("fast {tag}", {k}); }}'
N_FAST = 4


def server_processes(root: int) -> list[int]:
    """The python processes running executor/server.py under root (bubblewrap's own command line
    names it too: those are skipped), outermost first."""
    found, todo = [], [(root, 0)]
    while todo:
        pid, depth = todo.pop(0)  # breadth first: by depth
        try:
            argv = open(f"/proc/{pid}/cmdline", "rb").read().split(b"\0")
            if not os.path.basename(argv[0]).startswith(b"bwrap") and any(
                a.endswith(b"executor/server.py") for a in argv
            ):
                found.append((depth, pid))
            for task in os.listdir(f"/proc/{pid}/task"):
                kids = open(f"/proc/{pid}/task/{task}/children").read().split()
                todo += [(int(c), depth + 1) for c in kids]
        except OSError:  # it exited meanwhile
            continue
    if not found:
        raise LookupError(f"no python process running executor/server.py under {root}")
    return [pid for _, pid in sorted(found)]


def target(ex: Executor, which: str) -> int:
    """The outermost or deepest server process of ex's (idle) server."""
    procs = server_processes(ex.server_pid)
    return procs[0] if which == "outermost" else procs[-1]


def batch(tag: str) -> list[str]:
    """One slow job (1.5 s) first, then fast ones, all distinct to this test."""
    return [SLOW.format(tag=tag)] + [FAST.format(tag=tag, k=k) for k in range(N_FAST)]


def check_verdicts(verdicts, tag: str) -> None:
    assert [v.stdout for v in verdicts] == [f"slow {tag}\n"] + [
        f"fast {tag} {k}\n" for k in range(N_FAST)
    ]
    assert all(v.ran and v.status == "ok" for v in verdicts)


class Spy:
    """Records every request sent to a fork server and every verdict line read back (per server),
    and sets `first` when the first verdict of a request after `arm()` arrives."""

    def __init__(self, monkeypatch):
        self.requests: list[list[str]] = []  # the sources of each request, in order
        self.received: list[list[int]] = []  # the job indexes answered, per request
        self.first = threading.Event()
        self.on_send = None  # called with the _Server after each request went out
        send, read = executor_client._Server.send, executor_client._Server.read
        spy = self

        def spy_send(server, obj, timeout):
            send(server, obj, timeout)
            if "jobs" in obj:
                spy.requests.append([src for src, _ in obj["jobs"]])
                spy.received.append([])
                if spy.on_send is not None:
                    spy.on_send(server)

        def spy_read(server, timeout):
            msg = read(server, timeout)
            if isinstance(msg, dict) and "i" in msg and spy.received:
                spy.received[-1].append(msg["i"])
                spy.first.set()
            return msg

        monkeypatch.setattr(executor_client._Server, "send", spy_send)
        monkeypatch.setattr(executor_client._Server, "read", spy_read)

    def arm(self) -> None:
        self.first.clear()

    def signal_after_first_result(self, pid: int, sig: int) -> threading.Thread:
        """A thread that sends sig to pid as soon as the first verdict of the batch arrived."""

        def go():
            assert self.first.wait(60), "no verdict arrived"
            os.kill(pid, sig)

        thread = threading.Thread(target=go, daemon=True)
        thread.start()
        return thread


def check_resubmitted_only_the_unfinished(spy: Spy, sources: list[str], start: int) -> None:
    """Request `start` is the faulted one, `start + 1` the retry: the retry holds exactly the jobs
    that had no verdict, the slow one among them, and never one that had finished."""
    assert len(spy.requests) == start + 2, spy.requests
    first, retry = spy.requests[start], spy.requests[start + 1]
    assert first == sources
    done = {first[i] for i in spy.received[start]}
    assert done and sources[0] not in done  # some fast jobs had finished, the slow one had not
    assert retry == [s for s in sources if s not in done]
    assert sorted(spy.received[start + 1]) == list(range(len(retry)))  # each answered once


@pytest.mark.parametrize("which", ["outermost", "deepest"])
def test_sigkill_mid_batch_is_retried_keeping_finished_verdicts(monkeypatch, which):
    spy = Spy(monkeypatch)
    tag = f"kill-{which}-{time.time_ns()}"
    sources = batch(tag)
    with Executor() as ex:
        assert ex.run(PROBE).stdout == "probe 42\n"
        pid, old = target(ex, which), ex.server_pid
        spy.arm()
        killer = spy.signal_after_first_result(pid, signal.SIGKILL)
        before = ex.jobs_executed
        t0 = time.perf_counter()
        with pytest.warns(
            ExecutorRetryWarning,
            match=r"resubmitting the \d of 5 jobs without a "
            r"verdict \(retry 1 of 2\)",
        ) as rec:
            verdicts = ex.run_many(sources, timeout=10.0)
        elapsed = time.perf_counter() - t0
        killer.join()
        print(f"\nSIGKILL of the {which} server process: batch {elapsed:.2f} s, {rec[0].message}")
        check_verdicts(verdicts, tag)
        assert ex.restarts == 1 and ex.server_pid != old
        assert ex.jobs_executed - before == len(sources)  # every job ran to a verdict once
        check_resubmitted_only_the_unfinished(spy, sources, start=1)
        again = ex.run_many(sources, timeout=10.0)  # every verdict was cached, none re-run
        assert all(v.cached for v in again) and ex.jobs_executed - before == len(sources)
        check_verdicts(again, tag)


@pytest.mark.parametrize("which", ["outermost", "deepest"])
def test_sigstop_mid_batch_is_retried_after_the_deadline(monkeypatch, which):
    spy = Spy(monkeypatch)
    tag = f"stop-{which}-{time.time_ns()}"
    sources = batch(tag)
    timeout = 2.0
    with Executor() as ex:
        t0 = time.perf_counter()
        assert ex.run(PROBE).stdout == "probe 42\n"
        start_s = time.perf_counter() - t0  # a server start on this machine, now
        pid, old = target(ex, which), ex.server_pid
        spy.arm()
        stopper = spy.signal_after_first_result(pid, signal.SIGSTOP)
        before = ex.jobs_executed
        t0 = time.perf_counter()
        with pytest.warns(ExecutorRetryWarning, match="no answer from the fork server"):
            verdicts = ex.run_many(sources, timeout=timeout)
        elapsed = time.perf_counter() - t0
        stopper.join()
        print(
            f"\nSIGSTOP of the {which} server process: batch {elapsed:.2f} s (deadline "
            f"{wall_limit(timeout) + SLACK:.1f} s, a server start {start_s:.2f} s)"
        )
        check_verdicts(verdicts, tag)
        assert ex.restarts == 1 and ex.server_pid != old
        assert ex.jobs_executed - before == len(sources)
        check_resubmitted_only_the_unfinished(spy, sources, start=1)
        # the stop came after the first verdict (~0.1 s in), then silence for the deadline; then
        # a fresh server and the slow job again (1.5 s): a little more than one deadline
        assert elapsed < wall_limit(timeout) + SLACK + 2 * start_s + 1.5 + 2.0
    try:  # the stopped server went with its sandbox
        os.kill(pid, 0)
        gone = open(f"/proc/{pid}/stat").read().split()[2] == "Z"
    except (ProcessLookupError, FileNotFoundError):
        gone = True
    assert gone, f"stopped server process {pid} is still there"


def test_without_retries_one_fault_is_an_error_and_what_arrived_is_kept(monkeypatch):
    spy = Spy(monkeypatch)
    tag = f"noretry-{time.time_ns()}"
    sources = batch(tag)
    with Executor(retries=0) as ex:
        ex.run(PROBE)
        spy.arm()
        killer = spy.signal_after_first_result(target(ex, "outermost"), signal.SIGKILL)
        with pytest.raises(
            ExecutorError,
            match=r"1 attempt \(retries=0\), \d jobs without a "
            r"verdict: attempt 1: the fork server exited",
        ):
            ex.run_many(sources, timeout=10.0)
        killer.join()
        assert ex.restarts == 0
        finished = {sources[i] for i in spy.received[-1]}
        before = ex.jobs_executed
        again = ex.run_many(sources, timeout=10.0)  # a fresh server; what arrived was cached
        check_verdicts(again, tag)
        assert [v.cached for v in again] == [s in finished for s in sources]
        assert ex.jobs_executed - before == len(sources) - len(finished)
        assert ex.restarts == 0


def test_retries_exhausted_is_an_error_never_a_score(monkeypatch, harness):
    """Every server (the first and both fresh ones) is killed as soon as it has the request: 3
    attempts, 2 warnings, then ExecutorError naming each attempt; the reward raises too."""
    from jacrl.ruler.reward import score_completions

    spy = Spy(monkeypatch)
    killed: list[int] = []

    def kill_it(server):
        pid = server_processes(server.proc.pid)[0]
        killed.append(pid)
        os.kill(pid, signal.SIGKILL)

    driver, answer = next(iter(harness.values()))
    with Executor() as ex:
        ex.run(PROBE)
        spy.on_send = kill_it
        with pytest.warns(ExecutorRetryWarning) as rec:
            with pytest.raises(
                ExecutorError,
                match=r"3 attempts \(retries=2\), 1 jobs without a "
                r"verdict: attempt 1: .*; attempt 2: .*; "
                r"attempt 3: ",
            ):
                score_completions([driver.gold], [answer], executor=ex)
        assert len(killed) == 3 and len(set(killed)) == 3 and ex.restarts == 2
        assert len([w for w in rec if w.category is ExecutorRetryWarning]) == 2
        spy.on_send = None
        scored = score_completions([driver.gold], [answer], executor=ex)
        assert scored[0].score == 1.0 and ex.restarts == 2  # the next call: a fresh server


def test_job_failures_are_verdicts_not_retries(executor):
    """A job that times out, parses forever, exits non-zero, kills itself or its parent, or
    kills every process it can see is judged; the server is kept and nothing is retried."""
    jobs = {
        "timeout": "with entry { while True { } }",
        "parser_hang": "def f() {\n    has\n    x in y {\n",
        "exit_3": "import sys;\nwith entry { sys.exit(3); }",
        "self_kill": "import os;\nimport signal;\nwith entry { os.kill(os.getpid(), "
        "signal.SIGKILL); }",
        "kill_parent": "import os;\nimport signal;\nwith entry { os.kill(os.getppid(), "
        'signal.SIGKILL); print("still here"); }',
        "kill_all": "import os;\nimport signal;\nwith entry { os.kill(-1, signal.SIGKILL); }",
    }
    tag = f"\n# {time.time_ns()}"
    executor.run(PROBE)
    pid, restarts = executor.server_pid, executor.restarts
    verdicts = dict(
        zip(jobs, executor.run_many([j + tag for j in jobs.values()], timeout=1.5), strict=True)
    )
    assert executor.server_pid == pid and executor.restarts == restarts
    assert verdicts["timeout"].timed_out and verdicts["parser_hang"].timed_out
    assert verdicts["exit_3"].exit_code == 3 and verdicts["exit_3"].status == "runtime_error"
    assert verdicts["self_kill"].status == "killed:SIGKILL"
    assert not any(v.ran for k, v in verdicts.items() if k not in ("kill_parent", "kill_all"))


def test_a_protocol_violation_is_retried(monkeypatch):
    """A verdict line for a job the server was never given: the server is replaced and the batch
    completes on the fresh one."""
    read = executor_client._Server.read
    lied: list[int] = []

    def lying_read(server, timeout):
        msg = read(server, timeout)
        if not lied and "i" in msg:
            lied.append(msg["i"])
            return {**msg, "i": 99}
        return msg

    monkeypatch.setattr(executor_client._Server, "read", lying_read)
    tag = f"proto-{time.time_ns()}"
    with Executor() as ex:
        with pytest.warns(ExecutorRetryWarning, match="verdict for job 99 of 5"):
            check_verdicts(ex.run_many(batch(tag), timeout=10.0), tag)
        assert ex.restarts == 1 and lied


def test_a_stopped_server_cannot_block_a_large_request(monkeypatch):
    """A request larger than the pipe's buffer to a stopped server: the write has the batch's
    deadline too (it used to block forever), then the batch is retried on a fresh server."""
    big = PROBE + "\n# " + "x" * (1 << 18) + f" {time.time_ns()}"  # 256 KiB > a pipe's 64 KiB
    with Executor() as ex:
        ex.run(PROBE)
        for pid in server_processes(ex.server_pid):
            os.kill(pid, signal.SIGSTOP)
        t0 = time.perf_counter()
        within = f"took no request within {wall_limit(1.0) + SLACK:.1f} s"
        with pytest.warns(ExecutorRetryWarning, match=within):
            v = ex.run(big, timeout=1.0)
        elapsed = time.perf_counter() - t0
        print(f"\nlarge request to a stopped server: {elapsed:.2f} s")
        assert v.stdout == "probe 42\n" and ex.restarts == 1
        assert elapsed < wall_limit(1.0) + SLACK + 15


# -------------------------------------------------------------------------------------------
# a real GRPO run on jac-tiny survives one fault of the reward's fork server
# -------------------------------------------------------------------------------------------

GRPO_TIMEOUT = 2.0  # the tasks' run timeout: a stopped server is noticed after 2 + 1 + SLACK s
GRPO = dict(
    iters=3,
    learning_rate=1e-4,
    beta=0.0,
    group_size=4,
    batch_size=1,
    max_completion_length=24,
    lora_layers=1,
    lora_rank=4,
    grad_checkpoint=False,
    steps_per_report=1,
    temperature=1.0,
    seed=0,
)


@pytest.fixture(scope="module")
def grpo_task(harness_tasks):
    """A harness task with a short run timeout."""
    task = dict(harness_tasks[0])
    answer = json.loads(task["answer"])
    answer["timeout"] = GRPO_TIMEOUT
    task["answer"] = json.dumps(answer)
    return task


def _grpo(tiny, task, out_root, monkeypatch, sig: int | None = None):
    """GRPO (3 iterations, 1 task x 4 rollouts, seeded) with a fresh process-wide reward
    executor. With `sig`: right after the request of the second reward batch is sent, a
    background thread sends sig to the reward server's outermost python process. Returns
    (the train rows of metrics.jsonl, the executor, the spy)."""
    from jacrl import train as tr
    from jacrl.config import GRPOConfig
    from jacrl.ruler import reward

    ex = Executor()
    monkeypatch.setattr(reward, "_EXECUTOR", ex)  # what `default_executor()` returns
    spy = Spy(monkeypatch)
    hit, done, signalled = threading.Event(), threading.Event(), []

    def on_send(server):
        if len(spy.requests) == 2:
            hit.set()
            assert done.wait(30)  # the signal is out before the client reads a reply

    def fault():
        hit.wait()
        if done.is_set():  # the run ended first
            return
        pid = server_processes(ex.server_pid)[0]
        os.kill(pid, sig)
        signalled.append(pid)
        done.set()

    if sig is not None:
        spy.on_send = on_send
        thread = threading.Thread(target=fault, daemon=True)
        thread.start()
    cfg = GRPOConfig(**GRPO)
    t0 = time.time()
    try:
        art = tr.grpo(tiny, [task], None, cfg, out_root, log=lambda m: None)
    finally:
        if not hit.is_set():
            done.set()
            hit.set()
        ex.close()
    wall = time.time() - t0
    rows = [json.loads(x) for x in (art.path / "metrics.jsonl").read_text().splitlines()]
    train = [r for r in rows if r["event"] == "train"]
    what = f"a {signal.Signals(sig).name} of the reward server" if sig else "no fault"
    print(
        f"\nGRPO {cfg.iters} iters with {what}: {wall:.1f} s, {len(spy.requests)} reward "
        f"batches, restarts {ex.restarts}, rewards {[r['reward_mean'] for r in train]}"
    )
    assert len(train) == cfg.iters
    for r in train:
        assert r["reward_mean"] is not None and r["reward_mean"] == r["reward_mean"]
        assert 0.0 <= r["reward_mean"] <= 1.0 and r["reward_std"] >= 0.0
    if sig is not None:
        assert signalled and ex.restarts == 1
        # the faulted request was resubmitted, less what had been answered before the fault
        assert spy.requests[2] == [
            s for i, s in enumerate(spy.requests[1]) if i not in spy.received[1]
        ]
    return train, ex, spy


@pytest.fixture(scope="module")
def grpo_baseline(tiny, grpo_task, tmp_path_factory):
    """The same seeded run without a fault: its rewards are what a faulted run must reproduce."""
    with pytest.MonkeyPatch.context() as mp:
        train, ex, _ = _grpo(tiny, grpo_task, tmp_path_factory.mktemp("grpo-plain"), mp)
    assert ex.restarts == 0
    return [r["reward_mean"] for r in train]


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGSTOP], ids=["sigkill", "sigstop"])
def test_grpo_survives_a_fault_of_the_reward_server(
    tiny, grpo_task, grpo_baseline, tmp_path, monkeypatch, sig
):
    """The run finishes its iterations, and every iteration's reward is the one the run without
    a fault computed: nothing was lost, nothing scored as zero."""
    with pytest.warns(ExecutorRetryWarning):
        train, _, _ = _grpo(tiny, grpo_task, tmp_path, monkeypatch, sig)
    assert [r["reward_mean"] for r in train] == pytest.approx(grpo_baseline, abs=1e-6)
