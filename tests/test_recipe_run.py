"""`jacrl ladder run --recipe smart` end to end on jac-tiny (real papermill cells, tiny iterations,
rungs 1 and 3): a gate that fails stops after stage 0 with its reason and launches nothing else;
the same rows with a gate that passes go on through the curve, the elbow and GRPO at the elbow
only (raw_grpo on rung 1); a recipe interrupted mid-stage resumes without re-running finished
cells; `ladder plan --recipe smart` states every stage and decision; notebook 40's record text."""

from __future__ import annotations

import contextlib
import dataclasses
import io
import shutil
from pathlib import Path

import pytest

from jacrl import ladder, notebooks, recipe, report, results
from jacrl.cli import build_parser, main
from jacrl.cli.ladder import config_from_args, recipe_from_args

ROOT = Path(__file__).resolve().parent.parent


def _sets() -> list[str]:
    """notebook 30's quick training settings as --set flags (jac-tiny-sized, one val batch)."""
    return [
        f"--set={stage}.{k}={v}" for stage, d in notebooks.QUICK_SETS.items() for k, v in d.items()
    ]


def _argv(tiny: str, data_dir: str, res: Path, arts: Path) -> list[str]:
    return [
        "--recipe",
        "smart",
        "--models",
        tiny,
        "--rungs",
        "1,3",
        "--iters",
        "sft=1,grpo=1",
        "--gen-limit",
        "2",
        "-n",
        "0",
        "-k",
        "1",
        "--max-tokens",
        "16",
        *_sets(),
        "--data-dir",
        data_dir,
        "--results",
        str(res),
        "--artifacts",
        str(arts),
    ]


@pytest.fixture(scope="module")
def gated(tiny, data_dir, tmp_path_factory):
    """`jacrl ladder run --recipe smart --gate-threshold 1` after one SFT iteration: rung 1's
    body is not reproduced in 16 tokens, so the gate fails. Its exit status, output and what was
    on disk right after."""
    tmp = tmp_path_factory.mktemp("gated")
    argv = _argv(tiny, data_dir, tmp / "results", tmp / "artifacts")
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = main(["ladder", "run", *argv, "--gate-threshold", "1"])
    res = tmp / "results"
    return {
        "rc": rc,
        "out": out.getvalue(),
        "err": err.getvalue(),
        "tmp": tmp,
        "tiny": tiny,
        "data_dir": data_dir,
        "rows": results.read_rows(res / ladder.RESULTS_FILE),
        "cells": sorted(p.name for p in (res / "cells").iterdir()),
        "records": recipe.read_records(res),
    }


def test_a_failed_gate_stops_after_stage_0_with_its_reason(gated):
    assert gated["rc"] == 2
    lines = [ln for ln in gated["err"].splitlines() if ln.startswith("jacrl:")]
    assert lines == [
        "jacrl: ladder run: gate: failed: sft mem on r1 below 100% for jac-tiny "
        "0/1 = 0%; training, extraction, reward or evaluation is broken, so the "
        "recipe stops before the SFT curve"
    ]
    assert "recipe stage 0 gate: 1 cells" in gated["out"]
    assert "recipe stage 1" not in gated["out"]  # nothing after the gate was launched
    rows = gated["rows"]
    assert {(r["condition"], r["rung"], r["kind"]) for r in rows} == {
        ("sft", "1", "gen"),
        ("sft", "1", "mem"),
    }
    assert len(gated["cells"]) == 1 and gated["cells"][0] == rows[0]["cell_key"]
    [rec] = gated["records"]
    assert rec["gate"]["status"] == "fail" and rec["gate"]["threshold"] == 1.0
    assert rec["gate"]["mem"] == [{"model": "jac-tiny", "k": 0, "n": 1, "rate": 0.0}]
    assert rec["stopped"] == rec["gate"]["reason"] and rec["arms"] == []
    assert [s["status"] for s in rec["stages"]] == ["fail"] + ["stopped: the gate failed"] * 3
    assert rec["stages"][0]["cells"][0]["state"] == "done"
    assert rec["stages"][0]["cells"][0]["key"] == rows[0]["cell_key"]
    assert all(c["state"] != "done" for s in rec["stages"][1:] for c in s["cells"])
    text = recipe.record_text(rec)
    assert "gate: failed: sft mem on r1 below 100%" in text and "elbow jac-tiny" not in text
    assert text.endswith("stopped after the gate (stage 0): no curve, elbow or GRPO arm")


def test_the_recipe_end_to_end_and_resumed(gated, tmp_path, capsys):
    """The gated rows, now with a gate that passes (0) and the elbow set to rung 3 by hand: an
    interrupted run, then the resumed one; order of the engine's calls, the record, GRPO only at
    the elbow, no finished cell re-run."""
    res = tmp_path / "results"
    shutil.copytree(gated["tmp"] / "results", res)
    argv = [
        *_argv(gated["tiny"], gated["data_dir"], res, gated["tmp"] / "artifacts"),
        "--gate-threshold",
        "0",
        "--elbow",
        "3",
    ]
    args = build_parser().parse_args(["ladder", "run", *argv])
    cfg, rcfg = config_from_args(args), recipe_from_args(args)
    assert cfg.recipe == "smart" and rcfg.gate_threshold == 0 and rcfg.elbow == "3"
    calls: list[list[str]] = []

    class Killed(Exception):
        pass

    def interrupted(c, cells):  # stage 1 killed after its first cell
        calls.append([x.name for x in cells])
        if len(calls) == 2:
            ladder.run(c, progress=False, cells=cells[:1])
            raise Killed
        return ladder.run(c, progress=False, cells=cells)

    with pytest.raises(Killed):
        ladder.run_recipe(cfg, rcfg, interrupted)
    assert calls == [
        ["r1/jac-tiny/sft"],
        ["r1/jac-tiny/base", "r3/jac-tiny/base", "r3/jac-tiny/sft"],
    ]
    rec = recipe.read_record(res, recipe.plan_key(cfg, rcfg))
    assert rec["gate"]["status"] == "pass"
    assert rec["stages"][1]["status"] == "0 of 3 cells have rows"
    finished = {r["cell_key"] for r in results.read_rows(cfg.results_file)}
    assert len(finished) == 2  # the gate's cell and stage 1's first
    stamps = {
        k: ladder.read_status(res / "cells" / k / "status.json")["finished"] for k in finished
    }

    calls.clear()

    def engine(c, cells):
        calls.append([x.name for x in cells])
        return ladder.run(c, progress=False, cells=cells)

    done = ladder.run_recipe(cfg, rcfg, engine)
    assert done.stopped is None and [s["stage"] for s in done.stages] == [0, 1, 2, 3]
    assert calls == [
        ["r1/jac-tiny/sft"],
        ["r1/jac-tiny/base", "r3/jac-tiny/base", "r3/jac-tiny/sft"],
        ["r3/jac-tiny/sft_grpo", "r3/jac-tiny/sft_grpo_tuned", "r1/jac-tiny/raw_grpo"],
    ]  # stage 2 runs no cell
    state = {s["cell"]: s["status"] for s in done.statuses}
    assert state == {
        "r1/jac-tiny/sft": "skipped",
        "r1/jac-tiny/base": "skipped",
        "r3/jac-tiny/base": "done",
        "r3/jac-tiny/sft": "done",
        "r3/jac-tiny/sft_grpo": "done",
        "r3/jac-tiny/sft_grpo_tuned": "done",
        "r1/jac-tiny/raw_grpo": "done",
    }
    for k, t in stamps.items():  # the finished cells were not run again
        assert ladder.read_status(res / "cells" / k / "status.json")["finished"] == t

    rows = results.read_rows(cfg.results_file)
    pairs = [(r["cell_key"], r["kind"]) for r in rows]
    assert len(pairs) == len(set(pairs)) == 14  # 7 cells x (gen, mem), each once
    grpo = {(r["condition"], r["rung"]) for r in rows if r["ladder"]["grpo"]}
    assert grpo == {("sft_grpo", "3"), ("sft_grpo_tuned", "3"), ("raw_grpo", "1")}
    by = {r["condition"]: r for r in rows if r["kind"] == "gen" and r["rung"] == "3"}
    g, t = by["sft_grpo"]["ladder"]["grpo"], by["sft_grpo_tuned"]["ladder"]["grpo"]
    assert t["learning_rate"] == pytest.approx(10 * g["learning_rate"]) and t["iters"] == 2
    assert by["sft_grpo"]["cell_key"] != by["sft_grpo_tuned"]["cell_key"]

    rec = recipe.read_record(res, done.key)
    assert done.record == recipe.record_path(res, done.key)
    assert rec["gate"]["status"] == "pass" and rec["stopped"] is None
    assert [f["rung"] for f in rec["curve"]["jac-tiny"]] == ["1", "3"]
    el = rec["elbow"]["jac-tiny"]
    rule = recipe.elbow(recipe.curve(cfg, rows, "jac-tiny"))
    assert el["rung"] == "3" and el["rule"] == "manual" and el["rule_pick"] == rule.rung
    assert [(a["cell"], a["state"]) for a in rec["arms"]] == [
        ("r3/jac-tiny/sft_grpo", "done"),
        ("r3/jac-tiny/sft_grpo_tuned", "done"),
        ("r1/jac-tiny/raw_grpo", "done"),
    ]
    keys = {r["cell_key"] for r in rows}
    assert all(c["state"] == "done" and c["key"] in keys for s in rec["stages"] for c in s["cells"])
    assert rec["arms"][1]["overrides"] == {"sft": {}, "grpo": {}}  # its condition scales

    # the tuned arm is its own row in the pivot and the curves
    table = report.ladder_table(rows)
    assert ("jac-tiny", "sft_grpo_tuned") in list(table.index)
    assert "sft_grpo_tuned" in report.frame(rows).condition.tolist()

    # a third run runs nothing and rewrites the same decisions; the CLI agrees
    calls.clear()
    again = ladder.run_recipe(cfg, rcfg, engine)
    assert {s["status"] for s in again.statuses} == {"skipped"}
    strip = lambda r: {k: v for k, v in r.items() if k != "written"}  # noqa: E731
    assert strip(recipe.read_record(res, done.key)) == strip(rec)
    capsys.readouterr()
    assert main(["ladder", "run", *argv]) == 0
    assert "recipe: done" in capsys.readouterr().out
    assert main(["ladder", "plan", *argv]) == 0
    out = capsys.readouterr().out
    assert f"decisions -> {done.record}" in out and "gate passed" in out
    assert "-> jac-tiny: E = r3 (manual): set by hand" in out
    assert "r3/jac-tiny/sft_grpo_tuned  done  (grpo.iters x2 grpo.learning_rate x10)" in out
    assert "to run" not in out
    text = recipe.record_text(rec)
    assert "elbow jac-tiny: E = r3 (manual)" in text and "arm r1/jac-tiny/raw_grpo: done" in text


def test_recipe_knobs_and_plan_without_rows(data_dir, tmp_path, capsys, monkeypatch):
    """--demo picks the demo's gate threshold; env and flags override; plan runs and writes
    nothing and names what waits on which decision."""
    argv = [
        "--recipe",
        "smart",
        "--rungs",
        "1,3",
        "--data-dir",
        data_dir,
        "--results",
        str(tmp_path / "r"),
    ]
    args = build_parser().parse_args(["ladder", "plan", *argv])
    assert recipe_from_args(args, {}).gate_threshold == recipe.GATE_THRESHOLD
    args = build_parser().parse_args(["ladder", "plan", "--demo", *argv])
    assert recipe_from_args(args, {}).gate_threshold == recipe.DEMO_GATE_THRESHOLD
    env = {"JACRL_RECIPE_GATE_THRESHOLD": "0.5", "JACRL_RECIPE_ELBOW": "3"}
    assert recipe_from_args(args, env).gate_threshold == 0.5
    assert recipe_from_args(args, env).elbow == "3"
    with pytest.raises(KeyError, match="JACRL_RECIPE_TUNED_LR_SCALE: RecipeConfig has no such"):
        recipe_from_args(args, {"JACRL_RECIPE_TUNED_LR_SCALE": "3"})
    args = build_parser().parse_args(["ladder", "plan", *argv, "--gate-threshold", "0.7"])
    assert recipe_from_args(args, env).gate_threshold == 0.7
    assert (
        ladder.from_env(ladder.LadderConfig(), {"JACRL_LADDER_RECIPE": "smart"}).recipe == "smart"
    )
    with pytest.raises(ValueError, match="unknown recipe 'dumb'"):
        ladder.validate(ladder.LadderConfig(recipe="dumb"))
    monkeypatch.setenv("JACRL_LADDER_RECIPE", "smart")
    assert main(["ladder", "plan", *argv[2:]]) == 0  # the recipe from the environment
    out = capsys.readouterr().out
    assert out.startswith("recipe smart (plan smart-") and "waits for the gate" in out
    assert "rE/jac-tiny/sft_grpo  waits for the elbow" in out
    assert "r1/jac-tiny/raw_grpo  to run" in out
    assert not (tmp_path / "r").exists()
    # the recipe's field is not part of its plan key: the grid's configuration names the same
    cfg = config_from_args(build_parser().parse_args(["ladder", "plan", *argv]))
    assert recipe.plan_key(cfg) == recipe.plan_key(dataclasses.replace(cfg, recipe=""))
    assert main(["ladder", "plan", *argv, "--gate-threshold", "2"]) == 2
    assert "gate_threshold must be in [0, 1]" in capsys.readouterr().err
    assert main(["ladder", "plan", *argv, "--formats", "hole,conversion"]) == 2
    assert "the recipe decides on one task format" in capsys.readouterr().err


def test_the_recipes_cells_are_the_demo_grids_cells(data_dir):
    """For the same settings and seed the recipe runs the grid's own cells (same keys), so the
    demo's rows and the recipe's are one set: stages 0-1 (gate, SFT curve) are the grid's base
    and sft cells, and stage 3's untuned sft_grpo at the elbow is the grid's sft_grpo cell. Only
    the tuned arm (its own condition) and the raw_grpo control (not in the demo) are extra."""
    from jacrl.ladder.recipe_run import Book
    from jacrl.recipe.steps import planned_cells

    cfg = ladder.validate(ladder.demo_config(data_dir=data_dir))
    grid = {(c.rung, c.condition): c.key for c in ladder.plan(cfg)}
    book = Book(cfg, recipe.RecipeConfig(), env={})
    specs = [s for st in (0, 1) for s in planned_cells(st, cfg, env={})]
    specs += planned_cells(3, cfg, elbow_rungs={"jac-tiny": "3"}, env={})
    cells = book.cells(specs)
    assert {c.condition for c in cells} >= {"base", "sft", "sft_grpo", "sft_grpo_tuned"}
    for c in cells:
        if c.condition not in ("sft_grpo_tuned", "raw_grpo"):
            assert grid[(c.rung, c.condition)] == c.key, c.name
