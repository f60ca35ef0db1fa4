"""What adapts mlx-lm-lora's GRPO trainer to this project, at its module-level seams (its
`BatchGenerator`, `generate_grpo`, `_rollout_rewards`, `evaluate_grpo`), without forking it:

* `rollout_concurrency` lets a step decode batch x group rollouts together (the trainer alone
  decodes only batch_size at once).
* `group_advantages` / `grpo_hooks`: our advantages instead of its σ-normalised ones (which turn a
  0.0005 reward spread into ±1, a full update on noise), every rollout written to rollouts.jsonl,
  and per-step timings (generation, reward, update) as `step` events in metrics.jsonl.
* `fill_batch`: DAPO's dynamic sampling (a step trains on groups whose rewards differ, drawn from
  more prompts than the batch, all in one batched generation), which neither mlx-lm-lora nor
  TRL's GRPO trainer has.
* its per-step `Clipping:` line leaves the terminal (it is in metrics.jsonl already).
"""

from __future__ import annotations

import contextlib
import dataclasses
import time
from collections import Counter
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


def metric_names(rec: dict) -> dict:
    """mlx-lm-lora's GRPO train metrics under our names (`MetricsLog`'s `names`)."""
    return {
        "loss": rec.get("train_loss"),
        "reward_mean": rec.get("train_total_rewards_mean"),
        "reward_std": rec.get("train_total_rewards_std"),
        "group_reward_std": rec.get("train_grouped_rewards_std"),
        "kl": rec.get("train_kl"),
        "truncated": rec.get("train_hit_max_tokens_ratio"),
        "avg_tokens": rec.get("train_average_generated_tokens"),
    }


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


def has_signal(rewards, min_span: float) -> bool:
    """Rewards that differ by at least `min_span` (and at all): advantages that are not 0."""
    return max(rewards) > min(rewards) and max(rewards) - min(rewards) >= min_span


def fill_batch(draw, need: int, min_span: float, max_draws: int):
    """DAPO's dynamic sampling: call `draw()` (-> groups, each with `.rewards`) until `need` groups
    with signal (`has_signal`) are in hand or `max_draws` draws are made, so a task set whose
    groups all agree cannot loop forever. Short of `need` at the cap, the latest groups drawn fill
    the batch (advantage 0: the step still runs, as it would without dynamic sampling).
    Returns (the step's groups, the groups discarded, draws made)."""
    kept, passed, draws = [], [], 0
    while len(kept) < need and draws < max_draws:
        draws += 1
        for g in draw():
            (kept if len(kept) < need and has_signal(g.rewards, min_span) else passed).append(g)
    short = need - len(kept)
    if short > 0:
        kept, passed = kept + passed[len(passed) - short :], passed[: len(passed) - short]
    return kept, passed, draws


@dataclasses.dataclass
class _Group:
    """One prompt's rollouts as drawn: the batch entries mlx-lm-lora carries for the prompt (prompt
    tokens, answer tokens, prompt text, answer text, type) and its completions, texts, Scored."""

    entry: tuple
    completions: list
    texts: list[str]
    scored: list

    @property
    def rewards(self) -> list[float]:
        return [s.score for s in self.scored]


class _Batches:
    """mlx-lm-lora's `iterate_grpo_batches`, remembering the training batch just handed out and
    its iterator (dynamic sampling draws further prompts from it)."""

    def __init__(self):
        self.current, self.source = None, None

    def __call__(self, dataset, batch_size, max_seq_length, train=False):
        from mlx_lm_lora.trainer.grpo_trainer import iterate_grpo_batches

        inner = iterate_grpo_batches(dataset, batch_size, max_seq_length, train)
        if not train:
            yield from inner
            return
        self.source = inner
        for batch in inner:
            self.current = batch
            yield batch


class _StepLog:
    """What `grpo_hooks` observes of each training step, written as it completes."""

    def __init__(self, rollouts: Path, metrics: MetricsLog, max_tokens: int, eos: set[int]):
        self.rollouts, self.metrics = rollouts, metrics
        self.max_tokens, self.eos = max_tokens, eos
        self.step, self.pending, self.validating = 0, None, False
        self.kept: list[_Group] = []
        self.discarded: list[_Group] = []
        self.draws, self.gen_s, self.reward_s = 0, 0.0, 0.0

    def drawn(self, kept, discarded, draws: int, gen_s: float, reward_s: float) -> None:
        self.kept, self.discarded, self.draws = kept, discarded, draws
        self.gen_s, self.reward_s = gen_s, reward_s

    def _rows(self, g: _Group, group, adv, discarded: bool) -> list[dict]:
        rows = []
        for c, text, s, a in zip(g.completions, g.texts, g.scored, adv, strict=True):
            ids = c.tolist()
            truncated = len(ids) >= self.max_tokens and (not ids or ids[-1] not in self.eos)
            rows.append(
                {
                    "step": self.step,
                    "group": group,
                    "task_id": s.task_id,
                    "completion": text,
                    "body": s.body,
                    "tier": s.tier,
                    "reason": s.reason,
                    "reward": s.score,
                    "advantage": round(float(a), 6),
                    "truncated": truncated,
                    "tokens": len(ids),
                    "discarded": discarded,
                }
            )
        return rows

    def rewarded(self, adv, skipped: float, seconds: float, kind: str) -> None:
        self.step += 1
        rows, at = [], 0
        for k, g in enumerate(self.kept):
            rows += self._rows(g, k, adv[at : at + len(g.scored)], False)
            at += len(g.scored)
        dropped = [
            r for g in self.discarded for r in self._rows(g, None, [0.0] * len(g.scored), True)
        ]
        with open(self.rollouts, "a") as f:
            f.writelines(jsonl.dumps(r) for r in rows + dropped)
        drawn = len(self.kept) + len(self.discarded)
        with_signal = round((1 - skipped) * len(self.kept))
        self.pending = {
            "step": self.step,
            "advantage": kind,
            "generation_s": round(self.gen_s, 4),
            "reward_s": round(self.reward_s + seconds, 4),
            "t_rewarded": time.perf_counter(),
            "reward_mean": round(sum(r["reward"] for r in rows) / len(rows), 6),
            "exact": sum(r["tier"] == "exact" for r in rows),
            "rollouts": len(rows),
            "draws": self.draws,
            "groups_drawn": drawn,
            "groups_kept": with_signal,
            "groups_skipped": round(1 - with_signal / drawn, 4),
            # TRL's frac_reward_zero_std, turned round: the share of the step's groups whose
            # rewards span min_group_span (the only groups an update learns from)
            "groups_trained": len(self.kept),
            "signal_frac": round(with_signal / max(1, len(self.kept)), 4),
            "tiers": dict(sorted(Counter(r["tier"] for r in rows).items())),
            "rollouts_discarded": len(dropped),
            "truncated": round(sum(r["truncated"] for r in rows) / len(rows), 4),
        }

    def validation(self, evaluate):
        """`evaluate` run as validation: its rollouts pass through, and it ends the step before."""

        def run(*args, **kw):
            self.close_step()  # validation is not the last step's update either
            self.validating = True
            try:
                return evaluate(*args, **kw)
            finally:
                self.validating = False

        return run

    def close_step(self, at: float | None = None) -> None:
        """The pending step's update time: reward done -> `at` (the next generation's start) or
        now (the end)."""
        if self.pending is None:
            return
        rec = dict(self.pending)
        rec["update_s"] = round((at or time.perf_counter()) - rec.pop("t_rewarded"), 4)
        self.metrics.step(rec)
        self.pending = None


def _quiet_tqdm(tqdm):
    """mlx-lm-lora's tqdm, whose `write` drops the per-step `Clipping:` line (its ratios are in
    metrics.jsonl as train_clip_ratio_*); the progress bar and the rest of the summary stay."""

    class Quiet(tqdm):
        @classmethod
        def write(cls, s, *args, **kw):
            s = "\n".join(line for line in str(s).split("\n") if not line.startswith("Clipping:"))
            return super().write(s, *args, **kw)

    return Quiet


def _draw_groups(generate, reward_fn, batch, kw, clock: list[float]) -> list[_Group]:
    """One draw: `batch`'s rollouts generated and scored once, as groups (one per prompt);
    generation and reward seconds added to `clock`."""
    t0 = time.perf_counter()
    # every prompt of the draw decoded together (mlx-lm-lora decodes batch_size prompts at once)
    wide = {
        **kw,
        "prompt_tokens": batch[0],
        "batch_size": max(kw.get("batch_size", 1), len(batch[0])),
    }
    comps, texts, idx = generate(**wide)
    t1 = time.perf_counter()
    reward_fn(
        prompts=[batch[2][i] for i in idx],
        completions=texts,
        answer=[batch[3][i] for i in idx],
        types=None,
    )
    clock[0] += t1 - t0
    clock[1] += time.perf_counter() - t1
    groups = []
    for u in dict.fromkeys(idx):
        rows = [i for i, x in enumerate(idx) if x == u]
        groups.append(
            _Group(
                tuple(None if part is None else part[u] for part in batch),
                [comps[i] for i in rows],
                [texts[i] for i in rows],
                [reward_fn.last[i] for i in rows],
            )
        )
    return groups


def _fill_in_place(batch, batches, draw, min_span: float, max_draws: int):
    """Dynamic sampling over-sampled once up front (DAPO): the trainer's `batch` and the next
    max_draws - 1 batches of `batches.source` are drawn together, `draw` called once (one
    batched generation, one reward call), then `fill_batch` keeps the first groups with signal.
    The trainer's batch is rewritten in place to hold the kept groups' entries. Returns (kept,
    discarded, batches drawn)."""
    extra = []
    for _ in range(max_draws - 1):
        b = next(batches.source, None) if batches.source is not None else None
        if b is None:
            break
        extra.append(b)
    together = tuple(
        None if part is None else [*part, *(x for b in extra for x in b[j])]
        for j, part in enumerate(batch)
    )
    groups = draw(together)
    kept, discarded, _ = fill_batch(lambda: groups, len(batch[0]), min_span, 1)
    for j, part in enumerate(batch):
        if part is not None:
            part[:] = [g.entry[j] for g in kept]
    return kept, discarded, 1 + len(extra)


@contextlib.contextmanager
def grpo_hooks(
    reward_fn,
    kind: str,
    min_span: float,
    rollouts: Path,
    metrics: MetricsLog,
    max_tokens: int,
    eos_ids,
    dynamic: bool = False,
    max_draws: int = 1,
):
    """mlx-lm-lora's GRPO trainer with our advantages (`group_advantages` replaces its σ-normalised
    ones), every training rollout written to `rollouts` (JSON lines: step, group, task id,
    completion, extracted body, tier, reason, reward, advantage, truncated, tokens, discarded)
    and per-step timings and draws in metrics.jsonl. `dynamic`: DAPO's dynamic sampling
    (`fill_batch` over `max_draws` batches of prompts drawn together, `_fill_in_place`). Pass
    the yielded log's `batches` to the trainer as `iterate_batches`. reward_fn:
    `jacrl.ruler.reward.reward_function(...)` (its `.last` holds the Scored of each call); rollouts
    are scored once, as drawn."""
    import mlx.core as mx
    from mlx_lm_lora.trainer import grpo_trainer as gt

    log = _StepLog(rollouts, metrics, max_tokens, set(eos_ids))
    log.batches = batches = _Batches()
    orig = gt.generate_grpo, gt._rollout_rewards, gt.evaluate_grpo, gt.tqdm

    def generate(*args, **kw):
        if log.validating:
            return orig[0](*args, **kw)
        log.close_step(time.perf_counter())  # before this generation: not the last step's update
        batch = batches.current
        if args or batch is None or batch[0] is not kw["prompt_tokens"]:
            raise RuntimeError("grpo_hooks: the trainer must draw its batches from log.batches")
        clock = [0.0, 0.0]

        def draw(b):
            return _draw_groups(orig[0], reward_fn, b, kw, clock)

        if dynamic:
            kept, discarded, draws = _fill_in_place(batch, batches, draw, min_span, max_draws)
        else:
            kept, discarded, draws = draw(batch), [], 1
        log.drawn(kept, discarded, draws, *clock)
        return (
            [c for g in kept for c in g.completions],
            [t for g in kept for t in g.texts],
            [k for k, g in enumerate(kept) for _ in g.completions],
        )

    def rewards(batch, texts, indices, reward_funcs, reward_weights):
        if log.validating:
            return orig[1](batch, texts, indices, reward_funcs, reward_weights)
        t0 = time.perf_counter()
        scores = [r for g in log.kept for r in g.rewards]

        def replay(**_):  # the scores of the draw: the rollouts are not run again
            return scores

        replay.__name__ = reward_funcs[0].__name__  # its metrics' names
        _, info = orig[1](batch, texts, indices, [replay], reward_weights)
        groups = [[i for i, x in enumerate(indices) if x == u] for u in sorted(set(indices))]
        ours, skipped = group_advantages(scores, groups, kind, min_span)
        log.rewarded(ours, skipped, time.perf_counter() - t0, kind)
        return mx.array(ours, dtype=mx.float32), info

    gt.generate_grpo, gt._rollout_rewards = generate, rewards
    gt.evaluate_grpo = log.validation(orig[2])
    gt.tqdm = _quiet_tqdm(orig[3])
    try:
        yield log
        log.close_step()
    finally:
        gt.generate_grpo, gt._rollout_rewards, gt.evaluate_grpo, gt.tqdm = orig
