"""The jac-tiny build end to end, (a) to (e), and its model card."""

from __future__ import annotations

import dataclasses
import json
import math
import os
import platform
import shutil
import sys
import time
from collections.abc import Callable
from pathlib import Path

from jacrl.blas import cpus
from jacrl.models.registry import ModelError, display_path, set_offline
from jacrl.models.tiny_model.config import BuildResult, TinyModelConfig
from jacrl.models.tiny_model.data import Corpus, corpus
from jacrl.models.tiny_model.pretrain import init_model, pretrain
from jacrl.provenance import file_sha256, versions


def _stderr(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def build_tiny_model(
    out_dir: str | os.PathLike,
    config: TinyModelConfig | None = None,
    *,
    log: Callable[[str], None] = _stderr,
    command: str | None = None,
    **knobs,
) -> BuildResult:
    """Build jac-tiny into out_dir: tokenizer, config, pretrained fp32 weights, MODEL_CARD.md.

    Knobs are the TinyModelConfig fields, e.g. build_tiny_model(out, steps=3, seed=1).
    Fully offline; same seed and versions -> bit-identical weights (also across BLAS threads).
    """
    cfg = dataclasses.replace(config or TinyModelConfig(), **knobs)
    t_start, cpu_start = time.time(), time.process_time()
    set_offline()
    out_dir = Path(out_dir)
    if out_dir.exists() and any(out_dir.iterdir()) and not (out_dir / "config.json").exists():
        # Refuse to wipe a directory that is not a model (e.g. a mistyped --out).
        raise ModelError(f"{out_dir} exists, is not empty and is not a model directory")
    data = corpus(cfg, log)
    model, model_cfg, n_params = init_model(cfg, data, log)
    curves = pretrain(model, data, cfg, log)

    # (e) save into a sibling temp dir, then swap: a failed build never leaves half a model.
    tmp = out_dir.with_name(out_dir.name + ".building")
    _save(tmp, model, model_cfg, data)
    weights = tmp / "model.safetensors"
    result = BuildResult(
        out_dir=out_dir,
        params=n_params,
        weights_bytes=weights.stat().st_size,
        train_files=len(data.train_files),
        val_files=len(data.val_files),
        train_tokens=len(data.train_ids),
        val_tokens=len(data.val_ids),
        tokens_seen=cfg.steps * cfg.batch_size * cfg.seq_len,
        train_loss=curves.train_loss,
        val_loss=curves.val_loss,
        unigram_val_loss=data.unigram_val_loss,
        wall_s=time.time() - t_start,
        cpu_s=time.process_time() - cpu_start,
        train_s=curves.train_s,
        train_cpu_s=curves.train_cpu_s,
        sha256=file_sha256(weights),
    )
    metrics = {"config": dataclasses.asdict(cfg), **dataclasses.asdict(result)}
    metrics["out_dir"] = display_path(out_dir)
    (tmp / "build_metrics.json").write_text(json.dumps(metrics, indent=2) + "\n")
    (tmp / "MODEL_CARD.md").write_text(_model_card(cfg, result, model_cfg, command))

    if out_dir.exists():
        shutil.rmtree(out_dir)
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    tmp.rename(out_dir)
    log(
        f"saved {display_path(out_dir)} ({result.weights_bytes / 1e6:.1f} MB weights) in "
        f"{result.wall_s:.0f}s"
    )
    return result


def _save(tmp: Path, model, model_cfg: dict, data: Corpus) -> None:
    """Weights, config.json and the tokenizer files into `tmp` (replaced), tokenizer checked."""
    from mlx_lm.utils import save_config, save_model

    shutil.rmtree(tmp, ignore_errors=True)
    save_model(tmp, model)
    save_config(model_cfg, tmp / "config.json")
    data.hf_tok.save_pretrained(tmp)
    _check_tokenizer_roundtrip(tmp, data.tok, data.val_texts[:5])


def _check_tokenizer_roundtrip(model_dir: Path, tok, texts: list[str]) -> None:
    """Guard against transformers re-tokenizing differently from what we trained on."""
    from transformers import AutoTokenizer

    loaded = AutoTokenizer.from_pretrained(str(model_dir))
    loaded.model_max_length = 1 << 30  # whole files here; avoids a spurious length warning
    for text in texts:
        ids = tok.encode(text).ids
        if loaded.encode(text, add_special_tokens=False) != ids:
            raise RuntimeError("saved tokenizer encodes differently from the trained one")
        if loaded.decode(ids) != text:
            raise RuntimeError("saved tokenizer does not round-trip")


def _model_card(cfg: TinyModelConfig, r: BuildResult, model_cfg: dict, command: str | None) -> str:
    """MODEL_CARD.md from the build's numbers: its sections in order, each from its own part."""
    v = versions("tokenizers", "transformers", "numpy")  # what the bit-identical claim needs
    sections = [
        _card_intro(v),
        _card_architecture(cfg, r, model_cfg),
        _card_data(cfg, r, v),
        _card_training(cfg, r, model_cfg),
        _card_build(cfg, r, v, command),
        _card_knobs(cfg),
    ]
    return "\n\n## ".join(sections)


def _card_intro(v: dict) -> str:
    return f"""# jac-tiny

A tiny Qwen2-architecture causal LM with its own byte-level BPE tokenizer, trained **from scratch
and fully offline** on the `.jac` files bundled with jaclang {v["jaclang"]}. It is the embedded
default model of jacrl: it makes the whole pipeline (SFT, GRPO, evaluation) runnable on a CPU with
no download. It writes Jac-looking text but not correct programs; it is a test fixture, not a
useful coder."""


def _card_architecture(cfg: TinyModelConfig, r: BuildResult, model_cfg: dict) -> str:
    return f"""Architecture
| | |
|---|---|
| type | `qwen2` (mlx-lm `Qwen2ForCausalLM`), fp32 |
| hidden / intermediate | {model_cfg["hidden_size"]} / {model_cfg["intermediate_size"]} |
| layers / heads / kv heads | {model_cfg["num_hidden_layers"]} / \
{model_cfg["num_attention_heads"]} / {model_cfg["num_key_value_heads"]} |
| vocab | {model_cfg["vocab_size"]} (byte-level BPE, Qwen2 NFC + split regex) |
| embeddings | tied input/output |
| parameters | {r.params:,} ({r.params / 1e6:.2f}M) |
| model.safetensors | {r.weights_bytes:,} bytes, sha256 `{r.sha256}` |
| trained context | {cfg.seq_len} tokens (rope_theta {cfg.rope_theta:g}; longer prompts are \
out of distribution) |

Tokenizer: special tokens `<|endoftext|>` (id {model_cfg["pad_token_id"]}, pad), `<|im_start|>`,
`<|im_end|>` (id {model_cfg["eos_token_id"]}, EOS). ChatML chat template with system, user and
assistant roles. Files are separated by `<|im_end|>` in the training stream, so the model learns
to stop."""


def _card_data(cfg: TinyModelConfig, r: BuildResult, v: dict) -> str:
    return f"""Data
All `.jac` files bundled with the installed jaclang {v["jaclang"]} package (nothing from this
repo's `drivers/` or `data/`), split by file with a hash of the package-relative path
({cfg.val_fraction:.0%} validation):

| split | files | tokens |
|---|---|---|
| train | {r.train_files} | {r.train_tokens:,} |
| validation | {r.val_files} | {r.val_tokens:,} |
| total | {r.train_files + r.val_files} | {r.train_tokens + r.val_tokens:,} |

The tokenizer was trained on the train split only."""


def _card_training(cfg: TinyModelConfig, r: BuildResult, model_cfg: dict) -> str:
    final_val = r.val_loss[-1][1]
    final_train = r.train_loss[-1][1] if r.train_loss else float("nan")
    curve = "\n".join(
        f"| {s} | {loss:.4f} | {math.exp(min(loss, 50)):.1f} |" for s, loss in r.val_loss
    )
    return f"""Training
All parameters (embeddings included) trained with a custom MLX loop: random {cfg.seq_len}-token
windows of the packed train stream, batch {cfg.batch_size}, AdamW (lr {cfg.lr:g}, \
betas {cfg.adam_betas},
weight decay {cfg.weight_decay:g}), linear warmup {cfg.warmup_fraction:.0%} then cosine decay to
{cfg.min_lr_fraction:g}x, gradient clipping at {cfg.grad_clip:g}, seed {cfg.seed}
(`mx.random.seed` for the init, numpy for batches).

* steps: **{cfg.steps}**, tokens seen: **{r.tokens_seen:,}** \
({r.tokens_seen / r.train_tokens:.2f} epochs)
* final train loss (mean of the last {cfg.log_every} steps): {final_train:.4f}
* **final validation loss: {final_val:.4f}** (perplexity {math.exp(final_val):.1f}; \
ln(vocab) = {math.log(model_cfg["vocab_size"]):.2f};
  a unigram model of the train split scores {r.unigram_val_loss:.4f} on validation)

| step | val loss | val ppl |
|---|---|---|
{curve}"""


def _card_build(cfg: TinyModelConfig, r: BuildResult, v: dict, command: str | None) -> str:
    load = " / ".join(f"{x:.1f}" for x in os.getloadavg())
    blas = os.environ.get("LD_PRELOAD") or "reference BLAS bundled with mlx (slow)"
    threads = os.environ.get("OPENBLAS_NUM_THREADS", "default")
    cmd = command or (
        f"jacrl tiny-model --out {display_path(r.out_dir)} --steps {cfg.steps} --seed {cfg.seed}"
    )
    tok_per_s = r.tokens_seen / r.train_s if r.train_s else 0.0
    return f"""Build
```
{cmd}
```
* wall time: **{r.wall_s:.0f} s** (training {r.train_s:.0f} s, {tok_per_s:,.0f} tok/s)
* CPU time: {r.cpu_s:.0f} s in all, {r.train_cpu_s:.0f} s training \
({r.tokens_seen / max(r.train_cpu_s, 1e-9):,.0f} tokens per CPU-second)
* machine: {platform.machine()}, {cpus()} CPUs available, load average {load}
* BLAS: `{blas}`, OPENBLAS_NUM_THREADS={threads}
* versions: {", ".join(f"{k} {val}" for k, val in v.items())}

The step count is sized so that a build takes at most about 10 minutes on 2 idle CPU cores
with OpenBLAS. The machine this was built on was shared with other jobs, so wall time
overstates the cost; with one BLAS thread, the CPU time above approximates the wall time of a
build on an idle machine. Without OpenBLAS (reference BLAS bundled with mlx) a build is ~10x slower.

Determinism: same seed, same versions -> bit-identical `model.safetensors`. Checked while
writing the builder (two 4-step builds at these dimensions gave the same sha256, with 1 and
with 2 OpenBLAS threads); `tests/test_models.py` re-checks it on a small build."""


def _card_knobs(cfg: TinyModelConfig) -> str:
    knobs = "\n".join(f"| `{k}` | {val} |" for k, val in dataclasses.asdict(cfg).items())
    return f"""Build knobs
| knob | value |
|---|---|
{knobs}
"""
