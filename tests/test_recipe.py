"""The compute-smart recipe (jacrl.recipe): the elbow rule on synthetic curves, the gate, the cells
of each stage, the decision record and the plan text. Pure functions: no cell runs here."""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from itertools import pairwise
from pathlib import Path

import pytest

from jacrl import recipe as R
from jacrl.stats import wilson

ROOT = Path(__file__).resolve().parent.parent
LADDER = ("1", "3", "5", "10", "20", "all")


@dataclass(frozen=True)
class Cfg:
    """The ladder configuration's fields the recipe reads (and a few it must ignore)."""

    rungs: tuple = ("1", "3", "5")
    models: tuple = ("a", "b")
    conditions: tuple = ("base", "sft")
    seed: int = 0
    sft_iters: int = 200
    grpo_iters: int = 200
    sets: dict = field(default_factory=dict)
    n: int = 8
    results_dir: str = ""
    batch_size: int = 32


def row(model, rung, cond, kind, k, n, key=None):
    return {
        "tag": f"r{rung}/{model}/{cond}/{kind}",
        "model_name": model,
        "rung": rung,
        "condition": cond,
        "kind": kind,
        "pass1": k,
        "tasks": n,
        "cell_key": key or f"r{rung}-{model}-{cond}",
    }


def cell_rows(model, rung, cond, gen=(0, 6), mem=(1, 1)):
    return [row(model, rung, cond, "gen", *gen), row(model, rung, cond, "mem", *mem)]


def curve_of(counts, n, rungs=LADDER):
    """The first len(counts) rungs' (passed, tasks)."""
    return {r: (k, n) for r, k in zip(rungs, counts, strict=False)}


def separated(a, b):
    return wilson(*b)[0] > wilson(*a)[1]


def sft_curve_rows(model, counts, n, rungs=LADDER):
    return [
        r
        for rung, k in zip(rungs, counts, strict=False)  # the first len(counts) rungs
        for r in cell_rows(model, rung, "sft", (k, n))
    ]


# -------------------------------------------------------------------------------------------
# the elbow rule
# -------------------------------------------------------------------------------------------


def test_flat_curve_picks_the_first_rung():
    e = R.elbow(curve_of([5, 5, 5, 5, 5, 5], 18))
    assert e.rung == "1" and e.rule == R.RULE and e.rule_pick == "1"
    assert not e.still_rising and e.missing == []
    assert [f["beaten_by"] for f in e.figures] == [[]] * 6


def test_rising_with_separated_intervals_picks_the_last_rung():
    counts = [5, 30, 60, 90]
    pts = curve_of(counts, 100, ("1", "3", "5", "10"))
    assert all(separated(pts[a], pts[b]) for a, b in [("1", "3"), ("3", "5"), ("5", "10")])
    e = R.elbow(pts)
    assert e.rung == "10" and e.still_rising
    assert "still rising" in e.reason
    assert e.figures[0]["beaten_by"] == ["3", "5", "10"]


def test_peaked_curve_picks_the_peak_and_a_plateau_its_start():
    e = R.elbow(curve_of([5, 30, 45, 20], 50))
    assert e.rung == "5" and not e.still_rising  # the later fall does not move E
    e = R.elbow(curve_of([5, 40, 41, 39], 50))
    assert e.rung == "3"  # 41/50 and 39/50 overlap 40/50: the plateau starts at r3


def test_noisy_overlapping_curve_picks_the_first_rung():
    pts = curve_of([7, 11, 8, 10, 9], 18)
    rs = list(pts)
    assert not any(separated(pts[a], pts[b]) or separated(pts[b], pts[a]) for a, b in pairwise(rs))
    assert R.elbow(pts).rung == "1"


def test_slow_climb_under_overlapping_consecutive_intervals_is_not_flat():
    """Each step stays inside the previous interval, yet r10 and r20 are clearly above r1."""
    pts = curve_of([2, 5, 8, 11, 14], 18)
    rs = list(pts)
    assert not any(separated(pts[a], pts[b]) for a, b in pairwise(rs))
    e = R.elbow(pts)
    assert e.rung == "5"
    assert e.figures[0]["beaten_by"] == ["10", "20"] and e.figures[1]["beaten_by"] == ["20"]


def test_dip_and_recovery_keeps_the_cheaper_rung():
    e = R.elbow(curve_of([10, 1, 10], 18))
    assert separated((1, 18), (10, 18))  # r3 -> r5 rises with separated intervals
    assert e.rung == "1"  # but r5 is no better than r1


def test_ties_go_to_the_smaller_rung():
    assert R.elbow(curve_of([2, 40, 40], 50)).rung == "3"
    assert R.elbow({"all": (40, 50), "10": (40, 50), "1": (2, 50)}).rung == "10"  # any order


def test_missing_rungs_are_left_out_and_listed():
    e = R.elbow({"1": None, "3": (2, 18), "5": None, "10": (15, 18), "20": (0, 0)})
    assert e.missing == ["1", "5", "20"]
    assert [f["rung"] for f in e.figures] == ["3", "10"]
    assert e.rung == "10" and "no rows: r1, r5, r20" in e.reason
    none = R.elbow({"1": None, "3": None})
    assert none.rung is None and none.rule_pick is None and none.figures == []


def test_figures_are_the_counts_and_their_wilson_intervals():
    e = R.elbow({"1": (7, 18), "3": (11, 18)})
    f = e.figures[1]
    assert (f["k"], f["n"]) == (11, 18) and f["rate"] == pytest.approx(11 / 18)
    assert (f["lo"], f["hi"]) == pytest.approx(wilson(11, 18))


def test_manual_override_wins_and_keeps_the_rules_pick():
    pts = curve_of([5, 30, 45, 20], 50)
    e = R.elbow(pts, override="10")
    assert e.rung == "10" and e.rule == "manual" and e.rule_pick == "5"
    assert "r5" in e.reason
    with pytest.raises(ValueError, match="not a rung"):
        R.elbow(pts, override="20")


def test_parse_elbow():
    assert R.parse_elbow("", ("a", "b")) == {}
    assert R.parse_elbow("3", ("a", "models/b")) == {"a": "3", "b": "3"}
    assert R.parse_elbow("a=3, b=all", ("a", "b")) == {"a": "3", "b": "all"}
    with pytest.raises(ValueError):
        R.parse_elbow("a=3,b", ("a", "b"))


def test_elbows_from_rows_per_model_and_last_row_wins():
    cfg = Cfg(rungs=("1", "3", "5"))
    rows = (
        sft_curve_rows("a", [0, 0, 6], 6, ("1", "3", "5"))
        + sft_curve_rows("b", [3, 3, 3], 6, ("1", "3", "5"))
        + [row("a", "5", "sft", "gen", 0, 6)]
    )  # a later run of a/r5: flat again
    assert {m: e.rung for m, e in R.elbows(cfg, rows).items()} == {"a": "1", "b": "1"}
    assert R.elbows(cfg, rows[:-1])["a"].rung == "5"
    assert R.elbows(cfg, rows, R.RecipeConfig(elbow="b=3"))["b"].rung == "3"
    base_only = [row("a", r, "base", "gen", 6, 6) for r in ("1", "3", "5")]
    assert R.elbows(cfg, base_only)["a"].rung is None  # the curve is sft's, not base's


# -------------------------------------------------------------------------------------------
# the gate
# -------------------------------------------------------------------------------------------


def test_gate_passes_fails_and_waits():
    cfg = Cfg(models=("a",))
    ok = R.gate(cfg, cell_rows("a", "1", "sft", gen=(0, 6), mem=(1, 1)))
    assert ok.status == "pass" and ok.rung == "1" and ok.mem[0]["rate"] == 1.0
    bad = R.gate(cfg, cell_rows("a", "1", "sft", gen=(6, 6), mem=(0, 1)))
    assert bad.status == "fail" and "\n" not in bad.reason
    assert "a 0/1" in bad.reason and "90%" in bad.reason and "stops" in bad.reason
    wait = R.gate(cfg, cell_rows("a", "3", "sft") + cell_rows("a", "1", "base"))
    assert wait.status == "pending" and wait.mem[0]["k"] is None


def test_gate_threshold_boundary_and_every_model():
    cfg = Cfg(models=("a",))
    assert R.gate(cfg, cell_rows("a", "1", "sft", mem=(9, 10)), 0.9).status == "pass"
    assert R.gate(cfg, cell_rows("a", "1", "sft", mem=(8, 10)), 0.9).status == "fail"
    assert R.gate(cfg, cell_rows("a", "1", "sft", mem=(8, 10)), 0.8).status == "pass"
    two = Cfg(models=("a", "b"))
    rows = cell_rows("a", "1", "sft", mem=(1, 1)) + cell_rows("b", "1", "sft", mem=(0, 1))
    g = R.gate(two, rows)
    assert g.status == "fail" and "b 0/1" in g.reason and "a 1/1" not in g.reason
    assert R.gate(two, rows[:2]).status == "pending"
    with pytest.raises(ValueError):
        R.RecipeConfig(gate_threshold=1.5)


def test_gate_reads_the_last_row_and_the_first_rung_in_size_order():
    cfg = Cfg(rungs=("all", "3", "1"), models=("a",))
    rows = cell_rows("a", "1", "sft", mem=(0, 1)) + cell_rows("a", "1", "sft", mem=(1, 1))
    assert R.gate(cfg, rows).status == "pass"
    assert R.gate(cfg, rows[2:] + rows[:2]).status == "fail"


def test_the_demo_threshold_against_the_demos_own_rows():
    """The documented demo threshold is met by what the demo's SFT reaches on rung 1."""
    rows = (
        [
            json.loads(x)
            for x in (ROOT / "results" / "rl_ladder.jsonl").read_text().splitlines()
            if x.strip()
        ]
        if (ROOT / "results" / "rl_ladder.jsonl").is_file()
        else []
    )
    if not any(r.get("rung") == "1" and r.get("condition") == "sft" for r in rows):
        pytest.skip("no demo rows in results/rl_ladder.jsonl")
    assert R.DEMO_GATE_THRESHOLD == 1.0 and R.DEMO_RECIPE.gate_threshold == 1.0
    g = R.gate(Cfg(rungs=("1", "3"), models=("jac-tiny",)), rows, R.DEMO_GATE_THRESHOLD)
    assert g.status == "pass", g.reason


# -------------------------------------------------------------------------------------------
# the cells of each stage
# -------------------------------------------------------------------------------------------


def names(specs):
    return [s.name for s in specs]


def test_stage_0_and_1_cells():
    cfg = Cfg(rungs=("5", "1", "3"))
    assert names(R.stage_cells(0, cfg, [])) == ["r1/a/sft", "r1/b/sft"]
    assert R.stage_cells(1, cfg, []) == []  # the gate has no rows yet
    passed = cell_rows("a", "1", "sft") + cell_rows("b", "1", "sft")
    s1 = names(R.stage_cells(1, cfg, passed))
    assert s1 == [
        "r1/a/base",
        "r1/b/base",
        "r3/a/base",
        "r3/a/sft",
        "r3/b/base",
        "r3/b/sft",
        "r5/a/base",
        "r5/a/sft",
        "r5/b/base",
        "r5/b/sft",
    ]
    assert R.stage_cells(2, cfg, passed) == []
    assert R.stop_reason(cfg, passed) is None


def test_a_failed_gate_stops_every_later_stage():
    cfg = Cfg(models=("a",))
    rows = cell_rows("a", "1", "sft", mem=(0, 1))
    assert [R.stage_cells(s, cfg, rows) for s in (1, 2, 3)] == [[], [], []]
    why = R.stop_reason(cfg, rows)
    assert why is not None and why.startswith("gate failed") and "\n" not in why
    assert R.stop_reason(cfg, []).startswith("gate undecided")


def test_stage_3_runs_grpo_only_at_each_models_elbow():
    cfg = Cfg(rungs=("1", "3", "5"), models=("a", "b", "c"))
    rows = (
        sft_curve_rows("a", [0, 1, 6], 6, ("1", "3", "5"))
        + sft_curve_rows("b", [2, 2, 2], 6, ("1", "3", "5"))
        + cell_rows("c", "1", "sft")
    )  # c: only the gate's cell has rows
    e = R.elbows(cfg, rows)
    assert (e["a"].rung, e["b"].rung, e["c"].rung) == ("5", "1", "1")
    s3 = R.stage_cells(3, cfg, rows)
    assert names(s3) == [
        "r5/a/sft_grpo",
        "r5/a/sft_grpo_tuned",
        "r1/a/raw_grpo",
        "r1/b/sft_grpo",
        "r1/b/sft_grpo_tuned",
        "r1/b/raw_grpo",
        "r1/c/sft_grpo",
        "r1/c/sft_grpo_tuned",
        "r1/c/raw_grpo",
    ]
    assert {s.stage for s in s3} == {3}
    manual = R.stage_cells(3, cfg, rows, R.RecipeConfig(elbow="a=3"))
    assert [s.rung for s in manual if s.label == "a"] == ["3", "3", "1"]
    with pytest.raises(ValueError):
        R.stage_cells(3, cfg, rows, R.RecipeConfig(elbow="10"))


def test_a_model_without_a_curve_gets_only_its_control():
    cfg = Cfg(rungs=("1", "3"), models=("a",))
    gate_only = [row("a", "1", "sft", "mem", 1, 1)]  # the gate's mem row, its gen row lost
    assert names(R.stage_cells(3, cfg, gate_only)) == ["r1/a/raw_grpo"]


def test_the_tuned_arm_is_one_condition_not_overrides():
    """The recipe's tuned arm is the ladder's sft_grpo_tuned condition (jacrl.conditions: the
    default arm's GRPO learning rate x10 and iterations x2) with no overrides of its own, so
    "tuned" has one meaning; the ladder resolves it (test_ladder's test_condition_configs)."""
    from jacrl.conditions import CONDITIONS, TUNED

    cfg = Cfg(grpo_iters=4, sets={"grpo": {"learning_rate": "2e-5", "group_size": 2}})
    spec = next(
        s
        for s in R.planned_cells(3, cfg, elbow_rungs={"a": "3"}, env={})
        if s.condition == "sft_grpo_tuned"
    )
    assert spec.rung == "3" and spec.overrides == {"sft": {}, "grpo": {}}
    assert spec.sets(cfg) == {"sets": {"sft": {}, **cfg.sets}}  # the ladder's, as is
    assert (
        CONDITIONS["sft_grpo_tuned"].scale
        == TUNED
        == {"grpo": {"learning_rate": 10.0, "iters": 2.0}}
    )
    assert CONDITIONS["sft_grpo_tuned"].stages == CONDITIONS["sft_grpo"].stages
    assert not [f for f in dataclasses.fields(R.RecipeConfig) if "tuned" in f.name]
    custom = dataclasses.replace(spec, overrides={"grpo": {"beta": 0.0}})  # a caller's spec
    assert custom.sets(cfg) == {"sets": {"grpo": {**cfg.sets["grpo"], "beta": 0.0}}}


# -------------------------------------------------------------------------------------------
# the decision record and the plan text
# -------------------------------------------------------------------------------------------


def full_rows(cfg, counts_a):
    """Rows of a whole recipe run for model 'a' on rungs 1,3,5 (sft gen counts of 6)."""
    rows = []
    for rung, k in zip(("1", "3", "5"), counts_a, strict=True):
        rows += cell_rows("a", rung, "base", gen=(0, 6), mem=(0, 1))
        rows += cell_rows("a", rung, "sft", gen=(k, 6), mem=(1, 1))
    return rows


def test_plan_key_is_identity_not_decisions(monkeypatch):
    from jacrl.conditions import CONDITIONS

    cfg, rc = Cfg(), R.RecipeConfig()
    k = R.plan_key(cfg, rc)
    assert k.startswith("smart-") and len(k) == len("smart-") + 12
    assert R.plan_key(Cfg(), R.RecipeConfig()) == k
    for changed in (Cfg(grpo_iters=4), Cfg(models=("a",)), Cfg(sets={"grpo": {"beta": 0.0}})):
        assert R.plan_key(changed, rc) != k
    tuned = CONDITIONS["sft_grpo_tuned"]  # its scales are part of the recipe's identity
    monkeypatch.setitem(
        CONDITIONS,
        "sft_grpo_tuned",
        dataclasses.replace(tuned, scale={"grpo": {"learning_rate": 5.0, "iters": 2.0}}),
    )
    assert R.plan_key(cfg, rc) != k
    monkeypatch.setitem(CONDITIONS, "sft_grpo_tuned", tuned)
    assert R.plan_key(Cfg(results_dir="/elsewhere", batch_size=4), rc) == k
    assert R.plan_key(cfg, R.RecipeConfig(gate_threshold=0.5, elbow="3")) == k


def test_record_holds_gate_curve_elbow_and_arms(tmp_path):
    cfg = Cfg(rungs=("1", "3", "5"), models=("a",))
    rows = full_rows(cfg, [0, 1, 6])
    keys = {"r5/a/sft_grpo": "K1", "r1/a/sft": "K0"}
    rec = R.build_record(cfg, rows, keys=keys, env={})
    assert rec["plan_key"] == R.plan_key(cfg) and rec["stopped"] is None
    assert rec["gate"]["status"] == "pass" and rec["gate"]["mem"][0]["k"] == 1
    assert [(f["rung"], f["k"], f["n"]) for f in rec["curve"]["a"]] == [
        ("1", 0, 6),
        ("3", 1, 6),
        ("5", 6, 6),
    ]
    assert rec["curve"]["a"][2]["lo"] == pytest.approx(wilson(6, 6)[0])
    assert rec["elbow"]["a"]["rung"] == "5" and rec["elbow"]["a"]["rule"] == R.RULE
    assert rec["elbow"]["a"]["text"] == R.RULE_TEXT
    assert [a["cell"] for a in rec["arms"]] == [
        "r5/a/sft_grpo",
        "r5/a/sft_grpo_tuned",
        "r1/a/raw_grpo",
    ]
    assert rec["arms"][0]["key"] == "K1" and "key" not in rec["arms"][1]
    assert rec["arms"][1]["overrides"] == {"sft": {}, "grpo": {}}  # the condition scales
    assert [s["status"] for s in rec["stages"]] == [
        "pass",
        "done",
        "decided",
        "0 of 3 cells have rows",
    ]
    assert rec["stages"][0]["cells"][0]["key"] == "K0"
    path = R.write_record(tmp_path, rec)
    assert path == tmp_path / "recipe" / f"{rec['plan_key']}.json"
    back = R.read_record(tmp_path, rec["plan_key"])
    assert back["written"] and {k: v for k, v in back.items() if k != "written"} == json.loads(
        json.dumps(rec)
    )
    assert [p.name for p in (tmp_path / "recipe").iterdir()] == [path.name]  # no temp file left
    assert R.read_record(tmp_path, "smart-000000000000") is None


def test_record_of_a_failed_gate(tmp_path):
    cfg = Cfg(models=("a",))
    rec = R.build_record(cfg, cell_rows("a", "1", "sft", mem=(0, 1)), env={})
    assert rec["stopped"].startswith("gate failed") and rec["arms"] == []
    assert rec["gate"]["mem"][0] == {"model": "a", "k": 0, "n": 1, "rate": 0.0}
    assert [s["status"] for s in rec["stages"][1:]] == ["stopped: the gate failed"] * 3


def test_resume_rewrites_the_record_from_the_rows(tmp_path):
    """An interrupted recipe: the record says which cells have rows; the re-run adds the rest and
    rewrites the same file with the final decisions."""
    cfg = Cfg(rungs=("1", "3", "5"), models=("a",))
    rows = full_rows(cfg, [0, 1, 6])
    partial = rows[:6]  # killed during stage 1: r1 base+sft, r3 base
    rec = R.build_record(cfg, partial, env={})
    s1 = rec["stages"][1]
    assert s1["status"] == "2 of 5 cells have rows"
    states = {c["cell"]: c["state"] for c in s1["cells"]}
    assert states == {
        "r1/a/base": "done",
        "r3/a/base": "done",
        "r3/a/sft": "to run",
        "r5/a/base": "to run",
        "r5/a/sft": "to run",
    }
    assert rec["stages"][2]["status"] == "decided on the rows so far (stage 1 incomplete)"
    p1 = R.write_record(tmp_path, rec)
    p2 = R.write_record(tmp_path, R.build_record(cfg, rows, env={}))
    assert p1 == p2
    final = R.read_record(tmp_path, rec["plan_key"])
    assert final["stages"][1]["status"] == "done" and final["elbow"]["a"]["rung"] == "5"
    # a runner's own states (e.g. from cell keys) replace the row-derived ones
    rec = R.build_record(cfg, rows, env={}, state=lambda s: "failed" if s.rung == "5" else "done")
    assert {c["cell"]: c["state"] for c in rec["arms"]}["r5/a/sft_grpo"] == "failed"


def test_plan_text_shows_stages_states_and_dependencies(tmp_path):
    cfg = Cfg(rungs=("1", "3", "5"), models=("a",))
    before = R.plan_text(cfg, [], env={}, results_dir=tmp_path)
    assert str(tmp_path / "recipe") in before
    for s in R.STEPS:
        assert f"stage {s.number} {s.name}:" in before
    assert "gate undecided" in before and "waits for the gate" in before
    assert "rE/a/sft_grpo  waits for the elbow" in before
    assert "r1/a/raw_grpo  to run" in before
    after = R.plan_text(cfg, full_rows(cfg, [0, 1, 6]), env={})
    assert "E = r5 (no-later-rung-better)" in after
    assert "r5/a/sft_grpo  to run" in after and "rE/" not in after
    assert "r5/a/sft_grpo_tuned  to run  (grpo.iters x2 grpo.learning_rate x10)" in after
    failed = R.plan_text(cfg, cell_rows("a", "1", "sft", mem=(0, 1)), env={})
    assert "gate failed" in failed and "stopped: the gate failed" in failed


def test_rows_for_keeps_only_the_recipes_cells():
    rows = [row("a", "1", "sft", "mem", 1, 1, key="K1"), row("a", "1", "sft", "mem", 0, 1, key="X")]
    kept = R.rows_for(rows, {"K1"})
    assert kept == rows[:1]
    assert R.gate(Cfg(models=("a",)), kept).status == "pass"
    assert R.gate(Cfg(models=("a",)), rows).status == "fail"  # the foreign row, last, would win
