"""What adapts mlx-lm and mlx-lm-lora to this project: LoRA setup and checkpointing, a batch
iterator that trains every example every epoch, the SFT loss, the metrics callback.

* `sft_loss` is mlx-lm's default loss minus an off-by-one that also scored one padding token per
  sequence, and without computing the masked prompt's logits (`output_head`).
* `iterate_all` is mlx-lm's batch iterator, except that the len % batch_size remainder is
  trained too (mlx-lm drops it).
* GRPO is jacrl's own: `grpo_loop`, `grpo_rollouts`, `grpo_loss`.
* `no_live_bar_in_a_kernel`: mlx-lm's trainer without its live progress bar inside a Jupyter
  kernel (the report lines stay).
* `MetricsLog` writes metrics.jsonl: one JSON object per report, `{"event": "train"|"val",
  "stage", "time", ...}`. SFT train events: `train_loss`, `learning_rate`,
  `iterations_per_second`, `tokens_per_second`, `trained_tokens`, `peak_memory` (GB); val events:
  `val_loss`, `val_time`. GRPO train events add `reward_mean` / `reward_std` (total reward over
  all rollouts of the reported steps), `group_reward_std` (mean within-group σ: 0 means every
  rollout of a group scored the same, so there is no learning signal), `kl` (policy vs frozen
  reference, per token), `truncated` (share of rollouts that hit `max_completion_length`),
  `loss` (= `train_loss`), `avg_tokens`, `clip_ratio_total`, `kl_clip_ratio`. GRPO `step` events
  (one per step, `grpo_rollouts.StepLog`): `generation_s`, `reward_s`, `update_s`,
  `reward_mean`, `exact`, `rollouts`, `groups_skipped`, `signal_frac` (the share of the step's
  groups whose rewards span `min_group_span`: the groups it learns from), `tiers` (rollouts per
  reward tier), `truncated`, `advantage`, `draws`, `groups_drawn`, `groups_kept`,
  `rollouts_discarded` (docs/grpo-dynamic-sampling.md).

CPU: the mlx-cpu wheel's reference BLAS is ~10x slower than OpenBLAS, and LD_PRELOAD only works
at process start. The `jacrl` CLI re-execs itself with `jacrl.blas.fast_blas_env()`; a notebook
or test process should be started with that environment (`warn_slow_blas` says so otherwise).

mlx, mlx-lm and mlx-lm-lora are imported inside the functions that use them: they are heavy, and
importing `jacrl.train` (for `Artifact`, the CLI's help, ...) must not load them.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import time
import warnings
from pathlib import Path

from jacrl import jsonl
from jacrl.blas import find_openblas
from jacrl.models.registry import load


def warn_slow_blas() -> None:
    if sys.platform.startswith("linux") and not os.environ.get("LD_PRELOAD") and find_openblas():
        warnings.warn(
            "MLX is using the slow reference BLAS in this process (~10x slower "
            "training). In Jupyter pick the `jacrl` kernel (`make setup` installs it: "
            "python -m jacrl.kernel); else start Python with "
            "jacrl.blas.fast_blas_env() in the environment, or use the `jacrl` CLI, "
            "which re-execs with it.",
            stacklevel=3,
        )


@contextlib.contextmanager
def no_live_bar_in_a_kernel(kernel: bool | None = None):
    """Within it, mlx-lm's trainer draws no live progress bar when it runs in a Jupyter kernel
    (`kernel` None: rich's own test, the one that would make the bar a widget). The bar is a rich
    `Live` redrawn ten times a second, as a widget in a kernel: a 12-minute SFT sends thousands
    of iopub messages, and a ladder cell's papermill, reading them slowly on a loaded host,
    stopped reading at all and waited for ever behind a finished cell (seen: 2.8 MB queued in
    the kernel, 0.7 MB unread at papermill). The train and val report lines still print; in a
    terminal the bar is drawn as before."""
    from mlx_lm import cli_ui

    if not (cli_ui.make_console().is_jupyter if kernel is None else kernel):
        yield
        return
    drawn = cli_ui.make_train_progress  # what mlx-lm's TrainUI makes its bar with

    def disabled(console, *, disable: bool = False):
        return drawn(console, disable=True)

    cli_ui.make_train_progress = disabled
    try:
        yield
    finally:
        cli_ui.make_train_progress = drawn


def seed_all(value: int) -> None:
    """Seed MLX's, numpy's and Python's global generators (LoRA init, the trainers' sampling;
    mlx-lm-lora's GRPO batch order draws from numpy's, its judge dataset from Python's)."""
    import random

    import mlx.core as mx
    import numpy as np

    mx.random.seed(value)
    np.random.seed(value)
    random.seed(value)


# -------------------------------------------------------------------------------------------
# metrics
# -------------------------------------------------------------------------------------------


class MetricsLog:
    """mlx-lm TrainingCallback that appends one JSON line per report to metrics.jsonl."""

    def __init__(self, path: Path, stage: str):
        self.path, self.stage = path, stage
        self.train: list[dict] = []
        self.val: list[dict] = []
        self.steps: list[dict] = []

    def _write(self, event: str, info: dict) -> dict:
        rec = {"event": event, "stage": self.stage, "time": round(time.time(), 3)}
        for k, v in info.items():
            rec[k] = v.item() if hasattr(v, "item") else v
        with open(self.path, "a") as f:
            f.write(jsonl.dumps(rec))
        return rec

    def on_train_loss_report(self, info: dict) -> None:
        self.train.append(self._write("train", info))

    def on_val_loss_report(self, info: dict) -> None:
        self.val.append(self._write("val", info))

    def step(self, info: dict) -> None:
        """One GRPO step's own record (timings, reward, skipped groups; `grpo_rollouts.StepLog`)."""
        self.steps.append(self._write("step", info))


# -------------------------------------------------------------------------------------------
# LoRA
# -------------------------------------------------------------------------------------------


def adapter_config(
    num_layers: int, rank: int, scale: float, dropout: float, keys: str = ""
) -> dict:
    """mlx-lm's adapter_config.json (what `load(..., adapter_path)` reads)."""
    params = {"rank": rank, "scale": scale, "dropout": dropout}
    if keys.strip():
        params["keys"] = [k.strip() for k in keys.split(",") if k.strip()]
    return {"fine_tune_type": "lora", "num_layers": num_layers, "lora_parameters": params}


def _add_lora(model, cfg: dict) -> None:
    from mlx_lm.tuner.utils import linear_to_lora_layers

    model.freeze()
    linear_to_lora_layers(model, cfg["num_layers"], cfg["lora_parameters"])


def _unfreeze_lora(model) -> None:
    """After `load(base, adapter_path)`: train the adapter's LoRA matrices only."""
    model.freeze()

    def visit(_, m):
        if hasattr(m, "lora_a") and hasattr(m, "lora_b"):
            m.unfreeze(keys=["lora_a", "lora_b"], recurse=False, strict=False)

    model.apply_to_modules(visit)


def _checkpoint_blocks(model, on: bool) -> None:
    """Gradient checkpointing of the transformer block class on or off. mlx-lm's helper patches
    the class's __call__, so it holds for every model of that class in the process: each training
    sets it for itself (an SFT's checkpointing must not leak into a GRPO run in the same kernel);
    applying it twice would nest checkpoints."""
    from mlx_lm.tuner.trainer import grad_checkpoint

    cls = type(model.layers[0])
    plain = cls.__dict__.get("_jacrl_plain_call")
    if on and plain is None:
        cls._jacrl_plain_call = cls.__call__
        grad_checkpoint(model.layers[0])
    elif not on and plain is not None:
        cls.__call__ = plain
        del cls._jacrl_plain_call


def checkpointed(model) -> bool:
    """Whether the model's transformer blocks run under gradient checkpointing now."""
    return "_jacrl_plain_call" in type(model.layers[0]).__dict__


def lora_model(base: Path, cfg, out_dir: Path, parent_adapter: Path | None = None):
    """(model, tokenizer, adapter config) ready to train. Without `parent_adapter`: `base` with a
    fresh LoRA adapter shaped by cfg's lora_layers (clamped to the model's depth; -1 = all),
    lora_rank, lora_scale, lora_dropout and lora_keys. With it: base + that adapter, whose LoRA
    matrices (only) are trained further and whose shape wins over cfg's. Writes
    out_dir/adapter_config.json; cfg.grad_checkpoint turns on gradient checkpointing."""
    model, tok = load(
        base, adapter_path=str(parent_adapter) if parent_adapter else None, fresh=True
    )  # a private copy: LoRA layers are added in place
    if parent_adapter is not None:
        acfg = json.loads((Path(parent_adapter) / "adapter_config.json").read_text())
        _unfreeze_lora(model)
    else:
        n = len(model.layers)
        layers = n if cfg.lora_layers < 0 else min(cfg.lora_layers, n)
        acfg = adapter_config(
            layers, cfg.lora_rank, cfg.lora_scale, cfg.lora_dropout, cfg.lora_keys
        )
        _add_lora(model, acfg)
    (out_dir / "adapter_config.json").write_text(json.dumps(acfg, indent=1) + "\n")
    _checkpoint_blocks(model, cfg.grad_checkpoint)
    return model, tok, acfg


def trainer_args(cfg, batch: int, out_dir: Path) -> dict:
    """The training-loop arguments mlx-lm-lora's GRPO and DPO trainers share, from a stage's
    config: no intermediate saves, validation only when steps_per_eval > 0, the trainer's own
    checkpointing off (`lora_model` set it)."""
    return {
        "batch_size": batch,
        "iters": cfg.iters,
        "val_batches": cfg.val_batches,
        "steps_per_report": cfg.steps_per_report,
        "steps_per_eval": cfg.steps_per_eval if cfg.steps_per_eval > 0 else cfg.iters + 1,
        "steps_per_save": cfg.iters + 1,
        "max_seq_length": cfg.max_seq_length,
        "adapter_file": str(out_dir / "adapters.safetensors"),
        "grad_checkpoint": False,
    }


def trainable(model) -> int:
    """The number of trainable parameters."""
    from mlx.utils import tree_flatten

    return sum(v.size for _, v in tree_flatten(model.trainable_parameters()))


# -------------------------------------------------------------------------------------------
# SFT: batches and loss
# -------------------------------------------------------------------------------------------


def iterate_all(
    dataset, batch_size, max_seq_length, loop=False, seed=None, comm_group=None, head_skip: int = 0
):
    """mlx-lm's batch iterator, except that every example is seen every epoch (mlx-lm drops the
    remainder of len % batch_size — with 7 tasks and batch 2 one task would never be trained) and
    the order comes from a local seeded generator. Yields (tokens[B, L], [(offset, length)]);
    with head_skip > 0 also a third element for `sft_loss`: an empty-valued array whose length is
    the number of leading positions no row of the batch scores (the shortest prompt, rounded down
    to a multiple of head_skip so that few distinct shapes reach the compiled step)."""
    import mlx.core as mx
    import numpy as np

    n = len(dataset)
    if n < batch_size:
        raise ValueError(f"dataset has {n} examples, fewer than batch_size={batch_size}")
    rng = np.random.default_rng(0 if seed is None else seed)
    while True:
        order = rng.permutation(n) if loop else np.arange(n)
        batches = [list(order[i : i + batch_size]) for i in range(0, n, batch_size)]
        if len(batches[-1]) < batch_size:  # top up the last batch with other examples
            rest = [j for j in order if j not in batches[-1]]
            batches[-1] += rest[: batch_size - len(batches[-1])]
        for b in batches:
            items = [dataset[int(j)] for j in b]
            toks = [it[0] if isinstance(it, tuple) else it for it in items]
            offsets = [it[1] if isinstance(it, tuple) else 0 for it in items]
            lengths = [min(len(t), max_seq_length) for t in toks]
            pad = 32
            width = min(1 + pad * ((max(lengths) + pad - 1) // pad), max_seq_length)
            arr = np.zeros((len(b), width), np.int32)
            for r, (t, ln) in enumerate(zip(toks, lengths, strict=True)):
                arr[r, :ln] = t[:ln]
            if head_skip > 0:
                skip = min(max(0, min(offsets) - 1) // head_skip * head_skip, width - 2)
                yield (
                    mx.array(arr),
                    mx.array(list(zip(offsets, lengths, strict=True))),
                    mx.zeros((max(0, skip),), mx.int8),
                )
            else:
                yield mx.array(arr), mx.array(list(zip(offsets, lengths, strict=True)))
        if not loop:
            return


def sft_loss(model, batch, lengths, skip=None):
    """mlx-lm's default_loss with two changes. (1) The mask's upper bound: mlx-lm uses
    `steps <= length`, which also scores the padding token after each sequence's last token (an
    unlearnable target for jac-tiny, whose pad embedding never trained). (2) With `skip` (see
    `iterate_all`), the output projection runs only on the positions from len(skip) on: the
    masked prompt's logits are never computed (~13 % of a compiled SFT step on jac-tiny, whose
    prompts are ~3/4 of each example). The loss value is the same either way."""
    import mlx.core as mx
    from mlx import nn

    inputs, targets = batch[:, :-1], batch[:, 1:]
    start = 0 if skip is None else skip.shape[0]
    head = output_head(model) if start else None
    if head is None:
        start, logits = 0, model(inputs)
    else:
        logits = head(model.model(inputs)[:, start:])
        targets = targets[:, start:]
    steps = mx.arange(start + 1, start + targets.shape[1] + 1)
    mask = mx.logical_and(steps >= lengths[:, 0:1], steps < lengths[:, 1:])
    ce = nn.losses.cross_entropy(logits, targets) * mask
    ntoks = mask.sum()
    return ce.astype(mx.float32).sum() / ntoks, ntoks


def output_head(model):
    """`h -> logits` for models laid out as mlx-lm's `model.model` (the final norm included) +
    `lm_head` or tied `embed_tokens`; None otherwise. `sliced_head_ok` checks it on real input."""
    inner = getattr(model, "model", None)
    if inner is None:
        return None
    if getattr(model, "lm_head", None) is not None:
        return model.lm_head
    emb = getattr(inner, "embed_tokens", None)
    return getattr(emb, "as_linear", None)


def sliced_head_ok(model, tokens: list[int]) -> bool:
    """Whether `output_head(model)(model.model(x))` equals `model(x)` on `tokens` (a model with
    logit scaling or soft-capping after its head would differ: sft_loss then uses model(x))."""
    import mlx.core as mx

    head = output_head(model)
    if head is None:
        return False
    try:
        x = mx.array([tokens[:64]])
        return bool(mx.allclose(head(model.model(x)), model(x), atol=1e-4, rtol=1e-4).item())
    except Exception:  # noqa: BLE001 (any other layout: fall back to the full logits)
        return False
