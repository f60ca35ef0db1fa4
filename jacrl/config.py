"""Every knob of every algorithm: one frozen dataclass per stage, each field with its default and
help text (mlx-lm's `TrainingArgs` style), and one way to override them (`configure`: a mapping,
dotted keys for nested configs, or `JACRL_<STAGE>_<FIELD>` environment variables; one under a
stage's prefix that names no knob is an error; the prefixes are `jacrl.stages`'). Where each
default comes from: docs/training.md, "Where the defaults come from".
"""

from __future__ import annotations

import dataclasses
import difflib
import typing
from collections.abc import Mapping
from dataclasses import dataclass, field

# The reward formula knob's choices; jacrl.ruler.reward implements one function per name and checks
# at import that they are these, so the knob catalogue does not depend on the grader.
REWARD_FORMULAS = ("dependent", "tiered", "additive")
DEFAULT_FORMULA = "dependent"
MAX_TOKENS = 512  # the completion budget of every eval; GRPO rollouts and RFT samples use the same


def _f(default, help: str):
    """A knob: its default and its help text in one place (mlx-lm's style)."""
    return field(default=default, metadata={"help": help})


def check_formula(formula: str) -> str:
    """`formula`, or ValueError (one line) when it names no reward formula."""
    if formula not in REWARD_FORMULAS:
        raise ValueError(
            f"unknown reward formula {formula!r}; choose from {', '.join(REWARD_FORMULAS)}"
        )
    return formula


def env_formula(env: Mapping[str, str]) -> str:
    """JACRL_REWARD_FORMULA, else DEFAULT_FORMULA: read once, at the edge (the CLI, the ladder's
    `from_env`, a notebook run by hand), never by a config default or the grader."""
    value = env.get("JACRL_REWARD_FORMULA", "").strip() or DEFAULT_FORMULA
    if value not in REWARD_FORMULAS:
        raise ValueError(
            f"JACRL_REWARD_FORMULA={value!r} is not a reward formula; choose from "
            f"{', '.join(REWARD_FORMULAS)}"
        )
    return value


def _formula(what: str):
    """The reward formula knob (part of the key, like every knob)."""
    return _f(DEFAULT_FORMULA, f"reward formula grading {what} ({' | '.join(REWARD_FORMULAS)})")


# -------------------------------------------------------------------------------------------
# hyperparameters
# -------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class LoRATraining:
    """The knobs of every stage that trains a LoRA adapter (SFT, GRPO, DPO), declared once: a
    stage sets its own default with `_own` (keeping the help said here, plus a note where the
    knob means more in that stage) and adds the knobs only it has."""

    iters: int = _f(200, "training iterations")
    learning_rate: float = _f(1e-5, "Adam's learning rate")
    batch_size: int = _f(1, "examples per step")
    max_seq_length: int = _f(2048, "longest tokenized example")
    lora_layers: int = _f(
        8,
        "transformer blocks (from the top) that get LoRA; -1 = all; clamped to the model's depth",
    )
    lora_rank: int = _f(8, "LoRA rank")
    lora_scale: float = _f(10.0, "LoRA scale")
    lora_dropout: float = _f(0.0, "LoRA dropout")
    lora_keys: str = _f(
        "",
        "comma-separated module paths inside a block that get LoRA, e.g. "
        "'self_attn.v_proj,mlp.down_proj'; '' = every linear layer (mlx-lm)",
    )
    grad_checkpoint: bool = _f(False, "gradient checkpointing (memory for compute)")
    steps_per_report: int = _f(5, "iterations between metric reports (metrics.jsonl)")
    steps_per_eval: int = _f(0, "iterations between validation runs; 0 = never")
    val_batches: int = _f(-1, "validation batches per validation run (-1 = all)")
    seed: int = _f(0, "seed for LoRA init and batch order")


def _own(name: str, default, note: str = ""):
    """A `LoRATraining` knob with a stage's own default: the base's help, then the stage's note."""
    said = LoRATraining.__dataclass_fields__[name].metadata["help"]
    return _f(default, f"{said}; {note}" if note else said)


@dataclass(frozen=True)
class SFTConfig(LoRATraining):
    """Gold / RFT / STaR supervised fine-tuning (mlx-lm LoRA trainer)."""

    learning_rate: float = _own("learning_rate", 2e-5, "the peak (warm-up, then cosine decay)")
    warmup: int = _f(60, "linear warm-up steps from 0 to the peak (0 = none)")
    decay_steps: int = _f(
        600, "cosine decay horizon after warm-up (long: LR ~1.75e-5 at iteration 200)"
    )
    batch_size: int = _own(
        "batch_size", 2, "clamped to min(#train, #valid) (a larger batch would repeat examples)"
    )
    lora_layers: int = _own("lora_layers", 16)
    lora_rank: int = _own("lora_rank", 16)
    lora_scale: float = _own("lora_scale", 20.0, "mlx-lm's default")
    grad_checkpoint: bool = _own("grad_checkpoint", True)
    mask_prompt: bool = _f(True, "loss on the assistant turn only")
    steps_per_report: int = _own("steps_per_report", 10)
    steps_per_eval: int = _own("steps_per_eval", 50)
    keep_best: bool = _f(
        False,
        "keep the adapter of the best validation seen (validated at iteration 0, every "
        "steps_per_eval and before the last), not the last: early stopping by the valid split; "
        "the manifest records best_iter, best_val_loss (and best_val_reward)",
    )
    best_by: str = _f(
        "loss",
        "what keep_best ranks validations by: loss (the valid gold's loss, lowest) or reward "
        "(the mean tiered reward of greedy answers to the first graded_valid valid tasks, run "
        "by the sandboxed reward; highest, ties to the lower loss)",
    )
    graded_valid: int = _f(8, "valid tasks best_by=reward answers and grades at each validation")

    def __post_init__(self):
        if self.best_by not in ("loss", "reward"):
            raise ValueError(f"SFTConfig.best_by must be loss or reward, not {self.best_by!r}")
        if self.graded_valid < 1:
            raise ValueError(f"SFTConfig.graded_valid must be >= 1, not {self.graded_valid}")


@dataclass(frozen=True)
class GRPOConfig(LoRATraining):
    """GRPO (jacrl.train.grpo: our own loop) with the sandboxed reward."""

    learning_rate: float = _own("learning_rate", 1e-6, "constant")
    beta: float = _f(0.04, "KL coefficient; > 0 loads a frozen reference model")
    group_size: int = _f(4, "rollouts per prompt")
    batch_size: int = _own("batch_size", 1, "prompts per step; clamped to the number of tasks")
    max_completion_length: int = _f(MAX_TOKENS, "rollout token budget; = the eval budget")
    max_seq_length: int = _own(
        "max_seq_length", 1280, "of a prompt; a longer one is an error (not cut: its end matters)"
    )
    temperature: float = _f(
        0.0,
        "rollout sampling temperature; 0 = calibrated on the starting "
        "policy (the highest of temperature_grid whose rollouts keep "
        "calibration_floor of its greedy reward; recorded in the "
        "artifact)",
    )
    temperature_grid: tuple[float, ...] = _f(
        (1.0, 0.7, 0.5, 0.3), "temperatures calibration tries, highest first"
    )
    calibration_floor: float = _f(
        0.5, "share of the greedy reward a temperature's rollouts must keep to be chosen"
    )
    advantage: str = _f(
        "centered",
        "centered (Dr. GRPO: r - group mean) | std (mlx-lm-lora's: "
        "divided by the group's σ + 1e-4)",
    )
    min_group_span: float = _f(
        0.1,
        "a group whose rewards span less than this gets advantage 0 "
        "(DAPO's dynamic-sampling filter; 0.1 > the similarity "
        "spread of a group that all fails); 0 = only equal rewards",
    )
    dynamic_sampling: bool = _f(
        False,
        "DAPO's dynamic sampling: a step draws max_draws batches of prompts in one batched "
        "generation and trains on the first batch_size groups spanning >= min_group_span "
        "(the others are discarded, logged in rollouts.jsonl)",
    )
    max_draws: int = _f(
        4,
        "batches of prompts (batch_size prompts x group_size rollouts each) drawn together per "
        "step under dynamic sampling, over-sampled once up front; a step that finds too few "
        "groups with signal fills up with the last groups drawn (advantage 0)",
    )
    top_p: float = _f(0.95, "rollout top-p (trainer default)")
    top_k: int = _f(20, "rollout top-k (trainer default)")
    min_p: float = _f(0.0, "rollout min-p")
    lora_layers: int = _own("lora_layers", 8, "inherited from the parent adapter when chained")
    grad_checkpoint: bool = _own(
        "grad_checkpoint", False, "on, the update runs each rollout's prompt again"
    )
    loss_type: str = _f("grpo", "grpo | bnpo | dr_grpo")
    epsilon: float = _f(1e-4, "importance-ratio clip width (ratio is 1: one update per rollout)")
    rollout_batch: int = _f(
        0,
        "sequences decoded together in rollouts; 0 = all of a step's (batch x group, x "
        "max_draws under dynamic sampling)",
    )
    steps_per_eval: int = _own("steps_per_eval", 0, "validation: the rollout reward on valid tasks")
    val_batches: int = _own("val_batches", 1)
    seed: int = _own("seed", 0, "and rollouts")
    reward_formula: str = _formula("the rollouts")

    def __post_init__(self):
        check_formula(self.reward_formula)
        if self.advantage not in ("centered", "std"):
            raise ValueError(
                f"GRPOConfig.advantage must be centered or std, not {self.advantage!r}"
            )
        if self.max_draws < 1:
            raise ValueError(f"GRPOConfig.max_draws must be >= 1, not {self.max_draws}")


@dataclass(frozen=True)
class RFTConfig:
    """Rejection sampling then SFT on the verified samples."""

    samples: int = _f(8, "completions sampled per task")
    temperature: float = _f(1.0, "sampling temperature")
    threshold: float = _f(1.0, "keep a sample when its reward >= this (1.0 = exact output)")
    per_task: int = _f(1, "most kept examples per task; 0 = all distinct passing bodies")
    max_tokens: int = _f(MAX_TOKENS, "sampling token budget")
    seed: int = _f(0, "sampling seed")
    reward_formula: str = _formula("the samples (matters when threshold < 1)")
    sft: SFTConfig = field(
        default_factory=SFTConfig, metadata={"help": "the SFT run on the kept examples"}
    )

    def __post_init__(self):
        check_formula(self.reward_formula)


@dataclass(frozen=True)
class STaRConfig(RFTConfig):
    """Expert iteration = RFT iterated: rounds of sample -> keep verified -> SFT from the original
    base (round 0 is gold SFT). Every RFT knob, plus `rounds`; its own defaults where they
    differ."""

    samples: int = _f(6, "completions sampled per task each round")
    per_task: int = _f(1, "most kept examples per task per round; 0 = all distinct")
    sft: SFTConfig = field(
        default_factory=SFTConfig, metadata={"help": "the SFT run of every round"}
    )
    rounds: int = _f(2, "extra rounds after the gold round 0 (2 = 3 SFTs)")


DPO_LOSSES = ("sigmoid", "hinge", "ipo", "dpop")  # mlx-lm-lora's dpo_loss implements these


@dataclass(frozen=True)
class DPOConfig(LoRATraining):
    """DPO (mlx-lm-lora's trainer) on preference pairs our verifier builds from the parent's own
    samples: chosen passes (a passing sample, else the gold), rejected fails (docs/dpo.md)."""

    samples: int = _f(8, "completions sampled per train task from the parent (as RFT)")
    temperature: float = _f(1.0, "sampling temperature of those completions (as RFT)")
    max_tokens: int = _f(MAX_TOKENS, "sampling token budget; = the eval budget")
    pairs_per_task: int = _f(2, "most pairs per task: its highest-reward distinct failures")
    reward_formula: str = _formula("the samples (ranks the failures)")
    iters: int = _own("iters", 100, "mlx-lm-lora's default")
    learning_rate: float = _own("learning_rate", 1e-5, "constant (mlx-lm-lora's default)")
    beta: float = _f(
        0.1,
        "DPO's beta: strength of the pull toward the reference (DPO paper, mlx-lm-lora's default)",
    )
    loss_type: str = _f("sigmoid", f"{' | '.join(DPO_LOSSES)} (sigmoid: the DPO paper's loss)")
    delta: float = _f(
        50.0,
        "mlx-lm-lora's DPOP penalty weight (loss_type dpop only: its penalty outside the "
        "sigmoid; dpop_lambda is Pal et al.'s form)",
    )
    rpo_alpha: float = _f(
        0.0,
        "weight of the NLL of the chosen answer per token added to the loss (RPO, Pang et al. "
        "2024); 0 = off",
    )
    dpop_lambda: float = _f(
        50.0,
        "DPO-Positive (Pal et al. 2024): lambda * max(0, log ref(chosen) - log policy(chosen)) "
        "subtracted inside the sigmoid; 0 = off (plain DPO); sigmoid loss only; 50: the paper's, "
        "chosen by bench/dpo_learning.py (docs/dpo.md)",
    )
    batch_size: int = _own(
        "batch_size",
        1,
        "pairs per step; clamped to the number of pairs (mlx-lm-lora drops the len % batch_size "
        "remainder of each shuffle)",
    )
    max_seq_length: int = _own("max_seq_length", 2048, "prompt + response; longer ones are cut")
    # DPO always continues its parent's adapter, whose shape wins (`lora_model`): the LoRA knobs
    # are kept so that every stage that trains LoRA has the same ones.
    lora_layers: int = _own("lora_layers", 8, "the parent adapter's shape wins")
    steps_per_eval: int = _own(
        "steps_per_eval", 0, "on pairs built from the valid tasks (0: none are sampled)"
    )
    seed: int = _own("seed", 0, "and sampling")

    def __post_init__(self):
        check_formula(self.reward_formula)
        if self.loss_type not in DPO_LOSSES:
            raise ValueError(
                f"DPOConfig.loss_type must be one of {', '.join(DPO_LOSSES)}, not "
                f"{self.loss_type!r}"
            )
        if self.rpo_alpha < 0 or self.dpop_lambda < 0:
            raise ValueError(
                f"DPOConfig.rpo_alpha and dpop_lambda must be >= 0, not {self.rpo_alpha}, "
                f"{self.dpop_lambda}"
            )
        if self.dpop_lambda > 0 and self.loss_type != "sigmoid":
            raise ValueError(
                f"DPOConfig.dpop_lambda works inside the sigmoid loss; loss_type is "
                f"{self.loss_type!r}"
            )
        for name in ("samples", "pairs_per_task", "iters", "batch_size"):
            if getattr(self, name) < 1:
                raise ValueError(f"DPOConfig.{name} must be >= 1, not {getattr(self, name)}")
        if self.temperature <= 0:
            raise ValueError(
                f"DPOConfig.temperature must be > 0 (greedy samples are all the "
                f"same), not {self.temperature}"
            )


@dataclass(frozen=True)
class EvalConfig:
    """One evaluation: greedy decoding of every task, plus `n` temperature samples for pass@k."""

    n: int = _f(0, "temperature samples per task (0 = greedy only)")
    k: tuple[int, ...] = _f((1, 2, 4, 8), "pass@k values reported (those <= n are kept)")
    temperature: float = _f(1.0, "sampling temperature")
    seed: int = _f(0, "sampling seed")
    max_tokens: int = _f(MAX_TOKENS, "completion budget")
    budget_factor: float = _f(
        0.0,
        "per-task budget = ceil(this x the gold answer's tokens) + 16, at most max_tokens "
        "(jacrl.token_budget); 0 = max_tokens for every task",
    )
    batch_size: int = _f(32, "sequences decoded together (throughput only)")
    decode_workers: int = _f(
        1,
        "processes decoding the evaluation, one BLAS thread each (jacrl.generate.decode_split: "
        "2 on 2 cores decodes ~1.7x faster on a real model); samples depend on it, greedy not",
    )

    def __post_init__(self):
        if self.decode_workers < 1:
            raise ValueError(f"EvalConfig.decode_workers must be >= 1, got {self.decode_workers}")
        if self.n < 0:
            raise ValueError(f"EvalConfig.n must be >= 0, got {self.n}")
        if self.budget_factor < 0:
            raise ValueError(f"EvalConfig.budget_factor must be >= 0, got {self.budget_factor}")

    def ks(self) -> list[int]:
        """The pass@k values that can be reported with n samples."""
        return [x for x in self.k if x <= self.n]


def _coerce(value, typ):
    if typing.get_origin(typ) is tuple:  # "1,2,4" or a sequence -> tuple of the item type
        item = typing.get_args(typ)[0]
        items = value.split(",") if isinstance(value, str) else value
        return tuple(
            _coerce(x.strip() if isinstance(x, str) else x, item)
            for x in items
            if not (isinstance(x, str) and not x.strip())
        )
    if not isinstance(value, str) or typ is str:
        return typ(value) if typ in (int, float) and not isinstance(value, bool) else value
    if typ is bool:
        v = value.strip().lower()
        if v in ("1", "true", "yes", "on"):
            return True
        if v in ("0", "false", "no", "off", ""):
            return False
        raise ValueError(f"not a boolean: {value!r}")
    return typ(value)


def configure(
    cfg,
    overrides: Mapping[str, object] | None = None,
    *,
    env: Mapping[str, str] | None = None,
    prefix: str | None = None,
):
    """A copy of `cfg` with overrides applied: `{"iters": 50, "sft.learning_rate": 1e-3}` (dotted
    keys reach nested configs; strings are converted to the field's type), then, when `env` is
    given, the variables `prefix` + FIELD (`JACRL_<STAGE>_<FIELD>`; nested: `JACRL_RFT_SFT_ITERS`).
    Unknown keys raise."""
    hints = typing.get_type_hints(type(cfg))
    names = {f.name for f in dataclasses.fields(cfg)}
    changes: dict[str, object] = {}
    nested: dict[str, dict] = {}
    for key, value in (overrides or {}).items():
        head, _, rest = key.replace("-", "_").partition(".")
        if head not in names:
            raise KeyError(
                f"{type(cfg).__name__} has no field {head!r} (fields: {', '.join(sorted(names))})"
            )
        if rest:
            nested.setdefault(head, {})[rest] = value
        elif dataclasses.is_dataclass(hints[head]) and isinstance(value, Mapping):
            nested.setdefault(head, {}).update(value)
        else:
            try:
                changes[head] = _coerce(value, hints[head])
            except ValueError as e:  # name the knob: "SFTConfig.iters = 'abc': ..."
                raise ValueError(f"{type(cfg).__name__}.{head} = {value!r}: {e}") from None
    for head, sub in nested.items():
        changes[head] = configure(getattr(cfg, head), sub)
    cfg = dataclasses.replace(cfg, **changes)
    if env is not None:
        if prefix is None:  # the stage table names each stage's (jacrl.stages.ENV_PREFIX)
            raise TypeError(f"configure({type(cfg).__name__}, env=...) needs its prefix")
        env_changes = {}
        for f in dataclasses.fields(cfg):
            typ = hints[f.name]
            name = prefix + f.name.upper()
            if dataclasses.is_dataclass(typ):
                env_changes[f.name] = configure(getattr(cfg, f.name), env=env, prefix=name + "_")
            elif name in env:
                try:
                    env_changes[f.name] = _coerce(env[name], typ)
                except ValueError as e:
                    raise ValueError(f"{name}={env[name]!r}: {e}") from None
        cfg = dataclasses.replace(cfg, **env_changes)
        if prefix != "JACRL_":  # a stage's own prefix: a variable naming no knob is an error
            _check_env_names(cfg, env, prefix, hints)
    return cfg


def _check_env_names(cfg, env: Mapping[str, str], prefix: str, hints: Mapping) -> None:
    """Raise KeyError (one line) for a variable under `prefix` that names no field of cfg, so a
    misspelled or retired knob (JACRL_GRPO_ITER) is not silently ignored. A nested config's
    variables are checked by its own `configure` call."""
    known = {prefix + f.name.upper() for f in dataclasses.fields(cfg)}
    nested = tuple(
        prefix + f.name.upper() + "_"
        for f in dataclasses.fields(cfg)
        if dataclasses.is_dataclass(hints[f.name])
    )
    bad = sorted(
        n
        for n in env
        if n.startswith(prefix) and n not in known and not n.startswith(nested or ("\0",))
    )
    if bad:
        close = difflib.get_close_matches(bad[0], sorted(known), n=1)
        raise KeyError(
            f"{bad[0]}: {type(cfg).__name__} has no such knob"
            + (f" (did you mean {close[0]}?)" if close else "")
        )


def from_dict(cls, d: Mapping[str, object] | None = None):
    """`cls()` with `d` applied (see `configure`)."""
    return configure(cls(), d)


def config_help(cls) -> str:
    """One line per knob: name, default, help (for --help texts and docs)."""
    out = []
    for f in dataclasses.fields(cls):
        default = f.default_factory() if f.default is dataclasses.MISSING else f.default
        if dataclasses.is_dataclass(default):
            out.append(f"{f.name}.*: {f.metadata.get('help', '')} (see {type(default).__name__})")
        else:
            out.append(f"{f.name}={default!r}: {f.metadata.get('help', '')}")
    return "\n".join(out)
