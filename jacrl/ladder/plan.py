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

from jacrl import stages as stage_table
from jacrl.conditions import condition_of
from jacrl.config import configure
from jacrl.ladder.settings import (
    DEFAULTS,
    LadderConfig,
    default_notebook,
    validate,
)
from jacrl.ladder.taskset import cell_tasks, grpo_tasks, pool_size, task_format
from jacrl.models.registry import ModelError, resolve
from jacrl.provenance import code_of, data_hash, dir_hash
from jacrl.results import model_label
from jacrl.stages import STAGES

# -------------------------------------------------------------------------------------------
# cells
# -------------------------------------------------------------------------------------------


# What runs a cell (notebook 30's entry point: train, evaluate, file the rows): with its stages'
# trainers, which it imports by name from the stage table, the roots of the cell's code key.
CELL_RUNNER = ("jacrl.ladder.cell",)


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
    stages: dict[str, object]  # {stage: its config}, in training order ({} = base)
    key: str  # the key its rows are filed under
    key_parts: dict = field(repr=False, default_factory=dict)
    reads: dict[str, object] = field(default_factory=dict)  # configs its evaluation reads

    @property
    def eval(self) -> dict:
        """The evaluation settings in the key (`eval_settings`)."""
        return eval_settings(self.cfg)

    @property
    def reward_formula(self) -> str:
        """The last grading stage's formula; "" without one."""
        grading = [c for s, c in self.stages.items() if STAGES[s].grades]
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
        return json.dumps(
            {
                "cfg": dataclasses.asdict(self.cfg),
                "rung": self.rung,
                "model": self.model,
                "condition": self.condition,
                "format": self.format,
                "paired": self.paired,
                "train_seed": self.train_seed,
                "cell_key": self.key,
            },
            sort_keys=True,
        )

    @staticmethod
    def from_json(
        text: str,
        env: Mapping[str, str] = os.environ,
        log: Callable[[str], None] = print,
        source: str = "cell_json",
    ) -> Cell:
        """`to_json`'s cell, resolved again here (a changed key is logged; see `make_cell`). A
        cell written by another jacrl (before the stage table: its settings have `sft_set`,
        `grpo_set`, ... where they now have `sets`) is a one-line ValueError naming `source`
        (the parameter or file it came from) and what to do."""
        d = json.loads(text)
        known = {f.name for f in dataclasses.fields(LadderConfig)}
        old = sorted(set(d.get("cfg", {})) - known)
        if old:
            raise ValueError(
                f"{source}: a cell planned by another jacrl version (its settings have "
                f"{', '.join(old)}; one stage's overrides are now `sets`): plan it again "
                "(`jacrl ladder run` replans every cell)"
            )
        cfg = configure(LadderConfig(), d.pop("cfg"))
        return make_cell(cfg, env=env, log=log, **d)


def eval_settings(cfg: LadderConfig) -> dict:
    """The ladder's evaluation settings that a cell's key holds: its fields marked eval."""
    return {
        f.name: list(v) if isinstance(v := getattr(cfg, f.name), tuple) else v
        for f in dataclasses.fields(cfg)
        if f.metadata.get("eval")
        and not (f.metadata.get("since") and getattr(cfg, f.name) == f.default)
    }


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
    code = [
        "".join(c["source"]) if isinstance(c["source"], list) else c["source"]
        for c in nb.get("cells", [])
        if c.get("cell_type") == "code"
    ]
    return hashlib.sha256(json.dumps(code).encode()).hexdigest()


def _scaled(cfg, factors):
    """cfg with each field multiplied by its factor (an int field rounded, at least 1; a float
    to 6 significant digits, so 1e-6 x 10 is 1e-05)."""
    out = {}
    for name, f in factors.items():
        v = getattr(cfg, name) * f
        out[name] = max(1, round(v)) if isinstance(getattr(cfg, name), int) else float(f"{v:.6g}")
    return configure(cfg, out)


def stage_configs(
    condition: str,
    seed: int,
    iters: Mapping[str, int],
    sets: Mapping[str, Mapping] | None = None,
    env: Mapping[str, str] = os.environ,
    reward_formula: str = DEFAULTS.reward_formula,
) -> dict:
    """{stage: its config} of a condition, in training order, each resolved by
    `jacrl.stages.resolve` (as `jacrl train` does: the defaults, `reward_formula`, JACRL_<STAGE>_*
    in `env`), then the ladder's `iters` ({"sft_iters": N, ...}, per the stage's `iters`) and
    seed, the user's `sets[stage]`, then the condition's `scale`. Every SFT run of a cell (gold
    SFT, RFT's, each STaR round's) uses the one resolved SFT config. Raises on an unknown
    condition or knob."""
    c = condition_of(condition)
    return {
        s: _scaled(ladder_config(s, seed, iters, sets, env, reward_formula), c.scale.get(s, {}))
        for s in c.stages
    }


def ladder_config(
    stage: str,
    seed: int,
    iters: Mapping[str, int],
    sets: Mapping[str, Mapping] | None,
    env: Mapping[str, str],
    reward_formula: str,
) -> object:
    """One stage's config as a ladder cell resolves it (see `stage_configs`), unscaled."""
    sets, st = sets or {}, STAGES[stage]
    own: dict = {"seed": seed, **({"iters": iters[st.iters]} if st.iters else {})}
    for name, inner in st.nests.items():  # its SFT runs are the cell's one SFT config
        own[name] = dataclasses.asdict(ladder_config(inner, seed, iters, sets, env, reward_formula))
    return stage_table.resolve(stage, reward_formula, env, own, dict(sets.get(stage, {})))


def eval_reads(
    condition: str,
    seed: int,
    iters: Mapping[str, int],
    sets: Mapping[str, Mapping] | None = None,
    env: Mapping[str, str] = os.environ,
    reward_formula: str = DEFAULTS.reward_formula,
) -> dict:
    """{stage: config} the cell's evaluation reads beyond its stages (its last stage's
    `eval_reads`: an sft cell's mem temperature is calibrated with the GRPO config), resolved
    as that stage would be in this cell; {} for the base model."""
    c = condition_of(condition)
    reads = STAGES[c.last].eval_reads if c.last else {}
    return {s: ladder_config(s, seed, iters, sets, env, reward_formula) for s in reads}


def key_of(parts: Mapping) -> str:
    """r<rung>-<label>-<condition>[-<format>][-s<train seed>]-<12 hex of the parts>."""
    digest = hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()
    fmt = parts.get("format", "hole")
    seed = f"-s{parts['train_seed']}" if "train_seed" in parts else ""
    return (
        f"r{parts['rung']}-{parts['model']}-{parts['condition']}"
        f"{'' if fmt == 'hole' else '-' + fmt}{seed}-{digest[:12]}"
    )


def make_cell(
    cfg: LadderConfig,
    rung,
    model: str = DEFAULTS.models[0],
    condition: str = "base",
    format: str = "hole",
    *,
    paired: bool | str | None = None,
    train_seed: int | None = None,
    cell_key: str = "",
    env: Mapping[str, str] = os.environ,
    log: Callable[[str], None] = print,
) -> Cell:
    """Resolve one cell of `cfg`'s grid and compute its key. `paired` None: the plan's
    (`paired_plan`); `train_seed` None: cfg.seed. `cell_key`: the key the ladder planned the
    cell under ("" = the one computed here); when the two differ (code or data changed since
    planning) the difference is logged and the rows are filed under the planned key, so
    `ladder run` finds them. The key holds exactly what the cell's rows are made from: its
    stages' configs, the configs its evaluation reads (`eval_reads`: the fields the table names,
    e.g. GRPO's calibration settings for an sft cell), the eval settings (`eval_settings`), the
    tasks, the model, the code its runner and stages import (`cell_modules`) and the
    notebook; `format`/`paired` only when not plain hole-fill, `train_seed` only when it is not
    cfg.seed. tests/test_cell_keys.py checks this field by field."""
    cfg = validate(cfg)
    rung, seed = str(rung), cfg.seed if train_seed is None else int(train_seed)
    fmt, paired = task_format(format, paired_plan(cfg) if paired is None else paired)
    iters = {st.iters: rung_iters(cfg, rung, st.iters) for st in STAGES.values() if st.iters}
    args = (seed, iters, cfg.sets, env, cfg.reward_formula)
    stages = stage_configs(condition, *args)
    reads = eval_reads(condition, *args)
    tasks = cell_tasks(rung, cfg.data_dir, cfg.gen_limit, cfg.mem_limit, fmt, paired)
    label = model_label(str(model))
    last = STAGES[condition_of(condition).last] if stages else None
    parts = {
        "rung": rung,
        "model": label,
        "model_hash": model_fingerprint(str(model)),
        "condition": condition,
        "seed": cfg.seed,
        **{s: dataclasses.asdict(c) for s, c in stages.items()},
        "eval": eval_settings(cfg),
        **(
            {
                "reads": {
                    s: {f: _plain(getattr(c, f)) for f in last.eval_reads[s]}
                    for s, c in reads.items()
                }
            }
            if reads
            else {}
        ),
        "data_hash": data_hash(
            [t for name in ("train", "valid", "gen", "mem") for t in tasks[name]]
        ),
        "code_version": code_of(cell_modules(condition)),
        "notebook": notebook_hash(cfg.notebook),
        **({"format": fmt} if fmt != "hole" else {"paired": True} if paired else {}),
        **({"train_seed": seed} if seed != cfg.seed else {}),
        **grpo_prompts_part(cfg, stages, rung, fmt, paired),
    }
    key = key_of(parts)
    if cell_key and cell_key != key:
        log(
            f"warning: planned as {cell_key}, computed {key} here (code or data changed since "
            "planning); filing rows under the planned key"
        )
    return Cell(
        cfg=cfg,
        rung=rung,
        model=str(model),
        label=label,
        condition=condition,
        format=fmt,
        paired=paired,
        train_seed=seed,
        stages=stages,
        key=cell_key or key,
        key_parts=parts,
        reads=reads,
    )


def grpo_prompts_part(cfg: LadderConfig, stages: Mapping, rung: str, fmt: str, paired: bool):
    """The key's part for GRPO's prompts when they are not the rung's (`grpo_tasks`): the
    choice and the hash of the tasks it picks; {} for a cell without a rollout stage."""
    if cfg.grpo_prompts == "rung" or not any(STAGES[s].calibrates for s in stages):
        return {}
    tasks = grpo_tasks(cfg.grpo_prompts, rung, cfg.data_dir, fmt, paired)
    return {"grpo_prompts": cfg.grpo_prompts, "grpo_data_hash": data_hash(tasks)}


def _plain(v):
    return list(v) if isinstance(v, tuple) else v


def cell_modules(condition: str) -> tuple[str, ...]:
    """The modules whose code (with all they import, `jacrl.code_graph`) makes a cell's rows:
    its stages' trainers, the trainers and calibrations of the stages its evaluation reads
    (calibration is GRPO's), and the cell runner."""
    c = condition_of(condition)
    stages = [STAGES[s] for s in (*c.stages, *(STAGES[c.last].eval_reads if c.last else {}))]
    paths = [p for st in stages for p in (st.trainer, st.calibrates) if p]
    return tuple(dict.fromkeys([*(p.partition(":")[0] for p in paths), *CELL_RUNNER]))


def rung_iters(cfg: LadderConfig, rung: str, knob: str) -> int:
    """A stage's iterations in a rung's cells from the ladder's knob the stage table names
    (`Stage.iters`: "sft_iters", "grpo_iters"), at least 1; where the ladder also has
    `<knob>_per_task` > 0 (SFT's), min(the knob, that x the rung's tasks), so every rung trains
    each task about equally often."""
    total, per_task = getattr(cfg, knob), getattr(cfg, f"{knob}_per_task", 0)
    if per_task <= 0:
        return max(1, total)
    n = len(cell_tasks(rung, cfg.data_dir or None, paired=paired_plan(cfg))["train"])
    return max(1, min(total, per_task * n))


def rung_sft_iters(cfg: LadderConfig, rung: str) -> int:
    """The SFT iterations of a rung's cells (`rung_iters` of sft_iters)."""
    return rung_iters(cfg, rung, "sft_iters")


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
            raise ValueError(
                f"rung {r}: the train pool has {pool} tasks{which}, so rung {r} "
                f"would be 'all'; choose 1..{pool - 1} or 'all'"
            )
    for model in cfg.models:
        resolve(model)  # an unknown model fails here, not in its cells
    cells = []
    for rung in cfg.rungs:
        for model in cfg.models:
            m = (
                model
                if not Path(model).expanduser().is_dir()
                else str(Path(model).expanduser().resolve())
            )
            for cond, fmt in ((c, f) for c in cfg.conditions for f in cfg.formats):
                # a condition that trains nothing (base) is one cell, whatever the seeds
                seeds = train_seeds(cfg) if condition_of(cond).stages else (cfg.seed,)
                cells += [make_cell(cfg, rung, m, cond, fmt, train_seed=s) for s in seeds]
    return cells


def train_seeds(cfg: LadderConfig) -> tuple[int, ...]:
    """The training seeds of every trained cell: cfg.train_seeds, else (cfg.seed,)."""
    return tuple(cfg.train_seeds) or (cfg.seed,)
