"""GRPO (jacrl.train.grpo, grpo_loop, grpo_rollouts, grpo_loss): our loss equals mlx-lm-lora's
public `grpo_loss` (a second implementation: same loss, gradients and KL, with and without a
KL reference, each prompt run once per group or as one sequence per rollout); what each rollout
row and step record says; a draw of real rollouts; the prompt order; dynamic sampling (DAPO: a
step trains on groups whose rewards differ, drawn from more prompts than its batch, at most
max_draws draws), by hand and as real GRPO on jac-tiny with the sandboxed reward; the prompts
GRPO rolls out on, which are exactly the ones evaluation samples with
(`jacrl.prompts.prompt_ids`); the advantages the loss receives (each reward less its group's
mean, by hand); validation records; and that GRPO touches no private name of mlx-lm-lora."""

from __future__ import annotations

import importlib
import json
import time
from pathlib import Path
from types import SimpleNamespace

import mlx.core as mx
import mlx.nn as nn
import numpy as np
import pytest
from mlx.utils import tree_flatten, tree_map, tree_unflatten

from jacrl import prompts
from jacrl.config import GRPOConfig, configure
from jacrl.generate import Request, decode
from jacrl.ladder.cell import training_record
from jacrl.models import registry as models
from jacrl.models.registry import resolve
from jacrl.report.graded import NO_SIGNAL, signal_mark
from jacrl.ruler.reward import Scored
from jacrl.tasks import splits
from jacrl.tasks.record import prompt_answer, task_id
from jacrl.train import grpo, grpo_loop, grpo_loss
from jacrl.train.grpo_rollouts import (
    Group,
    Rollouts,
    StepLog,
    draw,
    fill_batch,
    has_signal,
    prompt_batches,
)
from jacrl.train.mlx_compat import MetricsLog, lora_model
from jacrl.train.reference import frozen_view

grpo_mod = importlib.import_module("jacrl.train.grpo")  # the module (jacrl.train.grpo: a function)

ROOT = Path(__file__).resolve().parent.parent

# -- the loss: equal to mlx-lm-lora's, each prompt once per group or once per rollout -------------


@pytest.fixture(scope="module")
def setup(tiny, tmp_path_factory):
    policy, tok, _ = lora_model(
        resolve(tiny),
        GRPOConfig(lora_layers=-1, grad_checkpoint=False),
        tmp_path_factory.mktemp("loss"),
    )
    assert grpo_loss.shares_prompt(policy)
    ref = frozen_view(policy)
    mx.random.seed(1)
    policy.update(
        tree_map(lambda a: a + 0.02 * mx.random.normal(a.shape), policy.trainable_parameters())
    )
    # two prompts of different lengths, groups of 3 with unequal completions (one of 1 token)
    heads = [
        tok.encode("def add(a: int, b: int) -> int {\n    # TODO\n}"),
        tok.encode("walker Count { has n: int = 0; can go with `root entry { # TODO } }"),
    ]
    texts = [
        "return a + b;\n}",
        "x = 1;",
        "}",
        "visit [-->];",
        "self.n += 1;\n visit [-->];",
        "report self.n;",
    ]
    completions = [mx.array(tok.encode(t)) for t in texts]
    completions[2] = completions[2][:1]
    return policy, ref, heads, completions


@pytest.mark.parametrize(
    "beta, loss_type, shared",
    [
        (0.0, "grpo", True),
        (0.05, "grpo", True),
        (0.05, "dr_grpo", True),
        (0.05, "bnpo", True),
        (0.05, "grpo", False),
    ],
)
def test_our_loss_equals_mlx_lm_loras(setup, beta, loss_type, shared, monkeypatch):
    from mlx_lm_lora.trainer.grpo_trainer import grpo_loss as theirs

    policy, ref, heads, completions = setup
    if not shared:  # a model that makes its own caches: prompt + completion per rollout
        monkeypatch.setattr(policy, "make_cache", lambda: None, raising=False)
    assert grpo_loss.shares_prompt(policy) == shared
    indices = [0, 0, 0, 1, 1, 1]
    adv = mx.array([0.6, -0.2, -0.4, 0.3, 0.3, -0.6])

    def mine(model, ref_model):
        return grpo_loss.grpo_loss(
            model,
            ref_model,
            heads,
            completions,
            indices,
            adv,
            beta=beta,
            epsilon=0.2,
            max_tokens=16,
            loss_type=loss_type,
        )

    def lib(model, ref_model):
        return theirs(
            model,
            ref_model,
            batch=(heads, [[1], [1]], ["p0", "p1"], ["a0", "a1"], None),
            completions=completions,
            completion_texts=["t"] * 6,
            batch_indices=indices,
            advantages=adv,
            beta=beta,
            epsilon=0.2,
            max_tokens=16,
            grpo_loss_type=loss_type,
        )

    results = {}
    for name, fn in (("theirs", lib), ("ours", mine)):
        (loss, tokens, metrics), grads = nn.value_and_grad(policy, fn)(policy, ref)
        results[name] = loss.item(), tokens.item(), metrics, dict(tree_flatten(grads))
    (l0, n0, m0, g0), (l1, n1, m1, g1) = results["theirs"], results["ours"]
    assert n0 == n1 == sum(c.size for c in completions)
    assert l1 == pytest.approx(l0, rel=1e-4, abs=1e-6) and l0 != 0.0
    for k in ("kl", "kl_clip_ratio", "clip_ratio_total"):
        assert m1[k].item() == pytest.approx(m0[k].item(), rel=1e-3, abs=1e-6), k
    assert (m0["kl"].item() > 0) == (beta > 0)
    assert set(g0) == set(g1)
    scale = max(mx.abs(v).max().item() for v in g0.values())
    assert scale > 0
    worst = max(mx.abs(g0[k] - g1[k]).max().item() for k in g0)
    assert worst <= 1e-3 * scale, (worst, scale)


def test_an_unknown_loss_type_is_refused(setup):
    policy, ref, heads, completions = setup
    with pytest.raises(ValueError, match="unknown GRPO loss 'ppo'"):
        grpo_loss.grpo_loss(
            policy,
            None,
            heads,
            completions[:1],
            [0],
            mx.array([1.0]),
            beta=0.0,
            epsilon=0.2,
            max_tokens=4,
            loss_type="ppo",
        )


def test_checkpointing_is_set_per_training_and_falls_back(tiny, tmp_path):
    """A model with checkpointing on turns it on for the class; the next model built without it
    turns it off again (it used to stay on for the process), and a checkpointed model runs each
    rollout as one sequence (the shared prompt's gradient cannot pass a checkpoint)."""
    on, _, _ = lora_model(resolve(tiny), GRPOConfig(lora_layers=1, grad_checkpoint=True), tmp_path)
    assert not grpo_loss.shares_prompt(on)
    off, _, _ = lora_model(
        resolve(tiny), GRPOConfig(lora_layers=1, grad_checkpoint=False), tmp_path
    )
    assert grpo_loss.shares_prompt(off) and grpo_loss.shares_prompt(on)  # one class: off for both


def test_a_groups_width_is_a_bucket_and_its_logps_are_the_models(setup):
    """group_logps: W is the longest completion rounded up to BUCKET, the mask marks each
    completion's own tokens, and one-token completions get the full model's log-softmax at the
    prompt's last position (computed here with mlx's own logsumexp)."""
    policy, _, heads, _ = setup
    logps, mask = grpo_loss.group_logps(policy, heads[0], [mx.array([5]), mx.array([9, 4])])
    assert logps.shape == (2, grpo_loss.BUCKET)
    assert mask[:, :3].tolist() == [[True, False, False], [True, True, False]]
    last = policy(mx.array(heads[0])[None])[0, -1].astype(mx.float32)
    want = last - mx.logsumexp(last)
    assert logps[0, 0].item() == pytest.approx(want[5].item(), abs=1e-4)
    assert logps[1, 0].item() == pytest.approx(want[9].item(), abs=1e-4)
    assert logps[0, 1:].tolist() == [0.0] * (grpo_loss.BUCKET - 1)


def _library_uses(path: Path) -> tuple[set[str], list[str], list[str]]:
    """In one source file: the names bound to mlx-lm-lora imports, the private (_name) names it
    imports from mlx-lm-lora, and the attributes it assigns (or setattr's) on those names."""
    import ast

    tree = ast.parse(path.read_text())
    bound, private, assigned = set(), [], []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("mlx_lm_lora"):
            for a in node.names:
                bound.add(a.asname or a.name)
                private += [a.name] if a.name.startswith("_") else []
        elif isinstance(node, ast.Import):
            bound |= {a.asname or a.name for a in node.names if a.name.startswith("mlx_lm_lora")}
    for node in ast.walk(tree):
        targets = []
        if isinstance(node, ast.Assign | ast.AugAssign | ast.AnnAssign):
            for t in getattr(node, "targets", None) or [node.target]:
                targets += t.elts if isinstance(t, ast.Tuple) else [t]
        elif isinstance(node, ast.Call) and getattr(node.func, "id", "") == "setattr":
            targets = [ast.Attribute(value=node.args[0], attr="?")] if node.args else []
        for t in targets:
            if isinstance(t, ast.Attribute) and getattr(t.value, "id", None) in bound:
                assigned.append(f"{t.value.id}.{t.attr}")
    return bound, private, assigned


def test_grpo_touches_no_private_name_of_mlx_lm_lora(tmp_path):
    """GRPO's modules import nothing private from mlx-lm-lora and assign into none of its
    modules (the monkey-patching of its trainer GRPO once did); no jacrl module imports one of
    its private names. The check itself sees such a patch (control)."""
    grpo_files = sorted((ROOT / "jacrl" / "train").glob("grpo*.py"))
    assert len(grpo_files) >= 4
    for path in (ROOT / "jacrl").rglob("*.py"):
        _, private, assigned = _library_uses(path)
        assert private == [], path
        if path in grpo_files:
            assert assigned == [], path
    patch = tmp_path / "patch_probe.py"
    patch.write_text(
        "from mlx_lm_lora.trainer import grpo_trainer as gt\n"
        "from mlx_lm_lora.trainer.grpo_trainer import _grpo_objective\n"
        "gt.grpo_loss, gt.tqdm = 1, 2\nsetattr(gt, 'x', 3)\n"
    )
    _, private, assigned = _library_uses(patch)
    assert private == ["_grpo_objective"] and assigned == ["gt.grpo_loss", "gt.tqdm", "gt.?"]


# -- the rollout log, a draw, the prompt order --------------------------------------------------


def _scored(task_id: str, score: float, tier: str = "runs") -> Scored:
    return Scored(task_id, score, tier, f"body {task_id}", 0.5, 0.5, None, f"why {task_id}")


def _group(name: str, rewards, tokens=None) -> Group:
    tokens = tokens or [(7, 8)] * len(rewards)
    return Group(
        task=name,
        ids=[tuple(t) for t in tokens],
        texts=[f"{name} {i}" for i in range(len(rewards))],
        scored=[_scored(name, r, "exact" if r == 1.0 else "runs") for r in rewards],
    )


def test_a_steps_rollout_rows_and_record(tmp_path):
    """StepLog.step: every rollout row names its step, reward, advantage (rounded), truncation
    (max_tokens drawn without an end token), tokens (the end token not counted) and whether it
    was discarded (discarded groups too, group None, advantage 0); the step record counts the
    draw exactly, with the timings it is given."""
    metrics = MetricsLog(tmp_path / "metrics.jsonl", "grpo")
    log = StepLog(tmp_path / "rollouts.jsonl", metrics.step, max_tokens=3, eos={0})
    kept = [
        _group("p0", [1.0, 0.2], tokens=[[5, 6, 7], [5, 0]]),  # truncated, then ended by EOS
        _group("p1", [0.5, 0.5], tokens=[[5, 6, 0], [5]]),  # 3 tokens ending in EOS: whole
    ]
    rec = log.step(
        1,
        kept,
        [_group("p2", [0.3, 0.3])],
        [0.4, -0.4000004, 0.0, 0.0],
        skipped=0.5,
        draws=2,
        advantage="centered",
        generation_s=1.2346,
        reward_s=0.75,
        update_s=0.5,
    )
    rows = [json.loads(ln) for ln in (tmp_path / "rollouts.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows] == [1] * 6
    assert [r["group"] for r in rows] == [0, 0, 1, 1, None, None]
    assert [r["reward"] for r in rows] == [1.0, 0.2, 0.5, 0.5, 0.3, 0.3]
    assert [r["advantage"] for r in rows] == [0.4, -0.4, 0.0, 0.0, 0.0, 0.0]
    assert [r["truncated"] for r in rows] == [True, False, False, False, False, False]
    assert [r["tokens"] for r in rows] == [3, 1, 2, 1, 2, 2]
    assert [r["discarded"] for r in rows] == [False] * 4 + [True] * 2
    assert rows[4]["task_id"] == "p2" and rows[4]["completion"] == "p2 0"
    assert rows[0]["body"] == "body p0" and rows[0]["reason"] == "why p0"
    assert rows[0]["tier"] == "exact"
    want = {
        "step": 1,
        "advantage": "centered",
        "generation_s": 1.2346,
        "reward_s": 0.75,
        "update_s": 0.5,
        "reward_mean": 0.55,
        "exact": 1,
        "rollouts": 4,
        "draws": 2,
        "groups_drawn": 3,
        "groups_kept": 1,
        "groups_skipped": 0.6667,
        "groups_trained": 2,
        "signal_frac": 0.5,  # p0's rewards differ, p1's do not
        "tiers": {"exact": 1, "runs": 3},  # the trained rollouts only
        "rollouts_discarded": 2,
        "truncated": 0.25,
    }
    assert rec == want
    assert {
        k: v for k, v in metrics.steps[-1].items() if k not in ("event", "stage", "time")
    } == want


def test_a_draw_decodes_every_prompt_and_scores_its_rollouts(tiny, harness_tasks):
    """draw: one group per task in the order asked, group_size rollouts each; a rollout's ids
    end with an end token or fill the budget, its text is its ids decoded without the end
    token, its Scored is the reward of that text for that task; seeded: the same seed draws
    the same rollouts."""
    policy, tok = models.load(tiny)
    records = [prompt_answer(t) for t in harness_tasks[:2]]
    how = Rollouts(3, 1.0, 0.95, 20, 12, "dependent")
    t0 = time.perf_counter()
    groups, gen_s, reward_s = draw(policy, tok, records, [1, 0], how, seed=5)
    wall = time.perf_counter() - t0
    assert [g.task for g in groups] == [1, 0] and gen_s > 0 and reward_s > 0
    assert gen_s + reward_s <= wall  # the two timings are parts of the call
    eos = set(tok.eos_token_ids)
    for g, t in zip(groups, (harness_tasks[1], harness_tasks[0]), strict=True):
        assert len(g.ids) == len(g.texts) == len(g.scored) == 3
        for ids, text, s in zip(g.ids, g.texts, g.scored, strict=True):
            assert ids[-1] in eos or len(ids) == 12
            body = ids[:-1] if ids[-1] in eos else ids
            assert text == tok.decode(list(body))
            assert s.task_id == task_id(t)
    again, _, _ = draw(policy, tok, records, [1, 0], how, seed=5)
    assert [g.ids for g in again] == [g.ids for g in groups]


def test_a_draw_is_decode_of_its_requests_all_in_one_batch(tiny, harness_tasks):
    """A step's rollouts are `decode`'s of one request per task at the rollout settings (top-p
    and top-k included), every sequence of the step in one batch (batch 0): 2 x 17 = 34
    sequences, more than evaluation's default batch of 32, whose later entries would draw other
    random numbers."""
    policy, tok = models.load(tiny)
    records = [prompt_answer(t) for t in harness_tasks[:2]]
    how = Rollouts(17, 1.0, 0.95, 20, 8, "dependent")
    groups, _, _ = draw(policy, tok, records, [1, 0], how, seed=3)
    reqs = [Request(records[t]["prompt"], 17, 1.0, 8, 0.95, 20) for t in (1, 0)]
    want = decode(policy, tok, reqs, seed=3, batch_size=34)
    assert [g.ids for g in groups] == [[s.ids for s in row] for row in want]
    assert [g.texts for g in groups] == [[s.text for s in row] for row in want]


def test_a_steps_signal_share_keeps_four_places(tmp_path):
    """signal_frac and groups_skipped are shares rounded to 4 places: 1 of 3 groups."""
    metrics = MetricsLog(tmp_path / "metrics.jsonl", "grpo")
    log = StepLog(tmp_path / "rollouts.jsonl", metrics.step, max_tokens=3, eos={0})
    kept = [_group("a", [1.0, 0.2]), _group("b", [0.5, 0.5]), _group("c", [0.3, 0.3])]
    rec = log.step(2, kept, [], [0.4, -0.4, 0, 0, 0, 0], skipped=2 / 3, draws=1)
    assert (rec["groups_kept"], rec["groups_trained"]) == (1, 3)
    assert (rec["signal_frac"], rec["groups_skipped"]) == (0.3333, 0.6667)


def test_prompt_batches_are_seeded_epochs_of_whole_batches():
    """Each epoch is a permutation cut into whole batches (the remainder waits), seeded."""
    it = prompt_batches(5, 2, seed=3)
    epochs = [[next(it) for _ in range(2)] for _ in range(3)]
    for e in epochs:
        flat = [i for b in e for i in b]
        assert len(flat) == len(set(flat)) == 4 and set(flat) <= set(range(5))
    assert len({tuple(map(tuple, e)) for e in epochs}) > 1  # reshuffled
    again = prompt_batches(5, 2, seed=3)
    assert [next(again) for _ in range(6)] == [b for e in epochs for b in e]


def test_a_runs_signal_counts_groups_over_every_step():
    """jacrl.train.grpo.signal: the signal rate is the groups with signal over the groups
    trained, across all steps (not a mean of the steps' shares); a signal step has at least one;
    the tier mix adds the steps' rollouts up; no step, no rate."""
    steps = [
        {"groups_trained": 4, "groups_kept": 1, "tiers": {"none": 6, "compiles": 2}},
        {"groups_trained": 4, "groups_kept": 0, "tiers": {"none": 8}},
        {"groups_trained": 2, "groups_kept": 2, "tiers": {"runs": 1, "none": 3}},
    ]
    got = grpo_mod.signal(steps)
    # 3 of 10 groups; the steps' own shares (0.25, 0, 1) would average 0.4167
    assert got == {
        "signal_rate": 0.3,
        "signal_steps": 2,
        "steps": 3,
        "tier_mix": {"compiles": 2, "none": 17, "runs": 1},
    }
    assert grpo_mod.signal([]) == {
        "signal_rate": None,
        "signal_steps": 0,
        "steps": 0,
        "tier_mix": {},
    }


def test_fill_batch_keeps_groups_with_signal_and_fills_from_the_latest():
    """fill_batch: groups with signal are kept up to `need`, the rest passed over; short at
    the cap, the latest groups drawn fill the batch."""
    draws = iter([[_group("a", [1, 1]), _group("b", [0, 1])], [_group("c", [0.2, 0.9])]])
    kept, passed, n = fill_batch(lambda: next(draws), 2, 0.0, 5)
    assert [g.task for g in kept] == ["b", "c"] and [g.task for g in passed] == ["a"]
    assert n == 2
    draws = iter([[_group("a", [1, 1]), _group("b", [0, 1]), _group("d", [2, 2])]])
    kept, passed, n = fill_batch(lambda: next(draws), 2, 0.0, 1)
    assert [g.task for g in kept] == ["b", "d"] and [g.task for g in passed] == ["a"]
    assert n == 1


# -- dynamic sampling: by hand, as a config knob, on real GRPO runs; the reports -------------------


def _draws(*rewards_per_draw):
    """A draw() handing out hand-made groups (one list of rewards each), draw by draw."""
    it = iter(rewards_per_draw)
    return lambda: [SimpleNamespace(rewards=r) for r in next(it)]


def test_fill_batch_keeps_groups_with_signal_and_caps_the_draws():
    draw = _draws([[0, 0], [0.5, 0.5]], [[0, 1], [0.2, 0.25]], [[1, 0], [0.3, 0.9]])
    kept, passed, draws = fill_batch(draw, 2, 0.1, 5)
    assert draws == 3  # the first two draws held one group with signal: a third was needed
    assert [g.rewards for g in kept] == [[0, 1], [1, 0]]
    # the groups that agreed, the one below the span and the surplus one with signal
    assert [g.rewards for g in passed] == [[0, 0], [0.5, 0.5], [0.2, 0.25], [0.3, 0.9]]
    # a task set whose groups all agree: the cap holds, the latest groups fill the batch
    flat = _draws([[1, 1], [0, 0]], [[0.5, 0.5], [0.2, 0.2]], [[9, 9], [9, 9]])
    kept, passed, draws = fill_batch(flat, 2, 0.1, 2)
    assert draws == 2 and [g.rewards for g in kept] == [[0.5, 0.5], [0.2, 0.2]]
    assert [g.rewards for g in passed] == [[1, 1], [0, 0]]
    assert not has_signal([0.3, 0.3], 0.0) and has_signal([0.3, 0.31], 0.0)


def test_dynamic_sampling_is_a_config_knob(monkeypatch):
    monkeypatch.setenv("JACRL_GRPO_DYNAMIC_SAMPLING", "1")
    monkeypatch.setenv("JACRL_GRPO_MAX_DRAWS", "3")
    cfg = configure(GRPOConfig(), env=__import__("os").environ, prefix="JACRL_GRPO_")
    assert cfg.dynamic_sampling is True and cfg.max_draws == 3
    with pytest.raises(ValueError, match="max_draws"):
        GRPOConfig(max_draws=0)


def _read(path):
    return [json.loads(x) for x in path.read_text().splitlines()]


def _run(tiny, tasks, out_root, **over):
    cfg = GRPOConfig(
        **{
            "iters": 3,
            "learning_rate": 1e-4,
            "beta": 0.04,
            "group_size": 4,
            "batch_size": 1,
            "max_completion_length": 32,
            "lora_layers": 2,
            "steps_per_report": 1,
            "temperature": 1.0,
            "dynamic_sampling": True,
            "max_draws": 4,
            **over,
        }
    )
    art = grpo(tiny, tasks, None, cfg, out_root, condition="dyn")
    steps = [r for r in _read(art.path / "metrics.jsonl") if r["event"] == "step"]
    return cfg, art, steps, _read(art.path / "rollouts.jsonl")


def _span(rows):
    return max(r["reward"] for r in rows) - min(r["reward"] for r in rows)


def test_dynamic_sampling_trains_on_groups_with_signal(tiny, harness_tasks, tmp_path, capfd):
    """Garbage rollouts of the untrained model differ only by their similarity (spans ~0.004 to
    0.012 at 32 tokens): a span of 0.008 keeps some groups and discards others. Each step
    draws max_draws groups together; the group trained on spans >= 0.008 when one did (else all
    spanned less and the last fills the batch), and the discarded rollouts are in rollouts.jsonl,
    marked, with advantage 0. The terminal shows the progress bar; every report is in
    metrics.jsonl."""
    cfg, art, steps, rollouts = _run(tiny, harness_tasks, tmp_path, min_group_span=0.008)
    out = capfd.readouterr()
    assert "grpo: 100%" in out.out + out.err
    train = [r for r in _read(art.path / "metrics.jsonl") if r["event"] == "train"]
    assert [r["iteration"] for r in train] == [1, 2, 3]
    for r, s in zip(train, steps, strict=True):  # one step per report: the report is the step's
        assert r["reward_mean"] == pytest.approx(s["reward_mean"], abs=1e-5)
        assert r["truncated"] == pytest.approx(s["truncated"], abs=1e-4)
        assert r["loss"] == r["train_loss"] and "clip_ratio_total" in r and r["kl"] >= 0

    assert [s["step"] for s in steps] == [1, 2, 3]
    for s in steps:
        mine = [r for r in rollouts if r["step"] == s["step"]]
        used = [r for r in mine if not r["discarded"]]
        dropped = [r for r in mine if r["discarded"]]
        assert len(used) == cfg.group_size and s["rollouts"] == len(used)
        # over-sampled once up front: max_draws batches drawn together every step
        assert s["rollouts_discarded"] == len(dropped) == (cfg.max_draws - 1) * cfg.group_size
        assert s["draws"] == cfg.max_draws and s["groups_drawn"] == s["draws"]
        groups = [dropped[i : i + cfg.group_size] for i in range(0, len(dropped), cfg.group_size)]
        if s["groups_kept"] == 1:  # a group with signal was found: it trained
            assert _span(used) >= cfg.min_group_span
            assert any(r["advantage"] != 0 for r in used)
        else:  # none had signal: the last group drawn fills the batch, advantage 0
            assert all(_span(g) < cfg.min_group_span for g in groups + [used])
            assert all(r["advantage"] == 0 for r in used)
        assert s["groups_skipped"] == pytest.approx(
            1 - s["groups_kept"] / s["groups_drawn"], abs=1e-4
        )
        assert all(r["advantage"] == 0.0 and r["group"] is None for r in dropped)
        assert s["reward_mean"] == pytest.approx(
            sum(r["reward"] for r in used) / len(used), abs=1e-5
        )
    assert any(r["discarded"] for r in rollouts)  # both kinds happened, so both were checked
    assert any(s["groups_kept"] for s in steps)
    summary = art.manifest["summary"]
    assert summary["dynamic_sampling"] is True
    assert summary["rollouts_discarded"] == sum(r["discarded"] for r in rollouts)
    # the run's signal, counted here from the steps' own records: it learned, and says so
    assert summary["signal_steps"] == sum(s["groups_kept"] > 0 for s in steps) > 0
    assert summary["signal_rate"] == round(sum(s["groups_kept"] for s in steps) / len(steps), 4)
    assert summary["adapter_delta"] > 0
    used = [r for r in rollouts if not r["discarded"]]
    assert summary["tier_mix"] == {
        t: sum(r["tier"] == t for r in used) for t in {r["tier"] for r in used}
    }
    assert training_record({"grpo": art})["grpo"]["learned"] is True


def test_dynamic_sampling_draw_cap_holds_when_every_group_agrees(tiny, harness_tasks, tmp_path):
    """One-token rollouts all score the same: no group ever has signal, so every step makes
    exactly max_draws draws, trains on its last one with advantage 0, and ends."""
    cfg, art, steps, rollouts = _run(
        tiny,
        harness_tasks,
        tmp_path,
        iters=2,
        max_draws=3,
        max_completion_length=1,
        min_group_span=0.1,
    )
    assert len({r["reward"] for r in rollouts}) == 1  # the premise: every rollout agrees
    assert [s["draws"] for s in steps] == [3, 3]
    assert all(s["groups_kept"] == 0 and s["groups_skipped"] == 1.0 for s in steps)
    assert len(rollouts) == 2 * 3 * cfg.group_size
    assert sum(r["discarded"] for r in rollouts) == 2 * 2 * cfg.group_size
    assert all(r["advantage"] == 0.0 for r in rollouts)
    assert art.manifest["summary"]["draws_mean"] == 3
    # no group ever had signal: every gradient was 0, the adapter never moved, and the run, its
    # cell's training record and `ladder show` say so instead of reporting a method result
    summary = art.manifest["summary"]
    assert (summary["signal_rate"], summary["signal_steps"], summary["steps"]) == (0.0, 0, 2)
    assert summary["adapter_delta"] == 0.0
    record = training_record({"grpo": art})
    assert record["grpo"]["learned"] is False
    assert signal_mark({"training": record}) == NO_SIGNAL


def test_reports_read_what_the_updates_trained_on(tmp_path):
    """jacrl.report.grpo's tables count the rollouts trained on; the discarded ones on request."""
    from jacrl import jsonl
    from jacrl.report import grpo as report

    rows = [
        {
            "step": 1,
            "group": 0,
            "task_id": "t",
            "completion": "",
            "body": "",
            "tier": "exact",
            "reward": 1.0,
            "advantage": 0.5,
            "truncated": False,
            "tokens": 3,
            "discarded": False,
        },
        {
            "step": 1,
            "group": None,
            "task_id": "u",
            "completion": "",
            "body": "",
            "tier": "none",
            "reward": 0.0,
            "advantage": 0.0,
            "truncated": True,
            "tokens": 9,
            "discarded": True,
        },
    ]
    (tmp_path / "rollouts.jsonl").write_text("".join(jsonl.dumps(r) for r in rows))
    assert [r["task_id"] for r in report.rollouts(tmp_path)] == ["t"]
    assert len(report.rollouts(tmp_path, discarded=True)) == 2
    table = report.tier_table(tmp_path)
    assert table.loc[1, "rollouts"] == 1 and table.loc[1, "exact_share"] == 1.0


# -- the prompts GRPO rolls out on are evaluation's ------------------------------------------------


@pytest.fixture(scope="module")
def tokenizer():
    return models.load("jac-tiny")[1]


@pytest.fixture(scope="module")
def pool():
    tasks = splits.load_split("trainpool", ROOT / "data")
    assert tasks
    return tasks


def test_grpo_prompt_tokens_are_evaluations(tokenizer, pool):
    """The update scores rollouts after the prompt evaluation renders (system prompt included);
    rollouts are drawn by evaluation's own decoder, which renders prompts the same way."""
    records = [{**prompt_answer(t), "system": prompts.SYSTEM_PROMPT} for t in pool]
    ids = grpo_mod._prompt_ids(records, tokenizer, GRPOConfig())
    assert ids == [prompts.prompt_ids(tokenizer, t["prompt"]) for t in pool]
    text = tokenizer.decode(ids[0])
    assert prompts.SYSTEM_PROMPT in text and pool[0]["prompt"] in text


def test_a_prompt_longer_than_max_seq_length_is_an_error_naming_it(tokenizer, pool):
    records = [prompt_answer(t) for t in pool[:3]]
    lengths = [len(prompts.prompt_ids(tokenizer, r["prompt"])) for r in records]
    longest = max(range(3), key=lengths.__getitem__)
    with pytest.raises(ValueError, match=f"GRPO prompt {longest} has {lengths[longest]} tokens"):
        grpo_mod._prompt_ids(records, tokenizer, GRPOConfig(max_seq_length=lengths[longest] - 1))


def test_the_loss_receives_group_advantages(tiny, harness_tasks, tmp_path, monkeypatch):
    """Spy on the loss the loop differentiates, not on the log; and validation's record."""
    received = []
    real_loss = grpo_loop.grpo_loss

    def spy(model, ref, heads, completions, indices, advantages, **kw):
        received.append((np.array(advantages).tolist(), list(indices)))
        return real_loss(model, ref, heads, completions, indices, advantages, **kw)

    monkeypatch.setattr(grpo_loop, "grpo_loss", spy)
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
        steps_per_eval=1,
        val_batches=2,
    )
    art = grpo(tiny, harness_tasks[:1], harness_tasks[1:4], cfg, tmp_path)
    assert received, "the loss was never called"
    rollouts = [json.loads(x) for x in (art.path / "rollouts.jsonl").read_text().splitlines()]
    rewards = [r["reward"] for r in rollouts]
    adv, indices = received[0]
    # "centered" by hand: each rollout's reward less its group's mean (no division by sigma)
    want = []
    for i, u in enumerate(indices):
        group = [rewards[j] for j, x in enumerate(indices) if x == u]
        want.append(rewards[i] - sum(group) / len(group))
    assert adv == pytest.approx(want, abs=1e-6)
    assert len(set(rewards)) > 1 and any(abs(a) > 1e-6 for a in adv)  # not zero by chance
    # validation at the first (and last) step: val_batches x batch prompts, group_size each
    (val,) = [r for r in _read(art.path / "metrics.jsonl") if r["event"] == "val"]
    assert val["iteration"] == 1 and val["val_rollouts"] == 2 * 4
    assert 0.0 <= val["val_reward_mean"] <= 1.0


def test_one_update_raises_the_better_rollout_and_lowers_the_worse(setup):
    """grpo_loop._update on one group of two rollouts with advantages +0.5 / -0.5: the policy's
    log-probability of the first rises and of the second falls (the sign of the step, checked
    against the model itself rather than against another implementation)."""
    import mlx.optimizers as optim

    policy, _, heads, completions = setup
    group = Group(0, [tuple(completions[0].tolist()), tuple(completions[1].tolist())], [], [])

    def seq_logps():
        logps, mask = grpo_loss.group_logps(policy, heads[0], [completions[0], completions[1]])
        return [float(x) for x in mx.where(mask, logps, 0).sum(axis=1).tolist()]

    before = seq_logps()
    cfg = GRPOConfig(beta=0.0, epsilon=0.2, max_completion_length=16)
    loss, tokens, metrics = grpo_loop._update(
        policy, None, {0: heads[0]}, [group], [0.5, -0.5], cfg, optim.Adam(learning_rate=1e-3)
    )
    after = seq_logps()
    assert tokens == completions[0].size + completions[1].size
    assert after[0] > before[0] and after[1] < before[1], (before, after)


@pytest.mark.parametrize("loss_type", ["grpo", "bnpo", "dr_grpo"])
def test_a_step_a_group_at_a_time_is_the_whole_batchs_step(setup, loss_type):
    """grpo_loop._update runs one group at a time (its activations freed between groups) and
    weights each group's gradient by its share of the loss's denominator: with plain SGD at
    learning rate 1 the step equals minus the gradient of the loss over the whole batch at once
    (`grpo_loss` on both groups), for every loss type."""
    import mlx.optimizers as optim

    policy, ref, heads, completions = setup
    indices = [0, 0, 0, 1, 1, 1]
    adv = [0.6, -0.2, -0.4, 0.3, 0.3, -0.6]
    kw = dict(beta=0.05, epsilon=0.2, max_tokens=16, loss_type=loss_type)
    _, whole = nn.value_and_grad(policy, grpo_loss.grpo_loss)(
        policy, ref, heads, completions, indices, mx.array(adv), **kw
    )
    before = {k: mx.array(v) for k, v in tree_flatten(policy.trainable_parameters())}
    groups = [
        Group(u, [tuple(completions[i].tolist()) for i in range(3 * u, 3 * u + 3)], [], [])
        for u in (0, 1)
    ]
    cfg = GRPOConfig(beta=0.05, epsilon=0.2, max_completion_length=16, loss_type=loss_type)
    grpo_loop._update(policy, ref, dict(enumerate(heads)), groups, adv, cfg, optim.SGD(1.0))
    after = dict(tree_flatten(policy.trainable_parameters()))
    policy.update(tree_unflatten(list(before.items())))  # the fixture's policy, restored
    want = dict(tree_flatten(whole))
    scale = max(mx.abs(v).max().item() for v in want.values())
    worst = max(mx.abs((before[k] - after[k]) - want[k]).max().item() for k in want)
    assert scale > 0 and worst <= 1e-3 * scale, (worst, scale)
