"""GRPO's rollouts: drawing them (every prompt of a step decoded in one batch by
`jacrl.generate.decode`, scored once by the sandboxed reward), their advantages, DAPO's dynamic
sampling, and the log of what each step trained on.

* `group_advantages`: r - group mean by default (Dr. GRPO), or divided by σ + 1e-4 as
  mlx-lm-lora and TRL do (which turns a 0.0005 reward spread into ±1, a full update on noise);
  a group whose rewards span less than `min_span` gets 0.
* `fill_batch`: DAPO's dynamic sampling (a step trains on groups whose rewards differ, drawn from
  more prompts than the batch, all in one batched generation).
* `StepLog`: every rollout to rollouts.jsonl and one `step` record per step to metrics.jsonl.
"""

from __future__ import annotations

import dataclasses
import time
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

from jacrl import jsonl

# Dr. GRPO's r - mean(group); mlx-lm-lora's and TRL's (r - mean) / (σ + 1e-4)
ADVANTAGES = ("centered", "std")


def group_advantages(rewards, groups: list[list[int]], kind: str, min_span: float = 0.0):
    """(advantage per rollout, share of groups skipped). A group whose rewards span less than
    `min_span` (max - min; DAPO's dynamic-sampling filter) gets advantage 0: no policy-gradient
    push from reward differences that small. kind "centered": r - mean; "std": divided by
    σ + 1e-4, which turns a 0.0005 spread into ±0.71."""
    import numpy as np

    if kind not in ADVANTAGES:
        raise ValueError(f"unknown advantage {kind!r}; choose from {', '.join(ADVANTAGES)}")
    rewards = np.asarray(rewards, dtype=np.float64)
    adv = np.zeros_like(rewards)
    skipped = 0
    for idx in groups:
        g = rewards[idx]
        if not has_signal(g, min_span):
            skipped += 1
            continue
        adv[idx] = (g - g.mean()) / ((g.std() + 1e-4) if kind == "std" else 1.0)
    return adv, skipped / max(1, len(groups))


def has_signal(rewards, min_span: float) -> bool:
    """Rewards that differ by at least `min_span` (and at all): advantages that are not 0."""
    return max(rewards) > min(rewards) and max(rewards) - min(rewards) >= min_span


def fill_batch(draw, need: int, min_span: float, max_draws: int):
    """DAPO's dynamic sampling: call `draw()` (-> groups, each with `.rewards`) until `need`
    groups with signal (`has_signal`) are in hand or `max_draws` draws are made, so a task set
    whose groups all agree cannot loop forever. Short of `need` at the cap, the latest groups
    drawn fill the batch (advantage 0: the step still runs, as it would without dynamic
    sampling). Returns (the step's groups, the groups discarded, draws made)."""
    kept, passed, draws = [], [], 0
    while len(kept) < need and draws < max_draws:
        draws += 1
        for g in draw():
            (kept if len(kept) < need and has_signal(g.rewards, min_span) else passed).append(g)
    short = need - len(kept)
    if short > 0:
        kept, passed = kept + passed[len(passed) - short :], passed[: len(passed) - short]
    return kept, passed, draws


def prompt_batches(n: int, batch: int, seed: int) -> Iterator[list[int]]:
    """Indices of `batch` prompts of `n` per step, for ever: each epoch a seeded permutation cut
    into whole batches (an epoch's remainder waits for the next one's shuffle)."""
    import numpy as np

    rng = np.random.default_rng(seed)
    while True:
        order = rng.permutation(n).tolist()
        for at in range(0, n - batch + 1, batch):
            yield order[at : at + batch]


@dataclasses.dataclass
class Group:
    """One prompt's rollouts as drawn: its record's index, each completion's token ids (its end
    token included: the policy learns to stop), texts (without it) and Scored."""

    task: int
    ids: list[tuple[int, ...]]
    texts: list[str]
    scored: list

    @property
    def rewards(self) -> list[float]:
        return [s.score for s in self.scored]


@dataclasses.dataclass(frozen=True)
class Rollouts:
    """How a step samples: `group_size` completions per prompt at this temperature, top-p,
    top-k and token budget, scored with `formula`; `batch` sequences decoded at once (0: all of
    a step's together)."""

    group_size: int
    temperature: float
    top_p: float
    top_k: int
    max_tokens: int
    formula: str
    batch: int = 0


def draw(
    policy, tok, records: Sequence[dict], tasks: list[int], how: Rollouts, seed: int
) -> tuple[list[Group], float, float]:
    """Every task's rollouts, decoded together and scored in one reward call: (groups in the
    order of `tasks`, generation seconds, reward seconds)."""
    from jacrl.generate import Request, decode
    from jacrl.ruler.reward import score_completions

    t0 = time.perf_counter()
    reqs = [
        Request(
            records[t]["prompt"],
            how.group_size,
            how.temperature,
            how.max_tokens,
            how.top_p,
            how.top_k,
        )
        for t in tasks
    ]
    was_training = policy.training
    policy.eval()  # no dropout while sampling
    try:
        batch = how.batch or len(reqs) * how.group_size
        out = decode(policy, tok, reqs, seed=seed, batch_size=batch)
    finally:
        policy.train(was_training)
    t1 = time.perf_counter()
    texts = [s.text for row in out for s in row]
    answers = [records[t]["answer"] for t, row in zip(tasks, out, strict=True) for _ in row]
    scored = score_completions(texts, answers, formula=how.formula)
    groups, at = [], 0
    for t, row in zip(tasks, out, strict=True):
        n = len(row)
        groups.append(Group(t, [s.ids for s in row], texts[at : at + n], scored[at : at + n]))
        at += n
    return groups, t1 - t0, time.perf_counter() - t1


class StepLog:
    """What each training step drew and trained on: its rollouts appended to `rollouts`
    (step, group, task id, completion, extracted body, tier, reason, reward, advantage,
    truncated, tokens, discarded) and one `step` record through `write`."""

    def __init__(self, rollouts: Path, write: Callable[[dict], None], max_tokens: int, eos):
        self.rollouts, self.write = rollouts, write
        self.max_tokens, self.eos = max_tokens, set(eos)

    def _rows(self, step: int, g: Group, group, adv, discarded: bool) -> list[dict]:
        rows = []
        for ids, text, s, a in zip(g.ids, g.texts, g.scored, adv, strict=True):
            stopped = bool(ids) and ids[-1] in self.eos
            rows.append(
                {
                    "step": step,
                    "group": group,
                    "task_id": s.task_id,
                    "completion": text,
                    "body": s.body,
                    "tier": s.tier,
                    "reason": s.reason,
                    "reward": s.score,
                    "advantage": round(float(a), 6),
                    "truncated": not stopped and len(ids) >= self.max_tokens,
                    "tokens": len(ids) - stopped,
                    "discarded": discarded,
                }
            )
        return rows

    def step(self, step: int, kept, discarded, adv, skipped: float, draws: int, **extra) -> dict:
        """Log one step; `extra` (timings, the advantage kind) joins its record. Returns it."""
        rows, at = [], 0
        for k, g in enumerate(kept):
            rows += self._rows(step, g, k, adv[at : at + len(g.scored)], False)
            at += len(g.scored)
        dropped = [
            r for g in discarded for r in self._rows(step, g, None, [0.0] * len(g.scored), True)
        ]
        with open(self.rollouts, "a") as f:
            f.writelines(jsonl.dumps(r) for r in rows + dropped)
        drawn = len(kept) + len(discarded)
        with_signal = round((1 - skipped) * len(kept))
        rec = {
            "step": step,
            **extra,
            "reward_mean": round(sum(r["reward"] for r in rows) / len(rows), 6),
            "exact": sum(r["tier"] == "exact" for r in rows),
            "rollouts": len(rows),
            "draws": draws,
            "groups_drawn": drawn,
            "groups_kept": with_signal,
            "groups_skipped": round(1 - with_signal / drawn, 4),
            # TRL's frac_reward_zero_std, turned round: the share of the step's groups whose
            # rewards span min_group_span (the only groups an update learns from)
            "groups_trained": len(kept),
            "signal_frac": round(with_signal / max(1, len(kept)), 4),
            "tiers": dict(sorted(Counter(r["tier"] for r in rows).items())),
            "rollouts_discarded": len(dropped),
            "truncated": round(sum(r["truncated"] for r in rows) / len(rows), 4),
        }
        self.write(rec)
        return rec
