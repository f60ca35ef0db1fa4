"""Gold SFT: LoRA on (system, user = the task's prompt, assistant = the ```jac fenced gold body),
prompt masked, with mlx-lm's trainer, `sft_loss` and `iterate_all` (every example every epoch).

Every task given is trained on (none is carved off for validation); the batch is clamped to the
data; validation is on the given valid tasks' gold bodies, else on the training set (the manifest
says which). `train_sft` is also the training half of RFT and STaR.

`report_to` (W&B, SwanLab): `jacrl.train.tracking`; it changes no key.
"""

from __future__ import annotations

import dataclasses
import os
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from jacrl import jsonl
from jacrl.config import SFTConfig
from jacrl.tasks.record import gold_records, task_id
from jacrl.train.artifacts import (
    Artifact,
    build_artifact,
    hash_json,
    key_parts,
    resolve_base,
)
from jacrl.train.mlx_compat import (
    iterate_all,
    lora_model,
    no_live_bar_in_a_kernel,
    seed_all,
    sft_loss,
    sliced_head_ok,
    trainable,
    warn_slow_blas,
)
from jacrl.train.tracking import Tracking, metrics_log, tracking

HEAD_SKIP = 64  # sft_loss skips the prompt's logits in multiples of this many positions
GRADED_BUDGET_FACTOR = 1.5  # best_by=reward's answer budgets: the real-model ladder's eval factor


def valid_records(
    valid_tasks: Sequence[dict] | None, train_records: Sequence[dict]
) -> tuple[list[dict], str]:
    """(validation records, where they came from): the valid tasks' gold, else the train set."""
    if valid_tasks:
        return gold_records(valid_tasks), "valid tasks (gold)"
    return list(train_records), (
        "train set (no valid tasks given: validation loss is on training data)"
    )


def _schedule(cfg: SFTConfig):
    """Linear warm-up to the peak, then cosine decay over decay_steps."""
    import mlx.optimizers as optim  # heavy: loaded only when training

    decay = optim.cosine_decay(cfg.learning_rate, max(1, cfg.decay_steps))
    if cfg.warmup <= 0:
        return decay
    warm = optim.linear_schedule(0.0, cfg.learning_rate, cfg.warmup)
    return optim.join_schedules([warm, decay], [cfg.warmup])


def graded_reward(model, tok, tasks: Sequence[dict]) -> float:
    """The mean tiered reward of `model`'s greedy answers to `tasks` (each within the budget an
    evaluation at factor GRADED_BUDGET_FACTOR gives it), run by the sandboxed reward: what
    best_by=reward ranks validations by, where the loss on gold misleads (a rung whose valid loss
    is lowest before the model has learned the answer's form)."""
    from jacrl.config import MAX_TOKENS
    from jacrl.generate import generate
    from jacrl.ruler.reward import score_completions
    from jacrl.token_budget import budgets

    limits = budgets(tok, tasks, GRADED_BUDGET_FACTOR, MAX_TOKENS)
    out = generate(model, tok, [t["prompt"] for t in tasks], max_tokens=limits)
    scored = score_completions([s[0].text for s in out], [t["answer"] for t in tasks])
    return round(sum(x.score for x in scored) / len(scored), 6)


class BestWeights:
    """The metrics callback, also keeping a copy of the trainable (LoRA) weights at the best
    validation reported: the lowest loss, or with `grade` (model -> mean reward, also logged as
    val_reward) the highest reward, ties to the lower loss. mlx-lm validates before the step of
    the iteration it reports, so the copy is the weights the validation measured."""

    def __init__(self, metrics, model, grade: Callable | None = None):
        self.metrics, self.model, self.grade = metrics, model, grade
        self.loss: float | None = None
        self.reward: float | None = None
        self.iter: int | None = None
        self.weights: dict | None = None

    def on_train_loss_report(self, info: dict) -> None:
        self.metrics.on_train_loss_report(info)

    def on_val_loss_report(self, info: dict) -> None:
        import mlx.core as mx
        from mlx.utils import tree_flatten

        loss = round(float(info["val_loss"]), 6)
        reward = None
        if self.grade is not None:
            reward = self.grade(self.model)
            info = {**info, "val_reward": reward}
        self.metrics.on_val_loss_report(info)
        if self.iter is None or self._rank(reward, loss) > self._rank(self.reward, self.loss):
            self.loss, self.reward, self.iter = loss, reward, int(info["iteration"])
            self.weights = {
                k: mx.array(v) for k, v in tree_flatten(self.model.trainable_parameters())
            }
            mx.eval(self.weights)

    def _rank(self, reward: float | None, loss: float | None) -> tuple:
        return (reward or 0.0, -loss) if self.grade is not None else (-loss,)

    def save(self, path: Path) -> None:
        """The kept weights, in place of the last (the adapter file mlx-lm wrote)."""
        import mlx.core as mx

        mx.save_safetensors(str(path), self.weights)


def train_sft(
    base: Path,
    train_records: Sequence[dict],
    valid_records: Sequence[dict],
    cfg: SFTConfig,
    out_dir: Path,
    track: Tracking | None = None,
    graded_tasks: Sequence[dict] = (),
) -> dict:
    """LoRA SFT of `base` on chat records; writes adapters + adapter_config.json + metrics.jsonl
    into out_dir (and, with `track`, the same metrics to its runs); returns a summary for the
    manifest. graded_tasks: the valid tasks (prompt, answer) best_by=reward grades."""
    import mlx.optimizers as optim  # heavy: loaded only when training
    from mlx_lm.tuner.datasets import CacheDataset, ChatDataset
    from mlx_lm.tuner.trainer import TrainingArgs, train

    warn_slow_blas()
    if not train_records:
        raise ValueError("SFT needs at least one training example")
    if cfg.best_by == "reward" and not (cfg.keep_best and cfg.steps_per_eval and graded_tasks):
        raise ValueError(
            "sft.best_by=reward needs keep_best, steps_per_eval > 0 and valid tasks to grade"
        )
    seed_all(cfg.seed)
    model, tok, acfg = lora_model(base, cfg, out_dir)
    batch = max(1, min(cfg.batch_size, len(train_records), len(valid_records)))
    train_ds = CacheDataset(ChatDataset(list(train_records), tok, mask_prompt=cfg.mask_prompt))
    valid_ds = CacheDataset(ChatDataset(list(valid_records), tok, mask_prompt=cfg.mask_prompt))
    longest = max(len(train_ds[i][0]) for i in range(len(train_ds)))
    args = TrainingArgs(
        batch_size=batch,
        iters=cfg.iters,
        val_batches=cfg.val_batches,
        steps_per_report=cfg.steps_per_report,
        steps_per_eval=cfg.steps_per_eval,
        steps_per_save=cfg.iters + 1,
        max_seq_length=cfg.max_seq_length,
        adapter_file=str(out_dir / "adapters.safetensors"),
        grad_checkpoint=False,
    )
    t0 = time.time()
    head_skip = HEAD_SKIP if cfg.mask_prompt and sliced_head_ok(model, train_ds[0][0]) else 0

    def batches(dataset, batch_size, max_seq_length, loop=False, seed=None, comm_group=None):
        return iterate_all(
            dataset,
            batch_size,
            max_seq_length,
            loop=loop,
            seed=cfg.seed if loop else 0,
            head_skip=head_skip,
        )

    with metrics_log(out_dir / "metrics.jsonl", "sft", track) as metrics:
        graded = list(graded_tasks)[: cfg.graded_valid]
        grade = (lambda m: graded_reward(m, tok, graded)) if cfg.best_by == "reward" else None
        best = BestWeights(metrics, model, grade)
        with no_live_bar_in_a_kernel():
            train(
                model=model,
                optimizer=optim.Adam(learning_rate=_schedule(cfg)),
                train_dataset=train_ds,
                val_dataset=valid_ds,
                args=args,
                loss=sft_loss,
                iterate_batches=batches,
                training_callback=best,
            )
    if cfg.keep_best and best.weights is not None:
        best.save(out_dir / "adapters.safetensors")
    wall = time.time() - t0
    last_train = metrics.train[-1] if metrics.train else {}
    last_val = metrics.val[-1] if metrics.val else {}
    return {
        "adapter": acfg,
        "batch_size": batch,
        "trainable_params": trainable(model),
        "train_examples": len(train_records),
        "valid_examples": len(valid_records),
        "longest_example_tokens": longest,
        "logits_prompt_skipped": bool(head_skip),
        "final_train_loss": last_train.get("train_loss"),
        "final_val_loss": last_val.get("val_loss"),
        "keep_best": cfg.keep_best,
        "best_by": cfg.best_by,
        "best_iter": best.iter,
        "best_val_loss": best.loss,
        "best_val_reward": best.reward,
        "train_s": round(wall, 2),
        "s_per_iter": round(wall / max(1, cfg.iters), 4),
    }


def sft(
    model,
    train_tasks: Sequence[dict],
    valid_tasks: Sequence[dict] | None = None,
    cfg: SFTConfig | None = None,
    out_root: str | os.PathLike | None = None,
    *,
    condition: str = "sft",
    log: Callable[[str], None] = print,
    report_to: str | None = None,
    project: str | None = None,
) -> Artifact:
    """Gold LoRA SFT on ALL `train_tasks`; validation on `valid_tasks`' gold bodies, or on the
    train set when none are given (recorded in the manifest). out_root None: the project's
    artifacts/. report_to / project: experiment tracking of the build (`tracking`; no key
    changes)."""
    cfg = cfg if cfg is not None else SFTConfig()
    base = resolve_base(model, None)
    train_records = gold_records(train_tasks)
    valid, valid_source = valid_records(valid_tasks, train_records)
    data = {
        "train": hash_json(train_records),
        "valid": hash_json(valid),
        "valid_source": valid_source,
    }
    parts = key_parts(condition, "sft", base, data, cfg, None)
    track = tracking(report_to, project, condition, parts, cfg)

    def build(tmp: Path) -> dict:
        jsonl.write(tmp / "data" / "train.jsonl", train_records)
        jsonl.write(tmp / "data" / "valid.jsonl", valid)
        summary = train_sft(base, train_records, valid, cfg, tmp, track, valid_tasks or ())
        return {
            "stage": "sft",
            "data": {
                **data,
                "train_tasks": [task_id(t) for t in train_tasks],
                "valid_tasks": [task_id(t) for t in valid_tasks or []],
            },
            "hyperparameters": dataclasses.asdict(cfg),
            "summary": summary,
        }

    return build_artifact(condition, parts, base, out_root, build, log)
