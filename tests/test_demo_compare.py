"""The demo's reference check compares what the demo shows: greedy and sampled pass@1, run % and
the temperature, per evaluation, and says in one line what moved and why (training noise or
changed inputs, and another host's BLAS kernel family or thread count)."""

from __future__ import annotations

import copy
import json
from pathlib import Path

from jacrl.ladder.demo import compare_rows
from jacrl.results import read_rows

ROOT = Path(__file__).resolve().parents[1]


def _with_host(row: dict, core: str, threads: int) -> dict:
    row = copy.deepcopy(row)
    pv = row["provenance"] if isinstance(row["provenance"], dict) else json.loads(row["provenance"])
    row["provenance"] = {**pv, "blas_core": core, "blas_threads": threads}
    return row


def test_the_committed_rows_against_themselves_match():
    rows = read_rows(ROOT / "results" / "rl_ladder.jsonl")
    out = compare_rows(rows, rows).splitlines()
    assert (
        out[-1] == f"{len(rows)} of {len(rows)} evaluations match the reference in greedy "
        "and sampled pass@1, run % and T"
    )
    assert all("(same)" in ln and "same key" in ln for ln in out[1:-1])


def test_a_sampled_move_on_another_host_is_named_with_its_blas():
    rows = read_rows(ROOT / "results" / "rl_ladder.jsonl")
    ref = [_with_host(r, "SkylakeX", 2) for r in rows]
    mem = next(i for i, r in enumerate(ref) if r["kind"] == "mem" and r.get("adapter"))
    fresh = [_with_host(r, "Cooperlake", 1) for r in ref]
    fresh[mem]["pass_at_k"] = {**fresh[mem]["pass_at_k"], "1": 58.0}
    new_t = 0.7 if ref[mem]["temperature"] != 0.7 else 0.5
    fresh[mem]["temperature"] = new_t
    out = compare_rows(ref, fresh).splitlines()
    tag = ref[mem]["tag"]
    line = next(ln for ln in out if ln.startswith(tag))
    assert f"-> sampled 58%, T {new_t:g}; same key" in line and "other BLAS" in line
    assert out[-1].startswith(f"{len(ref) - 1} of {len(ref)} evaluations match")
    assert f"moved: {tag} sampled/T (same key" in out[-1]
    assert out[-1].endswith(
        "BLAS kernel family / threads: reference SkylakeX x2, here Cooperlake x1"
    )
