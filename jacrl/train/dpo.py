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
from jacrl.models import load
from jacrl.prompts import SYSTEM_PROMPT
from jacrl.provenance import data_hash
from jacrl.reward import reward_isolation, score_completions
from jacrl.train.artifacts import (
    Artifact,
    build_artifact,
    hash_json,
    key_parts,
    resolve_base,
)
from jacrl.train.mlx_compat import lora_model, seed_all, trainable, trainer_args, warn_slow_blas
from jacrl.train.sft import fenced, gold_body, task_id
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
            f"dpo ({cfg.loss_type}, beta {cfg.beta}): loss {trained['first_loss']} -> "
            f"{trained['last_loss']}, margin {trained['last_margin']}"
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
            loss_type=cfg.loss_type,
        )
    wall = time.time() - t0
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
        "train_s": round(wall, 2),
        "s_per_iter": round(wall / cfg.iters, 3),
    }
