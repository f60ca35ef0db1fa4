"""The ladder's configuration: `LadderConfig` (every knob of a ladder run, with its default and
help), its JACRL_LADDER_* environment overrides (`from_env`), and `validate`, which checks it and
makes every path absolute. Nothing here resolves a cell (`jacrl.ladder.plan` does).
"""

from __future__ import annotations

import dataclasses
import os
import re
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from jacrl.conditions import CONDITIONS, DEFAULT_CONDITIONS
from jacrl.config import (
    DEFAULT_FORMULA,
    REWARD_FORMULAS,
    EvalConfig,
    GRPOConfig,
    SFTConfig,
    _f,
    configure,
    env_formula,
)
from jacrl.evaluate import check_k
from jacrl.ladder.taskset import FORMATS, check_prompts
from jacrl.project import ROWS_FILE, path_or, project
from jacrl.recipe import RECIPE
from jacrl.ruler.reward import check_formula
from jacrl.stages import STAGES
from jacrl.tasks import splits

NOTEBOOK = "30_training.ipynb"  # in the project's notebooks/
RESULTS_FILE = ROWS_FILE
LADDER_N = 8  # the ladder's own choice: 8 temperature samples per gen task (EvalConfig's n is 0)


# -------------------------------------------------------------------------------------------
# configuration
# -------------------------------------------------------------------------------------------


def _eval(default, help: str, *, since: bool = False):
    """An evaluation knob: in every cell's key (`plan.eval_settings`). since=True: a knob added
    after keys were filed, in the key only when set (its default is what earlier cells had), so
    their keys and artifacts stay valid."""
    return field(default=default, metadata={"help": help, "eval": True, "since": since})


@dataclass(frozen=True)
class LadderConfig:
    """Every knob of a ladder run. The iterations and the eval knobs it shares with
    SFTConfig / GRPOConfig / EvalConfig take their defaults from there; `n` is the ladder's own
    (LADDER_N)."""

    rungs: tuple[str, ...] = _f(splits.RUNGS, "rungs: training-pool prefix sizes or 'all'")
    models: tuple[str, ...] = _f(("jac-tiny",), "registry names or MLX model dirs")
    conditions: tuple[str, ...] = _f(DEFAULT_CONDITIONS, f"of {', '.join(CONDITIONS)}")
    formats: tuple[str, ...] = _f(
        ("hole",),
        "task formats, of hole, conversion; with "
        "conversion, every cell trains and evaluates only the ids "
        "that have a conversion task (paired across formats)",
    )
    seed: int = _f(0, "evaluation sampling seed, and the training seed without train_seeds")
    train_seeds: tuple[int, ...] = _f(
        (),
        "train every trained cell once per seed, e.g. 0,1,2 "
        "(replicates: distinct keys; () = seed only)",
    )
    sft_iters: int = _f(SFTConfig.iters, "SFT iterations (every SFT run of a cell)")
    grpo_iters: int = _f(GRPOConfig.iters, "GRPO iterations")
    sft_iters_per_task: int = _f(
        0,
        "when > 0, a rung's SFT runs min(sft_iters, this x the rung's "
        "tasks) iterations, so every rung trains each task about "
        "equally often (0 = sft_iters on every rung)",
    )
    grpo_prompts: str = _f(
        "rung",
        "GRPO's prompts (jacrl.ladder.taskset.grpo_tasks): rung = the rung's own tasks (SFT's: an "
        "SFT policy that passes them all gives every group equal rewards, no signal); pool = the "
        "whole train pool; beyond = the pool's tasks outside the rung (prompts SFT never saw); "
        "N = the first N of the pool. In the key when not rung",
    )
    sets: dict = field(
        default_factory=dict,
        metadata={
            "help": "{stage: {knob: value}}: overrides of a stage's config (jacrl.stages), "
            "e.g. {'grpo': {'group_size': 2}}; `--set grpo.group_size=2`"
        },
    )
    reward_formula: str = _f(
        DEFAULT_FORMULA,
        f"reward formula of every stage that grades samples ({', '.join(REWARD_FORMULAS)}); "
        "`from_env` takes JACRL_REWARD_FORMULA",
    )
    # eval knobs (in a cell's key): one named like an EvalConfig field reaches EvalConfig as is
    gen_limit: int = _eval(0, "N holdout tasks for gen, taken round-robin by family (0 = all)")
    mem_limit: int = _eval(0, "first N rung tasks for mem (0 = all)")
    n: int = _eval(LADDER_N, "temperature samples per gen task")
    k: tuple[int, ...] = _eval(EvalConfig.k, "pass@k values reported (each <= n)")
    temperature: float = _eval(EvalConfig.temperature, "gen sampling temperature")
    max_tokens: int = _eval(EvalConfig.max_tokens, "completion budget for every eval")
    budget_factor: float = _eval(
        EvalConfig.budget_factor,
        "per-task token budgets from the gold answer's length (jacrl.token_budget; "
        "0 = max_tokens for every task)",
        since=True,
    )
    batch_size: int = _f(EvalConfig.batch_size, "sequences decoded together (throughput only)")
    decode_workers: int = _eval(
        EvalConfig.decode_workers,
        "processes decoding each evaluation, one BLAS thread each (2 on 2 cores: ~1.7x a real "
        "model's decode); its samples depend on it",
        since=True,
    )
    data_dir: str = _f("", "tasks.jsonl + splits/ ('' = the project's data/)")
    results_dir: str = _f("", f"{RESULTS_FILE} and cells/ ('' = the project's results/)")
    figures_dir: str = _f("", "where show writes PNGs ('' = the project's figures/)")
    artifacts_dir: str = _f("", "training artifacts ('' = the project's artifacts/)")
    notebook: str = _f("", f"the per-cell notebook ('' = the project's notebooks/{NOTEBOOK})")
    report_to: str = _f(
        "",
        "experiment tracking of every training stage, e.g. wandb ('' = none; "
        "in no key: tracking never changes an artifact)",
    )
    cell_timeout: int = _f(0, "seconds per cell before it is killed and marked failed (0 = none)")
    recipe: str = _f(
        "",
        f"'' = every planned cell (the grid); {RECIPE!r} = the staged recipe "
        "(jacrl.recipe; `run_recipe`): gate, SFT curve, elbow, GRPO at the elbow",
    )

    @property
    def results_file(self) -> Path:
        return path_or(self.results_dir, "results") / RESULTS_FILE


DEFAULTS = LadderConfig()


def comma_list(s: str) -> tuple[str, ...]:
    return tuple(x.strip() for x in str(s).split(",") if x.strip())


def parse_iters(s: str) -> dict[str, int]:
    """'50' -> {sft: 50, grpo: 50}; 'sft=50,grpo=20' -> as given (the stages with a ladder
    iterations knob, `<stage>_iters`)."""
    s = str(s).strip()
    knobs = [st.iters.removesuffix("_iters") for st in STAGES.values() if st.iters]
    if re.fullmatch(r"\d+", s):
        return dict.fromkeys(knobs, int(s))
    out = {}
    for part in comma_list(s):
        k, sep, v = part.partition("=")
        if not sep or k.strip() not in knobs or not v.strip().isdigit():
            raise ValueError(f"iterations: expected N or sft=N,grpo=M, got {s!r}")
        out[k.strip()] = int(v)
    return out


ENV_PREFIX = "JACRL_LADDER_"
NOT_FIELDS = ("JACRL_LADDER_ITERS", "JACRL_LADDER_ENGINE")  # read here / by the CLI


def from_env(cfg: LadderConfig, env: Mapping[str, str] = os.environ) -> LadderConfig:
    """Apply JACRL_LADDER_<FIELD> for every scalar or list field (`configure`'s scheme: comma
    lists for rungs, models, conditions, formats, k; one naming no field is an error), plus
    JACRL_LADDER_ITERS ("50" or "sft=50,grpo=20"), after JACRL_REWARD_FORMULA (the reward
    formula's one environment variable, read here). Empty values are ignored."""
    given = {k: v for k, v in env.items() if k.startswith(ENV_PREFIX) and v.strip()}
    if env.get("JACRL_REWARD_FORMULA", "").strip():
        cfg = dataclasses.replace(cfg, reward_formula=env_formula(env))
    cfg = configure(
        cfg, env={k: v for k, v in given.items() if k not in NOT_FIELDS}, prefix=ENV_PREFIX
    )
    if given.get("JACRL_LADDER_ITERS"):
        it = parse_iters(given["JACRL_LADDER_ITERS"])
        cfg = dataclasses.replace(cfg, **{f"{k}_iters": v for k, v in it.items()})
    return validate(cfg)


def validate(cfg: LadderConfig) -> LadderConfig:
    bad = [c for c in cfg.conditions if c not in CONDITIONS]
    if bad:
        raise ValueError(f"unknown condition(s) {bad}; choose from {', '.join(CONDITIONS)}")
    for r in cfg.rungs:
        splits.check_rung(r, sys.maxsize)  # the pool's size is checked by plan()
    bad = [f for f in cfg.formats if f not in FORMATS]
    if bad or len(set(cfg.formats)) != len(cfg.formats):
        raise ValueError(f"formats {list(cfg.formats)}: each once, of {', '.join(FORMATS)}")
    if not cfg.rungs or not cfg.models or not cfg.conditions or not cfg.formats:
        raise ValueError("the ladder needs at least one rung, model, condition and format")
    check_k(cfg.k, cfg.n)
    if len(set(cfg.train_seeds)) != len(cfg.train_seeds):
        raise ValueError(f"train_seeds {list(cfg.train_seeds)}: each seed once")
    if cfg.recipe not in ("", RECIPE):
        raise ValueError(f"unknown recipe {cfg.recipe!r}; choose {RECIPE!r} (or none)")
    check_formula(cfg.reward_formula)
    check_prompts(cfg.grpo_prompts)
    bad = [s for s in cfg.sets if s not in STAGES] + [
        s for s, v in cfg.sets.items() if not isinstance(v, Mapping)
    ]
    if bad:
        raise ValueError(
            f"sets {dict(cfg.sets)}: expected {{stage: {{knob: value}}}} with "
            f"stages of {', '.join(STAGES)}"
        )
    return with_paths(cfg)


def with_paths(cfg: LadderConfig) -> LadderConfig:
    """Every path absolute: the ones given (relative to the working directory), else the
    project's, so cells, their notebooks and `show` agree wherever they run."""
    paths = {
        f: str(path_or(getattr(cfg, f), attr).resolve())
        for f, attr in (
            ("data_dir", "data"),
            ("results_dir", "results"),
            ("figures_dir", "figures"),
            ("artifacts_dir", "artifacts"),
        )
    }
    paths["notebook"] = (
        str(Path(cfg.notebook).resolve()) if cfg.notebook else str(default_notebook())
    )
    return dataclasses.replace(cfg, **paths)


def default_notebook() -> Path:
    return project().notebooks / NOTEBOOK
