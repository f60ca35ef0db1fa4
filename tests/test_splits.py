"""Splits: file-disjoint holdout with every family, decontaminated, nested balanced rungs; how
sources and unsourced tasks are picked, valid's families, the rung-5 check, `check_splits` on a
leaky split, the report, and the splits of a data dir of one's own."""

from __future__ import annotations

import dataclasses
import json

from conftest import ROOT

from jacrl.ruler.drivers import UNKNOWN_SOURCE
from jacrl.tasks import splits
from jacrl.tasks.record import meta, prompt_answer, read_tasks
from jacrl.tasks.splits import (
    RUNGS,
    SplitConfig,
    check_splits,
    load_split,
    make_splits,
    report,
    rung,
    rung_tasks,
)


def _ids(ts):
    return [json.loads(t["answer"])["id"] for t in ts]


def test_committed_splits_are_healthy_and_reproducible():
    tasks = read_tasks(ROOT / "data" / "tasks.jsonl")
    s = make_splits(tasks)
    assert check_splits(s) == []
    assert len(s.holdout) >= 40
    families = {t["meta"]["family"] for t in tasks}
    assert {json.loads(t["answer"])["family"] for t in s.holdout} == families
    for name in ("holdout", "trainpool", "valid"):
        assert _ids(load_split(name, ROOT / "data")) == _ids(getattr(s, name))
    assert "self-check: OK" in report(s)


def test_rungs_are_nested_and_balanced():
    pool = load_split("trainpool", ROOT / "data")
    prev = []
    for r in RUNGS:
        cur = _ids(rung_tasks(pool, r))
        assert cur[: len(prev)] == prev
        prev = cur
    assert len({json.loads(t["answer"])["family"] for t in rung(5, ROOT / "data")}) >= 2
    assert _ids(rung(3, ROOT / "data")) == _ids(pool[:3])


def test_decontamination_drops_a_near_duplicate_held_task():
    tasks = read_tasks(ROOT / "data" / "tasks.jsonl")
    s = make_splits(tasks)
    held = s.holdout[0]
    # the twin joins a source of the training pool, so the held original has a train near-twin
    pool_source = s.trainpool[0]["meta"]["source"]
    twin_meta = dict(held["meta"], id="zz_twin", source=pool_source)
    twin = {"prompt": held["prompt"], "answer": json.dumps(twin_meta), "meta": twin_meta}
    s2 = make_splits(tasks + [twin], SplitConfig())
    assert pool_source not in s2.holdout_sources and "zz_twin" in _ids(s2.trainpool + s2.valid)
    assert held["meta"]["id"] in s2.dropped
    assert held["meta"]["id"] not in _ids(s2.holdout)


def test_splits_are_deterministic_and_seedable():
    tasks = read_tasks(ROOT / "data" / "tasks.jsonl")
    a, b = make_splits(tasks), make_splits(list(reversed(tasks)))
    assert _ids(a.holdout) == _ids(b.holdout) and _ids(a.trainpool) == _ids(b.trainpool)
    c = make_splits(tasks, SplitConfig(seed=7))
    assert check_splits(c) == []


# -- the splits (jacrl.tasks.splits) ---------------------------------------------------------------


def _task(tid: str, family: str, source: str, gold: str = "") -> dict:
    m = {"id": tid, "family": family, "source": source, "gold": gold or f"x = '{tid}';"}
    return {"prompt": tid, "answer": json.dumps(m), "meta": m}


def test_sources_are_picked_until_every_family_is_held_and_no_further():
    """_pick_sources (`covered = ...` for `|=`): families held so far accumulate."""
    tasks = [_task("a", "x", "A"), _task("b", "y", "B"), _task("c", "x", "C")]
    chosen = splits._pick_sources(tasks, need=1, seed=0)
    assert len(chosen) == 2 and {"B"} < set(chosen)


def test_unsourced_holdout_gets_a_missing_family_first_and_never_all_tasks():
    """_pick_unsourced (the rest after `first`, without repeating it)."""
    tasks = [
        _task("x1", "x", UNKNOWN_SOURCE),
        _task("x2", "x", UNKNOWN_SOURCE),
        _task("y1", "y", UNKNOWN_SOURCE),
        _task("y2", "y", UNKNOWN_SOURCE),
    ]
    assert [meta(t)["family"] for t in splits._pick_unsourced(tasks, 1, {"x"}, 0)] == ["y"]
    got = splits._pick_unsourced(tasks, 10, {"x", "y"}, 0)  # never all: half at most
    assert len(got) == 2 and len({id(t) for t in got}) == 2
    got = splits._pick_unsourced(tasks, 2, set(), 0)
    assert sorted(meta(t)["family"] for t in got) == ["x", "y"]


def test_valid_takes_from_the_largest_family_first():
    """make_splits (valid's families ordered by how many tasks they have left)."""
    tasks = [
        _task("h1", "a", "H"),
        _task("h2", "b", "H"),
        _task("p1", "a", "P1"),
        *[_task(f"q{i}", "b", f"Q{i}") for i in range(3)],
    ]
    s = splits.make_splits(tasks, splits.SplitConfig(holdout_min=1, valid_n=1))
    assert [meta(t)["family"] for t in s.valid] == ["b"]


def test_build_writes_loads_and_reports_the_splits_of_its_own_data_dir(tmp_path):
    """build_splits / write_splits / load_split / rung read and write `data_dir`, not the
    project's data/; report shows the dropped ids ('-' for none) and the self-check."""
    s0 = splits.make_splits(read_tasks(ROOT / "data" / "tasks.jsonl"))
    drop = meta(s0.trainpool[-1])["id"]
    tasks = [t for t in read_tasks(ROOT / "data" / "tasks.jsonl") if meta(t)["id"] != drop]
    with open(tmp_path / "tasks.jsonl", "w") as fh:
        fh.writelines(json.dumps(prompt_answer(t)) + "\n" for t in tasks)
    s = splits.build_splits(tmp_path)
    want = splits.make_splits(tasks)
    for name in splits.SPLITS:
        rows = [prompt_answer(t) for t in getattr(want, name)]
        assert splits.load_split(name, tmp_path) == rows
        assert (tmp_path / "splits" / f"{name}.jsonl").read_text() == "".join(
            json.dumps(r) + "\n" for r in rows
        )
    assert len(splits.rung("all", tmp_path)) == len(want.trainpool) == len(s0.trainpool) - 1
    text = splits.report(dataclasses.replace(s, dropped=[]))
    assert "decontamination dropped 0: -" in text and text.endswith("self-check: OK")
    bad = splits.report(dataclasses.replace(s, trainpool=[]))
    assert bad.endswith(
        "self-check: the train pool is empty (the holdout took every task; lower holdout_min)"
    )


def test_a_pool_of_five_from_one_family_is_flagged():
    """check_splits (`>= 5`, its message)."""
    s = splits.Splits(
        holdout=[_task("h", "x", "H")],
        valid=[],
        dropped=[],
        holdout_sources=["H"],
        trainpool=[_task(f"p{i}", "x", f"P{i}") for i in range(5)],
    )
    assert splits.check_splits(s) == ["rung 5 spans fewer than 2 families"]


def test_a_pool_whose_first_five_span_two_families_passes():
    """check_splits (`< 2` families in rung 5, not `< 3`)."""
    s = splits.Splits(
        holdout=[_task("h", "x", "H"), _task("i", "y", "H")],
        valid=[],
        dropped=[],
        holdout_sources=["H"],
        trainpool=[_task(f"p{i}", "xy"[i % 2], f"P{i}") for i in range(5)],
    )
    assert splits.check_splits(s) == []


def test_the_report_names_each_rung_and_every_problem():
    """report: one line per rung that fits, by its number; the self-check joins every problem."""
    s = splits.Splits(
        holdout=[_task("p0", "x", "P0")],  # also in the train pool: a leak
        valid=[],
        dropped=[],
        holdout_sources=["P0"],
        trainpool=[_task(f"p{i}", "x", f"P{i}") for i in range(5)],
    )
    problems = splits.check_splits(s)
    text = splits.report(s)
    assert len(problems) >= 2 and text.endswith("self-check: " + "; ".join(problems))
    assert "rung   1: x 1" in text and "rung   5: x 5" in text


def test_the_default_data_dir_is_the_projects(tmp_path):
    """load_split with no data dir reads the project's data/splits; write_splits makes every
    missing folder of its own."""
    assert splits.load_split("holdout") == splits.load_split("holdout", ROOT / "data")
    s = splits.make_splits(read_tasks(ROOT / "data" / "tasks.jsonl"))
    splits.write_splits(s, tmp_path / "new" / "data")
    assert splits.load_split("valid", tmp_path / "new" / "data") == [
        prompt_answer(t) for t in s.valid
    ]


def _committed_splits():
    from jacrl.tasks.splits import Splits

    parts = {n: load_split(n, ROOT / "data") for n in ("holdout", "trainpool", "valid")}
    return Splits(**parts, dropped=[], holdout_sources=[])


def test_check_splits_reports_a_leaky_split():
    s = _committed_splits()
    assert check_splits(s) == []
    held = s.holdout[0]
    # the same task held out and trained on
    leaky = dataclasses.replace(s, trainpool=s.trainpool + [held])
    problems = check_splits(leaky)
    assert any(
        p.startswith("holdout and trainpool share ids") and meta(held)["id"] in p for p in problems
    ), problems
    # another task from a held-out source file in the train pool
    twin_meta = dict(meta(held), id="zz_twin")
    twin = {"prompt": held["prompt"], "answer": json.dumps(twin_meta), "meta": twin_meta}
    problems = check_splits(dataclasses.replace(s, trainpool=s.trainpool + [twin]))
    assert any(
        p.startswith("holdout shares sources with training") and meta(held)["source"] in p
        for p in problems
    ), problems
    problems = check_splits(dataclasses.replace(s, valid=s.valid + [held]))
    assert any(p.startswith("holdout and valid share ids") for p in problems), problems
