"""Training stages, each producing a content-addressed LoRA artifact (`Artifact`, see
`jacrl.train.artifacts`). Adapters are never fused or quantized; load one with
`jacrl.models.registry.load(artifact.base_model, adapter_path=artifact.adapter_path)`.

* `sft` — gold SFT: LoRA on (system, user = task prompt, assistant = ```jac fenced gold body),
  prompt masked, with mlx-lm's trainer (`jacrl.train.sft`).
* `rft` — rejection-sampling fine-tuning: sample k completions per task, keep those the reward
  verifies, SFT on them from the base model (`jacrl.train.rft`).
* `star` — STaR / expert iteration: RFT iterated, round 0 being gold SFT; every round trains from
  the original base on everything kept so far (`jacrl.train.rft`).
* `grpo` — mlx-lm-lora GRPO with the `jac_behavioral` reward, optionally continuing a parent's
  adapter (`jacrl.train.grpo`).
* `dpo` — mlx-lm-lora DPO continuing an SFT adapter, on preference pairs our verifier builds from
  that policy's own samples (`jacrl.train.dpo`, docs/dpo.md).

Every knob is in `jacrl.config` (`SFTConfig`, `RFTConfig`, `STaRConfig`, `GRPOConfig`,
`DPOConfig`). rft, grpo, star and dpo grade with `cfg.reward_formula` (dependent | tiered |
additive): a hyperparameter, so part of the key; its default is `jacrl.config.DEFAULT_FORMULA`
(dependent), and the CLI and the ladder read JACRL_REWARD_FORMULA once, at their edge. What a
stage is (config, trainer, parent, grading) is `jacrl.stages`; an artifact's key holds the code its
trainer imports.
`jacrl.train.mlx_compat` holds what adapts mlx-lm / mlx-lm-lora, and documents metrics.jsonl.

Experiment tracking is a keyword of every stage, never a knob, so it changes no key:
`report_to="wandb"` (or "swanlab", or "wandb,swanlab"; default JACRL_REPORT_TO, else none) and
`project` (default WANDB_PROJECT, else "jacrl"); `report_services` checks a value up front.
"""

from jacrl.train.artifacts import Artifact
from jacrl.train.dpo import dpo
from jacrl.train.grpo import grpo
from jacrl.train.rft import rft, star
from jacrl.train.sft import sft
from jacrl.train.tracking import report_services

__all__ = [
    "Artifact",
    "dpo",
    "grpo",
    "report_services",
    "rft",
    "sft",
    "star",
]
