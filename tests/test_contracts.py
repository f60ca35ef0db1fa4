"""Contracts every number rests on, each stated as one test that fails when a small, plausible bug
breaks it (each was shown to fail with that bug put in by hand; docs/mutation.md): exact match,
the default formula's value, which fenced block is the body, a leaky split, the advantages the loss
receives, what keys a ladder cell, `append`'s fsync and the bootstrap's task draws."""

from __future__ import annotations

import dataclasses
import json
import os

import numpy as np
import pytest
from conftest import ROOT

from jacrl import jsonl
from jacrl.drivers import Unit
from jacrl.executor import Verdict
from jacrl.extract import extract_body
from jacrl.reward import Hole, exact_match, score

# -- the reward ------------------------------------------------------------------------------


def test_whitespace_inside_a_line_is_not_an_exact_match():
    assert not exact_match("[1,2]", "[1, 2]")
    assert not exact_match("a  b", "a b")
    assert not exact_match("a\n  b", "a\nb")  # indentation of a later line is output too
    assert not exact_match("a\n\nb", "a\nb")
    assert exact_match("\n  [1, 2]\n\n", "[1, 2]")  # only the whole output's edges are stripped
    hole = _hole(expected="[1, 2]")
    assert score("return [1,2];", _ran("[1,2]\n"), hole).tier == "runs"


def _hole(expected: str, baseline: str | None = None, gold: str = "return x;") -> Hole:
    unit = Unit("def", "f", "def f(x: int) -> int", (), "", "")
    return Hole(
        id="t",
        template="def f(x: int) -> int {\n    #HOLE\n}\n",
        gold=gold,
        unit=unit,
        expected_output=expected,
        timeout=5.0,
        baseline_output=baseline,
    )


def _ran(stdout: str) -> Verdict:
    return Verdict(
        compiled=True,
        ran=True,
        exit_code=0,
        stdout=stdout,
        stderr="",
        timed_out=False,
        seconds=0.1,
        status="ok",
    )


def test_default_formula_value_for_a_hand_built_case():
    """dependent: compiled, whatever its exit, = 0.25 sim + 0.55 changed ('ran' is the job's own,
    forgeable claim: docs/threat-model.md); neither 0.10 sim."""
    # two of the three lines that depend on the hole (b, c, d; `a` is the baseline's) match
    hole = _hole("a\nb\nc\nd", baseline="a\nX\nY\nZ", gold="return 1;")
    same = score("return 1;", _ran("a\nb\nQ\nd\n"), hole, "dependent")
    assert (same.tier, same.sim) == ("runs", 1.0)
    assert same.score == round(0.25 * 1.0 + 0.55 * 2 / 3, 4) == 0.6167
    # "return 2;" vs "return 1;": 8 of 9 characters match, ratio 2 * 8 / 18
    near = score("return 2;", _ran("a\nb\nQ\nd\n"), hole, "dependent")
    assert near.sim == pytest.approx(16 / 18)
    assert near.score == round(0.25 * 16 / 18 + 0.55 * 2 / 3, 4) == 0.5889
    failed = dataclasses.replace(_ran(""), ran=False, exit_code=1, status="runtime_error")
    assert score("return 1;", failed, hole, "dependent").score == 0.25
    # what it printed counts, not how it exited
    crashed_late = dataclasses.replace(failed, stdout="a\nb\nQ\nd\n")
    assert score("return 1;", crashed_late, hole, "dependent").score == same.score
    neither = dataclasses.replace(failed, compiled=False, status="compile_error")
    assert score("return 1;", neither, hole, "dependent").score == 0.10
    assert score("return 1;", _ran("a\nb\nc\nd"), hole, "dependent").score == 1.0


# -- extraction ------------------------------------------------------------------------------


def test_first_fenced_block_is_the_body_when_a_fenced_example_follows():
    unit = Unit("def", "double", "def double(x: int) -> int", (), "", "")
    completion = (
        "Here is the body:\n```jac\nreturn x * 2;\n```\nUsage:\n```jac\nprint(double(6));\n```\n"
    )
    assert extract_body(completion, unit) == "return x * 2;"
    untagged = completion.replace("```jac", "```")
    assert extract_body(untagged, unit) == "return x * 2;"


# -- splits ----------------------------------------------------------------------------------


def _committed_splits():
    from jacrl.splits import Splits, load_split

    parts = {n: load_split(n, ROOT / "data") for n in ("holdout", "trainpool", "valid")}
    return Splits(**parts, dropped=[], holdout_sources=[])


def test_check_splits_reports_a_leaky_split():
    from jacrl.splits import check_splits
    from jacrl.tasks import meta

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


# -- the ladder's keys -----------------------------------------------------------------------

EVAL_PERTURBED = {
    "gen_limit": 3,
    "mem_limit": 1,
    "n": 9,
    "k": (1, 2),
    "temperature": 0.5,
    "max_tokens": 100,
    "budget_factor": 1.5,
}  # n 9: the default k (up to 8) still fits


def test_every_eval_and_grpo_knob_a_cells_rows_depend_on_changes_its_key(data_dir):
    from jacrl.config import EvalConfig, GRPOConfig
    from jacrl.ladder.plan import make_cell
    from jacrl.ladder.settings import LadderConfig

    base = LadderConfig(data_dir=data_dir, rungs=("1",), sft_iters=4, grpo_iters=4)
    # the evaluation knobs rows depend on: every EvalConfig field the ladder sets but the seed
    # (`seed`: every row's, tested by the ladder) and the decode batch (throughput only)
    shared = (
        {f.name for f in dataclasses.fields(EvalConfig)}
        & {f.name for f in dataclasses.fields(LadderConfig)}
    ) - {"seed", "batch_size"}
    assert shared | {"gen_limit", "mem_limit"} == set(EVAL_PERTURBED)

    def key(cfg, **kw):
        return make_cell(cfg, "1", condition="sft_grpo", env={}, log=lambda _: None, **kw).key

    k0 = key(base)
    for name, value in EVAL_PERTURBED.items():
        assert getattr(base, name) != value, name
        assert key(dataclasses.replace(base, **{name: value})) != k0, name
    assert key(dataclasses.replace(base, batch_size=base.batch_size + 1)) == k0
    # every GRPO knob (all of GRPOConfig) that a cell trains with
    defaults = GRPOConfig()
    for f in dataclasses.fields(GRPOConfig):
        if f.name in ("iters", "seed", "reward_formula"):  # the ladder's own knobs set them
            continue
        value = getattr(defaults, f.name)
        other = _other_value(f.name, value)
        cell = make_cell(
            dataclasses.replace(base, sets={"grpo": {f.name: other}}),
            "1",
            condition="sft_grpo",
            env={},
            log=lambda _: None,
        )
        assert getattr(cell.stages["grpo"], f.name) == other and cell.key != k0, f.name
    assert key(dataclasses.replace(base, grpo_iters=5)) != k0
    assert key(dataclasses.replace(base, reward_formula="additive")) != k0


def _other_value(name: str, value):
    choices = {"advantage": "std", "loss_type": "dr_grpo", "lora_keys": "self_attn.q_proj"}
    if name in choices:
        return choices[name]
    if isinstance(value, bool):
        return not value
    if isinstance(value, tuple):
        return value[:-1]
    if isinstance(value, float):
        return round(value / 2, 9) if value else 0.25
    return value + 1 if value >= 0 else 2


# -- GRPO: what the loss receives ------------------------------------------------------------


def test_the_loss_receives_group_advantages(tiny, harness_tasks, tmp_path, monkeypatch):
    """Spy on the seam into mlx-lm-lora (the loss function our trainer hands it), not the log."""
    import importlib

    import jacrl.train as tr
    from jacrl.config import GRPOConfig
    from jacrl.train.grpo_compat import group_advantages

    grpo = importlib.import_module("jacrl.train.grpo")  # the module (jacrl.train.grpo: a function)
    received = []
    real_loss = grpo.shared_prompt_loss

    def spy(*args, **kw):
        received.append((np.array(kw["advantages"]).tolist(), list(kw["batch_indices"])))
        return real_loss(*args, **kw)

    monkeypatch.setattr(grpo, "shared_prompt_loss", spy)
    cfg = GRPOConfig(
        iters=1,
        learning_rate=1e-4,
        beta=0.0,
        group_size=4,
        batch_size=1,
        max_completion_length=24,
        lora_layers=1,
        temperature=1.0,
        min_group_span=0.0,
        seed=3,
    )
    art = tr.grpo(tiny, harness_tasks[:1], None, cfg, tmp_path)
    assert received, "the loss was never called"
    rollouts = [json.loads(x) for x in (art.path / "rollouts.jsonl").read_text().splitlines()]
    rewards = [r["reward"] for r in rollouts]
    adv, indices = received[0]
    groups = [[i for i, x in enumerate(indices) if x == u] for u in sorted(set(indices))]
    want, _ = group_advantages(rewards, groups, "centered", 0.0)
    assert adv == pytest.approx(want.tolist(), abs=1e-6)
    assert len(set(rewards)) > 1 and any(abs(a) > 1e-6 for a in adv)  # not zero by chance


# -- JSONL -----------------------------------------------------------------------------------


def test_append_fsyncs_the_line_it_wrote(tmp_path, monkeypatch):
    p = tmp_path / "f.jsonl"
    synced = []
    real = os.fsync

    def fsync(fd):
        synced.append(os.fstat(fd).st_size)  # what was on the file when it was synced
        real(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    jsonl.append(p, {"a": 1})
    jsonl.append(p, {"b": 2})
    assert synced == [len('{"a": 1}\n'), len('{"a": 1}\n{"b": 2}\n')]


# -- the seeds' bootstrap --------------------------------------------------------------------


def test_bootstrap_draws_tasks_as_well_as_seeds():
    from jacrl.report.seeds import bootstrap_means

    rng = np.random.default_rng(0)
    x = rng.integers(0, 2, size=(1, 40)).astype(float)  # one seed: only the tasks can vary
    means = bootstrap_means(x, resamples=4000, rng_seed=1)
    # a task bootstrap's spread: the tasks' sd / sqrt(T)
    assert means.std() == pytest.approx(x.std() / np.sqrt(40), rel=0.1)
    assert means.mean() == pytest.approx(x.mean(), abs=0.01)
    # and seeds vary on their own: identical tasks, different seeds
    y = np.repeat(rng.random((5, 1)), 30, axis=1)
    assert bootstrap_means(y, resamples=4000, rng_seed=1).std() == pytest.approx(
        y[:, 0].std() / np.sqrt(5), rel=0.1
    )


# -- the reward's edges (mutants of jacrl.reward that survived) ------------------------------


def test_line_match_counts_lines_by_position():
    from jacrl.reward import line_match

    assert line_match("a 1\nQ\nc\n", "a 1\nb\nc") == pytest.approx(2 / 3)
    assert line_match("a", "a\nb") == 0.5


def test_nothing_run_scores_nothing_and_says_why():
    from jacrl.reward import Scored

    hole = _hole("1")
    assert score("# TODO", None, hole) == Scored(
        "t", 0.0, "empty", "# TODO", 0.0, 0.0, None, "no code"
    )
    assert score("return 1;", None, hole) == Scored("t", 0.0, "none", "return 1;", 0.0, 0.0, None)


def test_one_answer_per_completion_or_one_for_all():
    from jacrl.reward import _pair

    assert _pair(["x", "y"], ["a"]) == ["a", "a"]
    with pytest.raises(
        ValueError,
        match=r"^2 completions but 3 answers: expected one answer per "
        r"completion \(or a single answer for all\)$",
    ):
        _pair(["x", "y"], ["a", "b", "c"])


def test_a_body_of_exactly_max_body_characters_is_run(harness_tasks, executor):
    from jacrl.reward import MAX_BODY, score_completions

    task = harness_tasks[0]
    unit = Hole.from_answer(task["answer"]).unit
    pad = "# " + "x" * (MAX_BODY - len("# \nreturn 1;")) + "\nreturn 1;"
    assert len(extract_body(f"```jac\n{pad}\n```", unit)) == MAX_BODY
    (at,) = score_completions([f"```jac\n{pad}\n```"], [task["answer"]], executor=executor)
    (over,) = score_completions([f"```jac\n#{pad}\n```"], [task["answer"]], executor=executor)
    assert at.verdict is not None and at.tier != "none"
    assert over.verdict is None and over.tier == "none"


def test_the_formula_asked_for_is_the_formula_used(harness_tasks):
    from jacrl.reward import jac_behavioral, reward_function

    task = harness_tasks[0]
    wrong = ["```jac\nreturn 12345;\n```"]  # runs or not, never exact: formulas disagree
    dep = jac_behavioral([""], wrong, [task["answer"]], formula="dependent")
    add = jac_behavioral([""], wrong, [task["answer"]], formula="additive")
    assert dep != add
    assert reward_function("additive")([""], wrong, [task["answer"]]) == add
    assert reward_function("dependent")([""], wrong, [task["answer"]]) == dep


def test_the_unit_is_found_by_name_then_by_where_it_sits():
    """Several units named like the hole's: the one in the hole's archetypes, else a top-level
    one, else one elsewhere; the first of equals."""
    in_a = Unit("def", "f", "def f() -> int", ("A",), "", "")
    echoed = "```jac\ndef g() -> int { return 0; }\ndef f() -> int { return 1; }\n```"
    assert extract_body(echoed, in_a).strip() == "return 1;"  # top level when no A.f is given
    elsewhere = (
        "```jac\nobj B {\n    def f() -> int { return 2; }\n}\ndef f() -> int { return 1; }\n```"
    )
    assert extract_body(elsewhere, in_a).strip() == "return 1;"  # beats another archetype's
    twins = "```jac\ndef f() -> int { return 1; }\ndef f() -> int { return 2; }\n```"
    top = Unit("def", "f", "def f() -> int", (), "", "")
    assert extract_body(twins, top).strip() == "return 1;"


def test_thinking_closed_at_the_very_start_is_dropped():
    from jacrl.extract import answer_text

    assert answer_text("</think>return 1;") == "return 1;"  # its <think> was in the prompt
