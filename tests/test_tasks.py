"""Task build: the committed corpus and data/ are valid, rebuild byte-identically, and bad drivers
are rejected with one line `path:line: reason` while nothing is written; the answer record, a
task's meta, how a failed run is reported, validate's time-outs (jacrl.tasks.record)."""

from __future__ import annotations

import json
import shutil
from collections import Counter
from pathlib import Path

import pytest
from conftest import HARNESS, ROOT

from jacrl.executor.client import Verdict
from jacrl.ruler.drivers import parse_driver
from jacrl.tasks import corpus
from jacrl.tasks.build import build_tasks
from jacrl.tasks.record import meta, read_tasks
from jacrl.tasks.validate import (
    PROMPT_SENTENCE,
    TIMEOUT,
    TIMEOUT_STEPS,
    answer_json,
    failure,
    load_all,
    validate,
)


def test_corpus_composition():
    drivers = load_all(ROOT / "drivers")[0]
    n = len(drivers)
    fams = Counter(d.family for d in drivers)
    sources = Counter(d.source for d in drivers)
    assert n >= 200
    assert len(fams) >= 6
    assert fams["osp"] / n >= 0.30
    assert len(sources) >= 25
    assert max(sources.values()) / n <= 0.15
    kinds = Counter(d.unit.kind for d in drivers)
    assert kinds["def"] and kinds["can"] and kinds["impl"]
    assert sum(d.unit.partial for d in drivers) >= 5
    # our corpus policy, the check a build of drivers/ enforces
    assert [p for d in drivers for p in corpus.driver_problems(d)] == []
    assert corpus.corpus_problems(drivers, ROOT / "drivers") == []


def test_committed_data_matches_drivers():
    tasks = read_tasks(ROOT / "data" / "tasks.jsonl")
    ids = [t["meta"]["id"] for t in tasks]
    assert ids == [d.id for d in load_all(ROOT / "drivers")[0]]
    for t in tasks:
        meta = t["meta"]
        assert list(meta)[:4] == ["id", "source", "expected_output", "timeout"]
        assert PROMPT_SENTENCE in t["prompt"]
        assert "# TODO: write the body for this unit" in t["prompt"]
        assert t["prompt"].endswith("\n\n```")
        assert (ROOT / "data" / "templates" / f"{meta['id']}.jac").read_text() == meta["template"]
        assert meta["gold"] not in t["prompt"]


@pytest.mark.slow
def test_rebuild_is_byte_identical(tmp_path):
    report = build_tasks(ROOT / "drivers", tmp_path)
    assert not report.failures
    assert (tmp_path / "tasks.jsonl").read_bytes() == (ROOT / "data" / "tasks.jsonl").read_bytes()
    committed = sorted(p.name for p in (ROOT / "data" / "templates").iterdir())
    assert sorted(p.name for p in (tmp_path / "templates").iterdir()) == committed


def _hole_in_entry_block(text: str) -> str:
    lines = text.split("\n")
    marker = next(ln for ln in lines if ">>>HOLE" in ln).strip()
    lines = [ln for ln in lines if "HOLE" not in ln]
    i = next(k for k, ln in enumerate(lines) if "print(" in ln)
    return "\n".join(
        lines[:i] + ["        " + marker] + [lines[i]] + ["        # <<<HOLE"] + lines[i + 1 :]
    )


BAD = {
    "no_hole": (
        "syn_bad_nohole",
        lambda t: t.replace("# >>>HOLE", "# >>>HOPE"),
        ":1: expected exactly one '>>>HOLE'",
    ),
    "random": (
        "syn_bad_random",
        lambda t: t.replace('"""Harness', 'import random;\n"""Harness').replace(
            'print(f"{n} -> {collatz_steps(n)}");',
            'print(f"{n} -> {collatz_steps(n)} {random.random()}");',
        ),
        "nondeterministic stdout",
    ),
    "hole_unused": (
        "syn_bad_unused",
        lambda t: t.replace("collatz_steps(n)}", "n}"),
        "empty body gives the same output",
    ),
    "gold_crashes": (
        "syn_bad_crash",
        lambda t: t.replace("steps = 0;", "steps = 0 / 0;"),
        "does not run clean",
    ),
    "outside_unit": ("syn_bad_outside", lambda t: _hole_in_entry_block(t), "is not inside"),
}


def test_bad_drivers_are_rejected_and_nothing_is_written(tmp_path):
    src = next(p for p in HARNESS if "collatz" in p.name).read_text()
    drivers = tmp_path / "drivers"
    drivers.mkdir()
    expected = {}
    for new_id, edit, why in BAD.values():
        text = edit(src).replace("syn_harness_collatz_steps", new_id)
        (drivers / f"{new_id}.jac").write_text(text)
        expected[new_id] = why
    shutil.copy(next(p for p in HARNESS if "json_braces" in p.name), drivers)
    out = tmp_path / "data"
    report = build_tasks(drivers, out)
    assert len(report.failures) == len(BAD)
    for line in report.failures:
        path, lineno, why = line.split(":", 2)
        assert Path(path).parent == drivers and lineno.isdigit() and "\n" not in line
        assert expected[Path(path).stem] in line, line
    assert not (out / "tasks.jsonl").exists() and not (out / "templates").exists()


def test_answer_record_round_trips_through_the_reward(harness_tasks):
    from jacrl.ruler.reward import score_completions

    for t in harness_tasks:
        meta = json.loads(t["answer"])
        assert score_completions([f"```jac\n{meta['gold']}\n```"], [t["answer"]])[0].score == 1.0


def _driver(tid: str, head: str, entry: str) -> str:
    return (
        f"# Source: apps/harness\n{head}\n"
        "def double(x: int) -> int {\n"
        f'    # >>>HOLE id="{tid}" instruction="Return twice x."\n'
        "    return x * 2;\n"
        "    # <<<HOLE\n"
        "}\n\n"
        f"with entry {{\n    {entry}\n}}\n"
    )


def test_build_errors_name_the_real_cause(tmp_path):
    drivers = tmp_path / "drivers"
    drivers.mkdir()
    nomod = drivers / "syn_bad_nomod.jac"
    nomod.write_text(_driver("syn_bad_nomod", "import nosuchmod;\n", "print(double(2));"))
    silent = drivers / "syn_bad_silent.jac"
    silent.write_text(_driver("syn_bad_silent", "", "double(2);"))
    out = tmp_path / "data"
    report = build_tasks(drivers, out)
    assert report.failures == [
        f"{nomod}:2: driver does not run clean (runtime_error): Error: No module named 'nosuchmod'",
        f"{silent}:1: driver prints nothing (its stdout is empty)",
    ]
    assert not out.exists() or not any(out.iterdir())


# -- the answer record, meta, failure, validate's time-outs ----------------------------------------


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
