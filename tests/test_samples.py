"""jacrl.samples: an evaluation keeps its completions (real MLX on jac-tiny at tiny n, real
jaclang grading), `jacrl eval --log-samples` writes them beside the row, `jacrl samples` browses
them with the task's gold; damaged files are one-line errors."""

from __future__ import annotations

import gzip
import json

import pytest

from jacrl import samples as smp
from jacrl.cli import main
from jacrl.config import EvalConfig
from jacrl.evaluate import evaluate, score_all
from jacrl.generate import Sample
from jacrl.results import read_rows
from jacrl.ruler.extract import dedent
from jacrl.ruler.reward import score_completions
from jacrl.tasks.record import meta

FIELDS = {
    "task",
    "sample",
    "temperature",
    "text",
    "body",
    "tier",
    "reward",
    "exact",
    "ran",
    "truncated",
    "tokens",
    "stdout",
}


def fenced(task) -> str:
    return "```jac\n" + meta(task)["gold"] + "\n```"


@pytest.fixture(scope="module")
def kept(tiny, harness_tasks, tmp_path_factory):
    """One real evaluation of 2 tasks (greedy + 2 samples each) that keeps its samples."""
    path = tmp_path_factory.mktemp("samples") / "s.jsonl.gz"
    cfg = EvalConfig(n=2, k=(1, 2), temperature=0.9, seed=3, max_tokens=24)
    row = evaluate(tiny, None, harness_tasks[:2], cfg, tag="t", split="harness", samples=path)
    return row, path


def test_evaluation_keeps_every_completion_beside_its_row(kept, harness_tasks):
    row, path = kept
    assert row["samples"] == str(path)
    with open(path, "rb") as f:
        assert f.read(2) == b"\x1f\x8b"  # gzip
    head, recs = smp.read_samples(path)
    assert head["jacrl_samples"] == smp.FORMAT
    assert head["row"] == {f: row[f] for f in smp.HEADER_ROW}
    ids = [meta(t)["id"] for t in harness_tasks[:2]]
    assert list(head["tasks"]) == ids
    assert head["tasks"][ids[0]]["gold"] == dedent(meta(harness_tasks[0])["gold"]).strip("\n")
    assert [(r["task"], r["sample"]) for r in recs] == [(i, j) for i in ids for j in (0, 1, 2)]
    assert all(set(r) == FIELDS for r in recs)
    assert [r["temperature"] for r in recs] == [0.0, 0.9, 0.9] * 2
    # the kept grades are the row's: greedy tier and truncation, exact sample counts
    for p in row["per_task"]:
        mine = [r for r in recs if r["task"] == p["id"]]
        assert mine[0]["tier"] == p["greedy_tier"] and mine[0]["truncated"] == p["truncated"]
        assert sum(r["exact"] for r in mine[1:]) == p["samples_correct"]
        assert sum(r["ran"] for r in mine[1:]) == p["samples_ran"]
    assert all(r["tokens"] <= 24 and r["truncated"] == (r["tokens"] == 24) for r in recs)
    # and they are what the reward says of the kept text, re-graded here
    again = score_completions(
        [r["text"] for r in recs], [harness_tasks[i // 3]["answer"] for i in range(len(recs))]
    )
    assert [(s.body, s.tier, round(s.score, 4)) for s in again] == [
        (r["body"], r["tier"], r["reward"]) for r in recs
    ]


def test_same_samples_same_bytes(kept, tmp_path):
    _, path = kept
    head, recs = smp.read_samples(path)
    again = smp.write_samples(tmp_path / "again.jsonl.gz", head, recs)
    assert again.read_bytes() == path.read_bytes()  # no time stamp, no file name inside


def test_browse_shows_the_gold_beside_the_samples(harness_tasks, tmp_path):
    """Known completions (gold, a wrong-output body, prose), graded for real, browsed."""
    tasks = harness_tasks[:2]
    wrong = "```jac\nprint('nope');\n```"
    greedy = [Sample(fenced(tasks[0]), 30, False), Sample("no code here", 5, False)]
    drawn = [
        [Sample(wrong, 8, False), Sample(fenced(tasks[0]), 30, False)],
        [Sample(fenced(tasks[1]), 40, False), Sample("```jac\nx = (\n", 512, True)],
    ]
    scored = score_all(tasks, greedy, drawn)
    head = smp.header({"model": "m", "n": 2, "temperature": 0.7, "split": "harness"}, tasks)
    path = smp.write_samples(
        tmp_path / "k.jsonl.gz", head, smp.records(tasks, greedy, drawn, *scored, 0.7)
    )
    head, recs = smp.read_samples(path)
    a, b = (meta(t)["id"] for t in tasks)
    summary = smp.browse(head, recs)
    assert summary.splitlines()[2].split()[:3] == [
        a,
        meta(tasks[0]).get("family") or a.split("_")[0],
        "exact",
    ]
    assert summary.splitlines()[3].split()[2:] == ["none", "exact", "1", "none", "1"]
    one = smp.browse(head, recs, task=a)
    gold_line = dedent(meta(tasks[0])["gold"]).strip("\n").split("\n")[0]
    assert f"== {a}" in one and f"== {b}" not in one
    assert one.index("  gold:") < one.index(f"    | {gold_line}") < one.index("-- greedy: exact")
    assert "  expected output:" in one and "-- sample 1 (T=0.7): runs" in one
    assert "  its output:" in one  # the wrong body ran: what it printed is shown
    exact = smp.browse(head, recs, tiers=["exact"])
    assert exact.count("-- ") == 3 and "no code here" not in exact
    assert "truncated" in smp.browse(head, recs, tiers=["none,compiles"])
    assert "(same as the gold)" in smp.browse(head, recs, task=a, tiers=["exact"], show="diff")
    assert "no code here" in smp.browse(head, recs, task=b, show="text")
    with pytest.raises(ValueError, match="^unknown tier best"):
        smp.browse(head, recs, tiers=["best"])
    with pytest.raises(ValueError, match="^no task 'nope' in these samples"):
        smp.browse(head, recs, task="nope")


def test_eval_cli_log_samples_and_samples_cli(tiny, harness_tasks, tmp_path, capsys):
    tasks_file = tmp_path / "tasks.jsonl"
    tasks_file.write_text("".join(json.dumps(t) + "\n" for t in harness_tasks[:1]))
    rows = tmp_path / "out" / "rows.jsonl"
    assert (
        main(
            [
                "eval",
                "--model",
                tiny,
                "--tasks",
                str(tasks_file),
                "-n",
                "1",
                "--max-tokens",
                "16",
                "--out",
                str(rows),
                "--log-samples",
            ]
        )
        == 0
    )
    capsys.readouterr()
    row = read_rows(rows)[0]
    kept = [p for p in (rows.parent / "samples").iterdir()]
    assert len(kept) == 1 and kept[0].name.startswith("jac-tiny-tasks-")
    assert kept[0].name.endswith(".jsonl.gz") and str(kept[0]) == row["samples"]
    tid = meta(harness_tasks[0])["id"]
    assert main(["samples", str(kept[0])]) == 0
    assert capsys.readouterr().out.splitlines()[2].startswith(tid)
    assert main(["samples", str(kept[0]), "--task", tid, "--prompt"]) == 0
    out = capsys.readouterr().out
    assert "  prompt:" in out and "  gold:" in out and "-- sample 1 (T=" in out
    # a bad name is refused before any work
    assert (
        main(
            [
                "eval",
                "--model",
                tiny,
                "--tasks",
                str(tasks_file),
                "--out",
                "",
                "--log-samples",
                str(tmp_path / "x.jsonl"),
            ]
        )
        == 2
    )
    assert capsys.readouterr().err.startswith("jacrl: eval: --log-samples ")


def test_damaged_samples_files_are_one_line_errors(kept, tmp_path, capsys):
    _, path = kept
    cut = tmp_path / "cut.jsonl.gz"
    cut.write_bytes(path.read_bytes()[:-20])  # an interrupted copy
    plain = tmp_path / "plain.jsonl.gz"
    plain.write_text('{"jacrl_samples": 1}\n')  # not gzip
    bad = tmp_path / "bad.jsonl.gz"
    with gzip.open(bad, "wt") as f:
        f.write('{"jacrl_samples": 1, "row": {}, "tasks": {}}\n{"task": \n')
    headless = tmp_path / "headless.jsonl.gz"
    with gzip.open(headless, "wt") as f:
        f.write('{"task": "a"}\n')
    for p, msg in (
        (cut, f"{cut}: not a whole gzip file"),
        (plain, f"{plain}: not a whole gzip"),
        (bad, f"{bad}:2: not a JSON line"),
        (headless, f"{headless}:1: no samples header"),
        (tmp_path / "none.jsonl.gz", f"{tmp_path / 'none.jsonl.gz'}: no such"),
    ):
        assert main(["samples", str(p)]) == 2
        err = capsys.readouterr().err
        assert err.startswith(f"jacrl: samples: {msg}") and err.count("\n") == 1, err
    with pytest.raises(ValueError, match=r"name it \*\.jsonl\.gz"):
        smp.write_samples(tmp_path / "x.jsonl", {}, [])


def test_cell_samples_path_is_beside_the_cell_notebook(tmp_path):
    got = smp.cell_samples_path(tmp_path / "results" / "rl_ladder.jsonl", "r1-m-sft-abc", "gen")
    assert got == tmp_path / "results" / "cells" / "r1-m-sft-abc" / "samples-gen.jsonl.gz"
