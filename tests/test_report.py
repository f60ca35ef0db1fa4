"""Provenance is enforced: rows made with a model, adapter or tasks that are no longer on disk are
flagged stale by `report` and left out of `ladder show` unless asked for."""

from __future__ import annotations

import json
from pathlib import Path

from jacrl import ladder, report
from jacrl.models import resolve
from jacrl.provenance import data_hash, dir_hash
from jacrl.tasks import read_tasks

ROOT = Path(__file__).resolve().parent.parent


def _fresh_row() -> dict:
    """A committed ladder row re-stamped with what is on disk now (model and tasks hashes)."""
    row = json.loads((ROOT / "results" / "rl_ladder.jsonl").read_text().splitlines()[0])
    tasks = {t["meta"]["id"]: t for t in read_tasks(ROOT / "data" / "tasks.jsonl")}
    ids = [t["id"] for t in row["per_task"]]
    row["model"] = "jac-tiny"
    row["adapter"] = ""
    row["provenance"] = {**row["provenance"], "model_hash": dir_hash(resolve("jac-tiny")),
                         "adapter_hash": "", "data_hash": data_hash([tasks[i] for i in ids])}
    return row


def test_a_row_matching_the_disk_is_fresh():
    assert report.stale_reasons(_fresh_row()) == []


def test_foreign_model_hash_and_changed_tasks_are_stale():
    foreign = _fresh_row()
    foreign["provenance"]["model_hash"] = "0" * 64
    assert report.stale_reasons(foreign) == ["model changed"]
    edited = _fresh_row()
    edited["per_task"] = edited["per_task"][1:]  # graded on another task list than recorded
    assert report.stale_reasons(edited) == ["tasks changed"]
    gone = _fresh_row()
    gone["model"] = gone["model_name"] = "no-such-model"
    assert report.stale_reasons(gone) == ["model missing"]


def test_show_leaves_stale_rows_out_and_counts_them(tmp_path):
    fresh = _fresh_row()
    foreign = {**_fresh_row(), "condition": "sft", "cell_key": "foreign"}
    foreign["provenance"] = {**foreign["provenance"], "model_hash": "f" * 64}
    res = tmp_path / "results"
    res.mkdir()
    (res / ladder.RESULTS_FILE).write_text("".join(json.dumps(r) + "\n" for r in (fresh, foreign)))
    text, figs = ladder.show(res, tmp_path / "fig")
    assert "1 stale row(s) (model changed) left out" in text
    assert "base" in text and "\nsft" not in text.split("1 stale")[0].replace("jac-tiny sft", "")
    assert [p.name for p in figs] == ["ladder.png", "ladder_passk.png"]
    text_all, _ = ladder.show(res, None, include_stale=True)
    assert "1 stale row(s) (model changed) included" in text_all
    df = report.frame(report.mark_stale(report.load_rows(res / ladder.RESULTS_FILE)))
    assert sorted(df.stale) == ["", "model changed"]


def test_committed_rows_are_not_stale():
    """The rows the README's table comes from were made with the committed model and tasks."""
    rows = report.mark_stale(report.load_rows(ROOT / "results" / ladder.RESULTS_FILE))
    assert rows and [r["tag"] for r in rows if r["stale"]] == []
