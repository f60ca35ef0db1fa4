"""Splits: file-disjoint holdout with every family, decontaminated, nested balanced rungs."""

from __future__ import annotations

import json

from conftest import ROOT

from jacrl.splits import (
    RUNGS,
    SplitConfig,
    check_splits,
    load_split,
    make_splits,
    report,
    rung,
    rung_tasks,
)
from jacrl.tasks import read_tasks


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
