"""GRPO's training loop, ours (mlx-lm's `train()` is the model: a batch iterator, a loss under
`nn.value_and_grad`, the optimizer's update, callbacks for reports). Each step: draw the
batch's rollouts (`grpo_rollouts.draw`: one batched decode, one reward call), their advantages,
with dynamic sampling the groups with signal, then one update on them (`grpo_loss`), one
`step` record and, every `steps_per_report` steps, a `train` record of the steps since the last
(and the run's checkpoint, `jacrl.train.checkpoint`, through `on_report`).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from pathlib import Path

from jacrl.config import GRPOConfig
from jacrl.train.grpo_loss import grpo_loss
from jacrl.train.grpo_rollouts import (
    Rollouts,
    StepLog,
    draw,
    fill_batch,
    group_advantages,
    prompt_batches,
)
from jacrl.train.mlx_compat import MetricsLog

SEED_STRIDE = 100_003  # step k of seed s samples with seed s * SEED_STRIDE + k


def rollouts_of(cfg: GRPOConfig) -> Rollouts:
    return Rollouts(
        cfg.group_size,
        cfg.temperature,
        cfg.top_p,
        cfg.top_k,
        cfg.max_completion_length,
        cfg.reward_formula,
        cfg.rollout_batch,
    )


def _update(policy, ref, prompts, kept, adv, cfg: GRPOConfig, optimizer):
    """One optimizer step on the kept groups' rollouts (each group's gradient weighted by its
    share of the loss's denominator, so a group at a time gives the whole batch's gradient).
    Returns (loss, tokens, metrics) as floats."""
    import mlx.core as mx
    import mlx.nn as nn
    from mlx.utils import tree_flatten, tree_map

    loss_and_grad = nn.value_and_grad(policy, grpo_loss)
    sizes = [len(g.ids) for g in kept]
    tokens = [sum(len(i) for i in g.ids) for g in kept]
    kw = dict(beta=cfg.beta, epsilon=cfg.epsilon, max_tokens=cfg.max_completion_length)
    grads, loss, total, metrics, at = None, 0.0, 0, {}, 0
    for g, n, toks in zip(kept, sizes, tokens, strict=True):
        share = toks / max(1, sum(tokens)) if cfg.loss_type == "bnpo" else n / sum(sizes)
        comps = [mx.array(i, dtype=mx.int32) for i in g.ids]
        (lv, nt, m), gr = loss_and_grad(
            policy,
            ref,
            {g.task: prompts[g.task]},
            comps,
            [g.task] * n,
            mx.array(adv[at : at + n], dtype=mx.float32),
            loss_type=cfg.loss_type,
            **kw,
        )
        gr = tree_map(lambda x, s=share: x * s, gr)
        grads = gr if grads is None else tree_map(lambda a, b: a + b, grads, gr)
        mx.eval(grads, lv, nt, m)  # one group's activations at a time
        loss += lv.item() * share
        total += int(nt.item())
        for k, v in m.items():  # row-weighted, as the batch's own would be
            metrics[k] = metrics.get(k, 0.0) + v.item() * n / sum(sizes)
        at += n
    if not math.isfinite(loss) or not all(
        bool(mx.all(mx.isfinite(v)).item()) for _, v in tree_flatten(grads)
    ):
        raise FloatingPointError("non-finite GRPO loss or gradient: no update made")
    optimizer.update(policy, grads)
    mx.eval(policy.parameters(), optimizer.state)
    return loss, total, metrics


def _validate(policy, tok, val, cfg: GRPOConfig, it: int, metrics: MetricsLog) -> None:
    """The rollout reward on the first val_batches x batch validation prompts, as a val record."""
    n = min(len(val), cfg.val_batches * max(1, cfg.batch_size))
    t0 = time.perf_counter()
    groups, _, _ = draw(policy, tok, val, list(range(n)), rollouts_of(cfg), cfg.seed)
    scored = [s for g in groups for s in g.scored]
    metrics.on_val_loss_report(
        {
            "iteration": it,
            "val_reward_mean": round(sum(s.score for s in scored) / len(scored), 6),
            "val_exact": sum(s.exact for s in scored),
            "val_rollouts": len(scored),
            "val_time": round(time.perf_counter() - t0, 3),
        }
    )


class _Report:
    """The steps since the last report, summed into one `train` record."""

    def __init__(self):
        self.rows, self.t0 = [], time.perf_counter()

    def add(self, step: dict, loss: float, tokens: int, metrics: dict, rewards, stds, lengths):
        self.rows.append((step, loss, tokens, metrics, rewards, stds, lengths))

    def record(self, it: int, lr: float) -> dict:
        import mlx.core as mx
        import numpy as np

        steps, losses, tokens, ms, rewards, stds, lengths = zip(*self.rows, strict=True)
        rewards = np.concatenate(rewards)
        lengths = np.concatenate(lengths)
        wall = time.perf_counter() - self.t0
        loss = float(np.mean(losses))
        rec = {
            "iteration": it,
            "loss": loss,
            "train_loss": loss,
            "reward_mean": float(rewards.mean()),
            "reward_std": float(rewards.std()),
            "group_reward_std": float(np.mean(np.concatenate(stds))),
            **{k: float(np.mean([m[k] for m in ms])) for k in ms[0]},
            "truncated": float(np.mean([s["truncated"] for s in steps])),
            "avg_tokens": float(lengths.mean()),
            "learning_rate": lr,
            "iterations_per_second": len(steps) / wall,
            "tokens_per_second": sum(tokens) / wall,
            "trained_tokens": sum(tokens),
            "peak_memory": mx.get_peak_memory() / 1e9,
        }
        self.__init__()
        return rec


def run(
    policy,
    ref,
    tok,
    records,
    val,
    prompts,
    cfg: GRPOConfig,
    batch: int,
    optimizer,
    metrics: MetricsLog,
    out_dir: Path,
    start: int = 0,
    on_report: Callable[[int], None] | None = None,
) -> None:
    """cfg.iters steps of GRPO on `records` (prompts: their token ids), logging to `metrics`
    and out_dir/rollouts.jsonl; validation every steps_per_eval steps (and at the first and
    last) when there are `val` records. start: the steps already made (a resumed run: the
    prompt order is replayed past them); on_report(step) after every report but the last."""
    import numpy as np
    from tqdm.auto import tqdm

    log = StepLog(
        out_dir / "rollouts.jsonl", metrics.step, cfg.max_completion_length, tok.eos_token_ids
    )
    batches = prompt_batches(len(records), batch, cfg.seed)
    draws = cfg.max_draws if cfg.dynamic_sampling else 1
    for _ in range(start * draws):
        next(batches)
    report = _Report()
    policy.train()
    bar = tqdm(
        range(start + 1, cfg.iters + 1), desc="grpo", unit="step", initial=start, total=cfg.iters
    )
    for it in bar:
        if (
            val
            and cfg.steps_per_eval > 0
            and (it == 1 or it % cfg.steps_per_eval == 0 or it == cfg.iters)
        ):
            _validate(policy, tok, val, cfg, it, metrics)
        tasks = [t for _ in range(draws) for t in next(batches)]
        groups, gen_s, reward_s = draw(
            policy, tok, records, tasks, rollouts_of(cfg), cfg.seed * SEED_STRIDE + it
        )
        kept, discarded, _ = fill_batch(lambda g=groups: g, batch, cfg.min_group_span, 1)
        rewards = [r for g in kept for r in g.rewards]
        spans, at = [], 0
        for g in kept:
            spans.append(list(range(at, at + len(g.ids))))
            at += len(g.ids)
        adv, skipped = group_advantages(rewards, spans, cfg.advantage, cfg.min_group_span)
        t0 = time.perf_counter()
        loss, tokens, m = _update(policy, ref, prompts, kept, adv, cfg, optimizer)
        step = log.step(
            it,
            kept,
            discarded,
            adv,
            skipped,
            draws,
            advantage=cfg.advantage,
            generation_s=round(gen_s, 4),
            reward_s=round(reward_s, 4),
            update_s=round(time.perf_counter() - t0, 4),
        )
        report.add(
            step,
            loss,
            tokens,
            m,
            np.asarray(rewards),
            np.asarray([np.std(g.rewards) for g in kept]),
            np.asarray([len(i) for g in kept for i in g.ids]),
        )
        bar.set_postfix(reward=f"{step['reward_mean']:.3f}", kl=f"{m['kl']:.4f}")
        if it % cfg.steps_per_report == 0 or it == cfg.iters:
            metrics.on_train_loss_report(report.record(it, float(optimizer.learning_rate)))
            if on_report is not None and it < cfg.iters:
                on_report(it)


def save_adapter(policy, path: Path) -> None:
    """The policy's trainable (LoRA) weights, as mlx-lm's `load(..., adapter_path)` reads them."""
    import mlx.core as mx
    from mlx.utils import tree_flatten

    mx.save_safetensors(str(path), dict(tree_flatten(policy.trainable_parameters())))
