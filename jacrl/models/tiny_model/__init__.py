"""The offline `jac-tiny` build (`jacrl tiny-model`) and its model card.

`jac-tiny` is the embedded default model: a ~4M-parameter Qwen2 with its own byte-level BPE,
pretrained from scratch on the .jac files bundled with the installed jaclang package, so the
whole pipeline (SFT, GRPO, eval) runs without any download. A build, `build_tiny_model`:

- `data.py`: (a) the corpus, split by file; (b) a tokenizer trained on the train split;
- `pretrain.py`: (c) mlx-lm's own Qwen2 at a fixed seed; (d) pretraining on random windows of the
  packed stream;
- `build.py`: (e) the model dir, written next to the target and swapped in, with
  `build_metrics.json` and `MODEL_CARD.md`;
- `config.py`: `TinyModelConfig`, the build's knobs, and `BuildResult`.
"""

from jacrl.models.tiny_model.build import build_tiny_model
from jacrl.models.tiny_model.config import BuildResult, TinyModelConfig
from jacrl.models.tiny_model.data import (
    CHAT_TEMPLATE,
    SPECIAL_TOKENS,
    jaclang_jac_files,
    split_files,
    train_tokenizer,
    wrap_tokenizer,
)

__all__ = [
    "CHAT_TEMPLATE",
    "SPECIAL_TOKENS",
    "BuildResult",
    "TinyModelConfig",
    "build_tiny_model",
    "jaclang_jac_files",
    "split_files",
    "train_tokenizer",
    "wrap_tokenizer",
]
