"""(c) and (d) of the jac-tiny build: mlx-lm's own Qwen2 at a fixed seed, pretrained with AdamW on
random windows of the packed train stream. MLX and numpy are imported where used: heavy, and only
a build needs them."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from jacrl.models.tiny_model.config import TinyModelConfig
from jacrl.models.tiny_model.data import IM_END, PAD, Corpus


@dataclass
class Curves:
    train_loss: list[tuple[int, float]]
    val_loss: list[tuple[int, float]]
    train_s: float
    train_cpu_s: float  # summed over threads


def qwen2_config(cfg: TinyModelConfig, vocab_size: int, eos_id: int, pad_id: int) -> dict:
    return {
        "model_type": "qwen2",
        "architectures": ["Qwen2ForCausalLM"],
        "hidden_size": cfg.hidden_size,
        "intermediate_size": cfg.intermediate_size,
        "num_hidden_layers": cfg.num_layers,
        "num_attention_heads": cfg.num_heads,
        "num_key_value_heads": cfg.num_kv_heads,
        "rms_norm_eps": 1e-6,
        "vocab_size": vocab_size,
        "max_position_embeddings": cfg.max_position_embeddings,
        "rope_theta": cfg.rope_theta,
        "tie_word_embeddings": True,
        "torch_dtype": "float32",  # bf16/fp16 matmuls are 20-30x slower on CPU
        "bos_token_id": None,
        "eos_token_id": eos_id,
        "pad_token_id": pad_id,
    }


def init_model(cfg: TinyModelConfig, data: Corpus, log: Callable[[str], None]):
    """(c) mlx-lm's own Qwen2 class, so what we train is exactly what mlx_lm.load builds, seeded
    with cfg.seed. Returns (model, its config.json dict, parameter count)."""
    import mlx.core as mx
    from mlx.utils import tree_flatten
    from mlx_lm.models import qwen2

    tok = data.tok
    model_cfg = qwen2_config(
        cfg, tok.get_vocab_size(), tok.token_to_id(IM_END), tok.token_to_id(PAD)
    )
    mx.random.seed(cfg.seed)
    model = qwen2.Model(qwen2.ModelArgs.from_dict(model_cfg))
    # nn.Embedding initialises N(0, 1); with tied weights that gives huge initial logits.
    emb = model.model.embed_tokens
    emb.weight = mx.random.normal(emb.weight.shape) * 0.02
    mx.eval(model.parameters())
    n_params = sum(v.size for _, v in tree_flatten(model.parameters()))
    log(f"model: qwen2 {cfg.hidden_size}d x {cfg.num_layers}L, {n_params / 1e6:.2f}M params")
    return model, model_cfg, n_params


def _loss_fn():
    import mlx.nn as nn

    def loss_fn(m, x, y):
        return nn.losses.cross_entropy(m(x), y, reduction="mean")

    return loss_fn


def _val_loss_fn(model, val_ids, cfg: TinyModelConfig) -> Callable[[], float]:
    """Mean loss over fixed, evenly spaced validation windows: comparable across steps and
    builds."""
    import mlx.core as mx
    import numpy as np

    T, B, loss_fn = cfg.seq_len, cfg.batch_size, _loss_fn()
    n_val = max(1, min(cfg.eval_windows, (len(val_ids) - 1) // T))
    val_starts = np.linspace(0, len(val_ids) - T - 1, n_val).astype(np.int64)
    windows = np.stack([val_ids[s : s + T + 1] for s in val_starts])

    def val_loss() -> float:
        total, count = 0.0, 0
        for i in range(0, len(windows), B):
            w = windows[i : i + B]
            total += loss_fn(model, mx.array(w[:, :-1]), mx.array(w[:, 1:])).item() * len(w)
            count += len(w)
        return total / count

    return val_loss


def _step_fn(model, cfg: TinyModelConfig):
    """One AdamW update (linear warmup, cosine decay, gradient clipping), compiled when
    cfg.compile; returns (step(x, y) -> loss, the state to evaluate after each step)."""
    import mlx.core as mx
    import mlx.nn as nn
    import mlx.optimizers as optim

    warmup = max(1, int(cfg.steps * cfg.warmup_fraction))
    schedule = optim.join_schedules(
        [
            optim.linear_schedule(cfg.lr * 0.01, cfg.lr, warmup),
            optim.cosine_decay(cfg.lr, max(1, cfg.steps - warmup), cfg.lr * cfg.min_lr_fraction),
        ],
        [warmup],
    )
    opt = optim.AdamW(
        learning_rate=schedule, betas=list(cfg.adam_betas), weight_decay=cfg.weight_decay
    )
    grad_fn = nn.value_and_grad(model, _loss_fn())
    state = [model.state, opt.state]

    def step(x, y):
        loss, grads = grad_fn(model, x, y)
        grads, _ = optim.clip_grad_norm(grads, cfg.grad_clip)
        opt.update(model, grads)
        return loss

    if cfg.compile:
        step = mx.compile(step, inputs=state, outputs=state)
    return step, state


def _batch(ids, rng, T: int, B: int):
    """B random windows of T + 1 tokens: (inputs, targets) shifted by one."""
    import mlx.core as mx
    import numpy as np

    starts = rng.integers(0, len(ids) - T - 1, size=B)
    x = np.stack([ids[s : s + T + 1] for s in starts])
    return mx.array(x[:, :-1]), mx.array(x[:, 1:])


def pretrain(model, data: Corpus, cfg: TinyModelConfig, log: Callable[[str], None]) -> Curves:
    """(d) all parameters, on random windows of the packed train stream (numpy, seeded)."""
    import mlx.core as mx
    import numpy as np

    T, B, train_ids = cfg.seq_len, cfg.batch_size, data.train_ids
    rng = np.random.default_rng(cfg.seed)
    val_loss = _val_loss_fn(model, data.val_ids, cfg)
    step, state = _step_fn(model, cfg)
    model.train()
    train_hist: list[tuple[int, float]] = []
    val_hist = [(0, val_loss())]
    log(f"step 0 val_loss {val_hist[-1][1]:.4f}")
    t_train, cpu_train = time.time(), time.process_time()
    t_last, acc, n_acc = t_train, 0.0, 0
    for it in range(1, cfg.steps + 1):
        loss = step(*_batch(train_ids, rng, T, B))
        mx.eval(state, loss)
        acc += loss.item()
        n_acc += 1
        if it % cfg.log_every == 0 or it == cfg.steps:
            now = time.time()
            train_hist.append((it, acc / n_acc))
            log(
                f"step {it} train_loss {acc / n_acc:.4f} {n_acc * B * T / (now - t_last):.0f} tok/s"
            )
            t_last, acc, n_acc = now, 0.0, 0
        if it % cfg.eval_every == 0 or it == cfg.steps:
            val_hist.append((it, val_loss()))
            log(f"step {it} val_loss {val_hist[-1][1]:.4f}")
    # CPU seconds, summed over threads: with other jobs on the machine this says more about
    # the cost of a build than wall time does.
    curves = Curves(train_hist, val_hist, time.time() - t_train, time.process_time() - cpu_train)
    model.eval()
    return curves
