"""jacrl.ladder and jacrl.report: scoping, plan runs nothing, keys, the conditions' stages (RFT and
STaR cells on jac-tiny), row dedup, the show table against the statistics, a failing cell recorded
while the ladder goes on, and a ladder killed with SIGKILL then resumed (real papermill, real
jac-tiny, real jaclang) leaving exactly one row per evaluation."""

from __future__ import annotations

import dataclasses
import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import nbformat
import papermill
import pytest
from tiny_ladder import tiny_ladder_args

from jacrl import ladder, report, results
from jacrl.cli import build_parser, main
from jacrl.cli.ladder import config_from_args
from jacrl.models.registry import resolve
from jacrl.project import project
from jacrl.stats import mcnemar_exact, wilson
from jacrl.tasks.record import fenced, gold_body

ROOT = Path(__file__).resolve().parent.parent


def _args(*argv: str):
    return build_parser().parse_args(["ladder", *argv])


# -------------------------------------------------------------------------------------------
# configuration and plan (nothing runs)
# -------------------------------------------------------------------------------------------


def test_env_scopes_and_flags_win():
    env = {
        "JACRL_LADDER_RUNGS": "1,all",
        "JACRL_LADDER_MODELS": "a,b",
        "JACRL_LADDER_CONDITIONS": "base,sft_grpo_tuned",
        "JACRL_LADDER_ITERS": "sft=5,grpo=3",
    }
    cfg = ladder.from_env(ladder.LadderConfig(), env)
    assert cfg.rungs == ("1", "all") and cfg.models == ("a", "b")
    assert cfg.conditions == ("base", "sft_grpo_tuned")
    assert (cfg.sft_iters, cfg.grpo_iters) == (5, 3)
    assert ladder.parse_iters("7") == {"sft": 7, "grpo": 7}
    cfg = config_from_args(
        _args("plan", "--rungs", "3", "--iters", "9", "--set", "grpo.group_size=2", "-n", "4"), env
    )
    assert cfg.rungs == ("3",) and cfg.models == ("a", "b") and cfg.sft_iters == 9
    assert cfg.sets == {"grpo": {"group_size": "2"}} and cfg.n == 4
    with pytest.raises(ValueError):
        ladder.from_env(ladder.LadderConfig(), {"JACRL_LADDER_CONDITIONS": "base,nope"})
    with pytest.raises(ValueError):
        ladder.parse_iters("sft=x")


def _it(sft: int, grpo: int) -> dict[str, int]:
    return {"sft_iters": sft, "grpo_iters": grpo}


def test_condition_configs():
    """Each condition's stages, in order, resolved; the tuned arm scales the resolved default
    arm (the user's overrides included); RFT and STaR train with the one SFT config."""
    got = ladder.stage_configs("sft_grpo_tuned", 3, _it(10, 4), {"grpo": {"group_size": 2}}, env={})
    assert list(got) == ["sft", "grpo"]
    assert got["sft"].iters == 10 and got["sft"].seed == 3
    grpo = got["grpo"]
    assert (grpo.iters, grpo.learning_rate, grpo.group_size) == (8, 1e-5, 2)  # 2 x 4, 10 x 1e-6
    tuned = ladder.stage_configs(
        "sft_grpo_tuned", 0, _it(1, 4), {"grpo": {"learning_rate": 3e-6}}, env={}
    )["grpo"]
    assert tuned.learning_rate == 3e-5  # relative to what the default arm would run
    assert ladder.stage_configs("base", 0, _it(1, 1), env={}) == {}
    got = ladder.stage_configs("raw_grpo", 0, _it(1, 6), env={"JACRL_GRPO_BETA": "0.5"})
    assert list(got) == ["grpo"] and got["grpo"].iters == 6 and got["grpo"].beta == 0.5
    sets = {"sft": {"learning_rate": 1e-3}, "star": {"rounds": 1, "sft.iters": 2}}
    star = ladder.stage_configs("star", 5, _it(7, 1), sets, env={"JACRL_STAR_SAMPLES": "3"})
    assert list(star) == ["star"] and (star["star"].rounds, star["star"].samples) == (1, 3)
    assert star["star"].sft.learning_rate == 1e-3 and star["star"].sft.iters == 2
    assert star["star"].seed == star["star"].sft.seed == 5
    rft = ladder.stage_configs("sft_rft", 0, _it(7, 1), sets, env={})
    assert list(rft) == ["sft", "rft"] and rft["rft"].sft == rft["sft"]  # one SFT config
    with pytest.raises(ValueError, match="unknown condition 'nope'; choose from base, sft, "):
        ladder.stage_configs("nope", 0, _it(1, 1), env={})
    with pytest.raises(KeyError, match="STaRConfig has no field 'roundz'"):
        ladder.stage_configs("star", 0, _it(1, 1), {"star": {"roundz": 1}}, env={})


def test_conditions_are_data_in_one_place():
    """One list (jacrl.conditions) gives the stages, the parents and the display order the
    report and the recipe use; a chain that cannot be trained is refused when it is written."""
    from jacrl import conditions as C

    assert report.COND_ORDER == C.ORDER == tuple(ladder.CONDITIONS)
    assert C.parent_stage(C.CONDITIONS["sft_rft"], "rft") == "sft"
    assert C.parent_stage(C.CONDITIONS["star"], "star") is None
    assert [c for c, v in C.CONDITIONS.items() if v.shares == "sft"] == [
        "sft_rft",
        "sft_grpo",
        "sft_grpo_tuned",
        "sft_grpo_lr0",
        "sft_dpo",
    ]
    for bad in (
        (("grpo", "sft"), {}),
        (("sft", "star"), {}),
        (("nope",), {}),
        (("sft",), {"grpo": {"iters": 2.0}}),
    ):
        with pytest.raises(ValueError, match="condition 'x': stages"):
            C.Condition("x", bad[0], "", bad[1])


def _fake_task(i: int, family: str, source: str) -> dict:
    return {
        "prompt": f"p{i}",
        "answer": json.dumps({"id": f"{family}_{i}", "family": family, "source": source}),
    }


def test_stratified_sample_covers_every_family():
    """gen_limit samples round-robin by family (each family's picks spread over sources), keeps
    the given order, is deterministic; 0 or >= len = everything."""
    from collections import Counter

    from jacrl.tasks.record import family_of

    tasks = (
        [_fake_task(i, "arch", f"s{i % 2}") for i in range(10)]  # unbalanced families
        + [_fake_task(10, "err", "s0"), _fake_task(11, "lib", "s1"), _fake_task(12, "lib", "s1")]
    )
    for n in (3, 4, 5):
        got = ladder.stratified(tasks, n)
        assert len(got) == n and {family_of(t) for t in got} == {"arch", "err", "lib"}
        assert got == [t for t in tasks if t in got]  # the given order
        assert got == ladder.stratified(list(tasks), n)  # deterministic
    two_arch = [t for t in ladder.stratified(tasks, 5) if family_of(t) == "arch"]
    assert {json.loads(t["answer"])["source"] for t in two_arch} == {"s0", "s1"}
    assert ladder.stratified(tasks, 0) == tasks and ladder.stratified(tasks, 99) == tasks
    assert Counter(family_of(t) for t in ladder.stratified(tasks, 2)) == {"arch": 1, "err": 1}


def test_gen_sample_of_the_real_holdout_covers_every_family(data_dir):
    from collections import Counter

    from jacrl.tasks import splits
    from jacrl.tasks.record import family_of

    hold = splits.load_split("holdout", data_dir)
    fams = {family_of(t) for t in hold}
    assert ladder.cell_tasks("1", data_dir, 0)["gen"] == hold  # 0 = the whole holdout
    for n in (len(fams), 2 * len(fams), ladder.demo_config().gen_limit):
        gen = ladder.cell_tasks("3", data_dir, n)["gen"]
        counts = Counter(family_of(t) for t in gen)
        assert len(gen) == n and set(counts) == fams, counts
        assert max(counts.values()) - min(counts.values()) <= 1
        assert gen == ladder.cell_tasks("1", data_dir, n)["gen"]  # every rung: the same sample


def test_demo_budgets_fit_the_memorized_answers(tiny, data_dir):
    """The demo's eval and rollout budget holds every rung task's whole gold answer (+ the end
    token), so mem is never cut off by truncation; SFT runs 90 iterations per rung task."""
    import dataclasses

    from jacrl.models.registry import load
    from jacrl.prompts import chat_messages

    cfg = ladder.demo_config(data_dir=data_dir)
    _, tok = load(tiny)
    for rung in cfg.rungs:
        for t in ladder.cell_tasks(rung, data_dir)["mem"]:
            full = tok.apply_chat_template(
                chat_messages(t["prompt"], fenced(gold_body(t))), return_dict=False
            )
            prompt = tok.apply_chat_template(
                chat_messages(t["prompt"]), return_dict=False, add_generation_prompt=True
            )
            answer = len(full) - len(prompt) - 1  # the answer and <|im_end|>, not the final "\n"
            assert answer <= cfg.max_tokens, (rung, answer)
    assert cfg.sets["grpo"]["max_completion_length"] == cfg.max_tokens
    assert {r: ladder.rung_sft_iters(cfg, r) for r in cfg.rungs} == {"1": 90, "3": 270}
    assert ladder.rung_sft_iters(dataclasses.replace(cfg, sft_iters=50), "3") == 50  # a cap
    assert ladder.rung_sft_iters(dataclasses.replace(cfg, sft_iters_per_task=0), "1") == 270


def test_plan_runs_nothing_and_keys_are_stable(tiny, data_dir, tmp_path, capsys):
    res, arts = tmp_path / "results", tmp_path / "artifacts"
    other = tmp_path / "tiny-copy"  # a second model (an unknown one is an error at plan time)
    shutil.copytree(resolve(tiny), other)
    argv = [
        "--models",
        f"{tiny},{other}",
        "--rungs",
        "1,3",
        "--iters",
        "sft=4,grpo=2",
        "--data-dir",
        data_dir,
        "--results",
        str(res),
        "--artifacts",
        str(arts),
    ]
    assert main(["ladder", "plan", *argv]) == 0  # the compact table: a line per cell
    table = capsys.readouterr().out.splitlines()
    assert table[1].split() == ["cell", "stages", "key", "status"] and len(table) == 2 + 16
    assert "papermill" not in "".join(table) and table[2].split()[1:2] == ["-"]  # base: none
    assert main(["ladder", "plan", "--commands", *argv]) == 0
    out = capsys.readouterr().out
    cfg = config_from_args(_args("plan", *argv))
    cells = ladder.plan(cfg)
    assert len(cells) == 2 * 2 * 4
    assert len({c.key for c in cells}) == len(cells)
    for c in cells:
        assert c.key in out and shlex.join(ladder.command(cfg, c)) in out
    assert out.count("papermill") == len(cells) and out.count("to run") == len(cells)
    assert not res.exists() and not arts.exists()  # plan wrote nothing
    assert [c.key for c in ladder.plan(cfg)] == [c.key for c in cells]  # stable
    # everything that defines a cell changes its key
    one = {
        "rung": "1",
        "model": "jac-tiny",
        "condition": "sft",
        "data_dir": data_dir,
        "sft_iters": 4,
    }
    k0 = ladder.notebook_cell(**one).key
    assert ladder.notebook_cell(**{**one, "sft_iters": 5}).key != k0
    assert ladder.notebook_cell(**{**one, "seed": 1}).key != k0
    assert ladder.notebook_cell(**{**one, "gen_limit": 3}).key != k0
    assert ladder.notebook_cell(**{**one, "sft_set": {"learning_rate": 1e-3}}).key != k0
    assert (
        ladder.notebook_cell(**{**one, "sets": '{"sft": {"learning_rate": 1e-3}}'}).key
        == ladder.notebook_cell(**{**one, "sft_set": '{"learning_rate": 1e-3}'}).key
    )  # both spellings
    assert ladder.notebook_cell(**{**one, "rung": "3"}).key != k0
    other = tmp_path / "data"
    shutil.copytree(Path(data_dir) / "splits", other / "splits")
    lines = (other / "splits" / "holdout.jsonl").read_text().splitlines(keepends=True)
    (other / "splits" / "holdout.jsonl").write_text("".join(lines[:-1]))
    assert ladder.notebook_cell(**{**one, "data_dir": str(other)}).key != k0
    # the paths where things are written do not define the cell
    assert ladder.notebook_cell(**{**one, "results_dir": str(res)}).key == k0
    # every training seed is a cell of its own; the first is the one-seed ladder's cell
    assert ladder.notebook_cell(**one, train_seed=0).key == k0
    s1 = ladder.notebook_cell(**one, train_seed=1)
    assert s1.key != k0 and s1.key.startswith("r1-jac-tiny-sft-s1-") and s1.stages["sft"].seed == 1
    assert s1.name == "r1/jac-tiny/sft/s1" and s1.key_parts["seed"] == 0  # the eval seed
    # by hand, rows go to the project's scratch results, never the ladder's own
    assert ladder.notebook_cell(**one).results == str(project().scratch / "rl_ladder.jsonl")


GRADING_CONDITIONS = [c for c, v in ladder.CONDITIONS.items() if v.grades]


def test_reward_formula_keys_grading_cells_only(data_dir, tmp_path, monkeypatch, capsys):
    """`JACRL_REWARD_FORMULA=additive jacrl ladder plan` re-keys the cells with a stage that
    grades samples (GRPO, RFT, STaR) and sft, whose mem temperature GRPO's calibration picks by
    that reward; never base."""
    assert set(GRADING_CONDITIONS) == {
        "sft_grpo",
        "raw_grpo",
        "sft_grpo_tuned",
        "sft_grpo_lr0",
        "sft_rft",
        "star",
        "sft_dpo",
    }
    argv = [
        "ladder",
        "plan",
        "--rungs",
        "1",
        "--conditions",
        ",".join(ladder.CONDITIONS),
        "--iters",
        "4",
        "--data-dir",
        data_dir,
        "--results",
        str(tmp_path / "r"),
    ]

    def plan_keys() -> dict[str, str]:
        assert main(argv) == 0
        out = capsys.readouterr().out
        cols = [ln.split() for ln in out.splitlines()[2:]]  # cell, stages, key, status
        return {c: next(w[2] for w in cols if w[0].endswith(f"/{c}")) for c in ladder.CONDITIONS}

    monkeypatch.delenv("JACRL_REWARD_FORMULA", raising=False)
    default = plan_keys()
    monkeypatch.setenv("JACRL_REWARD_FORMULA", "additive")
    additive = plan_keys()
    for c in ladder.CONDITIONS:
        assert (default[c] != additive[c]) == (c != "base"), c
    # the same cells by parameter (flag, notebook parameter, --set) under the default env
    monkeypatch.delenv("JACRL_REWARD_FORMULA")
    assert plan_keys() == default
    argv += ["--reward-formula", "additive"]
    assert plan_keys() == additive
    cfg = config_from_args(_args(*argv[1:]))
    cell = next(c for c in ladder.plan(cfg) if c.condition == "raw_grpo")
    cmd = ladder.command(cfg, cell)
    assert cmd[-3:] == ["-r", "cell_json", cell.to_json()]  # the one papermill parameter
    assert json.loads(cmd[-1])["cfg"]["reward_formula"] == "additive"
    assert ladder.notebook_cell(cmd[-1], env={}) == cell  # what notebook 30 resolves from it
    one = {
        "rung": "1",
        "model": "jac-tiny",
        "data_dir": data_dir,
        "sft_iters": 4,
        "grpo_iters": 4,
        "env": {},
    }
    for c in ladder.CONDITIONS:
        cell = ladder.notebook_cell(condition=c, reward_formula="additive", **one)
        assert cell.key == additive[c]
        if c in GRADING_CONDITIONS:
            stage = ladder.CONDITIONS[c].last
            assert cell.stages[stage].reward_formula == cell.reward_formula == "additive"
            # the same by sets: every grading stage the cell runs or its evaluation reads
            sets = {s: {"reward_formula": "additive"} for s in (stage, *cell.reads)}
            assert ladder.notebook_cell(condition=c, sets=sets, **one).key == additive[c]
        else:
            assert cell.reward_formula == ""
            assert c == "base" or cell.reads["grpo"].reward_formula == "additive"


def test_unknown_reward_formula_is_a_one_line_error(data_dir, monkeypatch, capsys):
    one = {"rung": "1", "model": "jac-tiny", "condition": "raw_grpo", "data_dir": data_dir}
    for bad in (
        {"reward_formula": "v3"},
        {"env": {"JACRL_REWARD_FORMULA": "v3"}},
        {"grpo_set": {"reward_formula": "v3"}},
        {"sets": {"grpo": {"reward_formula": "v3"}}},
    ):
        with pytest.raises(ValueError, match="v3.*choose from dependent, tiered, additive") as e:
            ladder.notebook_cell(**one, **bad)
        assert "\n" not in str(e.value)
    with pytest.raises(ValueError, match="unknown reward formula 'v3'"):
        ladder.validate(ladder.LadderConfig(reward_formula="v3"))
    assert main(["ladder", "plan", "--reward-formula", "v3"]) == 2  # a usage error, one line
    assert "invalid choice: 'v3'" in capsys.readouterr().err
    monkeypatch.setenv("JACRL_REWARD_FORMULA", "v3")  # read at the edge, for every cell
    with pytest.raises(ValueError, match="JACRL_REWARD_FORMULA='v3'"):
        ladder.notebook_cell(**{**one, "condition": "base"}, env=os.environ)


def test_an_unknown_cell_parameter_is_a_one_line_error(data_dir):
    one = {"rung": "1", "model": "jac-tiny", "condition": "base", "data_dir": data_dir}
    with pytest.raises(
        TypeError,
        match=r"unknown cell parameter 'nn' \(did you mean 'n'\?\); "
        r"known: artifacts_dir, batch_size, ",
    ) as e:
        ladder.notebook_cell(env={}, **one, nn=4)
    assert "\n" not in str(e.value) and "train_seed" in str(e.value)
    # what notebook 30 passes on: the public names bound before its first import
    ns = {"__name__": "__main__", "rung": "1", "nn": 4, "plt": os, "cell": None, "rows": []}
    assert ladder.notebook_params(ns) == {"rung": "1", "nn": 4}


def test_a_cell_planned_before_the_stage_table_is_a_one_line_error(data_dir):
    """A cell JSON whose settings still have the per-stage `*_set` fields (before the stage
    table) fails in one line naming where it came from, the old fields and what to do."""
    cell = ladder.plan(ladder.LadderConfig(rungs=("1",), conditions=("sft",), data_dir=data_dir))
    old = json.loads(cell[0].to_json())
    old["cfg"]["sft_set"] = old["cfg"].pop("sets").get("sft", {})
    old["cfg"]["grpo_set"] = {}
    with pytest.raises(ValueError) as e:
        ladder.notebook_cell(cell_json=json.dumps(old), env={})
    assert str(e.value) == (
        "cell_json: a cell planned by another jacrl version (its settings have grpo_set, "
        "sft_set; one stage's overrides are now `sets`): plan it again (`jacrl ladder run` "
        "replans every cell)"
    )


def test_a_misspelled_papermill_parameter_fails_notebook_30(data_dir, tmp_path):
    """papermill only warns about a parameter the notebook does not declare; notebook 30 passes
    every parameter to the cell, which refuses an unknown one before any work."""
    out = tmp_path / "out.ipynb"
    with pytest.raises(papermill.PapermillExecutionError, match="unknown cell parameter 'nn'"):
        papermill.execute_notebook(
            str(ROOT / "notebooks" / ladder.NOTEBOOK),
            str(out),
            parameters={"nn": 4, "data_dir": data_dir},
            kernel_name="python3",
            cwd=str(ROOT),
            progress_bar=False,
        )


def test_rows_record_the_training_reward_formula(tiny, data_dir, tmp_path):
    """evaluate_cell's rows name the formula the cell trained with (None without GRPO)."""
    kw = {
        "rung": "1",
        "model": tiny,
        "data_dir": data_dir,
        "gen_limit": 1,
        "mem_limit": 1,
        "results_dir": str(tmp_path),
        "n": 0,
        "k": "1",
        "max_tokens": 8,
        "reward_formula": "additive",
        "env": {},
    }
    for cond, want in (("raw_grpo", "additive"), ("sft", None)):
        rows = ladder.evaluate_cell(ladder.notebook_cell(condition=cond, **kw), {}, progress=False)
        assert [r["kind"] for r in rows] == ["gen", "mem"]
        assert all(r["reward_formula"] == want for r in rows)
        assert all((r["ladder"]["grpo"] or {}).get("reward_formula") == want for r in rows)


# tiny settings for the sampling stages: jac-tiny after 3 SFT iterations verifies no sample, so
# threshold 0 keeps any sample with a body; the test is of the plumbing (stages, parents, keys)
TINY_SAMPLING = {"samples": 2, "threshold": 0.0, "max_tokens": 16}


def test_rft_and_star_cells_train_their_stages_on_jac_tiny(tiny, data_dir, tmp_path):
    """sft_rft: the sft cell's own gold SFT artifact (reused, not trained twice), then RFT
    sampling from it (its parent: the previous stage's artifact) and training from the base;
    star: its rounds from the base. Each evaluates its last stage's adapter, and its rows carry
    the stage's resolved config."""
    from jacrl.notebooks import QUICK_SETS

    kw = {
        "rung": "1",
        "model": tiny,
        "data_dir": data_dir,
        "sft_iters": 3,
        "gen_limit": 1,
        "mem_limit": 1,
        "n": 0,
        "k": "1",
        "max_tokens": 16,
        "env": {},
        "sft_set": QUICK_SETS["sft"],
        "artifacts_dir": str(tmp_path / "a"),
        "results_dir": str(tmp_path / "r"),
        "rft_set": TINY_SAMPLING,
        "star_set": {**TINY_SAMPLING, "rounds": 1},
    }
    rft_cell = ladder.notebook_cell(condition="sft_rft", **kw)
    arts = ladder.train_cell(rft_cell, log=lambda _: None)
    assert list(arts) == ["sft", "rft"] and not arts["sft"].reused
    sft = ladder.train_cell(ladder.notebook_cell(condition="sft", **kw), log=lambda _: None)
    assert sft["sft"].reused and sft["sft"].key == arts["sft"].key  # one gold SFT artifact
    assert arts["rft"].manifest["sampled_from"] == str(arts["sft"].path)
    assert arts["rft"].path.name.startswith("sft_rft-")
    assert ladder.adapter_of(arts) == Path(arts["rft"].adapter_path)
    star_cell = ladder.notebook_cell(condition="star", **kw)
    star = ladder.train_cell(star_cell, log=lambda _: None)
    assert list(star) == ["star"] and star["star"].path.name.startswith("star1-")
    assert star["star"].manifest["round"] == 1
    for cell, a in ((rft_cell, arts), (star_cell, star)):
        rows = ladder.evaluate_cell(cell, a, progress=False)
        assert [r["kind"] for r in rows] == ["gen", "mem"]
        stage = ladder.CONDITIONS[cell.condition].last
        assert all(
            r["ladder"][stage] == dataclasses.asdict(cell.stages[stage])
            and r["condition"] == cell.condition
            and r["reward_formula"] == cell.reward_formula
            and r["cell_key"] == cell.key
            for r in rows
        )
        assert rows[0]["ladder"]["artifacts"][stage] == str(a[stage].path)


# -------------------------------------------------------------------------------------------
# rows and the show table (synthetic rows; no model)
# -------------------------------------------------------------------------------------------


def _row(key, model, rung, cond, kind, passed, n, k_pct=None):
    per_task = [{"id": f"t{i}", "greedy_exact": bool(p)} for i, p in enumerate(passed)]
    p1 = sum(passed)
    return {
        "tag": f"r{rung}/{model}/{cond}/{kind}",
        "cell_key": key,
        "model_name": model,
        "rung": rung,
        "condition": cond,
        "kind": kind,
        "tasks": n,
        "pass1": p1,
        "pass1_pct": round(100 * p1 / n, 2),
        "pass_at_k": k_pct or {},
        "per_task": per_task,
    }


def test_append_cell_rows_never_duplicates(tmp_path):
    res = tmp_path / "rl_ladder.jsonl"
    gen = _row("K", "m", "1", "base", "gen", [1, 0], 2)
    mem = _row("K", "m", "1", "base", "mem", [1], 1)
    assert results.append_cell_rows(res, [gen]) == 1  # as if killed between the two appends
    with open(res, "a") as f:
        f.write('{"torn": ')  # and a torn write after it
    with pytest.warns(UserWarning, match="dropped a torn last line 2"):  # before appending to it
        assert results.append_cell_rows(res, [gen, mem]) == 1
    assert results.append_cell_rows(res, [gen, mem]) == 0
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the file is whole again: nothing to skip
        rows = report.load_rows(res)
    assert [(r["cell_key"], r["kind"]) for r in rows] == [("K", "gen"), ("K", "mem")]
    assert results.is_done(results.rows_by_key(res), "K")


def test_show_reproduces_the_statistics(tmp_path, capsys):
    base = [1, 1, 1, 1, 1, 1, 1] + [0] * 11  # 7/18 -> Wilson 20-61
    sft = [1, 1, 1, 1, 1, 0, 0] + [1] * 6 + [0] * 5  # 11/18 -> 39-80
    rows = [
        _row("a", "m", "1", "base", "gen", base, 18, {"1": 38.89, "8": 55.5}),
        _row("a", "m", "1", "base", "mem", [0], 1),
        _row("b", "m", "1", "sft", "gen", sft, 18, {"1": 61.11, "8": 72.22}),
        _row("b", "m", "1", "sft", "mem", [1], 1),
        _row("c", "m", "all", "sft", "gen", [0] * 4, 4),
        {"tag": "not/a/ladder/row/at/all", "tasks": 3, "pass1": 1},
    ]
    res = tmp_path / "results"
    results.append_cell_rows(res / "rl_ladder.jsonl", [r for r in rows if "cell_key" in r])
    assert main(["ladder", "show", "--results", str(res), "--figures", str(tmp_path / "fig")]) == 0
    out = capsys.readouterr().out
    assert "38.9 [20-61] p@8 55.5 m0" in out and "61.1 [39-80] p@8 72.2 m100" in out
    assert "0.0 [0-49] m·" in out  # rung all: no samples, no mem row
    assert (tmp_path / "fig" / "ladder.png").stat().st_size > 1000
    table = report.ladder_table(rows)
    assert list(table.columns) == ["1", "all"]
    assert list(table.index) == [("m", "base"), ("m", "sft")]
    df = report.frame(rows)
    for r in df.itertuples():
        lo, hi = wilson(r.pass1, r.tasks)
        assert (r.ci_lo, r.ci_hi) == (round(100 * lo, 2), round(100 * hi, 2))
    mc = report.mcnemar_vs_base(rows)
    got = mc[(mc.kind == "gen") & (mc.condition == "sft")].iloc[0]
    want = mcnemar_exact([bool(x) for x in base], [bool(x) for x in sft])
    assert (got.lost, got.gained, got.n) == (want["b"], want["c"], 18) == (2, 6, 18)
    assert got.p == round(want["p"], 4)
    assert main(["ladder", "show", "--results", str(res), "--no-figures", "--include-stale"]) == 0
    assert "38.9 [20-61] p@8 55.5 m0" in capsys.readouterr().out


def test_reference_tags_are_read():
    row = {"tag": "r20/jac-qwen3coder/sft/gen", "tasks": 18, "pass1": 11, "pass1_pct": 61.11}
    assert report.cell_of(row) == ("jac-qwen3coder", "20", "sft", "gen")
    assert report.cell_of({"tag": "corr/jac/r20/sft"}) is None


# -------------------------------------------------------------------------------------------
# running (papermill)
# -------------------------------------------------------------------------------------------


def test_a_failing_cell_is_recorded_and_the_ladder_goes_on(data_dir, tmp_path):
    nb = nbformat.v4.new_notebook()
    params = nbformat.v4.new_code_cell('cell_json = ""')  # the one parameter the ladder hands
    params.metadata["tags"] = ["parameters"]
    nb.cells = [
        params,
        nbformat.v4.new_code_cell(
            'import json\nraise ValueError("boom " + json.loads(cell_json)["condition"])'
        ),
    ]
    nb.metadata["kernelspec"] = {"name": "python3", "language": "python", "display_name": "py3"}
    path = tmp_path / "fail.ipynb"
    nbformat.write(nb, path)
    cfg = ladder.LadderConfig(
        rungs=("1",),
        models=("jac-tiny",),
        conditions=("base", "sft"),
        data_dir=data_dir,
        results_dir=str(tmp_path / "results"),
        notebook=str(path),
    )
    lines: list[str] = []
    statuses = ladder.run(cfg, log=lines.append, progress=False)
    assert [s["status"] for s in statuses] == ["failed", "failed"]
    for s in statuses:  # each cell says where its log is when it starts
        log = Path(cfg.results_dir) / "cells" / s["key"] / "log.txt"
        assert any(ln.endswith(f"): running (log: {log})") for ln in lines), lines
    assert statuses[0]["error"] == "ValueError: boom base"
    assert statuses[1]["error"] == "ValueError: boom sft"
    for s in statuses:
        d = Path(cfg.results_dir) / "cells" / s["key"]
        st = json.loads((d / "status.json").read_text())
        assert st["status"] == "failed" and st["error"].startswith("ValueError")
        assert (d / "fail.ipynb").is_file() and (d / "log.txt").is_file()
    assert not cfg.results_file.exists()


def _procs_mentioning(text: str) -> list[int]:
    pids = []
    for p in Path("/proc").iterdir():
        if p.name.isdigit():
            try:
                if text.encode() in (p / "cmdline").read_bytes():
                    pids.append(int(p.name))
            except OSError:
                pass
    return pids


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="uses /proc")
def test_sigkill_mid_cell_then_resume(tiny, data_dir, tmp_path, capsys):
    """Kill the ladder with SIGKILL while its second cell runs; the papermill child dies with it;
    a resumed run skips the finished cell, reruns the killed one, and the results file holds
    exactly one row per (cell, kind); show reproduces the numbers from those rows."""
    res = tmp_path / "results"
    argv = tiny_ladder_args(tmp_path, "1,3", model=tiny, data=data_dir)
    cfg = config_from_args(_args("run", *argv))
    first, second = ladder.plan(cfg)
    status2 = ladder.cell_dir(cfg, second) / "status.json"
    with open(tmp_path / "ladder.log", "w") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "jacrl.cli", "ladder", "run", *argv],
            stdout=log,
            stderr=subprocess.STDOUT,
            cwd=ROOT,
        )
        deadline = time.time() + 600
        while time.time() < deadline and proc.poll() is None:
            if ladder.read_status(status2).get("status") == "running":
                break
            time.sleep(0.5)
        while time.time() < deadline and proc.poll() is None:  # until its papermill runs
            if _procs_mentioning(second.key):
                break
            time.sleep(0.2)
        assert proc.poll() is None and _procs_mentioning(second.key), (
            tmp_path / "ladder.log"
        ).read_text()
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
    present = results.rows_by_key(cfg.results_file)
    assert results.is_done(present, first.key) and not results.is_done(present, second.key)
    assert ladder.read_status(status2)["status"] == "running"  # killed mid-way
    assert ladder.cell_state(status2.parent) == "interrupted"  # nobody holds it any more
    line = next(ln for ln in ladder.plan_text(cfg).splitlines() if ln.startswith(second.name))
    assert line.split()[2] == second.key and line.split()[3] == "interrupted"
    assert second.name in ladder.show(res, None)[0].split("interrupted")[-1]
    for _ in range(40):  # the papermill child gets SIGKILL with its parent (PR_SET_PDEATHSIG)
        if not _procs_mentioning(second.key):
            break
        time.sleep(0.5)
    assert not _procs_mentioning(second.key)

    assert main(["ladder", "run", *argv]) == 0
    out = capsys.readouterr().out
    assert f"{first.name} ({first.key}): rows exist, skipped" in out
    assert f"{second.name} ({second.key}): done" in out
    rows = report.load_rows(cfg.results_file)
    pairs = [(r["cell_key"], r["kind"]) for r in rows]
    assert sorted(pairs) == sorted({(c.key, k) for c in (first, second) for k in ("gen", "mem")})
    assert ladder.read_status(status2)["status"] == "done"
    assert (ladder.cell_dir(cfg, second) / "30_training.ipynb").is_file()

    assert main(["ladder", "run", *argv]) == 0  # a third run does nothing
    assert "0 run, 2 skipped" in capsys.readouterr().out
    assert len(report.load_rows(cfg.results_file)) == 4

    assert main(["ladder", "show", "--results", str(res), "--figures", str(tmp_path / "fig")]) == 0
    out = capsys.readouterr().out
    for r in rows:
        assert r["tasks"] == (2 if r["kind"] == "gen" else int(r["rung"]))
        if r["kind"] == "gen":
            lo, hi = wilson(r["pass1"], r["tasks"])
            assert f"{100 * r['pass1'] / r['tasks']:.1f} [{100 * lo:.0f}-{100 * hi:.0f}]" in out
            assert f"p@2 {r['pass_at_k']['2']:.1f}" in out
    assert (tmp_path / "fig" / "ladder.png").is_file()


def test_readme_demo_table_is_what_ladder_show_prints():
    """The demo table (docs/results.md) is what `jacrl ladder show` prints on the committed rows."""
    import re

    readme = (ROOT / "docs" / "results.md").read_text()
    rows = re.findall(r"^\| (jac-tiny) \| (\w+) \| (.+?) \| (.+?) \|$", readme, re.M)
    assert [r[1] for r in rows] == list(ladder.demo_config().conditions)
    table, _ = ladder.show(ROOT / "results", None)
    lines = table.splitlines()
    for _model, cond, r1, r3 in rows:
        line = next(ln for ln in lines if re.search(rf"\b{cond}\b", ln) and "p@" in ln)
        assert r1 in line and r3 in line, (cond, line)


def test_two_concurrent_runs_split_the_cells(tiny, data_dir, tmp_path):
    """Two `ladder run` processes started together on the same two-cell plan: each cell is run
    exactly once (the other process finds it held and moves on), one row per evaluation."""
    res = tmp_path / "results"
    argv = tiny_ladder_args(tmp_path, "1,3", model=tiny, n=0, data=data_dir)
    logs = [tmp_path / f"run{i}.log" for i in (1, 2)]
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "jacrl.cli", "ladder", "run", *argv],
            stdout=open(log, "w"),
            stderr=subprocess.STDOUT,
            cwd=ROOT,
        )
        for log in logs
    ]
    for p in procs:
        assert p.wait(timeout=900) == 0, [log.read_text()[-2000:] for log in logs]
    out = "".join(log.read_text() for log in logs)
    import re

    for name in ("r1/jac-tiny/base", "r3/jac-tiny/base"):  # started once in all, and finished
        assert len(re.findall(rf"{name} \([^)]+\): running", out)) == 1, out
        assert len(re.findall(rf"{name} \([^)]+\): done", out)) == 1, out
    assert out.count("being run by another process") + out.count("rows exist, skipped") == 2
    rows = report.load_rows(res / ladder.RESULTS_FILE)
    pairs = sorted((r["cell_key"], r["kind"]) for r in rows)
    assert len(pairs) == 4 and len(set(pairs)) == 4 and len({k for k, _ in pairs}) == 2


def test_train_seeds_plan_replicates_of_every_trained_cell(data_dir):
    """--train-seeds 0,1,2 (or JACRL_LADDER_TRAIN_SEEDS): base once, every trained condition
    once per seed, each its own key, every stage seeded with it and the evaluation with --seed."""
    argv = [
        "plan",
        "--rungs",
        "1",
        "--conditions",
        "base,sft,sft_grpo",
        "--iters",
        "4",
        "--data-dir",
        data_dir,
        "--train-seeds",
        "0,1,2",
    ]
    cfg = config_from_args(_args(*argv))
    assert cfg.train_seeds == (0, 1, 2)
    assert config_from_args(_args(*argv[:-2]), {"JACRL_LADDER_TRAIN_SEEDS": "0,1,2"}) == cfg
    cells = ladder.plan(cfg)
    assert [c.name for c in cells] == [
        "r1/jac-tiny/base",
        "r1/jac-tiny/sft",
        "r1/jac-tiny/sft/s1",
        "r1/jac-tiny/sft/s2",
        "r1/jac-tiny/sft_grpo",
        "r1/jac-tiny/sft_grpo/s1",
        "r1/jac-tiny/sft_grpo/s2",
    ]
    assert len({c.key for c in cells}) == len(cells)
    for c in cells[1:]:
        assert all(st.seed == c.train_seed for st in c.stages.values())
        assert c.key_parts["seed"] == 0 and c.cfg.seed == 0  # the evaluation's seed
    one = ladder.plan(dataclasses.replace(cfg, train_seeds=()))  # seed 0's cells as before
    assert [c.key for c in one] == [c.key for c in cells if c.train_seed == 0]
    with pytest.raises(ValueError, match="each seed once"):
        ladder.validate(dataclasses.replace(cfg, train_seeds=(1, 1)))
