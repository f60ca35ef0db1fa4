"""Contracts of the reward (jacrl.reward) that mutants of bench/mutation.py survived
(docs/mutation.md): the changed-lines share, why a body is not run, a time-out's lines, each
task's own time-out reaching the executor, and a failed extraction's record."""

from __future__ import annotations

import json
import sys

import pytest

from jacrl import reward
from jacrl.executor import Verdict
from jacrl.reward import ExtractionWarning, Hole, changed_lines, not_run, score, score_completions


def test_changed_lines_compare_whole_lines_spaces_included():
    assert changed_lines("a b\nc d\n", "a b\nc d", None) == 1.0
    assert changed_lines("a b\nc  d\n", "a b\nc d", "a b\nx") == 0.0  # only line 2 depends
    assert changed_lines("a\nb\n", "a b", None) == 0.0


def test_why_a_body_is_not_run():
    assert not_run("") == "no code" and not_run("# only a comment\n") == "no code"
    assert not_run("x = 1;") == ""


def test_a_timed_out_run_matches_no_line_whatever_it_printed(harness):
    """A time-out is the server's observation: what the job printed before it counts for
    nothing, not even the lines it got right."""
    d, answer = next(iter(harness.values()))
    hole = Hole.from_answer(answer)
    out = hole.expected_output
    timed_out = Verdict(True, False, None, out, "", True, 2.0, "timeout")
    s = score(d.gold, timed_out, hole)
    assert (s.tier, s.line_match) == ("compiles", 0.0)
    ran = Verdict(True, True, 0, out, "", False, 0.1, "ok")
    assert score(d.gold, ran, hole).line_match == 1.0


class _Recording:
    """The real executor, recording the time-outs each batch was run with."""

    def __init__(self, executor):
        self.executor, self.timeouts = executor, []

    def run_many(self, sources, timeout=20.0):
        self.timeouts.append(timeout)
        return self.executor.run_many(sources, timeout=timeout)


def test_each_program_runs_with_its_tasks_own_timeout(harness, executor):
    (d1, a1), (d2, a2) = list(harness.values())[:2]
    a2 = json.dumps({**json.loads(a2), "timeout": 1.5})
    rec = _Recording(executor)
    got = score_completions([f"```jac\n{d.gold}\n```" for d in (d1, d2)], [a1, a2], executor=rec)
    assert rec.timeouts == [[json.loads(a1)["timeout"], 1.5]]
    assert [s.score for s in got] == [1.0, 1.0]


def test_a_failed_extraction_is_recorded_as_nothing_graded(harness, executor, monkeypatch):
    """extraction raising: tier none, score, similarity and lines 0, no verdict, the reason
    naming the exception with its message cut at 200 characters; the warning names the line
    that asked for the scores."""
    long = "x" * 300

    def broken(text, unit):
        raise KeyError(long)

    monkeypatch.setattr(reward, "extract_body", broken)
    _, answer = next(iter(harness.values()))
    with pytest.warns(ExtractionWarning, match="KeyError") as rec:
        (s,) = score_completions(["anything"], [answer], executor=executor)
    # under mutmut a trampoline in its own file sits between (tests/test_contracts_more.py)
    assert rec[0].filename != reward.__file__
    assert rec[0].filename == __file__ or "mutmut" in sys.modules
    assert (s.tier, s.score, s.sim, s.line_match, s.verdict) == ("none", 0.0, 0.0, 0.0, None)
    assert s.reason == f"extraction failed: KeyError: {repr(long)[:200]}: not run"
