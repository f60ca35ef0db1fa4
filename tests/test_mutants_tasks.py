"""Contracts of the tasks (jacrl.tasks) that mutants of bench/mutation.py survived
(docs/mutation.md): the answer record's keys, where a task's meta comes from, and which stderr
line and program line a failed run is reported with."""

from __future__ import annotations

import json

from conftest import ROOT

from jacrl.build import build_tasks
from jacrl.drivers import parse_driver
from jacrl.executor.client import Verdict
from jacrl.tasks import TIMEOUT, TIMEOUT_STEPS, answer_json, failure, meta, read_tasks, validate


def _failed(stderr: str, status: str = "runtime_error", code: int | None = 1) -> Verdict:
    return Verdict(True, False, code, "", stderr, False, 0.1, status)


def test_the_answer_record_carries_family_and_timeout():
    """answer_json: the record has the earlier harness's keys (id, source, expected_output,
    timeout: the value given) and ours (family, unit, template, gold, baseline_output)."""
    d = parse_driver(sorted((ROOT / "drivers").glob("*.jac"))[0])
    got = json.loads(answer_json(d, "42\n", timeout=1.5, baseline_output="0\n"))
    assert list(got) == [
        "id", "source", "expected_output", "timeout", "family", "unit", "template", "gold",
        "baseline_output",
    ]  # fmt: skip
    assert (got["id"], got["timeout"], got["family"]) == (d.id, 1.5, d.family)
    assert (got["expected_output"], got["baseline_output"], got["gold"]) == ("42\n", "0\n", d.gold)


def test_meta_is_the_parsed_answer_or_the_one_already_read(tmp_path):
    """meta: a task read by read_tasks carries its parsed answer as `meta` and that is used;
    a bare record's answer JSON is parsed. read_tasks skips blank lines."""
    assert meta({"meta": {"id": "m"}, "answer": json.dumps({"id": "a"})}) == {"id": "m"}
    assert meta({"answer": json.dumps({"id": "a"})}) == {"id": "a"}
    path = tmp_path / "tasks.jsonl"
    path.write_text(json.dumps({"prompt": "p", "answer": json.dumps({"id": "t1"})}) + "\n\n")
    assert read_tasks(path) == [{"prompt": "p", "answer": '{"id": "t1"}', "meta": {"id": "t1"}}]


def test_a_failure_is_its_exception_line_or_its_exit_code():
    """failure: with only traceback frames on stderr the cause is the exit code, not a frame;
    the program line is the first `.jac:N` or else the last Python frame in the program."""
    tb = (
        "Traceback (most recent call last):\n"
        '  File "/tmp/p.jac", line 3, in <module>\n'
        '  File "/tmp/p.jac", line 5, in f\n'
        '  File "/tmp/p.jac", line 7, in g\n'
    )
    assert failure(_failed(tb, "exit", 3)) == (7, "exit code 3")
    assert failure(_failed(tb, "exit", 0)) == (7, "exit")
    assert failure(_failed(tb + "ZeroDivisionError: division by zero\n")) == (
        7,
        "ZeroDivisionError: division by zero",
    )
    assert failure(_failed("✖ Error: bad thing\n  --> /tmp/p.jac:4:2\n")) == (4, "bad thing")
    assert failure(_failed("", "timeout", None)) == (None, "timeout")


def test_read_tasks_defaults_to_the_projects_tasks_file():
    """read_tasks(): the project's data/tasks.jsonl."""
    assert read_tasks() == read_tasks(ROOT / "data" / "tasks.jsonl")


def test_a_fixed_timeout_is_the_cap_and_otherwise_a_step_of_the_rule(executor):
    """validate(fixed_timeout=True): every task's time-out is TIMEOUT; without it, a step of
    TIMEOUT_STEPS from the gold's CPU time (a quick driver: below the cap)."""
    d = parse_driver(sorted((ROOT / "drivers").glob("*.jac"))[0])
    fixed = validate([d], (executor, executor), fixed_timeout=True)
    assert fixed.failures == [] and meta(fixed.built[0])["timeout"] == TIMEOUT
    ruled = validate([d], (executor, executor))
    assert meta(ruled.built[0])["timeout"] in TIMEOUT_STEPS[:-1]


SELF_READ = """# Source: apps/harness
def double(x: int) -> int {{
    # >>>HOLE id="{tid}" instruction="Return twice x."
    return x * 2;
    # <<<HOLE
}}

with entry {{
    lines = len(open(__file__).read().splitlines());
    {entry}
}}
"""


def test_a_gold_body_that_fails_only_in_the_template_is_named_with_why(tmp_path):
    """validate: a driver that runs clean but whose gold body, spliced into the template (two
    marker lines shorter), does not score 1.0 is refused at its hole line, saying how the gold
    scored and why: its stdout differs, or the error it ran into."""
    drivers = tmp_path / "drivers"
    drivers.mkdir()
    differs = drivers / "syn_self_differs.jac"
    differs.write_text(SELF_READ.format(tid="syn_self_differs", entry="print(double(2), lines);"))
    crashes = drivers / "syn_self_crashes.jac"
    crashes.write_text(
        SELF_READ.format(tid="syn_self_crashes", entry='print(double(2), [0][lines - 11], "ok");')
    )
    report = build_tasks(drivers, tmp_path / "data")
    assert report.failures == [
        f"{crashes}:3: gold body scores 0.25 (compiles), not 1.0: Error: list index out of range",
        f"{differs}:3: gold body scores 0.25 (runs), not 1.0: its stdout differs",
    ]
