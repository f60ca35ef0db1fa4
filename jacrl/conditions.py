"""The ladder's conditions as data: each one is its training stages, in order, and the overrides
it applies on top of the ladder's settings. The order of `CONDITIONS` is the display order of
every table, figure and recipe record.

A stage's parent is the previous stage's artifact (`parent_stage`): `sft_grpo`'s GRPO continues
the sft adapter, `sft_rft`'s RFT samples from it. The first stage starts from the base model; a
condition whose first stage is `sft` shares the gold SFT artifact of the `sft` cell (same rung,
model, seed and SFT config), which is what the Ray engine's DAG follows.

Owns: `Condition`, `CONDITIONS`, `DEFAULT_CONDITIONS`, `TUNED`, `alone`, `baseline`. What a
stage is, is `jacrl.stages` (the one table); both import no MLX, so every floor (report, recipe,
ladder) may read them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from jacrl.stages import STAGES


@dataclass(frozen=True)
class Condition:
    """One condition: `stages` in training order (() = the base model as is); `scale`:
    {stage: {field: factor}} applied to the stage's fully resolved config (the ladder's settings
    and the user's overrides included), so a tuned arm is relative to the default arm."""

    name: str
    stages: tuple[str, ...]
    help: str
    scale: Mapping[str, Mapping[str, float]] = field(default_factory=dict)

    def __post_init__(self):
        bad = [s for s in self.stages if s not in STAGES]
        late = [s for s in self.stages[1:] if s in STAGES and STAGES[s].first_only]
        if bad or late or set(self.scale) - set(self.stages):
            first = ", ".join(s.name for s in STAGES.values() if s.first_only)
            raise ValueError(
                f"condition {self.name!r}: stages {self.stages} (of {tuple(STAGES)}; "
                f"{first} only first), scale {dict(self.scale)}"
            )

    @property
    def last(self) -> str | None:
        """The stage whose adapter the cell evaluates (None: the base model)."""
        return self.stages[-1] if self.stages else None

    @property
    def grades(self) -> bool:
        """Whether a stage grades samples, so the reward formula is part of the cell."""
        return any(STAGES[s].grades for s in self.stages)

    @property
    def shares(self) -> str | None:
        """Its first stage when that stage's artifact is shared and another stage follows (the
        gold SFT an `sft` cell also trains), else None."""
        first = self.stages[0] if len(self.stages) > 1 else None
        return first if first and STAGES[first].shared else None


def alone(stage: str) -> str | None:
    """The condition that trains `stage` and nothing else (sft for sft), or None."""
    return next((c.name for c in CONDITIONS.values() if c.stages == (stage,)), None)


def baseline() -> str:
    """The condition that trains nothing: the model as is, every other's reference."""
    return next(c.name for c in CONDITIONS.values() if not c.stages)


def parent_stage(condition: Condition, stage: str) -> str | None:
    """The stage whose artifact `stage` continues or samples from (None: the base model)."""
    i = condition.stages.index(stage)
    return condition.stages[i - 1] if i else None


TUNED = {"grpo": {"learning_rate": 10.0, "iters": 2.0}}  # the tuned GRPO arm, relative

CONDITIONS: dict[str, Condition] = {
    c.name: c
    for c in (
        Condition("base", (), "the model as is"),
        Condition("sft", ("sft",), "gold LoRA SFT on the rung's tasks"),
        Condition(
            "sft_rft",
            ("sft", "rft"),
            "RFT: samples of the sft adapter that verify, SFT from the base on them",
        ),
        Condition(
            "star",
            ("star",),
            "STaR: gold SFT, then rounds of sampling, keeping what verifies "
            "and SFT from the base on all of it",
        ),
        Condition("sft_grpo", ("sft", "grpo"), "GRPO continuing the sft adapter"),
        Condition(
            "sft_grpo_tuned",
            ("sft", "grpo"),
            "sft_grpo with the GRPO learning rate x10 and iterations x2 (the recipe's tuned arm)",
            TUNED,
        ),
        Condition(
            "sft_grpo_lr0",
            ("sft", "grpo"),
            "sft_grpo with GRPO's learning rate 0: the same rollouts, calibration and "
            "evaluation, no update (sft_grpo's control)",
            {"grpo": {"learning_rate": 0.0}},
        ),
        Condition(
            "sft_dpo",
            ("sft", "dpo"),
            "DPO continuing the sft adapter, on pairs the verifier builds from its own samples",
        ),
        Condition("raw_grpo", ("grpo",), "GRPO on the base model (control)"),
    )
}
DEFAULT_CONDITIONS = ("base", "sft", "sft_grpo", "raw_grpo")
ORDER = tuple(CONDITIONS)  # the display order


def condition_of(name: str) -> Condition:
    """The condition called `name`; an unknown name is a one-line error listing the known."""
    try:
        return CONDITIONS[name]
    except KeyError:
        raise ValueError(
            f"unknown condition {name!r}; choose from {', '.join(CONDITIONS)}"
        ) from None
