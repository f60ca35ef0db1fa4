"""The training stages as data: one `Stage` per method of jacrl.train, the one place that says
what a stage is. Conditions chain stages (`jacrl.conditions`); the ladder resolves a stage's
config, dispatches its trainer and keys its cell from this table; `jacrl train` lists it.

A stage's trainer is named by dotted path ("jacrl.train.grpo:grpo") and imported only when it
runs (`trainer_of`), so reading the table loads no MLX. Adding a training method is one entry
here, its config class in jacrl.config and its trainer module (docs/training.md).

Owns: `Stage`, `STAGES` (by name), `CONFIGS`, `ENV_PREFIX`, `CALIBRATION`, `LIMIT_KINDS`,
`stage_of`, and `resolve` (a stage's config from defaults, formula, environment and overrides).
"""

from __future__ import annotations

import dataclasses
import importlib
import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from jacrl.config import (
    DPOConfig,
    EvalConfig,
    GRPOConfig,
    RFTConfig,
    SFTConfig,
    STaRConfig,
    configure,
)

# The GRPOConfig fields `jacrl.train.grpo.calibrate_temperature` reads: the rollout temperature
# a cell without a GRPO stage samples its mem rows at is calibrated with them, so they are an
# input of that cell's evaluation.
CALIBRATION = (
    "temperature",
    "temperature_grid",
    "calibration_floor",
    "group_size",
    "seed",
    "max_completion_length",
    "top_p",
    "top_k",
    "reward_formula",
)
CALIBRATED = {"grpo": CALIBRATION}  # what the cell of a stage without rollouts reads

PARENT_USES = ("none", "continues", "samples")  # its parent's adapter: unused/trained on/sampled
# What a token limit of a stage's config bounds: a task's prompt, its prompt + gold answer (a
# training example), or the gold answer alone (a sampling budget)
LIMIT_KINDS = ("prompt", "example", "answer")


@dataclass(frozen=True)
class Stage:
    """One training method: its `config` class, its `trainer` ("module:function"), how it uses
    the previous stage's artifact (`parent`: PARENT_USES), whether it may only come first (it
    starts from the base model), whether its artifact is `shared` by every condition that starts
    with it (labelled with the stage's name, not the condition's), the ladder's knob its
    `iters` come from ("sft_iters", "grpo_iters"; "" = its own default), `eval_reads`:
    {stage: fields} of the configs the cell's evaluation reads when this is its last stage
    (beside the cell's own stages), and `calibrates` ("module:function"; "" = it samples no
    rollouts): how it picks its rollout temperature on an adapter, which its artifact's
    manifest summary records as `temperature` — a cell's mem rows are sampled at it. `limits`:
    {field: kind (LIMIT_KINDS)} of its config's token limits (dotted for a nested config's),
    which `jacrl models check` measures the task set against."""

    name: str
    config: type
    trainer: str
    parent: str = "none"
    first_only: bool = False
    shared: bool = False
    iters: str = ""
    eval_reads: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    calibrates: str = ""
    limits: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self):
        paths = [self.trainer] + ([self.calibrates] if self.calibrates else [])
        if self.parent not in PARENT_USES or any(":" not in p for p in paths):
            raise ValueError(
                f"stage {self.name!r}: parent {self.parent!r} (of {PARENT_USES}), trainer "
                f"{self.trainer!r}, calibrates {self.calibrates!r} (module:function)"
            )
        if bad := {k: v for k, v in self.limits.items() if v not in LIMIT_KINDS}:
            raise ValueError(f"stage {self.name!r}: limits {bad} (kinds: {LIMIT_KINDS})")

    def limit_values(self, cfg) -> dict[str, tuple[str, int]]:
        """{"stage.field": (kind, value)} of its limits on `cfg` (a config of its class)."""
        out = {}
        for path, kind in self.limits.items():
            value = cfg
            for part in path.split("."):
                value = getattr(value, part)
            out[f"{self.name}.{path}"] = (kind, value)
        return out

    @property
    def grades(self) -> bool:
        """Whether it grades samples (its config has a reward_formula)."""
        return "reward_formula" in {f.name for f in dataclasses.fields(self.config)}

    @property
    def nests(self) -> dict[str, str]:
        """{field: stage} of the stage configs its config nests (RFT's `sft`: the cell's SFT
        config), the first stage in the table with that config class."""
        by_config = {}
        for st in STAGES.values():
            by_config.setdefault(st.config, st.name)
        hints = typing.get_type_hints(self.config)
        return {
            f.name: by_config[hints[f.name]]
            for f in dataclasses.fields(self.config)
            if hints[f.name] in by_config
        }

    @property
    def env_prefix(self) -> str:
        return f"JACRL_{self.name.upper()}_"

    @property
    def module(self) -> str:
        """The trainer's module: its imports are the code its artifacts' keys hold."""
        return self.trainer.partition(":")[0]


# RFT and STaR sample answers within max_tokens, then train their nested SFT config on them
SAMPLES_THEN_SFT = {"max_tokens": "answer", "sft.max_seq_length": "example"}

STAGES: dict[str, Stage] = {
    s.name: s
    for s in (
        Stage(
            "sft",
            SFTConfig,
            "jacrl.train.sft:sft",
            first_only=True,
            shared=True,
            iters="sft_iters",
            eval_reads=CALIBRATED,
            limits={"max_seq_length": "example"},
        ),
        Stage(
            "rft",
            RFTConfig,
            "jacrl.train.rft:rft",
            parent="samples",
            eval_reads=CALIBRATED,
            limits=SAMPLES_THEN_SFT,
        ),
        Stage(
            "star",
            STaRConfig,
            "jacrl.train.rft:star",
            first_only=True,
            eval_reads=CALIBRATED,
            limits=SAMPLES_THEN_SFT,
        ),
        Stage(
            "grpo",
            GRPOConfig,
            "jacrl.train.grpo:grpo",
            parent="continues",
            iters="grpo_iters",
            calibrates="jacrl.train.grpo:calibrate_temperature",
            limits={"max_seq_length": "prompt", "max_completion_length": "answer"},
        ),
        Stage(
            "dpo",
            DPOConfig,
            "jacrl.train.dpo:dpo",
            parent="continues",
            eval_reads=CALIBRATED,
            limits={"max_tokens": "answer", "max_seq_length": "example"},
        ),
    )
}

CONFIGS = {**{s.name: s.config for s in STAGES.values()}, "eval": EvalConfig}
ENV_PREFIX = {**{s.config: s.env_prefix for s in STAGES.values()}, EvalConfig: "JACRL_EVAL_"}


def stage_of(name: str) -> Stage:
    """The stage called `name`; an unknown name is a one-line error listing the known."""
    try:
        return STAGES[name]
    except KeyError:
        raise ValueError(f"unknown stage {name!r}; choose from {', '.join(STAGES)}") from None


def function_of(path: str) -> Callable:
    """The function a "module:function" path of the table names, imported now."""
    module, _, func = path.partition(":")
    return getattr(importlib.import_module(module), func)


def trainer_of(name: str) -> Callable:
    """The stage's trainer function, imported now (MLX loads with it)."""
    return function_of(stage_of(name).trainer)


def resolve(name: str, formula: str, env: Mapping[str, str], *layers: Mapping) -> object:
    """The stage's config, resolved the one way `jacrl train` and every ladder cell do: its
    dataclass defaults, the reward `formula` (a grading stage), JACRL_<STAGE>_* in `env`, then
    each of `layers` ({field: value}, dotted keys for nested configs) in order."""
    stage = stage_of(name)
    cfg = stage.config(**({"reward_formula": formula} if stage.grades else {}))
    cfg = configure(cfg, env=env, prefix=stage.env_prefix)
    for layer in layers:
        cfg = configure(cfg, layer)
    return cfg
