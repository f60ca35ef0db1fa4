"""Per-task time-outs (`jacrl.tasks.validate.task_timeout`): stepped from the gold's CPU time and
stored in every task, used by the reward and the conversion checks, and never failing a correct
answer on a busy machine."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys

from conftest import HARNESS, ROOT
from variants import variants

from jacrl.executor import Executor
from jacrl.executor.child import wall_limit
from jacrl.ruler.extract import extract_body, splice
from jacrl.ruler.reward import Hole, score_completions
from jacrl.tasks import conversion
from jacrl.tasks.build import build_tasks
from jacrl.tasks.record import read_conversion, read_tasks
from jacrl.tasks.validate import TIMEOUT, TIMEOUT_STEPS, load_all, task_timeout


def test_the_rule_and_the_stored_values():
    assert [task_timeout(s) for s in (0.0, 0.12, 0.17, 0.33, 0.34, 1.66, 1.67)] == [
        0.5,
        0.5,
        1.0,
        1.0,
        5.0,
        5.0,
        TIMEOUT,
    ]
    tasks = read_tasks(ROOT / "data" / "tasks.jsonl")
    assert {t["meta"]["timeout"] for t in tasks} <= set(TIMEOUT_STEPS)
    by_id = {t["meta"]["id"]: t["answer"] for t in tasks}
    for c in read_conversion():  # a conversion task carries its hole-fill task's answer
        assert c["answer"] == by_id[c["meta"]["id"]]


def test_fixed_timeout_builds_the_earlier_20_s(tmp_path):
    drivers = tmp_path / "drivers"
    drivers.mkdir()
    (drivers / HARNESS[0].name).write_text(HARNESS[0].read_text())
    assert not build_tasks(drivers, tmp_path / "data", fixed_timeout=True).failures
    built = read_tasks(tmp_path / "data" / "tasks.jsonl")
    assert [t["meta"]["timeout"] for t in built] == [TIMEOUT]


class Recording(Executor):
    """A real executor that also records the time-outs it is given."""

    def __init__(self):
        super().__init__()
        self.timeouts: list[float] = []

    def run_many(self, sources, timeout=20.0):
        self.timeouts += list(timeout) if not isinstance(timeout, (int, float)) else [timeout]
        return super().run_many(sources, timeout)


def test_reward_and_conversion_checks_use_the_tasks_timeout(harness_tasks):
    answer = json.loads(harness_tasks[0]["answer"])
    assert answer["timeout"] == 0.5  # the ordinary build of a harness driver
    with Recording() as ex:
        (loop,) = score_completions(
            ["```jac\nwhile True { }\n```"], [harness_tasks[0]["answer"]], executor=ex
        )
        assert ex.timeouts == [0.5]
        assert loop.verdict.timed_out and loop.verdict.seconds < wall_limit(0.5) + 0.5
        ex.timeouts.clear()
        built = read_tasks(ROOT / "data" / "tasks.jsonl")
        report = conversion.build(ROOT / "drivers", built, ex)
        assert report.records and not report.failures
        stored = {t["meta"]["id"]: t["meta"]["timeout"] for t in built}
        ids = [
            r["meta"]["id"] if "meta" in r else json.loads(r["answer"])["id"]
            for r in report.records
        ]
        assert sorted(ex.timeouts) == sorted(stored[i] for i in ids)


@contextlib.contextmanager
def one_busy_core():
    """This thread, and what it starts meanwhile (the executor's server and its jobs), on one CPU,
    with a process spinning on that CPU: every job shares its core with a spinner, as on a
    machine whose cores all spin, while the other cores stay free for the rest of the suite."""
    before = os.sched_getaffinity(0)
    core = min(before)
    os.sched_setaffinity(0, {core})
    spin = subprocess.Popen([sys.executable, "-c", "while True: pass"])  # on that CPU too
    try:
        yield core
    finally:
        spin.kill()
        spin.wait()
        os.sched_setaffinity(0, before)


def test_every_answer_shape_of_every_task_scores_one_on_a_busy_machine():
    """Every gold of the corpus in every answer shape, and every gold of the learnable family,
    under its stored time-out and the jobs' syscall allowlist, while the core the jobs run on
    spins: 1.0 each (the time-out is CPU time, which the spinning does not stretch). The programs
    run while it spins; the grading (pure Python) after, from those verdicts."""
    answers = {t["meta"]["id"]: t["answer"] for t in read_tasks(ROOT / "data" / "tasks.jsonl")}
    named = [
        (f"{d.id}/{name}", c, answers[d.id])
        for d in load_all(ROOT / "drivers")[0]
        for name, c in variants(d).items()
    ]
    named += [  # the learnable family: its gold, fenced (one program each)
        (f"learnable/{t['meta']['id']}", f"```jac\n{t['meta']['gold']}\n```", t["answer"])
        for t in read_tasks(ROOT / "learnable" / "data" / "tasks.jsonl")
    ]
    programs = {}  # what score_completions runs for each shape: its spliced program
    for _, c, a in named:
        hole = Hole.from_answer(a)
        programs[splice(hole.template, extract_body(c, hole.unit))] = hole.timeout
    with Executor() as ex:  # a fresh cache: every gold runs
        with one_busy_core() as core:  # the server starts at the first batch: on the busy core
            runs = ex.run_many(list(programs), timeout=list(programs.values()))
            assert os.sched_getaffinity(ex.server_pid) == {core}
        ran = ex.jobs_executed
        scored = score_completions([c for _, c, _ in named], [a for _, _, a in named], executor=ex)
        assert ex.jobs_executed == ran == len(programs)  # every verdict is from the busy runs
    bad = [
        (n, s.score, s.tier) for (n, _, _), s in zip(named, scored, strict=True) if s.score != 1.0
    ]
    slowest = max(v.seconds for v in runs)
    print(
        f"\n{len(named)} shapes of {len(answers)} tasks, {len(programs)} programs: slowest "
        f"run {slowest:.2f} s wall"
    )
    assert not bad and len(named) >= len(answers) * 10, bad[:5]


def test_splits_carry_the_tasks_answers():
    """The split files copy each task's record: a rebuild of the tasks must reach them too (it
    once did not, and the ladder graded with the old time-outs)."""
    from jacrl.tasks.splits import SPLITS, load_split

    answers = {t["meta"]["id"]: t["answer"] for t in read_tasks(ROOT / "data" / "tasks.jsonl")}
    for name in SPLITS:
        for t in load_split(name, ROOT / "data"):
            tid = json.loads(t["answer"])["id"]
            assert t["answer"] == answers[tid], (name, tid)
