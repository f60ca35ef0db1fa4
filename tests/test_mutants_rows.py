"""Contracts of the result rows (jacrl.results) that mutants of bench/mutation.py survived
(docs/mutation.md): a cell's rows appended once per (cell key, kind), what a row's summary says,
how a model is labelled, and bytes that are not UTF-8 in a results file."""

from __future__ import annotations

import json
import sys

import pytest

from jacrl import results
from jacrl.results import KINDS, append_cell_rows, format_row, is_done, model_label, rows_by_key


def _cell(key: str, kind: str, **extra) -> dict:
    return {"cell_key": key, "kind": kind, **extra}


def test_a_cells_rows_are_appended_once_per_key_and_kind(tmp_path):
    """append_cell_rows: rows already in the file (same cell key and kind) are not appended
    again, nor a second row of one (key, kind) in the same call; it returns how many it
    appended, makes missing folders and locks `<results>.lock` beside the file."""
    path = tmp_path / "new" / "rows.jsonl"
    assert append_cell_rows(path, [_cell("k1", "gen", v=1), _cell("k1", "gen", v=2)]) == 1
    assert (tmp_path / "new" / "rows.jsonl.lock").is_file()
    assert (
        append_cell_rows(path, [_cell("k1", "gen", v=3), _cell("k1", "mem"), _cell("k2", "gen")])
        == 2
    )
    rows = [json.loads(ln) for ln in path.read_text().splitlines()]
    assert [(r["cell_key"], r["kind"], r.get("v")) for r in rows] == [
        ("k1", "gen", 1),
        ("k1", "mem", None),
        ("k2", "gen", None),
    ]
    present = rows_by_key(path)
    assert present == {"k1": {"gen", "mem"}, "k2": {"gen"}}
    assert is_done(present, "k1") and not is_done(present, "k2") and not is_done(present, "k3")
    assert set(KINDS) == {"gen", "mem"}


def test_rows_by_key_skips_rows_without_a_key_and_a_torn_last_line(tmp_path):
    """rows_by_key: {cell key: kinds} of the rows that have a key; a torn last line is skipped
    without a warning; no file is {}."""
    path = tmp_path / "rows.jsonl"
    assert rows_by_key(path) == {}
    path.write_text(
        json.dumps(_cell("k", "mem")) + "\n" + json.dumps({"model": "m"}) + "\n" + '{"cell_key": "t'
    )
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert rows_by_key(path) == {"k": {"mem"}}


def test_bytes_that_are_not_utf8_are_replaced_not_fatal(tmp_path):
    """read_rows: a row whose text holds bytes that are not UTF-8 is read, with U+FFFD."""
    path = tmp_path / "rows.jsonl"
    path.write_bytes(b'{"completion": "a\xffb"}\n')
    assert results.read_rows(path) == [{"completion": "a\ufffdb"}]


def _row(**kw) -> dict:
    row = {
        "model": "jac-tiny",
        "adapter": None,
        "tasks": 4,
        "n": 0,
        "k": 0,
        "temperature": 0.0,
        "seed": 0,
        "max_tokens": 64,
        "tag": "",
        "run_pct": 50.0,
        "pass1_pct": 25.0,
        "wilson_lo": 4.6,
        "wilson_hi": 69.9,
        "pass1": 1,
        "near_pct": 25.0,
        "avg_osim": 0.5,
        "truncation_pct": 0.0,
        "pass_at_k": {},
        "by_family": {"a": [1, 2], "b": [0, 3]},
    }
    return row | kw


def test_a_rows_summary_says_base_or_adapter_tag_and_anecdotes():
    """format_row: a row without an adapter is '(base)', with one '+ adapter'; a tag shows only
    when there is one; a family of 2 tasks or fewer is marked an anecdote, of 3 it is not."""
    text = format_row(_row())
    assert text.splitlines()[0] == "model jac-tiny (base)"
    assert "tag=" not in text
    assert text.splitlines()[-1] == "  by family: a: 1/2 (anecdote)  b: 0/3"
    text = format_row(_row(adapter="runs/a1", tag="t1"))
    assert text.splitlines()[0] == "model jac-tiny + runs/a1"
    assert text.splitlines()[1].endswith("  max_tokens=64  tag=t1")


@pytest.mark.parametrize(
    "model, label",
    [("/some/where/My Model v2", "My-Model-v2"), ("models/qwen.0-5b", "qwen.0-5b"), ("", "model")],
)
def test_a_model_path_is_labelled_by_its_directorys_name(model, label):
    """model_label: a path (not a registry name) is labelled by its last part, characters
    outside [A-Za-z0-9_.-] made '-'; nothing left is 'model'."""
    assert model_label(model) == label


def test_appending_after_a_whole_last_line_warns_of_nothing(tmp_path):
    """append_row: a file whose last line ends in a newline is appended to as it is (no torn
    line to drop, no warning)."""
    import warnings

    path = tmp_path / "rows.jsonl"
    results.append_row(path, {"a": 1})
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        results.append_row(path, {"a": 2})
    assert path.read_text() == '{"a": 1}\n{"a": 2}\n'


def test_a_torn_line_dropped_for_a_cells_rows_is_reported_at_the_callers_line(tmp_path):
    """append_cell_rows dropping a torn last line: the warning points at the line that asked
    for the rows (this test's; under mutmut a trampoline outside results.py), not at
    append_cell_rows' own call of append_row."""
    path = tmp_path / "rows.jsonl"
    path.write_text('{"cell_key": "k1", "kind": "gen"}\n{"cell_key": "k1", "ki')
    with pytest.warns(UserWarning, match="dropped a torn last line 2") as rec:
        assert append_cell_rows(path, [_cell("k1", "mem")]) == 1
    assert rec[0].filename != results.__file__
    assert rec[0].filename == __file__ or "mutmut" in sys.modules
    assert rows_by_key(path) == {"k1": {"gen", "mem"}}


def test_a_rows_summary_names_each_figure_and_best_of_k():
    """format_row: the table's labels (avg osim among them), and best-of-k's line when the
    row has one."""
    b = {"k": 4, "deploy_pct": 50.0, "coverage_pct": 75.0, "oracle_pct": 75.0}
    text = format_row(_row(bestofk=b))
    assert "  avg osim " in text and "  truncated " in text
    assert "best-of-4 deploy" in text and "50.0%  (coverage 75.0%, oracle 75.0%)" in text
