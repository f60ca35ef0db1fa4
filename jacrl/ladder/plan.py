"""Planning the ladder: every cell resolved (`make_cell`: its stages' configs, `stage_configs`,
and its key) and the plan of a `LadderConfig` (`plan`).

Nothing here trains, evaluates or writes; `plan` reads the splits and the model registry only.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from jacrl.conditions import STAGES, condition_of
from jacrl.config import GRPOConfig, RFTConfig, SFTConfig, STaRConfig, configure, default_formula
from jacrl.ladder.settings import (
    DEFAULTS,
    LadderConfig,
    default_notebook,
    validate,
)
from jacrl.ladder.taskset import cell_tasks, pool_size, task_format
from jacrl.models import ModelError, resolve
from jacrl.provenance import code_version, data_hash, dir_hash
from jacrl.results import model_label

# -------------------------------------------------------------------------------------------
# cells
# -------------------------------------------------------------------------------------------


STAGE_CONFIGS = {"sft": SFTConfig, "rft": RFTConfig, "star": STaRConfig, "grpo": GRPOConfig}
StageConfig = SFTConfig | RFTConfig | STaRConfig | GRPOConfig


@dataclass(frozen=True)
class Cell:
    """One ladder cell, fully resolved: the ladder's settings it was made from (`cfg`, paths
    absolute), what picks the cell out of the grid, its stages' typed configs and its key.
    `to_json` is the one papermill parameter notebook 30 gets; `from_json` reads it back."""

    cfg: LadderConfig
    rung: str
    model: str  # as given (registry name or path)
    label: str  # the model's name in tags and tables
    condition: str
    format: str  # the task format it trains and evaluates on (FORMATS)
    paired: bool  # only the ids with a conversion task (always so for conversion)
    train_seed: int  # every stage's seed; the evaluation samples with cfg.seed
    stages: dict[str, StageConfig]  # in training order ({} = base)
    key: str  # the key its rows are filed under
    key_parts: dict = field(repr=False, default_factory=dict)

    @property
    def sft(self) -> SFTConfig | None:
        """The gold SFT stage's config (None: the condition has none)."""
        return self.stages.get("sft")

    @property
    def grpo(self) -> GRPOConfig | None:
        return self.stages.get("grpo")

    @property
    def eval(self) -> dict:
        """The evaluation settings in the key (`eval_settings`)."""
        return eval_settings(self.cfg)

    @property
    def reward_formula(self) -> str:
        """The last grading stage's formula; "" without one."""
        grading = [c for s, c in self.stages.items() if s != "sft" and hasattr(c, "reward_formula")]
        return grading[-1].reward_formula if grading else ""

    @property
    def results(self) -> str:
        return str(self.cfg.results_file)

    @property
    def name(self) -> str:
        """r<rung>/<model>/<condition>, then /<format> unless hole, /s<seed> unless cfg.seed."""
        tail = "" if self.format == "hole" else f"/{self.format}"
        seed = "" if self.train_seed == self.cfg.seed else f"/s{self.train_seed}"
        return f"r{self.rung}/{self.label}/{self.condition}{tail}{seed}"

    def tag(self, kind: str) -> str:
        return f"{self.name}/{kind}"

    def to_json(self) -> str:
        """The cell as one JSON string: its ladder settings, what picks it, and its key."""
        return json.dumps({"cfg": dataclasses.asdict(self.cfg), "rung": self.rung,
                           "model": self.model, "condition": self.condition,
                           "format": self.format, "paired": self.paired,
                           "train_seed": self.train_seed, "cell_key": self.key}, sort_keys=True)

    @staticmethod
    def from_json(text: str, env: Mapping[str, str] = os.environ,
                  log: Callable[[str], None] = print) -> Cell:
        """`to_json`'s cell, resolved again here (a changed key is logged; see `make_cell`)."""
        d = json.loads(text)
        cfg = configure(LadderConfig(), d.pop("cfg"))
        return make_cell(cfg, env=env, log=log, **d)


def eval_settings(cfg: LadderConfig) -> dict:
    """The ladder's evaluation settings that a cell's key holds: its fields marked eval."""
    return {f.name: list(v) if isinstance(v := getattr(cfg, f.name), tuple) else v
            for f in dataclasses.fields(cfg) if f.metadata.get("eval")}


def model_fingerprint(model: str) -> str:
    try:
        return dir_hash(resolve(model))
    except ModelError as e:
        return f"missing: {e}"


def notebook_hash(path: str | os.PathLike | None = None) -> str:
    """sha256 of the notebook's code cells (outputs and metadata do not count)."""
    path = path if path is not None else default_notebook()
    try:
        nb = json.loads(Path(path).read_text())
    except (OSError, ValueError):
        return "missing"
    code = ["".join(c["source"]) if isinstance(c["source"], list) else c["source"]
            for c in nb.get("cells", []) if c.get("cell_type") == "code"]
    return hashlib.sha256(json.dumps(code).encode()).hexdigest()


def _scaled(cfg, factors):
    """cfg with each field multiplied by its factor (an int field rounded, at least 1; a float
    to 6 significant digits, so 1e-6 x 10 is 1e-05)."""
    out = {}
    for name, f in factors.items():
        v = getattr(cfg, name) * f
        out[name] = max(1, round(v)) if isinstance(getattr(cfg, name), int) else float(f"{v:.6g}")
    return configure(cfg, out)


def stage_configs(condition: str, seed: int, sft_iters: int, grpo_iters: int,
                  sets: Mapping[str, Mapping] | None = None,
                  env: Mapping[str, str] = os.environ, reward_formula: str = "") -> dict:
    """{stage: its config} of a condition, in training order, each resolved in this order: the
    dataclass defaults, JACRL_<STAGE>_* in `env`, the ladder's iterations and seed (and
    reward_formula; "" = JACRL_REWARD_FORMULA in `env`, else the default formula), the user's
    `sets[stage]`, then the condition's `scale`. Every SFT run of a cell (gold SFT, RFT's, each
    STaR round's) uses the one resolved SFT config. Raises on an unknown condition or knob."""
    c = condition_of(condition)
    sets = sets or {}
    sft = configure(configure(SFTConfig(), env=env),
                    {"iters": sft_iters, "seed": seed, **sets.get("sft", {})})
    own = {"seed": seed, **({"reward_formula": reward_formula} if reward_formula else {})}
    out = {}
    for stage in c.stages:
        cls = STAGE_CONFIGS[stage]
        if stage == "sft":
            cfg = sft
        else:
            first = {"reward_formula": default_formula(env)}
            cfg = configure(cls(**first), env=env)
            mine = {"iters": max(1, grpo_iters)} if stage == "grpo" else \
                {"sft": dataclasses.asdict(sft)}
            cfg = configure(cfg, {**mine, **own, **sets.get(stage, {})})
        out[stage] = _scaled(cfg, c.scale.get(stage, {}))
    return out


def key_of(parts: Mapping) -> str:
    """r<rung>-<label>-<condition>[-<format>][-s<train seed>]-<12 hex of the parts>."""
    digest = hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()
    fmt = parts.get("format", "hole")
    seed = f"-s{parts['train_seed']}" if "train_seed" in parts else ""
    return (f"r{parts['rung']}-{parts['model']}-{parts['condition']}"
            f"{'' if fmt == 'hole' else '-' + fmt}{seed}-{digest[:12]}")


def make_cell(cfg: LadderConfig, rung, model: str = DEFAULTS.models[0], condition: str = "base",
              format: str = "hole", *, paired: bool | str | None = None,
              train_seed: int | None = None, cell_key: str = "",
              env: Mapping[str, str] = os.environ, log: Callable[[str], None] = print) -> Cell:
    """Resolve one cell of `cfg`'s grid and compute its key. `paired` None: the plan's
    (`paired_plan`); `train_seed` None: cfg.seed. `cell_key`: the key the ladder planned the
    cell under ("" = the one computed here); when the two differ (code or data changed since
    planning) the difference is logged and the rows are filed under the planned key, so
    `ladder run` finds them. The key holds the stages' configs (`sft` and `grpo` None when the
    condition lacks them; any other stage only when it has it, so a new condition leaves the
    others' keys as they were), the eval settings (`eval_settings`), the tasks, model, code and
    notebook; `format`/`paired` only when not plain hole-fill, `train_seed` only when it is not
    cfg.seed (so a one-seed ladder's keys are the ones it had before seeds)."""
    cfg = validate(cfg)
    rung, seed = str(rung), cfg.seed if train_seed is None else int(train_seed)
    fmt, paired = task_format(format, paired_plan(cfg) if paired is None else paired)
    sets = {s: dict(getattr(cfg, f"{s}_set")) for s in STAGES}
    stages = stage_configs(condition, seed, rung_sft_iters(cfg, rung), cfg.grpo_iters, sets,
                           env, cfg.reward_formula)
    tasks = cell_tasks(rung, cfg.data_dir, cfg.gen_limit, cfg.mem_limit, fmt, paired)
    label = model_label(str(model))
    asdicts = {s: dataclasses.asdict(c) for s, c in stages.items()}
    parts = {
        "rung": rung, "model": label, "model_hash": model_fingerprint(str(model)),
        "condition": condition, "seed": cfg.seed,
        "sft": asdicts.get("sft"), "grpo": asdicts.get("grpo"),
        **{s: v for s, v in asdicts.items() if s not in ("sft", "grpo")},
        "eval": eval_settings(cfg),
        "data_hash": data_hash([t for name in ("train", "valid", "gen", "mem")
                                for t in tasks[name]]),
        "code_version": code_version(),
        "notebook": notebook_hash(cfg.notebook),
        **({"format": fmt} if fmt != "hole" else {"paired": True} if paired else {}),
        **({"train_seed": seed} if seed != cfg.seed else {}),
    }
    key = key_of(parts)
    if cell_key and cell_key != key:
        log(f"warning: planned as {cell_key}, computed {key} here (code or data changed since "
            "planning); filing rows under the planned key")
    return Cell(cfg=cfg, rung=rung, model=str(model), label=label, condition=condition,
                format=fmt, paired=paired, train_seed=seed, stages=stages, key=cell_key or key,
                key_parts=parts)


def rung_sft_iters(cfg: LadderConfig, rung: str) -> int:
    """The SFT iterations of a rung's cells: cfg.sft_iters, or with cfg.sft_iters_per_task > 0,
    min(cfg.sft_iters, sft_iters_per_task x the rung's tasks)."""
    if cfg.sft_iters_per_task <= 0:
        return cfg.sft_iters
    n = len(cell_tasks(rung, cfg.data_dir or None, paired=paired_plan(cfg))["train"])
    return max(1, min(cfg.sft_iters, cfg.sft_iters_per_task * n))


def paired_plan(cfg: LadderConfig) -> bool:
    """Whether the plan's cells are paired (`cell_tasks`): it has conversion cells, so its hole
    cells train and evaluate the same ids as they do, and a format comparison is paired."""
    return "conversion" in cfg.formats


def plan(cfg: LadderConfig) -> list[Cell]:
    """Every cell of the ladder, in order: rung, then model, then condition, then format. Reads
    only; raises on a rung as large as the pool or an unknown model."""
    cfg = validate(cfg)
    pool = pool_size(cfg.data_dir, paired_plan(cfg))
    for r in cfg.rungs:  # a rung as large as the pool would be 'all' again under another key
        if r != "all" and int(r) >= pool:
            which = " with a conversion task" if paired_plan(cfg) else ""
            raise ValueError(f"rung {r}: the train pool has {pool} tasks{which}, so rung {r} "
                             f"would be 'all'; choose 1..{pool - 1} or 'all'")
    for model in cfg.models:
        resolve(model)  # an unknown model fails here, not in its cells
    cells = []
    for rung in cfg.rungs:
        for model in cfg.models:
            m = model if not Path(model).expanduser().is_dir() \
                else str(Path(model).expanduser().resolve())
            for cond, fmt in ((c, f) for c in cfg.conditions for f in cfg.formats):
                # a condition that trains nothing (base) is one cell, whatever the seeds
                seeds = train_seeds(cfg) if condition_of(cond).stages else (cfg.seed,)
                cells += [make_cell(cfg, rung, m, cond, fmt, train_seed=s) for s in seeds]
    return cells


def train_seeds(cfg: LadderConfig) -> tuple[int, ...]:
    """The training seeds of every trained cell: cfg.train_seeds, else (cfg.seed,)."""
    return tuple(cfg.train_seeds) or (cfg.seed,)
