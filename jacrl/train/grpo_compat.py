"""What adapts mlx-lm-lora's GRPO trainer to this project, at its module-level seams (its
`BatchGenerator`, `generate_grpo`, `_rollout_rewards`, `evaluate_grpo`), without forking it:

* `rollout_concurrency` lets a step decode batch x group rollouts together (the trainer alone
  decodes only batch_size at once).
* `group_advantages` / `grpo_hooks`: our advantages instead of its σ-normalised ones (which turn a
  0.0005 reward spread into ±1, a full update on noise), every rollout written to rollouts.jsonl,
  and per-step timings (generation, reward, update) as `step` events in metrics.jsonl.
"""

from __future__ import annotations

import contextlib
import time
from pathlib import Path

from jacrl import jsonl
from jacrl.train.mlx_compat import MetricsLog


# -------------------------------------------------------------------------------------------
# GRPO: rollout decoding
# -------------------------------------------------------------------------------------------


@contextlib.contextmanager
def rollout_concurrency(n: int):
    """mlx-lm-lora decodes only `batch_size` rollouts at once; let it decode n together (its
    `BatchGenerator` is swapped for one with wider completion and prefill batches meanwhile)."""
    from mlx_lm_lora.trainer import grpo_trainer

    orig = grpo_trainer.BatchGenerator

    def wider(model, **kw):
        kw["completion_batch_size"] = max(n, kw.get("completion_batch_size", 1))
        kw["prefill_batch_size"] = max(n, kw.get("prefill_batch_size", 1))
        return orig(model, **kw)

    grpo_trainer.BatchGenerator = wider
    try:
        yield
    finally:
        grpo_trainer.BatchGenerator = orig


# -------------------------------------------------------------------------------------------
# GRPO: advantages, the rollout log, per-step timings
# -------------------------------------------------------------------------------------------

# Dr. GRPO's r - mean(group); mlx-lm-lora's (r - mean) / (σ + 1e-4)
ADVANTAGES = ("centered", "std")


def group_advantages(rewards, groups: list[list[int]], kind: str, min_span: float = 0.0):
    """(advantage per rollout, share of groups skipped). A group whose rewards span less than
    `min_span` (max - min; DAPO's dynamic-sampling filter) gets advantage 0: no policy-gradient
    push from reward differences that small. kind "centered": r - mean; "std": divided by σ + 1e-4
    as mlx-lm-lora does, which turns a 0.0005 spread into ±0.71."""
    import numpy as np

    if kind not in ADVANTAGES:
        raise ValueError(f"unknown advantage {kind!r}; choose from {', '.join(ADVANTAGES)}")
    rewards = np.asarray(rewards, dtype=np.float64)
    adv = np.zeros_like(rewards)
    skipped = 0
    for idx in groups:
        g = rewards[idx]
        if g.max() - g.min() < min_span or g.max() == g.min():
            skipped += 1
            continue
        adv[idx] = (g - g.mean()) / ((g.std() + 1e-4) if kind == "std" else 1.0)
    return adv, skipped / max(1, len(groups))


class _StepLog:
    """What `grpo_hooks` observes of each training step, written as it completes."""

    def __init__(self, rollouts: Path, metrics: MetricsLog, max_tokens: int, eos: set[int]):
        self.rollouts, self.metrics = rollouts, metrics
        self.max_tokens, self.eos = max_tokens, eos
        self.step, self.pending, self.validating = 0, None, False
        self.tokens: list[list[int]] = []
        self.gen_s = 0.0

    def generated(self, completions, seconds: float) -> None:
        self.tokens = [c.tolist() for c in completions]
        self.gen_s = seconds

    def rewarded(self, scored, texts, adv, skipped: float, groups, seconds: float,
                 kind: str) -> None:
        self.step += 1
        rows = []
        for g, idx in enumerate(groups):
            for i in idx:
                ids, s = self.tokens[i], scored[i]
                truncated = len(ids) >= self.max_tokens and (not ids or ids[-1] not in self.eos)
                rows.append({"step": self.step, "group": g, "task_id": s.task_id,
                             "completion": texts[i], "body": s.body, "tier": s.tier,
                             "reason": s.reason, "reward": s.score,
                             "advantage": round(float(adv[i]), 6), "truncated": truncated,
                             "tokens": len(ids)})
        with open(self.rollouts, "a") as f:
            f.writelines(jsonl.dumps(r) for r in rows)
        self.pending = {"step": self.step, "advantage": kind, "generation_s": round(self.gen_s, 4),
                        "reward_s": round(seconds, 4), "t_rewarded": time.perf_counter(),
                        "reward_mean": round(sum(r["reward"] for r in rows) / len(rows), 6),
                        "exact": sum(r["tier"] == "exact" for r in rows), "rollouts": len(rows),
                        "groups_skipped": round(skipped, 4),
                        "truncated": round(sum(r["truncated"] for r in rows) / len(rows), 4)}

    def close_step(self, at: float | None = None) -> None:
        """The pending step's update time: reward done -> `at` (the next generation's start) or
        now (the end)."""
        if self.pending is None:
            return
        rec = dict(self.pending)
        rec["update_s"] = round((at or time.perf_counter()) - rec.pop("t_rewarded"), 4)
        self.metrics.step(rec)
        self.pending = None


@contextlib.contextmanager
def grpo_hooks(reward_fn, kind: str, min_span: float, rollouts: Path, metrics: MetricsLog,
               max_tokens: int, eos_ids):
    """mlx-lm-lora's GRPO trainer with our advantages (`group_advantages` replaces its σ-normalised
    ones), every training rollout written to `rollouts` (JSON lines: step, group, task id,
    completion, extracted body, tier, reason, reward, advantage, truncated, tokens) and per-step
    timings (generation, reward, update) in metrics.jsonl. reward_fn:
    `jacrl.reward.reward_function(...)` (its `.last` holds the Scored of each call). Validation
    rollouts pass through unchanged."""
    import mlx.core as mx
    from mlx_lm_lora.trainer import grpo_trainer as gt

    log = _StepLog(rollouts, metrics, max_tokens, set(eos_ids))
    orig = gt.generate_grpo, gt._rollout_rewards, gt.evaluate_grpo

    def generate(*args, **kw):
        t0 = time.perf_counter()
        if not log.validating:
            log.close_step(t0)  # before this generation: it is not the last step's update
        out = orig[0](*args, **kw)
        if not log.validating:
            log.generated(out[0], time.perf_counter() - t0)
        return out

    def rewards(batch, texts, indices, reward_funcs, reward_weights):
        t0 = time.perf_counter()
        adv, info = orig[1](batch, texts, indices, reward_funcs, reward_weights)
        if log.validating:
            return adv, info
        scored = list(reward_fn.last)
        groups = [[i for i, x in enumerate(indices) if x == u] for u in sorted(set(indices))]
        ours, skipped = group_advantages([s.score for s in scored], groups, kind, min_span)
        log.rewarded(scored, texts, ours, skipped, groups, time.perf_counter() - t0, kind)
        return mx.array(ours, dtype=mx.float32), info

    def evaluate(*args, **kw):
        log.close_step()  # validation is not the last step's update either
        log.validating = True
        try:
            return orig[2](*args, **kw)
        finally:
            log.validating = False

    gt.generate_grpo, gt._rollout_rewards, gt.evaluate_grpo = generate, rewards, evaluate
    try:
        yield log
        log.close_step()
    finally:
        gt.generate_grpo, gt._rollout_rewards, gt.evaluate_grpo = orig
