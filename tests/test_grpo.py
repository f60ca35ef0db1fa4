"""GRPO (jacrl.train.grpo, grpo_compat, grpo_loss): the loss with each prompt run once per group
gives mlx-lm-lora's `grpo_loss` (same loss, gradients and metrics, with and without a KL
reference; its fallback is theirs with every argument); what each rollout row and step record
says; dynamic sampling (DAPO: a step trains on groups whose rewards differ, drawn from more
prompts than its batch, at most max_draws draws), by hand and as real GRPO on jac-tiny with the
sandboxed reward; and the prompts GRPO rolls out on, which are exactly the ones evaluation
samples with (`jacrl.prompts.prompt_ids`); and the advantages the loss receives (each reward
less its group's mean, by hand)."""

from __future__ import annotations

import io
import json
import time
import types
from pathlib import Path
from types import SimpleNamespace

import mlx.core as mx
import mlx.nn as nn
import numpy as np
import pytest
from mlx.utils import tree_flatten, tree_map
from mlx_lm_lora.trainer.datasets import CacheDataset, GRPODataset

from jacrl import prompts
from jacrl.config import GRPOConfig, configure
from jacrl.ladder.cell import training_record
from jacrl.models import registry as models
from jacrl.models.registry import resolve
from jacrl.report.graded import NO_SIGNAL, signal_mark
from jacrl.ruler.reward import Scored
from jacrl.tasks import splits
from jacrl.tasks.record import prompt_answer
from jacrl.train import grpo, grpo_compat, grpo_loss
from jacrl.train.grpo_compat import _Batches, _Group, _StepLog, fill_batch, has_signal
from jacrl.train.grpo_loss import shared_prompt_loss, shares_prompt
from jacrl.train.mlx_compat import MetricsLog, lora_model
from jacrl.train.reference import frozen_view

# -- the loss: each prompt run once per group, equal to mlx-lm-lora's ------------------------------


@pytest.fixture(scope="module")
def setup(tiny, tmp_path_factory):
    policy, tok, _ = lora_model(
        resolve(tiny),
        GRPOConfig(lora_layers=-1, grad_checkpoint=False),
        tmp_path_factory.mktemp("loss"),
    )
    assert shares_prompt(policy)  # the shared-prompt path, not the fallback, is what is compared
    ref = frozen_view(policy)
    mx.random.seed(1)
    policy.update(
        tree_map(lambda a: a + 0.02 * mx.random.normal(a.shape), policy.trainable_parameters())
    )
    # two prompts of different lengths, groups of 3 with unequal completions (one of 1 token)
    prompts = [
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
    batch = (prompts, [[1], [1]], ["p0", "p1"], ["a0", "a1"], None)
    return policy, ref, batch, completions


@pytest.mark.parametrize("beta, loss_type", [(0.0, "grpo"), (0.05, "grpo"), (0.05, "dr_grpo")])
def test_shared_prompt_loss_equals_grpo_loss(setup, beta, loss_type):
    from mlx_lm_lora.trainer.grpo_trainer import grpo_loss as theirs

    policy, ref, batch, completions = setup
    kw = dict(
        batch=batch,
        completions=completions,
        completion_texts=["t"] * 6,
        batch_indices=[0, 0, 0, 1, 1, 1],
        advantages=mx.array([0.6, -0.2, -0.4, 0.3, 0.3, -0.6]),
        beta=beta,
        epsilon=0.2,
        max_tokens=16,
        grpo_loss_type=loss_type,
    )
    results = {}
    for name, fn in (("theirs", theirs), ("ours", shared_prompt_loss)):
        (loss, tokens, metrics), grads = nn.value_and_grad(policy, fn)(policy, ref, **kw)
        results[name] = loss.item(), tokens.item(), metrics, dict(tree_flatten(grads))
    (l0, n0, m0, g0), (l1, n1, m1, g1) = results["theirs"], results["ours"]
    assert n0 == n1 == sum(c.size for c in completions)
    assert l1 == pytest.approx(l0, rel=1e-4, abs=1e-6) and l0 != 0.0
    for k in ("kl", "average_generated_tokens", "max_generated_tokens", "hit_max_tokens_ratio"):
        assert m1[k].item() == pytest.approx(m0[k].item(), rel=1e-3, abs=1e-6), k
    assert (m0["kl"].item() > 0) == (beta > 0)
    assert set(g0) == set(g1)
    scale = max(mx.abs(v).max().item() for v in g0.values())
    assert scale > 0
    worst = max(mx.abs(g0[k] - g1[k]).max().item() for k in g0)
    assert worst <= 1e-3 * scale, (worst, scale)


def test_checkpointing_is_set_per_training_and_falls_back(tiny, tmp_path):
    """An SFT-style model with checkpointing on turns it on for the class; the next model built
    without it turns it off again (it used to stay on for the process), and a checkpointed model
    takes mlx-lm-lora's loss (the shared prompt's gradient cannot pass a checkpoint)."""
    on, _, _ = lora_model(resolve(tiny), GRPOConfig(lora_layers=1, grad_checkpoint=True), tmp_path)
    assert not shares_prompt(on)
    off, _, _ = lora_model(
        resolve(tiny), GRPOConfig(lora_layers=1, grad_checkpoint=False), tmp_path
    )
    assert shares_prompt(off) and shares_prompt(on)  # one class: off for both now


def _scored(task_id: str, score: float, tier: str = "runs") -> Scored:
    return Scored(task_id, score, tier, f"body {task_id}", 0.5, 0.5, None, f"why {task_id}")


def _group(name: str, rewards, tokens=None) -> _Group:
    tokens = tokens or [[7, 8]] * len(rewards)
    return _Group(
        entry=(name, f"a {name}", f"s {name}", f"t {name}", None),
        completions=[mx.array(t) for t in tokens],
        texts=[f"{name} {i}" for i in range(len(rewards))],
        scored=[_scored(name, r, "exact" if r == 1.0 else "runs") for r in rewards],
    )


# -- the loss: its fallback is mlx-lm-lora's own, every argument passed ----------------------


@pytest.fixture(scope="module")
def fallback(tiny, tmp_path_factory):
    """A policy (LoRA, moved off its reference) that makes its own caches: shared_prompt_loss
    must fall back to mlx-lm-lora's grpo_loss for it."""
    policy, tok, _ = lora_model(
        resolve(tiny),
        GRPOConfig(lora_layers=1, grad_checkpoint=False),
        tmp_path_factory.mktemp("fb"),
    )
    ref = frozen_view(policy)
    mx.random.seed(2)
    policy.update(
        tree_map(lambda a: a + 0.05 * mx.random.normal(a.shape), policy.trainable_parameters())
    )
    prompts = [tok.encode("def add(a: int, b: int) -> int {"), tok.encode("walker W {")]
    completions = [mx.array(tok.encode(t)) for t in ("return a + b;", "}", "has n: int;", "x")]
    return policy, ref, (prompts, [[1], [1]], ["p0", "p1"], ["a0", "a1"], None), completions


def test_the_fallback_is_mlx_lm_loras_loss_with_every_argument(fallback, monkeypatch):
    """shared_prompt_loss on a model that makes its own caches returns mlx-lm-lora's grpo_loss
    for the same arguments: the reference (KL), epsilons, sampling level, loss type and reward
    metrics all reach it, also before shared_prompt_groups ever ran (nothing saved yet)."""
    from mlx_lm_lora.trainer.grpo_trainer import grpo_loss as theirs

    policy, ref, batch, completions = fallback
    # a model-made cache: the shared prompt does not apply (removed again after the test)
    monkeypatch.setattr(policy, "make_cache", lambda: None, raising=False)
    assert not grpo_loss.shares_prompt(policy)
    monkeypatch.setattr(grpo_loss, "_ORIGINAL", {})
    args = (policy, ref, batch, completions, ["t"] * 4, [0, 0, 1, 1], mx.array([0.5, -0.5, 1, -1]))
    kw = dict(
        reward_metrics={"reward_mean": mx.array(0.25)},
        beta=0.1,
        epsilon=0.2,
        epsilon_high=0.3,
        max_tokens=4,
        importance_sampling_level="sequence",
        grpo_loss_type="dr_grpo",
    )
    l0, n0, m0 = theirs(*args, **kw)
    l1, n1, m1 = grpo_loss.shared_prompt_loss(*args, **kw)
    assert m0["kl"].item() > 0  # the reference is a different model: KL is not zero
    assert (l1.item(), n1.item()) == (l0.item(), n0.item())
    assert {k: v.item() for k, v in m1.items()} == {k: v.item() for k, v in m0.items()}
    assert m1["reward_mean"].item() == 0.25


def test_a_groups_width_is_its_longest_completion(fallback):
    """_group_logps: W is the longest completion (rounded up to a bucket only past 128 tokens),
    so one-token completions give one column, and their log-probs are the full model's."""
    from mlx_lm_lora.trainer.grpo_trainer import _select_token_logps

    policy, _, batch, _ = fallback
    assert grpo_loss.shares_prompt(policy)
    prompt, done = batch[0][0], [mx.array([5]), mx.array([9])]
    logps, mask = grpo_loss._group_logps(policy, prompt, done)
    assert logps.shape == (2, 1) and mask.tolist() == [[True], [True]]
    full = policy(mx.array(prompt)[None])[:, -1:]
    want = _select_token_logps(mx.repeat(full, 2, axis=0), mx.array([[5], [9]]), mask)
    assert mx.allclose(logps, want, atol=1e-4).item()


def test_the_fallback_under_our_patch_is_still_mlx_lm_loras_loss(fallback, monkeypatch):
    """Inside shared_prompt_groups the trainer's grpo_loss is ours: the fallback must call the
    one saved before (not the patched name, which would be itself)."""
    from mlx_lm_lora.trainer.grpo_trainer import grpo_loss as theirs

    policy, ref, batch, completions = fallback
    monkeypatch.setattr(policy, "make_cache", lambda: None, raising=False)
    args = (policy, ref, batch, completions, ["t"] * 4, [0, 0, 1, 1], mx.array([0.5, -0.5, 1, -1]))
    l0, n0, _ = theirs(*args, beta=0.1)
    with grpo_loss.shared_prompt_groups(2):
        l1, n1, _ = grpo_loss.shared_prompt_loss(*args, beta=0.1)
    assert (l1.item(), n1.item()) == (l0.item(), n0.item())


# -- the step log: rollouts.jsonl and the step records of metrics.jsonl ------------------------


def test_a_steps_rollout_rows_and_record(tmp_path):
    """_StepLog (rewarded, _rows, close_step): step numbers start at 1, every rollout row names
    its step, reward, advantage (rounded), truncation (at max_tokens without an EOS) and whether
    it was discarded (discarded groups too, group None, advantage 0); the step record sums the
    draw exactly: reward seconds are the draw's plus the advantages', times rounded to 4 places."""
    metrics = MetricsLog(tmp_path / "metrics.jsonl", "grpo")
    log = _StepLog(tmp_path / "rollouts.jsonl", metrics, max_tokens=3, eos={0})
    assert (log.step, log.kept, log.discarded, log.pending) == (0, [], [], None)
    kept = [
        _group("p0", [1.0, 0.2], tokens=[[5, 6, 7], [5, 0]]),  # truncated, then ended by EOS
        _group("p1", [0.5, 0.5], tokens=[[5, 6, 0], [5]]),  # 3 tokens ending in EOS: whole
    ]
    log.drawn(kept, [_group("p2", [0.3, 0.3])], draws=2, gen_s=1.234567, reward_s=0.5)
    log.rewarded([0.4, -0.4000004, 0.0, 0.0], skipped=0.5, seconds=0.25, kind="mean")
    rows = [json.loads(ln) for ln in (tmp_path / "rollouts.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows] == [1] * 6
    assert [r["group"] for r in rows] == [0, 0, 1, 1, None, None]
    assert [r["reward"] for r in rows] == [1.0, 0.2, 0.5, 0.5, 0.3, 0.3]
    assert [r["advantage"] for r in rows] == [0.4, -0.4, 0.0, 0.0, 0.0, 0.0]
    assert [r["truncated"] for r in rows] == [True, False, False, False, False, False]
    assert [r["discarded"] for r in rows] == [False] * 4 + [True] * 2
    assert rows[4]["task_id"] == "p2" and rows[4]["completion"] == "p2 0"
    assert rows[0]["body"] == "body p0" and rows[0]["reason"] == "why p0"
    assert rows[0]["tier"] == "exact" and rows[0]["tokens"] == 3

    at = log.pending["t_rewarded"] + 1.23456789
    log.close_step(at)
    assert log.pending is None
    rec = {k: v for k, v in metrics.steps[-1].items() if k not in ("event", "stage", "time")}
    assert rec == {
        "step": 1,
        "advantage": "mean",
        "generation_s": 1.2346,
        "reward_s": 0.75,
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
        "update_s": 1.2346,
    }
    log.close_step()  # nothing pending: no second record
    assert len(metrics.steps) == 1


def test_validation_passes_its_arguments_and_ends_the_step_first(tmp_path):
    """_StepLog.validation: the trainer's evaluate gets every argument (keywords too), runs with
    `validating` set (its rollouts pass through the hooks), and the pending step is closed
    before it (validation is not that step's update)."""
    metrics = MetricsLog(tmp_path / "metrics.jsonl", "grpo")
    log = _StepLog(tmp_path / "rollouts.jsonl", metrics, max_tokens=8, eos={0})
    log.drawn([_group("p0", [1.0, 0.0])], [], 1, 0.1, 0.1)
    log.rewarded([0.5, -0.5], 0.0, 0.0, "mean")
    seen = []

    def evaluate(*args, **kw):
        seen.append((args, kw, log.validating, len(metrics.steps)))
        return "val"

    assert log.validation(evaluate)(1, 2, batch_size=3) == "val"
    assert seen == [((1, 2), {"batch_size": 3}, True, 1)]
    assert log.validating is False


# -- drawing groups, dynamic sampling ---------------------------------------------------------


class _Rewards:
    """A reward function as grpo_hooks gets one: called on the texts, its Scored in `.last`."""

    def __call__(self, prompts, completions, answer, types):
        self.last = [
            _scored(p, float(len(c) % 3) / 2) for p, c in zip(prompts, completions, strict=True)
        ]
        return [s.score for s in self.last]


def test_a_draw_times_its_generation_and_groups_by_prompt():
    """_draw_groups: the generation's seconds are added to clock[0] (never subtracted), the
    reward's to clock[1], and the rollouts are grouped by the prompt they came from."""

    def generate(prompt_tokens, **_):
        t = time.perf_counter()
        while time.perf_counter() - t < 0.002:  # a generation that takes >= 2 ms
            pass
        idx = [0, 0, 1, 1]
        return [mx.array([i]) for i in range(4)], ["a", "bb", "ccc", "dddd"], idx

    batch = ([[1], [2]], [[3], [4]], ["p0", "p1"], ["t0", "t1"], None)
    clock = [1.0, 1.0]
    groups = grpo_compat._draw_groups(generate, _Rewards(), batch, {}, clock)
    assert clock[0] >= 1.002 and clock[1] >= 1.0
    assert [g.texts for g in groups] == [["a", "bb"], ["ccc", "dddd"]]
    assert [g.entry[2] for g in groups] == ["p0", "p1"]
    assert [g.rewards for g in groups] == [[0.5, 1.0], [0.0, 0.5]]


def test_fill_batch_keeps_groups_with_signal_and_fills_from_the_latest():
    """fill_batch: groups with signal are kept up to `need`, the rest passed over; short at
    the cap, the latest groups drawn fill the batch."""
    draws = iter([[_group("a", [1, 1]), _group("b", [0, 1])], [_group("c", [0.2, 0.9])]])
    kept, passed, n = fill_batch(lambda: next(draws), 2, 0.0, 5)
    assert [g.entry[0] for g in kept] == ["b", "c"] and [g.entry[0] for g in passed] == ["a"]
    assert n == 2
    draws = iter([[_group("a", [1, 1]), _group("b", [0, 1]), _group("d", [2, 2])]])
    kept, passed, n = fill_batch(lambda: next(draws), 2, 0.0, 1)
    assert [g.entry[0] for g in kept] == ["b", "d"] and [g.entry[0] for g in passed] == ["a"]
    assert n == 1


def test_dynamic_sampling_rewrites_the_trainers_batch_in_place():
    """_fill_in_place: the trainer's batch and the next max_draws - 1 batches of
    `batches.source` drawn together, in one call of `draw` (one batched generation); the first
    groups with signal are kept, as many as the batch had prompts, and the batch then holds
    their entries (a None part stays None). A source that runs out ends the over-sampling."""
    rewards = {"p0": [1, 1], "p1": [0, 1], "p2": [0, 0.5], "p3": [1, 1], "p4": [0, 1]}
    calls = []

    def draw(b):
        calls.append(list(b[0]))
        return [_group(name, rewards[name]) for name in b[0]]

    def part(names, prefix):
        return [f"{prefix}{n}" for n in names] if prefix else list(names)

    def batch_of(*names):
        return (*(part(names, p) for p in ("", "a ", "s ", "t ")), None)

    batch = batch_of("p0", "p1")
    batches = types.SimpleNamespace(source=iter([batch_of("p2", "p3"), batch_of("p4")]))
    kept, discarded, n = grpo_compat._fill_in_place(batch, batches, draw, 0.0, 3)
    assert calls == [["p0", "p1", "p2", "p3", "p4"]]  # one draw of every prompt
    assert [g.entry[0] for g in kept] == ["p1", "p2"] and n == 3
    assert [g.entry[0] for g in discarded] == ["p0", "p3", "p4"]
    assert batch[:4] == (["p1", "p2"], ["a p1", "a p2"], ["s p1", "s p2"], ["t p1", "t p2"])
    assert batch[4] is None
    calls.clear()
    short = batch_of("p0", "p3")
    kept, discarded, n = grpo_compat._fill_in_place(
        short, types.SimpleNamespace(source=iter([])), draw, 0.0, 4
    )
    assert calls == [["p0", "p3"]] and n == 1  # nothing more to draw
    assert [g.entry[0] for g in kept] == ["p0", "p3"] and discarded == []


def test_training_batches_repeat_and_are_remembered():
    """_Batches: a training iteration goes on past one epoch (mlx-lm-lora's train=True), and
    the batch just handed out and its iterator are remembered for dynamic sampling."""
    data = [([1, 2], [3], "p0", "a0"), ([4], [5], "p1", "a1")]
    batches = _Batches()
    it = batches(data, 1, 16, train=True)
    got = [next(it) for _ in range(5)]  # more than the 2 batches of one epoch
    assert batches.current is got[-1] and batches.source is not None
    assert len(list(_Batches()(data, 1, 16, train=False))) == 2


def test_the_quiet_progress_bar_drops_only_the_clipping_line():
    """_quiet_tqdm: its `write` drops lines starting with `Clipping:` and keeps the others,
    joined by newlines as they were."""
    from tqdm import tqdm

    out = io.StringIO()
    grpo_compat._quiet_tqdm(tqdm).write("Iter 1: loss 0.5\nClipping: 0.1\nclipping: kept", file=out)
    assert out.getvalue() == "Iter 1: loss 0.5\nclipping: kept\n"


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
    marked, with advantage 0. The terminal keeps the
    progress bar and the per-step summary but not mlx-lm-lora's per-step Clipping line (its
    ratios are in metrics.jsonl)."""
    cfg, art, steps, rollouts = _run(tiny, harness_tasks, tmp_path, min_group_span=0.008)
    out = capfd.readouterr()
    terminal = out.out + out.err
    assert "Clipping:" not in terminal
    assert "Training:" in terminal and "Iter 3:" in terminal and "KL Divergence" in terminal
    train = [r for r in _read(art.path / "metrics.jsonl") if r["event"] == "train"]
    assert len(train) == 3 and all("train_clip_ratio_total" in r for r in train)

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


ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def tokenizer():
    return models.load("jac-tiny")[1]


@pytest.fixture(scope="module")
def pool():
    tasks = splits.load_split("trainpool", ROOT / "data")
    assert tasks
    return tasks


def _records(tasks, **extra):
    return [{**prompt_answer(t), **extra} for t in tasks]


def test_grpo_prompt_tokens_are_evaluations(tokenizer, pool):
    ds = CacheDataset(GRPODataset(_records(pool, system=prompts.SYSTEM_PROMPT), tokenizer))
    assert len(ds) == len(pool)
    first = ds[0][0]
    assert list(first) == prompts.prompt_ids(tokenizer, pool[0]["prompt"])
    text = tokenizer.decode(first)
    assert prompts.SYSTEM_PROMPT in text and pool[0]["prompt"] in text
    differ = [
        i
        for i, t in enumerate(pool)
        if list(ds[i][0]) != prompts.prompt_ids(tokenizer, t["prompt"])
    ]
    assert differ == []


def test_the_check_sees_a_different_system_prompt(tokenizer, pool):
    """Control: without the record's `system`, mlx-lm-lora's own <think>/<answer> system prompt
    gives other ids, so the equality above is not vacuous."""
    ds = GRPODataset(_records(pool[:1]), tokenizer)
    assert list(ds[0][0]) != prompts.prompt_ids(tokenizer, pool[0]["prompt"])


def test_the_loss_receives_group_advantages(tiny, harness_tasks, tmp_path, monkeypatch):
    """Spy on the seam into mlx-lm-lora (the loss function our trainer hands it), not the log."""
    import importlib

    import jacrl.train as tr

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
    # "centered" by hand: each rollout's reward less its group's mean (no division by sigma)
    want = []
    for i, u in enumerate(indices):
        group = [rewards[j] for j, x in enumerate(indices) if x == u]
        want.append(rewards[i] - sum(group) / len(group))
    assert adv == pytest.approx(want, abs=1e-6)
    assert len(set(rewards)) > 1 and any(abs(a) > 1e-6 for a in adv)  # not zero by chance
