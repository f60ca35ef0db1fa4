"""Contracts of one evaluation (jacrl.evaluate.evaluate) that mutants of bench/mutation.py
survived (docs/mutation.md): the row's sampling fields, its timings, the samples file it names,
its BLAS record, and no tasks refused. One real task, the embedded model, a short budget."""

from __future__ import annotations

import json

import pytest
from conftest import ROOT

from jacrl import evaluate as ev
from jacrl.config import EvalConfig
from jacrl.tasks import read_tasks


@pytest.fixture(scope="module")
def one_task():
    t = read_tasks(ROOT / "data" / "tasks.jsonl")[0]
    return [{"prompt": t["prompt"], "answer": t["answer"]}]


def test_a_sampled_evaluation_row(tiny, one_task, tmp_path, capsys):
    """evaluate with samples: n and temperature as asked, every phase timed (load, greedy,
    sample, grade, total; none negative), the samples file named, the per-task record kept,
    BLAS threads recorded, and progress saying how many completions are graded."""
    cfg = EvalConfig(n=2, temperature=0.7, k=(1, 2), seed=0, max_tokens=12)
    path = tmp_path / "s.jsonl.gz"
    row = ev.evaluate(tiny, None, one_task, cfg, samples=path, progress=True)
    assert (row["n"], row["temperature"], row["tasks"]) == (2, 0.7, 1)
    assert set(row["seconds"]) == {"load", "greedy", "sample", "grade", "total"}
    assert all(v >= 0 for v in row["seconds"].values())
    assert row["seconds"]["total"] >= row["seconds"]["sample"]
    assert path.is_file() and row["samples"] and row["samples"].endswith("s.jsonl.gz")
    assert len(row["per_task"]) == 1 and 0 <= row["per_task"][0]["samples_correct"] <= 2
    assert "blas_threads" in row["provenance"]
    err = capsys.readouterr().err
    assert "grading 3 completions" in err and "greedy" in err and "samples" in err


def test_a_greedy_evaluation_has_temperature_0_and_no_tasks_is_refused(tiny, one_task):
    """evaluate with n=0: the row's temperature is 0.0 whatever the config says (greedy only);
    no tasks: 'no tasks to evaluate'."""
    cfg = EvalConfig(n=0, temperature=0.7, k=(1,), seed=0, max_tokens=8)
    row = ev.evaluate(tiny, None, one_task, cfg)
    assert (row["n"], row["temperature"]) == (0, 0.0)
    with pytest.raises(ValueError, match="^no tasks to evaluate$"):
        ev.evaluate(tiny, None, [], cfg)


def test_percentages_keep_two_decimals_and_none_of_nothing():
    assert ev._pct(1, 3) == 33.33 and ev._pct(2, 3) == 66.67 and ev._pct(5, 0) == 0.0


def test_a_tasks_family_is_its_own_or_its_ids_first_word():
    assert ev.family_of({"meta": {"id": "loop_sum_3", "family": "walkers"}}) == "walkers"
    assert ev.family_of({"meta": {"id": "loop_sum_3", "family": ""}}) == "loop"
    assert ev.family_of({"answer": json.dumps({"id": "graph_bfs"})}) == "graph"


def test_grading_no_tasks_gives_zeros_not_an_error():
    m = ev.grade([], [], k=(1,))
    assert (m["tasks"], m["pass1_pct"], m["avg_osim"], m["avg_idiom"]) == (0, 0.0, 0.0, 0.0)
    assert m["bestofk"] is None and m["pass_at_k"] == {}


def test_one_sample_per_task_is_a_best_of_one(harness_tasks):
    """n = 1: best-of-k is reported with k = 1 (it is only absent without samples)."""
    task = harness_tasks[0]
    body = "```jac\n" + json.loads(task["answer"])["gold"] + "\n```"
    m = ev.grade([task], [body], [[body]], k=(1,))
    assert m["pass_at_k"] == {"1": 100.0}
    assert m["bestofk"] == {
        "k": 1,
        "deploy": 1,
        "deploy_pct": 100.0,
        "coverage": 1,
        "coverage_pct": 100.0,
        "oracle": 1,
        "oracle_pct": 100.0,
    }
