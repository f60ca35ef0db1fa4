"""(a) and (b) of the jac-tiny build: the corpus (the .jac files bundled with jaclang, split by
file) and a byte-level BPE tokenizer trained on its train split, both splits packed into token
streams. numpy, tokenizers and transformers are imported where used: heavy, and only a build needs
them."""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from jacrl.models.registry import ModelError, set_offline
from jacrl.models.tiny_model.config import TinyModelConfig
from jacrl.project import ProjectNotFound, project

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


@dataclass
class Corpus:
    """The tokenized build data: token streams (numpy int32) of each split and their tokenizer."""

    train_files: list[Path]
    val_files: list[Path]
    val_texts: list[str]
    tok: Any  # tokenizers.Tokenizer
    hf_tok: Any  # its transformers wrapper, saved with the model
    train_ids: Any
    val_ids: Any
    unigram_val_loss: float  # the card's baseline


def jaclang_jac_files() -> tuple[Path, list[Path]]:
    """(package dir, sorted .jac files) bundled with the installed jaclang package.

    Only the package: never the repo's drivers/ or data/, which hold the evaluation tasks.
    """
    import jaclang

    root = Path(jaclang.__file__).resolve().parent
    try:
        proj = project()
        forbidden = [proj.drivers.resolve(), proj.data.resolve()]
    except ProjectNotFound:
        forbidden = []
    files = sorted(
        p
        for p in root.rglob("*.jac")
        if p.is_file() and not any(p.is_relative_to(f) for f in forbidden)
    )
    return root, files


def split_files(
    root: Path, files: list[Path], val_fraction: float
) -> tuple[list[Path], list[Path]]:
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
    from tokenizers import (
        Regex,
        Tokenizer,
        decoders,
        models,
        normalizers,
        pre_tokenizers,
        processors,
        trainers,
    )

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
    set_offline()
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


def _pack(tok, texts: list[str], sep_id: int):
    """One token stream: each file followed by the separator (EOS, so the model learns to stop)."""
    import numpy as np

    ids: list[int] = []
    for enc in tok.encode_batch(texts):
        ids.extend(enc.ids)
        ids.append(sep_id)
    return np.asarray(ids, dtype=np.int32)


def corpus(cfg: TinyModelConfig, log: Callable[[str], None]) -> Corpus:
    """(a) jaclang's .jac files split by file, (b) a tokenizer trained on the train split, and
    both splits packed into token streams."""
    import numpy as np

    root, files = jaclang_jac_files()
    if cfg.max_files is not None:
        files = files[: cfg.max_files]
    if len(files) < 2:
        raise ModelError(f"found {len(files)} .jac files in {root}; need at least 2")
    train_files, val_files = split_files(root, files, cfg.val_fraction)
    train_texts = [_read(p) for p in train_files]
    val_texts = [_read(p) for p in val_files]
    log(f"corpus: {len(train_files)} train / {len(val_files)} val .jac files from {root}")

    tok = train_tokenizer(train_texts, cfg.vocab_size, cfg.min_frequency)
    hf_tok = wrap_tokenizer(tok)
    eos_id = tok.token_to_id(IM_END)
    train_ids = _pack(tok, train_texts, eos_id)
    val_ids = _pack(tok, val_texts, eos_id)
    T = cfg.seq_len
    if len(train_ids) <= T + 1 or len(val_ids) <= T + 1:
        raise ModelError(
            f"corpus too small for seq_len {T}: {len(train_ids)}/{len(val_ids)} tokens"
        )
    log(
        f"tokenizer: vocab {tok.get_vocab_size()}, {len(train_ids)} train / {len(val_ids)} val "
        "tokens"
    )
    # Baseline for the card: val cross-entropy of add-one-smoothed train unigram frequencies.
    counts = np.bincount(train_ids, minlength=tok.get_vocab_size()) + 1.0
    unigram_val_loss = float(-np.log(counts[val_ids] / counts.sum()).mean())
    return Corpus(
        train_files, val_files, val_texts, tok, hf_tok, train_ids, val_ids, unigram_val_loss
    )
