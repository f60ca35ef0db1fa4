"""Model resolution, loading, fast CPU BLAS, and the offline `jac-tiny` model build.

`jac-tiny` is the embedded default model: a ~4M-parameter Qwen2 with its own byte-level BPE,
pretrained from scratch on the .jac files bundled with the installed jaclang package, so the
whole pipeline (SFT, GRPO, eval) runs without any download.

CLI: `jacrl tiny-model [--out models/jac-tiny] [--steps N] [--seed S]`.
"""

from __future__ import annotations

import argparse
import dataclasses
import glob
import hashlib
import json
import math
import os
import platform
import shutil
import sys
import time
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

TINY = "jac-tiny"  # the embedded default, models/jac-tiny in the project

PAD, IM_START, IM_END = "<|endoftext|>", "<|im_start|>", "<|im_end|>"
SPECIAL_TOKENS = [PAD, IM_START, IM_END]

# ChatML, the format Qwen2 models and mlx-lm(-lora) expect. mlx-lm-lora's GRPO dataset always
# renders [system, user] with add_generation_prompt=True, so the system role must be accepted.
CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)

# Qwen2's pre-tokenizer split pattern. transformers>=5 maps model_type=qwen2 to Qwen2Tokenizer,
# which replaces the saved normalizer/pre-tokenizer with Qwen's NFC + this split; training the
# BPE with exactly the same pipeline keeps training-time and load-time tokenization identical.
QWEN2_PAT = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}"
    r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)


class ModelError(ValueError):
    """A model name or path that cannot be used; the message is one line."""


# --------------------------------------------------------------------------------------------
# Resolution and loading
# --------------------------------------------------------------------------------------------


def _project():
    from jacrl.project import ProjectNotFound, project

    try:
        return project()
    except ProjectNotFound:
        return None


def _display(path: Path) -> str:
    """Project-relative path when possible: shorter, stable error messages."""
    proj = _project()
    return proj.rel(path) if proj else str(path)


def default_registry() -> Path | None:
    proj = _project()
    return proj.registry if proj else None


def portable(model: str | os.PathLike) -> str:
    """How a result row names a model: its registry name, or its project-relative path (never an
    absolute path that ties rows to one machine)."""
    if not Path(model).expanduser().is_dir():
        return str(model)
    return _display(Path(model).expanduser())


def read_registry(registry: Path | None = None) -> dict[str, dict]:
    """The `[models.<name>]` tables of the registry file ({} if there is none)."""
    registry = registry if registry is not None else default_registry()
    if registry is None or not Path(registry).is_file():
        return {}
    with open(registry, "rb") as f:
        return tomllib.load(f).get("models", {})


def resolve(model: str | os.PathLike, *, registry: Path | None = None) -> Path:
    """Map a local MLX model directory or a registry name (in the project's models/registry.toml)
    to a directory holding config.json.

    An existing directory wins over a registry name. Never touches the network.
    """
    registry = registry if registry is not None else default_registry()
    if registry is None:
        if not Path(model).expanduser().is_dir():
            from jacrl.project import find_root

            find_root()  # raises the one-line "not inside a jacrl project" error
    registry = Path(registry) if registry is not None else Path("models/registry.toml")
    candidate = Path(model).expanduser()
    if candidate.is_dir():
        path, origin = candidate, f"directory {_display(candidate)}"
        where = ""
    else:
        entries = read_registry(registry)
        entry = entries.get(str(model))
        if entry is None or "path" not in entry:
            known = ", ".join(sorted(entries)) or "none"
            raise ModelError(
                f"unknown model {str(model)!r}: not a directory and not a name in "
                f"{_display(registry)} (known: {known})"
            )
        # Registry paths are relative to the repo root (the registry's parent's parent).
        path = (registry.resolve().parent.parent / Path(entry["path"]).expanduser()).resolve()
        origin = f"model {str(model)!r} (path {entry['path']!r} in {_display(registry)})"
        where = f" at {_display(path)}"
    if not (path / "config.json").is_file():
        hint = " (build it with `jacrl tiny-model`)" if path.name == "jac-tiny" else ""
        raise ModelError(f"{origin} has no config.json{where}{hint}")
    return path.resolve()


def _set_offline() -> None:
    # Must happen before huggingface_hub/transformers are imported: they read these at import.
    os.environ["HF_HUB_OFFLINE"] = "1"
    os.environ["TRANSFORMERS_OFFLINE"] = "1"


def load(model: str | os.PathLike, adapter_path: str | os.PathLike | None = None):
    """(model, tokenizer) via mlx_lm.load, strictly offline."""
    path = resolve(model)
    _set_offline()
    import mlx_lm

    adapter = None if adapter_path is None else str(adapter_path)
    return mlx_lm.load(str(path), adapter_path=adapter)


# --------------------------------------------------------------------------------------------
# Fast BLAS on CPU
# --------------------------------------------------------------------------------------------

# Debian's libopenblas0-pthread. The mlx-cpu wheel links the reference BLAS (~5 GFLOP/s on a
# 1024^2 fp32 matmul); preloading OpenBLAS overrides cblas_sgemm & co. (~150 GFLOP/s).
_OPENBLAS_GLOBS = (
    "/usr/lib/x86_64-linux-gnu/openblas-pthread/libopenblasp-r*.so",
    "/usr/lib/aarch64-linux-gnu/openblas-pthread/libopenblasp-r*.so",
)
_REEXEC_GUARD = "JACRL_FAST_BLAS_REEXEC"  # set in the re-exec'd process: never loop
_DISABLE = "JACRL_NO_FAST_BLAS"  # set to 1 to opt out


def _cpus() -> int:
    """CPUs this process may run on (sched_getaffinity is Linux-only)."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def find_openblas() -> str | None:
    if not sys.platform.startswith("linux"):
        return None
    for pattern in _OPENBLAS_GLOBS:
        hits = sorted(glob.glob(pattern))
        if hits:
            return hits[-1]
    return None


def fast_blas_env() -> dict[str, str]:
    """Env vars that make MLX use OpenBLAS, or {} when it is not installed / not Linux."""
    lib = find_openblas()
    if lib is None:
        return {}
    # Keep a user's thread choice; otherwise use the CPUs we may run on.
    threads = os.environ.get("OPENBLAS_NUM_THREADS") or str(_cpus())
    return {"LD_PRELOAD": lib, "OPENBLAS_NUM_THREADS": threads}


def ensure_fast_blas() -> None:
    """Re-exec this process with OpenBLAS preloaded; call first thing in a CLI process.

    The dynamic loader reads LD_PRELOAD only at process start, hence the exec. No-op when
    LD_PRELOAD is already set, when no library is found, after one re-exec, or when
    JACRL_NO_FAST_BLAS=1.
    """
    if os.environ.get("LD_PRELOAD") or os.environ.get(_REEXEC_GUARD):
        return
    if os.environ.get(_DISABLE, "") not in ("", "0"):
        return
    extra = fast_blas_env()
    if not extra:
        return
    env = {**os.environ, **extra, _REEXEC_GUARD: "1"}
    # orig_argv keeps `-m pkg.mod` (sys.argv would turn it into a script path).
    argv = [sys.executable, *sys.orig_argv[1:]]
    sys.stdout.flush()
    sys.stderr.flush()
    os.execve(sys.executable, argv, env)


# --------------------------------------------------------------------------------------------
# The jac-tiny build
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class TinyModelConfig:
    """Knobs of the jac-tiny build. Defaults build the registered model."""

    seed: int = 0
    # 360 x 4 x 512 = 737k tokens: ~9-10 min on 2 idle cores with OpenBLAS (measured ~1,400
    # training tokens per CPU-second with one BLAS thread on this model).
    steps: int = 360
    # data
    val_fraction: float = 0.05
    max_files: int | None = None  # only for tests: first N files in sorted order
    # tokenizer
    vocab_size: int = 4096
    min_frequency: int = 2
    # architecture (Qwen2; ~4.2M params, 16.8 MB fp32 at the defaults)
    hidden_size: int = 256
    num_layers: int = 4
    num_heads: int = 4
    num_kv_heads: int = 2
    intermediate_size: int = 768
    max_position_embeddings: int = 2048
    rope_theta: float = 10000.0
    # optimisation
    # At a fixed token budget, batch 4 beat batch 8 (more updates) and beta2 0.95 beat 0.999:
    # val loss 5.95 vs 6.79 after 368k tokens in 90-step-equivalent probes.
    batch_size: int = 4
    seq_len: int = 512
    lr: float = 3e-3
    min_lr_fraction: float = 0.1
    warmup_fraction: float = 0.05
    weight_decay: float = 0.01
    adam_betas: tuple[float, float] = (0.9, 0.95)
    grad_clip: float = 1.0
    compile: bool = True
    # evaluation / logging
    eval_every: int = 120
    eval_windows: int = 64  # fixed validation windows of seq_len tokens (independent of batch)
    log_every: int = 20


@dataclass
class BuildResult:
    out_dir: Path
    params: int
    weights_bytes: int
    train_files: int
    val_files: int
    train_tokens: int
    val_tokens: int
    tokens_seen: int
    train_loss: list[tuple[int, float]]  # (step, mean loss since previous report)
    val_loss: list[tuple[int, float]]
    unigram_val_loss: float
    wall_s: float
    cpu_s: float
    train_s: float
    train_cpu_s: float
    sha256: str


def jaclang_jac_files() -> tuple[Path, list[Path]]:
    """(package dir, sorted .jac files) bundled with the installed jaclang package.

    Only the package: never the repo's drivers/ or data/, which hold the evaluation tasks.
    """
    import jaclang

    root = Path(jaclang.__file__).resolve().parent
    proj = _project()
    forbidden = [p.resolve() for p in ((proj.drivers, proj.data) if proj else ())]
    files = sorted(
        p
        for p in root.rglob("*.jac")
        if p.is_file() and not any(p.is_relative_to(f) for f in forbidden)
    )
    return root, files


def split_files(root: Path, files: list[Path], val_fraction: float) -> tuple[list[Path], list[Path]]:
    """Deterministic by-file split: a file's side depends only on its package-relative path."""

    def bucket(p: Path) -> float:
        digest = hashlib.sha256(p.relative_to(root).as_posix().encode()).digest()
        return int.from_bytes(digest[:8], "big") / 2**64

    train = [p for p in files if bucket(p) >= val_fraction]
    val = [p for p in files if bucket(p) < val_fraction]
    if not val and len(train) > 1:  # tiny corpora (tests): still hold one file out
        first = min(train, key=bucket)
        train.remove(first)
        val = [first]
    return train, val


def _read(p: Path) -> str:
    return p.read_text(encoding="utf-8", errors="replace")


def train_tokenizer(texts: list[str], vocab_size: int, min_frequency: int = 2):
    """Byte-level BPE with Qwen2's normalizer and pre-tokenizer (see QWEN2_PAT)."""
    from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers
    from tokenizers import processors, trainers

    tok = Tokenizer(models.BPE())
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(QWEN2_PAT), behavior="isolated", invert=False),
            pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=True, use_regex=False),
        ]
    )
    tok.decoder = decoders.ByteLevel()
    tok.post_processor = processors.ByteLevel(trim_offsets=False)
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=SPECIAL_TOKENS,  # ids 0, 1, 2
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        min_frequency=min_frequency,
        show_progress=False,
    )
    tok.train_from_iterator(texts, trainer, length=len(texts))
    return tok


def wrap_tokenizer(tok):
    """PreTrainedTokenizerFast with ChatML template, EOS <|im_end|>, pad <|endoftext|>."""
    _set_offline()
    from transformers import PreTrainedTokenizerFast

    hf = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        bos_token=None,
        eos_token=IM_END,
        pad_token=PAD,
        unk_token=None,
        model_max_length=2048,
    )
    hf.chat_template = CHAT_TEMPLATE
    return hf


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


def _pack(tok, texts: list[str], sep_id: int):
    """One token stream: each file followed by the separator (EOS, so the model learns to stop)."""
    import numpy as np

    ids: list[int] = []
    for enc in tok.encode_batch(texts):
        ids.extend(enc.ids)
        ids.append(sep_id)
    return np.asarray(ids, dtype=np.int32)


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


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
    _set_offline()
    import mlx.core as mx
    import mlx.nn as nn
    import mlx.optimizers as optim
    import numpy as np
    from mlx.utils import tree_flatten
    from mlx_lm.models import qwen2
    from mlx_lm.utils import save_config, save_model

    out_dir = Path(out_dir)
    if out_dir.exists() and any(out_dir.iterdir()) and not (out_dir / "config.json").exists():
        # Refuse to wipe a directory that is not a model (e.g. a mistyped --out).
        raise ModelError(f"{out_dir} exists, is not empty and is not a model directory")

    # (a) data
    root, files = jaclang_jac_files()
    if cfg.max_files is not None:
        files = files[: cfg.max_files]
    if len(files) < 2:
        raise ModelError(f"found {len(files)} .jac files in {root}; need at least 2")
    train_files, val_files = split_files(root, files, cfg.val_fraction)
    train_texts = [_read(p) for p in train_files]
    val_texts = [_read(p) for p in val_files]
    log(f"corpus: {len(train_files)} train / {len(val_files)} val .jac files from {root}")

    # (b) tokenizer, trained on the train split only
    tok = train_tokenizer(train_texts, cfg.vocab_size, cfg.min_frequency)
    hf_tok = wrap_tokenizer(tok)
    eos_id, pad_id = tok.token_to_id(IM_END), tok.token_to_id(PAD)
    train_ids = _pack(tok, train_texts, eos_id)
    val_ids = _pack(tok, val_texts, eos_id)
    T, B = cfg.seq_len, cfg.batch_size
    if len(train_ids) <= T + 1 or len(val_ids) <= T + 1:
        raise ModelError(f"corpus too small for seq_len {T}: {len(train_ids)}/{len(val_ids)} tokens")
    log(f"tokenizer: vocab {tok.get_vocab_size()}, {len(train_ids)} train / {len(val_ids)} val tokens")
    # Baseline for the card: val cross-entropy of add-one-smoothed train unigram frequencies.
    counts = np.bincount(train_ids, minlength=tok.get_vocab_size()) + 1.0
    unigram_val_loss = float(-np.log(counts[val_ids] / counts.sum()).mean())

    # (c) model: mlx-lm's own Qwen2 class, so what we train is exactly what mlx_lm.load builds
    model_cfg = qwen2_config(cfg, tok.get_vocab_size(), eos_id, pad_id)
    mx.random.seed(cfg.seed)
    model = qwen2.Model(qwen2.ModelArgs.from_dict(model_cfg))
    # nn.Embedding initialises N(0, 1); with tied weights that gives huge initial logits.
    emb = model.model.embed_tokens
    emb.weight = mx.random.normal(emb.weight.shape) * 0.02
    mx.eval(model.parameters())
    n_params = sum(v.size for _, v in tree_flatten(model.parameters()))
    log(f"model: qwen2 {cfg.hidden_size}d x {cfg.num_layers}L, {n_params / 1e6:.2f}M params")

    # (d) pretraining: all parameters, random windows of a packed stream
    rng = np.random.default_rng(cfg.seed)

    def train_batch():
        starts = rng.integers(0, len(train_ids) - T - 1, size=B)
        x = np.stack([train_ids[s : s + T + 1] for s in starts])
        return mx.array(x[:, :-1]), mx.array(x[:, 1:])

    # Fixed, evenly spaced validation windows: comparable across steps and builds.
    n_val = max(1, min(cfg.eval_windows, (len(val_ids) - 1) // T))
    val_starts = np.linspace(0, len(val_ids) - T - 1, n_val).astype(np.int64)
    val_windows = np.stack([val_ids[s : s + T + 1] for s in val_starts])

    def loss_fn(m, x, y):
        return nn.losses.cross_entropy(m(x), y, reduction="mean")

    def val_loss() -> float:
        total, count = 0.0, 0
        for i in range(0, len(val_windows), B):
            w = val_windows[i : i + B]
            total += loss_fn(model, mx.array(w[:, :-1]), mx.array(w[:, 1:])).item() * len(w)
            count += len(w)
        return total / count

    warmup = max(1, int(cfg.steps * cfg.warmup_fraction))
    schedule = optim.join_schedules(
        [
            optim.linear_schedule(cfg.lr * 0.01, cfg.lr, warmup),
            optim.cosine_decay(cfg.lr, max(1, cfg.steps - warmup), cfg.lr * cfg.min_lr_fraction),
        ],
        [warmup],
    )
    opt = optim.AdamW(learning_rate=schedule, betas=list(cfg.adam_betas), weight_decay=cfg.weight_decay)
    grad_fn = nn.value_and_grad(model, loss_fn)
    state = [model.state, opt.state]

    def step(x, y):
        loss, grads = grad_fn(model, x, y)
        grads, _ = optim.clip_grad_norm(grads, cfg.grad_clip)
        opt.update(model, grads)
        return loss

    if cfg.compile:
        step = mx.compile(step, inputs=state, outputs=state)

    model.train()
    train_hist: list[tuple[int, float]] = []
    val_hist = [(0, val_loss())]
    log(f"step 0 val_loss {val_hist[-1][1]:.4f}")
    t_train, cpu_train = time.time(), time.process_time()
    t_last, acc, n_acc = t_train, 0.0, 0
    for it in range(1, cfg.steps + 1):
        loss = step(*train_batch())
        mx.eval(state, loss)
        acc += loss.item()
        n_acc += 1
        if it % cfg.log_every == 0 or it == cfg.steps:
            now = time.time()
            train_hist.append((it, acc / n_acc))
            log(f"step {it} train_loss {acc / n_acc:.4f} {n_acc * B * T / (now - t_last):.0f} tok/s")
            t_last, acc, n_acc = now, 0.0, 0
        if it % cfg.eval_every == 0 or it == cfg.steps:
            val_hist.append((it, val_loss()))
            log(f"step {it} val_loss {val_hist[-1][1]:.4f}")
    train_s = time.time() - t_train
    # CPU seconds, summed over threads: with other jobs on the machine this says more about
    # the cost of a build than wall time does.
    train_cpu_s = time.process_time() - cpu_train
    model.eval()

    # (e) save into a sibling temp dir, then swap: a failed build never leaves half a model.
    tmp = out_dir.with_name(out_dir.name + ".building")
    shutil.rmtree(tmp, ignore_errors=True)
    save_model(tmp, model)
    save_config(model_cfg, tmp / "config.json")
    hf_tok.save_pretrained(tmp)
    _check_tokenizer_roundtrip(tmp, tok, val_texts[:5])

    weights = tmp / "model.safetensors"
    result = BuildResult(
        out_dir=out_dir,
        params=n_params,
        weights_bytes=weights.stat().st_size,
        train_files=len(train_files),
        val_files=len(val_files),
        train_tokens=len(train_ids),
        val_tokens=len(val_ids),
        tokens_seen=cfg.steps * B * T,
        train_loss=train_hist,
        val_loss=val_hist,
        unigram_val_loss=unigram_val_loss,
        wall_s=time.time() - t_start,
        cpu_s=time.process_time() - cpu_start,
        train_s=train_s,
        train_cpu_s=train_cpu_s,
        sha256=_sha256(weights),
    )
    metrics = {"config": dataclasses.asdict(cfg), **dataclasses.asdict(result)}
    metrics["out_dir"] = _display(out_dir)
    (tmp / "build_metrics.json").write_text(json.dumps(metrics, indent=2) + "\n")
    (tmp / "MODEL_CARD.md").write_text(_model_card(cfg, result, model_cfg, command))

    if out_dir.exists():
        shutil.rmtree(out_dir)
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    tmp.rename(out_dir)
    log(f"saved {_display(out_dir)} ({result.weights_bytes / 1e6:.1f} MB weights) in {result.wall_s:.0f}s")
    return result


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


def _versions() -> dict[str, str]:
    from importlib.metadata import PackageNotFoundError, version

    out = {}
    for pkg in ("jaclang", "mlx", "mlx-lm", "tokenizers", "transformers", "numpy"):
        try:
            out[pkg] = version(pkg)
        except PackageNotFoundError:
            out[pkg] = "?"
    return out


def _model_card(cfg: TinyModelConfig, r: BuildResult, model_cfg: dict, command: str | None) -> str:
    v = _versions()
    load = " / ".join(f"{x:.1f}" for x in os.getloadavg())
    final_val = r.val_loss[-1][1]
    final_train = r.train_loss[-1][1] if r.train_loss else float("nan")
    blas = os.environ.get("LD_PRELOAD") or "reference BLAS bundled with mlx (slow)"
    threads = os.environ.get("OPENBLAS_NUM_THREADS", "default")
    cmd = command or f"jacrl tiny-model --out {_display(r.out_dir)} --steps {cfg.steps} --seed {cfg.seed}"
    tok_per_s = r.tokens_seen / r.train_s if r.train_s else 0.0
    curve = "\n".join(f"| {s} | {loss:.4f} | {math.exp(min(loss, 50)):.1f} |" for s, loss in r.val_loss)
    knobs = "\n".join(f"| `{k}` | {val} |" for k, val in dataclasses.asdict(cfg).items())
    return f"""# jac-tiny

A tiny Qwen2-architecture causal LM with its own byte-level BPE tokenizer, trained **from scratch
and fully offline** on the `.jac` files bundled with jaclang {v['jaclang']}. It is the embedded
default model of jacrl: it makes the whole pipeline (SFT, GRPO, evaluation) runnable on a CPU with
no download. It writes Jac-looking text but not correct programs; it is a test fixture, not a
useful coder.

## Architecture
| | |
|---|---|
| type | `qwen2` (mlx-lm `Qwen2ForCausalLM`), fp32 |
| hidden / intermediate | {model_cfg['hidden_size']} / {model_cfg['intermediate_size']} |
| layers / heads / kv heads | {model_cfg['num_hidden_layers']} / {model_cfg['num_attention_heads']} / {model_cfg['num_key_value_heads']} |
| vocab | {model_cfg['vocab_size']} (byte-level BPE, Qwen2 NFC + split regex) |
| embeddings | tied input/output |
| parameters | {r.params:,} ({r.params / 1e6:.2f}M) |
| model.safetensors | {r.weights_bytes:,} bytes, sha256 `{r.sha256}` |
| trained context | {cfg.seq_len} tokens (rope_theta {cfg.rope_theta:g}; longer prompts are out of distribution) |

Tokenizer: special tokens `<|endoftext|>` (id {model_cfg['pad_token_id']}, pad), `<|im_start|>`,
`<|im_end|>` (id {model_cfg['eos_token_id']}, EOS). ChatML chat template with system, user and
assistant roles. Files are separated by `<|im_end|>` in the training stream, so the model learns
to stop.

## Data
All `.jac` files bundled with the installed jaclang {v['jaclang']} package (nothing from this
repo's `drivers/` or `data/`), split by file with a hash of the package-relative path
({cfg.val_fraction:.0%} validation):

| split | files | tokens |
|---|---|---|
| train | {r.train_files} | {r.train_tokens:,} |
| validation | {r.val_files} | {r.val_tokens:,} |
| total | {r.train_files + r.val_files} | {r.train_tokens + r.val_tokens:,} |

The tokenizer was trained on the train split only.

## Training
All parameters (embeddings included) trained with a custom MLX loop: random {cfg.seq_len}-token
windows of the packed train stream, batch {cfg.batch_size}, AdamW (lr {cfg.lr:g}, betas {cfg.adam_betas},
weight decay {cfg.weight_decay:g}), linear warmup {cfg.warmup_fraction:.0%} then cosine decay to
{cfg.min_lr_fraction:g}x, gradient clipping at {cfg.grad_clip:g}, seed {cfg.seed}
(`mx.random.seed` for the init, numpy for batches).

* steps: **{cfg.steps}**, tokens seen: **{r.tokens_seen:,}** ({r.tokens_seen / r.train_tokens:.2f} epochs)
* final train loss (mean of the last {cfg.log_every} steps): {final_train:.4f}
* **final validation loss: {final_val:.4f}** (perplexity {math.exp(final_val):.1f}; ln(vocab) = {math.log(model_cfg['vocab_size']):.2f};
  a unigram model of the train split scores {r.unigram_val_loss:.4f} on validation)

| step | val loss | val ppl |
|---|---|---|
{curve}

## Build
```
{cmd}
```
* wall time: **{r.wall_s:.0f} s** (training {r.train_s:.0f} s, {tok_per_s:,.0f} tok/s)
* CPU time: {r.cpu_s:.0f} s in all, {r.train_cpu_s:.0f} s training ({r.tokens_seen / max(r.train_cpu_s, 1e-9):,.0f} tokens per CPU-second)
* machine: {platform.machine()}, {_cpus()} CPUs available, load average {load}
* BLAS: `{blas}`, OPENBLAS_NUM_THREADS={threads}
* versions: {', '.join(f'{k} {val}' for k, val in v.items())}, Python {platform.python_version()}

The step count is sized so that a build takes at most about 10 minutes on 2 idle CPU cores
with OpenBLAS. The machine this was built on was shared with other jobs, so wall time
overstates the cost; with one BLAS thread, the CPU time above approximates the wall time of a
build on an idle machine. Without OpenBLAS (reference BLAS bundled with mlx) a build is ~10x slower.

Determinism: same seed, same versions -> bit-identical `model.safetensors`. Checked while
writing the builder (two 4-step builds at these dimensions gave the same sha256, with 1 and
with 2 OpenBLAS threads); `tests/test_models.py` re-checks it on a small build.

## Build knobs
| knob | value |
|---|---|
{knobs}
"""


# --------------------------------------------------------------------------------------------
# CLI
# --------------------------------------------------------------------------------------------


def add_arguments(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """Arguments of `jacrl tiny-model` (for wiring into another parser's subcommand)."""
    d = TinyModelConfig()
    parser.add_argument("--out", type=Path, default=None,
                        help="output model directory (default: models/jac-tiny in the project)")
    parser.add_argument("--steps", type=int, default=d.steps, help=f"training steps (default: {d.steps})")
    parser.add_argument("--seed", type=int, default=d.seed, help=f"random seed (default: {d.seed})")
    parser.set_defaults(func=run)
    return parser


def run(args: argparse.Namespace) -> int:
    if args.out is None:
        from jacrl.project import project

        args.out = project().models / TINY
    command = f"jacrl tiny-model --out {_display(args.out)} --steps {args.steps} --seed {args.seed}"
    result = build_tiny_model(args.out, steps=args.steps, seed=args.seed, command=command)
    print(json.dumps({
        "out": str(result.out_dir),
        "params": result.params,
        "weights_bytes": result.weights_bytes,
        "final_val_loss": round(result.val_loss[-1][1], 4),
        "wall_s": round(result.wall_s, 1),
    }))
    return 0
