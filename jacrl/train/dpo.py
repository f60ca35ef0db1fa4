"""DPO on preference pairs our verifier builds from the SFT policy's own samples.

`dpo` samples `cfg.samples` completions per train task from the parent (base + its SFT adapter)
and grades them, with the fenced gold body, by `cfg.reward_formula` (`build_pairs`). A pair per
failing completion, at most `cfg.pairs_per_task` per task:

* chosen: the task's first sampled completion that passes (tier exact), as the policy wrote it;
  the fenced gold body (what SFT trained on) when none does. On-policy text first: DPO's loss
  moves the log-probabilities of both sides, and text the policy already writes moves less
  erratically than text it never would; the gold keeps a task the policy always fails in play.
* rejected: the task's distinct failing completions, highest reward first (ties: sample order).
  Near misses (it runs, most of the output right) are what the policy cannot yet tell from a
  pass; garbage (no code, no parse) it already ranks low, and a pair of it teaches little.

A task without a failing sample gives no pair (logged, listed in the manifest); no pair at all
is an error. Every pair is kept in the artifact's pairs.jsonl (`jacrl.samples.read_pairs`,
`jacrl samples pairs.jsonl`). Training is mlx-lm-lora's `train_dpo`, continuing the parent's
adapter, with the starting policy (base + parent adapter) as the frozen reference: loaded a
second time, as GRPO's `reference="copy"` (`_reference` says why not a view). The key covers the
sampling inputs (model, parent, tasks, config, seed), so a rerun of the same key is reused
whole and a rebuild samples the same pairs.
"""

from __future__ import annotations

import dataclasses
import os
import time
from collections.abc import Callable, Sequence
from contextlib import contextmanager
from pathlib import Path

from jacrl import jsonl
from jacrl.config import DPOConfig
from jacrl.generate import sample_tasks
from jacrl.models.registry import load
from jacrl.prompts import SYSTEM_PROMPT
from jacrl.provenance import data_hash
from jacrl.ruler.reward import reward_isolation, score_completions
from jacrl.tasks.record import fenced, gold_body, task_id
from jacrl.train.artifacts import (
    Artifact,
    build_artifact,
    hash_json,
    key_parts,
    resolve_base,
)
from jacrl.train.mlx_compat import lora_model, seed_all, trainable, trainer_args, warn_slow_blas
from jacrl.train.tracking import Tracking, metrics_log, tracking

PAIRS = "pairs.jsonl"


def build_pairs(
    tasks: Sequence[dict],
    completions: Sequence[Sequence[str]],
    cfg: DPOConfig,
    split: str = "train",
) -> tuple[list[dict], list[str]]:
    """(pair rows, ids of the tasks that gave none) from each task's sampled completions, graded
    with the fenced gold by cfg.reward_formula (the rule: this module's docstring). A gold that
    fails the verifier is a ValueError: the task is broken."""
    flat = [
        (i, j, c)
        for i, cs in enumerate(completions)
        for j, c in enumerate([fenced(gold_body(tasks[i])), *cs])
    ]
    scored = score_completions(
        [c for _, _, c in flat],
        [tasks[i]["answer"] for i, _, _ in flat],
        formula=cfg.reward_formula,
    )
    per_task: list[list[tuple[int, str, object]]] = [[] for _ in tasks]
    for (i, j, c), s in zip(flat, scored, strict=True):
        per_task[i].append((j, c, s))
    rows, without = [], []
    for task, graded in zip(tasks, per_task, strict=True):
        (_, gold, gold_s), samples = graded[0], graded[1:]
        if not gold_s.exact:
            raise ValueError(
                f"task {task_id(task)}: its gold body fails the verifier "
                f"({gold_s.tier}); rebuild the tasks"
            )
        passing = [g for g in samples if g[2].exact]
        chosen, chosen_s, source = (
            (passing[0][1], passing[0][2], f"sample {passing[0][0]}")
            if passing
            else (gold, gold_s, "gold")
        )
        failing, seen = [], set()
        for j, c, s in samples:
            if not s.exact and c not in seen:
                seen.add(c)
                failing.append((j, c, s))
        failing.sort(key=lambda g: (-g[2].score, g[0]))
        if not failing:
            without.append(task_id(task))
        for rank, (j, c, s) in enumerate(failing[: cfg.pairs_per_task], start=1):
            rows.append(
                {
                    "split": split,
                    "task": task_id(task),
                    "prompt": task["prompt"],
                    "chosen": chosen,
                    "chosen_source": source,
                    "chosen_reward": round(chosen_s.score, 4),
                    "chosen_tier": chosen_s.tier,
                    "rejected": c,
                    "rejected_sample": j,
                    "rejected_reward": round(s.score, 4),
                    "rejected_tier": s.tier,
                    "rank": rank,
                    "reason": f"chosen: {source} (passes); rejected: sample {j}, {s.tier}, reward "
                    f"{s.score:.3f}, failure {rank} of {len(failing)} by reward",
                }
            )
    return rows, without


def require_pairs(rows: list[dict], tasks: int, cfg: DPOConfig) -> None:
    """RuntimeError (one line) when no task gave a pair: nothing to train on."""
    if not rows:
        raise RuntimeError(
            f"DPO: none of {tasks} tasks had a failing sample among "
            f"{cfg.samples} (no pair to train on); sample more or hotter"
        )


def sample_pairs(
    base: Path,
    adapter: Path,
    tasks: Sequence[dict],
    cfg: DPOConfig,
    seed: int,
    split: str = "train",
) -> tuple[list[dict], list[str], dict]:
    """Sample cfg.samples completions per task from base + adapter (seeded) and `build_pairs`
    them. Returns (rows, tasks without a pair, sampling counts for the manifest)."""
    t0 = time.time()
    outs = sample_tasks(base, adapter, tasks, cfg, seed)
    rows, without = build_pairs(tasks, [[s.text for s in ss] for ss in outs], cfg, split)
    info = {
        "samples_total": cfg.samples * len(tasks),
        "tasks": len(tasks),
        "tasks_without_pair": without,
        "sample_s": round(time.time() - t0, 2),
    }
    return rows, without, info


def _pairs_summary(rows: list[dict], info: dict) -> dict:
    """What the manifest says of the train pairs: how many, from where, the reward margin."""
    margins = [r["chosen_reward"] - r["rejected_reward"] for r in rows]
    return {
        **info,
        "pairs": len(rows),
        "tasks_with_pair": len({r["task"] for r in rows}),
        "chosen_from_samples": sum(r["chosen_source"] != "gold" for r in rows),
        "chosen_from_gold": sum(r["chosen_source"] == "gold" for r in rows),
        "reward_margin_mean": round(sum(margins) / len(margins), 4) if margins else None,
    }


def dpo(
    model,
    train_tasks: Sequence[dict],
    valid_tasks: Sequence[dict] | None = None,
    cfg: DPOConfig | None = None,
    out_root: str | os.PathLike | None = None,
    *,
    parent: Artifact,
    condition: str = "sft_dpo",
    log: Callable[[str], None] = print,
    report_to: str | None = None,
    project: str | None = None,
) -> Artifact:
    """DPO continuing `parent`'s adapter (required: the SFT policy the pairs are sampled from and
    the frozen reference) on verifier-built pairs (`build_pairs`). valid_tasks: pairs built the
    same way for validation, only when cfg.steps_per_eval > 0. Raises when no task gives a pair.
    out_root None: the project's artifacts/. report_to / project: experiment tracking of the
    build (`jacrl.train.tracking`; no key changes)."""
    cfg = cfg if cfg is not None else DPOConfig()
    if parent is None:
        raise ValueError(
            "DPO needs a parent artifact (the SFT adapter it samples from and continues)"
        )
    isolation = reward_isolation()  # refuses here, before any work, without a sandbox
    base = resolve_base(model, parent)
    data = {
        "train_tasks": data_hash(train_tasks),
        "valid_tasks": data_hash(valid_tasks) if valid_tasks else None,
    }
    parts = key_parts(condition, "dpo", base, data, cfg, parent, {"system_prompt": SYSTEM_PROMPT})
    track = tracking(report_to, project, condition, parts, cfg)

    def build(tmp: Path) -> dict:
        rows, without, info = sample_pairs(base, parent.adapter_path, train_tasks, cfg, cfg.seed)
        summary = _pairs_summary(rows, info)
        log(
            f"dpo: {len(rows)} pairs from {summary['tasks_with_pair']}/{len(train_tasks)} tasks"
            + (f"; no failing sample (no pair): {', '.join(without)}" if without else "")
        )
        require_pairs(rows, len(train_tasks), cfg)
        val = []
        if valid_tasks and cfg.steps_per_eval > 0:
            val = sample_pairs(base, parent.adapter_path, valid_tasks, cfg, cfg.seed + 1, "valid")[
                0
            ]
        jsonl.write(tmp / PAIRS, rows + val)
        trained = train_dpo(base, rows, val, cfg, tmp, parent, track)
        log(
            f"dpo ({cfg.loss_type}, beta {cfg.beta}, rpo_alpha {cfg.rpo_alpha}, dpop_lambda "
            f"{cfg.dpop_lambda}): loss {trained['first_loss']} -> {trained['last_loss']}, "
            f"margin {trained['last_margin']}; chosen log-prob/token "
            f"{trained['logp_before']['chosen']} -> {trained['logp_after']['chosen']}, "
            f"rejected {trained['logp_before']['rejected']} -> "
            f"{trained['logp_after']['rejected']}"
        )
        return {
            "stage": "dpo",
            "isolation": isolation,
            "data": {**data, "pairs_hash": hash_json(rows), "valid_pairs": len(val)},
            "pairs": summary,
            "sampled_from": str(parent.path),
            "hyperparameters": dataclasses.asdict(cfg),
            "summary": trained,
        }

    return build_artifact(condition, parts, base, out_root, build, log)


# -------------------------------------------------------------------------------------------
# training
# -------------------------------------------------------------------------------------------


class _CoreWithWorkingSet:
    """mlx.core as mlx-lm-lora's DPO trainer sees it: its first line reads
    device_info()["max_recommended_working_set_size"], which a CPU device does not report
    (KeyError); here it reads 0, and set_wired_limit(0) leaves the wired limit off."""

    def __init__(self, core):
        self._core = core

    def __getattr__(self, name):
        return getattr(self._core, name)

    def device_info(self):
        return {"max_recommended_working_set_size": 0, **self._core.device_info()}


@contextmanager
def _adapted(dt):
    """mlx-lm-lora's dpo_trainer module `dt` for the duration: working on a CPU device, its
    per-report and save lines dropped (they are in metrics.jsonl; the progress bar stays)."""

    class Quiet(dt.tqdm):
        @classmethod
        def write(cls, *args, **kw):
            return None

    saved = dt.mx, dt.tqdm
    dt.mx, dt.tqdm = _CoreWithWorkingSet(saved[0]), Quiet
    try:
        yield
    finally:
        dt.mx, dt.tqdm = saved


def _dataset(rows: list[dict], tok, cfg: DPOConfig):
    """mlx-lm-lora's DPODataset over rows (system prompt on every one); a pair longer than
    max_seq_length is an error (the trainer would cut the response's end off)."""
    from mlx_lm_lora.trainer.datasets import DPODataset

    ds = DPODataset(
        [
            {
                "prompt": r["prompt"],
                "chosen": r["chosen"],
                "rejected": r["rejected"],
                "system": SYSTEM_PROMPT,
            }
            for r in rows
        ],
        tok,
    )
    longest = max(max(len(ds[i]["chosen"]), len(ds[i]["rejected"])) for i in range(len(ds)))
    if longest > cfg.max_seq_length:
        raise ValueError(
            f"a DPO pair has {longest} tokens > max_seq_length={cfg.max_seq_length}"
            f"; raise max_seq_length"
        )
    return ds, longest


def _reference(base: Path, adapter: Path):
    """The frozen reference: a second load of base + the parent's adapter. Not GRPO's view over
    the policy's arrays (`reference.frozen_view`): mlx-lm-lora's DPO step is mx.compile'd with
    the policy's arrays as its state, and compile rejects a closure holding those same arrays
    ("uncaptured inputs"). Costs a second copy of the weights."""
    ref, _ = load(base, adapter_path=str(adapter), fresh=True)
    ref.freeze()
    ref.eval()
    return ref


def dpo_loss(rpo_alpha: float = 0.0, dpop_lambda: float = 0.0):
    """The loss mlx-lm-lora's trainer calls (its `loss_fn` signature): its own `dpo_loss` when
    both terms are off, else that loss with the terms that keep the chosen answer likely:

    * dpop_lambda > 0 (DPO-Positive, Pal et al. 2024, "Smaug", eq. 3): the sigmoid's argument
      becomes beta * (logits - lambda * max(0, log ref(chosen) - log policy(chosen))), so the
      loss stays high while the chosen answer is less likely than under the reference (whole
      answers' log-probabilities, as the logits);
    * rpo_alpha > 0 (RPO, Pang et al. 2024, "Iterative Reasoning Preference Optimization"):
      + alpha * NLL(chosen) / its tokens, the SFT loss on the chosen answer.

    Rewards and metrics are the trainer's own (`train_chosen_reward` = beta * mean(log policy -
    log ref) of the chosen answers)."""
    import mlx.core as mx
    import mlx.nn as nn
    from mlx_lm_lora.trainer.dpo_trainer import dpo_loss as plain

    if not rpo_alpha and not dpop_lambda:
        return plain

    def loss(
        policy_chosen_score,
        policy_rejected_score,
        reference_chosen_score,
        reference_rejected_score,
        chosen_masks,
        rejected_masks,
        beta,
        delta,
        loss_type="sigmoid",
    ):
        value, reward, toks, metrics = plain(
            policy_chosen_score=policy_chosen_score,
            policy_rejected_score=policy_rejected_score,
            reference_chosen_score=reference_chosen_score,
            reference_rejected_score=reference_rejected_score,
            chosen_masks=chosen_masks,
            rejected_masks=rejected_masks,
            beta=beta,
            delta=delta,
            loss_type=loss_type,
        )
        if dpop_lambda:
            logits = (policy_chosen_score - policy_rejected_score) - (
                reference_chosen_score - reference_rejected_score
            )
            fall = mx.maximum(reference_chosen_score - policy_chosen_score, 0.0)
            value = mx.mean(-nn.log_sigmoid(beta * (logits - dpop_lambda * fall)))
        if rpo_alpha:
            # ipo's scores are already per token (mlx-lm-lora's compute_score)
            tokens = mx.maximum(chosen_masks[:, 1:].sum(-1), 1)
            per_token = policy_chosen_score if loss_type == "ipo" else policy_chosen_score / tokens
            value = value + rpo_alpha * mx.mean(-per_token)
        return value, reward, toks, metrics

    return loss


def pair_logps(model, ds, max_seq_length: int) -> dict:
    """Mean per-token log-probability (nats) of the chosen and of the rejected answers of the
    DPODataset `ds` under `model`, one pair at a time (answer tokens only, as the loss sees)."""
    import mlx.core as mx
    from mlx_lm_lora.trainer.dpo_trainer import get_token_scores, iterate_dpo_batches

    model.eval()
    sums = {"chosen": 0.0, "rejected": 0.0}
    n = 0
    for chosen, rejected, cm, rm in iterate_dpo_batches(ds, 1, max_seq_length):
        for name, x, m in (("chosen", chosen, cm), ("rejected", rejected, rm)):
            per = get_token_scores(model, x, m).sum() / mx.maximum(m[:, 1:].sum(), 1)
            sums[name] += per.item()
        n += 1
    return {k: round(v / max(1, n), 4) for k, v in sums.items()}


def train_dpo(
    base: Path,
    rows: list[dict],
    val: list[dict],
    cfg: DPOConfig,
    out_dir: Path,
    parent: Artifact,
    track: Tracking | None = None,
) -> dict:
    """mlx-lm-lora DPO of base + the parent's adapter (trained further) against the frozen
    starting policy on pair rows; writes adapters + adapter_config.json + metrics.jsonl into
    out_dir (and, with `track`, the same records to its runs); returns the manifest's summary."""
    import mlx.optimizers as optim  # heavy: loaded only when training
    from mlx_lm_lora.trainer import dpo_trainer as dt

    warn_slow_blas()
    seed_all(cfg.seed)  # LoRA dropout and the trainer's batch order (numpy's global generator)
    policy, tok, acfg = lora_model(base, cfg, out_dir, parent.adapter_path)
    ref = _reference(base, parent.adapter_path)
    train_ds, longest = _dataset(rows, tok, cfg)
    val_ds = _dataset(val, tok, cfg)[0] if val else None
    batch = max(1, min(cfg.batch_size, len(rows), len(val) if val else len(rows)))
    args = dt.DPOTrainingArgs(
        **trainer_args(cfg, batch, out_dir),
        beta=cfg.beta,
        loss_type=cfg.loss_type,
        delta=cfg.delta,
    )
    before = pair_logps(ref, train_ds, cfg.max_seq_length)
    t0 = time.time()
    with metrics_log(out_dir / "metrics.jsonl", "dpo", track) as metrics, _adapted(dt):
        dt.train_dpo(
            model=policy,
            ref_model=ref,
            optimizer=optim.Adam(cfg.learning_rate),
            train_dataset=train_ds,
            val_dataset=val_ds,
            args=args,
            training_callback=metrics,
            loss_fn=dpo_loss(cfg.rpo_alpha, cfg.dpop_lambda),
            loss_type=cfg.loss_type,
        )
    wall = time.time() - t0
    after = pair_logps(policy, train_ds, cfg.max_seq_length)
    tr = metrics.train
    return {
        "adapter": acfg,
        "adapter_inherited_from": parent.key,
        "reference_model": "base + parent adapter",
        "reference_weights": "copy",
        "pairs": len(rows),
        "valid_pairs": len(val),
        "batch_size": batch,
        "longest_pair_tokens": longest,
        "trainable_params": trainable(policy),
        "first_loss": tr[0]["train_loss"] if tr else None,
        "last_loss": tr[-1]["train_loss"] if tr else None,
        "last_margin": tr[-1]["train_margins"] if tr else None,
        "last_accuracy": tr[-1]["train_accuracies"] if tr else None,
        # mean per-token log-probability of the train pairs' answers, before (the reference)
        # and after: a chosen side that fell is DPO's likelihood displacement (docs/dpo.md)
        "logp_before": before,
        "logp_after": after,
        "train_s": round(wall, 2),
        "s_per_iter": round(wall / cfg.iters, 3),
    }
