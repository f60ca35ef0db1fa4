"""The quick gold-SFT config the training tests share: 3 iterations of a 2-layer, rank-4 LoRA on
the embedded model, one example per batch, no warm-up, no mid-run evaluation."""

from __future__ import annotations

from jacrl.config import SFTConfig

QUICK = SFTConfig(
    iters=3,
    learning_rate=1e-3,
    warmup=0,
    batch_size=1,
    lora_layers=2,
    lora_rank=4,
    grad_checkpoint=False,
    steps_per_report=1,
    steps_per_eval=1000,
    val_batches=1,
)
