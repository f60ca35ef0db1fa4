"""The recipe's steps (its records call them stages 0-3; the training stages are
`jacrl.stages`) and the cells each one runs, as pure functions of (ladder configuration,
recipe configuration, rows so far). The ladder configuration is any object with the ladder's
fields (rungs, models, grpo_iters, sets); nothing here runs or resolves a cell.

Each cell belongs to one stage: stage 0's sft cell on the first rung is not repeated in stage 1.
The tuned arm is the ladder's `sft_grpo_tuned` condition (`jacrl.conditions`: the default arm's
resolved GRPO learning rate and iterations, scaled), defined there once; its cell key differs
from the default arm's both by condition and by the resolved GRPO hyperparameters.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from jacrl.recipe.decide import RecipeConfig, elbows, first_rung, gate, ordered_rungs
from jacrl.results import model_label


@dataclass(frozen=True)
class Step:
    """One step of the recipe: what it runs and what it needs from the steps before."""

    number: int
    name: str
    runs: str
    needs: str


STEPS = (
    Step(
        0,
        "gate",
        "sft on the first rung, every model; its mem eval must reach the threshold",
        "nothing",
    ),
    Step(1, "curve", "base + sft on every rung, every model", "the gate (stage 0) passing"),
    Step(
        2, "elbow", "no cells: the elbow rung E of each model's sft curve", "stage 1's sft gen rows"
    ),
    Step(
        3,
        "grpo",
        "sft_grpo + sft_grpo_tuned at E; raw_grpo control on the first rung",
        "the gate; the sft_grpo arms also the elbow (stage 2)",
    ),
)


@dataclass(frozen=True)
class CellSpec:
    """One cell the recipe wants: ladder cell (rung, model, condition) with hyperparameter
    overrides {stage: {...}} applied over the ladder's `sets` (none of the recipe's own
    cells has any; a caller's spec may)."""

    stage: int
    rung: str
    model: str  # as the ladder configuration gives it (registry name or path)
    condition: str
    overrides: dict = field(default_factory=lambda: {"sft": {}, "grpo": {}})
    why: str = ""

    @property
    def label(self) -> str:
        return model_label(self.model)

    @property
    def name(self) -> str:
        return f"r{self.rung}/{self.label}/{self.condition}"

    def sets(self, cfg) -> dict[str, dict]:
        """{"sets": {stage: overrides}} of the ladder cell: the configuration's, then, for each
        stage this spec overrides, this spec's over them."""
        return {
            "sets": {
                **cfg.sets,
                **{st: {**cfg.sets.get(st, {}), **o} for st, o in self.overrides.items()},
            }
        }

    def as_dict(self) -> dict:
        return {
            "stage": self.stage,
            "cell": self.name,
            "rung": self.rung,
            "model": self.model,
            "condition": self.condition,
            "overrides": self.overrides,
            "why": self.why,
        }


def planned_cells(
    stage: int,
    cfg,
    rcfg: RecipeConfig = RecipeConfig(),
    elbow_rungs: Mapping[str, str | None] | None = None,
    env: Mapping[str, str] = os.environ,
) -> list[CellSpec]:
    """The cells of a stage, ignoring the gate; stage 3's sft_grpo arms only for the models in
    `elbow_rungs` ({label: E}) with an E. Each cell belongs to one stage (stage 1 leaves out
    stage 0's cell)."""
    first, rungs = first_rung(cfg), ordered_rungs(cfg)
    if stage == 0:
        return [
            CellSpec(0, first, m, "sft", why="gate: sft mem on the first rung") for m in cfg.models
        ]
    if stage == 1:
        return [
            CellSpec(1, r, m, c, why="the SFT curve")
            for r in rungs
            for m in cfg.models
            for c in ("base", "sft")
            if not (r == first and c == "sft")
        ]
    if stage != 3:
        return []
    out = []
    for m in cfg.models:
        e = (elbow_rungs or {}).get(model_label(m))
        if e is not None:
            out += [
                CellSpec(3, e, m, "sft_grpo", why=f"GRPO at the elbow r{e}, default arm"),
                CellSpec(3, e, m, "sft_grpo_tuned", why=f"GRPO at the elbow r{e}, tuned arm"),
            ]
        out.append(CellSpec(3, first, m, "raw_grpo", why="raw_grpo control on the first rung"))
    return out


def stage_cells(
    stage: int,
    cfg,
    rows: Sequence[Mapping],
    rcfg: RecipeConfig = RecipeConfig(),
    env: Mapping[str, str] = os.environ,
) -> list[CellSpec]:
    """The cells a runner should run for `stage`, given the rows so far: stage 0 always; later
    stages only once the gate passed; stage 3 at each model's elbow (from the rows)."""
    if stage > 0 and gate(cfg, rows, rcfg.gate_threshold).status != "pass":
        return []
    e = {m: x.rung for m, x in elbows(cfg, rows, rcfg).items()} if stage == 3 else None
    return planned_cells(stage, cfg, rcfg, e, env)


def stop_reason(cfg, rows: Sequence[Mapping], rcfg: RecipeConfig = RecipeConfig()) -> str | None:
    """The gate's one-line reason when it did not pass (the recipe stops), else None."""
    g = gate(cfg, rows, rcfg.gate_threshold)
    return None if g.status == "pass" else g.reason
