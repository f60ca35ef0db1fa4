"""Planning the ladder: its configuration, the conditions, and every cell resolved with its key.

Nothing here trains, evaluates or writes; `plan` reads the splits and the model registry only.
"""

from __future__ import annotations

import dataclasses
import difflib
import hashlib
import inspect
import json
import os
import re
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from jacrl import splits
from jacrl.config import EvalConfig, GRPOConfig, SFTConfig, _f, configure
from jacrl.evaluate import check_k
from jacrl.ladder.taskset import FORMATS, cell_tasks, pool_size, task_format
from jacrl.models import ModelError, resolve
from jacrl.project import path_or, project
from jacrl.provenance import code_version, data_hash, dir_hash
from jacrl.recipe import RECIPE
from jacrl.results import model_label
from jacrl.reward import check_formula, default_formula

NOTEBOOK = "30_training.ipynb"  # in the project's notebooks/
DEFAULT_CONDITIONS = ("base", "sft", "sft_grpo", "raw_grpo")
RESULTS_FILE = "rl_ladder.jsonl"
LADDER_N = 8  # the ladder's own choice: 8 temperature samples per gen task (EvalConfig's n is 0)


# -------------------------------------------------------------------------------------------
# conditions
# -------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Condition:
    sft: bool  # gold SFT on the rung's tasks first
    grpo: bool  # then GRPO (continuing the SFT adapter when sft is True)
    grpo_lr: float | None = None  # fixed GRPO learning rate (tuned variant)
    grpo_iters_scale: float = 1.0  # GRPO iterations = round(scale * the ladder's grpo_iters)
    help: str = ""


CONDITIONS: dict[str, Condition] = {
    "base": Condition(False, False, help="the model as is"),
    "sft": Condition(True, False, help="gold LoRA SFT on the rung's tasks"),
    "sft_grpo": Condition(True, True, help="GRPO continuing the sft adapter"),
    "raw_grpo": Condition(False, True, help="GRPO on the base model (control)"),
    "sft_grpo_tuned": Condition(True, True, grpo_lr=1e-5, grpo_iters_scale=2.5,
                                help="sft_grpo with GRPO lr 1e-5 and 2.5x the iterations"),
}


# -------------------------------------------------------------------------------------------
# configuration
# -------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class LadderConfig:
    """Every knob of a ladder run. The iterations and the eval knobs it shares with
    SFTConfig / GRPOConfig / EvalConfig take their defaults from there (the earlier harness's
    ladder); `n` is the ladder's own (LADDER_N)."""

    rungs: tuple[str, ...] = _f(splits.RUNGS, "rungs: training-pool prefix sizes or 'all'")
    models: tuple[str, ...] = _f(("jac-tiny",), "registry names or MLX model dirs")
    conditions: tuple[str, ...] = _f(DEFAULT_CONDITIONS, f"of {', '.join(CONDITIONS)}")
    formats: tuple[str, ...] = _f(("hole",), "task formats, of hole, conversion; with "
                                  "conversion, every cell trains and evaluates only the ids "
                                  "that have a conversion task (paired across formats)")
    seed: int = _f(0, "training and sampling seed")
    sft_iters: int = _f(SFTConfig.iters, "SFT iterations (reference RFT_ITERS)")
    grpo_iters: int = _f(GRPOConfig.iters, "GRPO iterations (reference GRPO_ITERS)")
    sft_iters_per_task: int = _f(0, "when > 0, a rung's SFT runs min(sft_iters, this x the rung's "
                                    "tasks) iterations, so every rung trains each task about "
                                    "equally often (0 = sft_iters on every rung)")
    sft_set: dict = field(default_factory=dict, metadata={
        "help": "SFTConfig overrides, e.g. {'learning_rate': 1e-3}"})
    grpo_set: dict = field(default_factory=dict, metadata={
        "help": "GRPOConfig overrides, e.g. {'group_size': 2}"})
    reward_formula: str = _f("", "GRPO reward formula, tiered | additive ('' = "
                                 "JACRL_REWARD_FORMULA, else tiered)")
    gen_limit: int = _f(0, "N holdout tasks for gen, taken round-robin by family (0 = all)")
    mem_limit: int = _f(0, "first N rung tasks for mem (0 = all)")
    n: int = _f(LADDER_N, "temperature samples per gen task (reference JAC_LADDER_K)")
    k: tuple[int, ...] = _f(EvalConfig.k, "pass@k values reported (each <= n)")
    temperature: float = _f(EvalConfig.temperature, "gen sampling temperature")
    max_tokens: int = _f(EvalConfig.max_tokens, "completion budget for every eval")
    batch_size: int = _f(EvalConfig.batch_size, "sequences decoded together (throughput only)")
    data_dir: str = _f("", "tasks.jsonl + splits/ ('' = the project's data/)")
    results_dir: str = _f("", f"{RESULTS_FILE} and cells/ ('' = the project's results/)")
    figures_dir: str = _f("", "where show writes PNGs ('' = the project's figures/)")
    artifacts_dir: str = _f("", "training artifacts ('' = the project's artifacts/)")
    notebook: str = _f("", f"the per-cell notebook ('' = the project's notebooks/{NOTEBOOK})")
    cell_timeout: int = _f(0, "seconds per cell before it is killed and marked failed (0 = none)")
    recipe: str = _f("", f"'' = every planned cell (the grid); {RECIPE!r} = the staged recipe "
                         "(jacrl.recipe; `run_recipe`): gate, SFT curve, elbow, GRPO at the elbow")

    @property
    def results_file(self) -> Path:
        return path_or(self.results_dir, "results") / RESULTS_FILE


DEFAULTS = LadderConfig()


def comma_list(s: str) -> tuple[str, ...]:
    return tuple(x.strip() for x in str(s).split(",") if x.strip())


def parse_iters(s: str) -> dict[str, int]:
    """'50' -> {sft: 50, grpo: 50}; 'sft=50,grpo=20' -> as given."""
    s = str(s).strip()
    if re.fullmatch(r"\d+", s):
        return {"sft": int(s), "grpo": int(s)}
    out = {}
    for part in comma_list(s):
        k, sep, v = part.partition("=")
        if not sep or k.strip() not in ("sft", "grpo") or not v.strip().isdigit():
            raise ValueError(f"iterations: expected N or sft=N,grpo=M, got {s!r}")
        out[k.strip()] = int(v)
    return out


def from_env(cfg: LadderConfig, env: Mapping[str, str] = os.environ) -> LadderConfig:
    """Apply JACRL_LADDER_RUNGS / _MODELS / _CONDITIONS / _FORMATS / _ITERS / _RECIPE."""
    ch: dict = {}
    if env.get("JACRL_LADDER_RUNGS"):
        ch["rungs"] = comma_list(env["JACRL_LADDER_RUNGS"])
    if env.get("JACRL_LADDER_MODELS"):
        ch["models"] = comma_list(env["JACRL_LADDER_MODELS"])
    if env.get("JACRL_LADDER_CONDITIONS"):
        ch["conditions"] = comma_list(env["JACRL_LADDER_CONDITIONS"])
    if env.get("JACRL_LADDER_FORMATS"):
        ch["formats"] = comma_list(env["JACRL_LADDER_FORMATS"])
    if env.get("JACRL_LADDER_ITERS"):
        it = parse_iters(env["JACRL_LADDER_ITERS"])
        ch.update({f"{k}_iters": v for k, v in it.items()})
    if env.get("JACRL_LADDER_RECIPE"):
        ch["recipe"] = env["JACRL_LADDER_RECIPE"].strip()
    return validate(dataclasses.replace(cfg, **ch))


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
    if cfg.recipe not in ("", RECIPE):
        raise ValueError(f"unknown recipe {cfg.recipe!r}; choose {RECIPE!r} (or none)")
    if cfg.reward_formula:
        check_formula(cfg.reward_formula)
    return with_paths(cfg)


def with_paths(cfg: LadderConfig) -> LadderConfig:
    """Every path absolute: the ones given (relative to the working directory), else the
    project's, so cells, their notebooks and `show` agree wherever they run."""
    paths = {f: str(path_or(getattr(cfg, f), attr).resolve()) for f, attr in (
        ("data_dir", "data"), ("results_dir", "results"), ("figures_dir", "figures"),
        ("artifacts_dir", "artifacts"))}
    paths["notebook"] = str(Path(cfg.notebook).resolve()) if cfg.notebook else \
        str(default_notebook())
    return dataclasses.replace(cfg, **paths)


def default_notebook() -> Path:
    return project().notebooks / NOTEBOOK


# -------------------------------------------------------------------------------------------
# cells
# -------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Cell:
    """One ladder cell, fully resolved. `params()` are the notebook's papermill parameters."""

    rung: str
    model: str  # as given (registry name or path)
    label: str  # the model's name in tags and tables
    condition: str
    seed: int
    sft_iters: int
    grpo_iters: int
    sft_set: dict
    grpo_set: dict
    sft: dict | None  # resolved SFTConfig fields (None: no SFT stage)
    grpo: dict | None  # resolved GRPOConfig fields
    reward_formula: str  # the GRPO stage's resolved formula; "" without one
    eval: dict  # gen_limit, mem_limit, n, k, temperature, max_tokens
    batch_size: int
    data_dir: str
    results: str
    artifacts: str
    key: str  # the key its rows are filed under
    key_parts: dict = field(repr=False, default_factory=dict)
    format: str = "hole"  # the task format it trains and evaluates on (FORMATS)
    paired: bool = False  # only the ids with a conversion task (always so for conversion)

    @property
    def name(self) -> str:
        """r<rung>/<model>/<condition>, then /<format> unless it is hole."""
        tail = "" if self.format == "hole" else f"/{self.format}"
        return f"r{self.rung}/{self.label}/{self.condition}{tail}"

    def tag(self, kind: str) -> str:
        return f"{self.name}/{kind}"

    def params(self) -> dict:
        e = self.eval
        return {"rung": self.rung, "model": self.model, "condition": self.condition,
                "seed": self.seed, "sft_iters": self.sft_iters, "grpo_iters": self.grpo_iters,
                "sft_set": json.dumps(self.sft_set, sort_keys=True),
                "grpo_set": json.dumps(self.grpo_set, sort_keys=True),
                "reward_formula": self.reward_formula,
                "gen_limit": e["gen_limit"], "mem_limit": e["mem_limit"], "n": e["n"],
                "k": ",".join(map(str, e["k"])), "temperature": e["temperature"],
                "max_tokens": e["max_tokens"], "batch_size": self.batch_size,
                "format": self.format, "paired": self.paired,
                "data_dir": self.data_dir, "results": self.results, "artifacts": self.artifacts,
                "cell_key": self.key}


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


def stage_configs(condition: str, seed: int, sft_iters: int, grpo_iters: int,
                  sft_set: Mapping | None = None, grpo_set: Mapping | None = None,
                  env: Mapping[str, str] = os.environ, reward_formula: str = ""):
    """(SFTConfig | None, GRPOConfig | None) of a condition, resolved in this order: the
    dataclass defaults, JACRL_SFT_* / JACRL_GRPO_* in `env`, the ladder's iterations and seed
    (and reward_formula; "" = JACRL_REWARD_FORMULA in `env`, else tiered), the condition's own
    overrides, then sft_set / grpo_set."""
    c = CONDITIONS[condition]
    sft = grpo = None
    if c.sft:
        sft = configure(SFTConfig(), env=env)
        sft = configure(sft, {"iters": sft_iters, "seed": seed, **(sft_set or {})})
    if c.grpo:
        grpo = configure(GRPOConfig(reward_formula=default_formula(env)), env=env)
        own: dict = {"iters": max(1, round(grpo_iters * c.grpo_iters_scale)), "seed": seed}
        if reward_formula:
            own["reward_formula"] = reward_formula
        if c.grpo_lr is not None:
            own["learning_rate"] = c.grpo_lr
        grpo = configure(grpo, {**own, **(grpo_set or {})})
    return sft, grpo


def make_cell(rung, model: str = DEFAULTS.models[0], condition: str = "base", *,
              seed: int = DEFAULTS.seed, sft_iters: int = DEFAULTS.sft_iters,
              grpo_iters: int = DEFAULTS.grpo_iters, sft_set=None, grpo_set=None,
              reward_formula: str = "", gen_limit: int = 0, mem_limit: int = 0,
              n: int = DEFAULTS.n, k=DEFAULTS.k, temperature: float = DEFAULTS.temperature,
              max_tokens: int = DEFAULTS.max_tokens, batch_size: int = DEFAULTS.batch_size,
              format: str = "hole", paired: bool | str = False,
              data_dir: str | None = None, results: str | None = None,
              artifacts: str | None = None, notebook: str | os.PathLike | None = None,
              cell_key: str = "", env: Mapping[str, str] = os.environ,
              log: Callable[[str], None] = print, **unknown) -> Cell:
    """Resolve one cell and compute its key. Accepts the notebook's parameters as papermill gives
    them (JSON strings for the *_set dicts, a comma string for k); a parameter it does not know
    is an error. `cell_key`: the key the ladder planned the cell under ("" = the one computed
    here). When the two differ (code or data changed since planning) the difference is logged
    and the rows are filed under the planned key, so `ladder run` finds them. `format`,
    `paired`: see `cell_tasks`; in the key only when not plain unpaired hole-fill (whose key
    is thus the one it had before formats existed)."""
    if unknown:
        raise TypeError(unknown_params(unknown))
    data_dir = str(path_or(data_dir, "data").resolve())
    results = str(path_or(results, "rows").resolve())
    artifacts = str(path_or(artifacts, "artifacts").resolve())
    rung = str(rung)
    if condition not in CONDITIONS:
        raise ValueError(f"unknown condition {condition!r}; choose from {', '.join(CONDITIONS)}")
    sft_set = json.loads(sft_set) if isinstance(sft_set, str) else dict(sft_set or {})
    grpo_set = json.loads(grpo_set) if isinstance(grpo_set, str) else dict(grpo_set or {})
    ks = tuple(int(x) for x in (k.split(",") if isinstance(k, str) else k) if str(x).strip())
    sft, grpo = stage_configs(condition, int(seed), int(sft_iters), int(grpo_iters), sft_set,
                              grpo_set, env, str(reward_formula or ""))
    ev = {"gen_limit": int(gen_limit), "mem_limit": int(mem_limit), "n": int(n), "k": list(ks),
          "temperature": float(temperature), "max_tokens": int(max_tokens)}
    fmt, paired = task_format(format, paired)
    tasks = cell_tasks(rung, data_dir, int(gen_limit), int(mem_limit), fmt, paired)
    label = model_label(str(model))
    parts = {
        "rung": rung, "model": label, "model_hash": model_fingerprint(str(model)),
        "condition": condition, "seed": int(seed),
        "sft": dataclasses.asdict(sft) if sft else None,
        "grpo": dataclasses.asdict(grpo) if grpo else None,
        "eval": ev,
        "data_hash": data_hash([t for name in ("train", "valid", "gen", "mem")
                                for t in tasks[name]]),
        "code_version": code_version(),
        "notebook": notebook_hash(notebook),
        **({"format": fmt} if fmt != "hole" else {"paired": True} if paired else {}),
    }
    digest = hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()
    key = f"r{rung}-{label}-{condition}{'' if fmt == 'hole' else '-' + fmt}-{digest[:12]}"
    if cell_key and cell_key != key:
        log(f"warning: planned as {cell_key}, computed {key} here (code or data changed since "
            "planning); filing rows under the planned key")
    return Cell(rung=rung, model=str(model), label=label, condition=condition, seed=int(seed),
                sft_iters=int(sft_iters), grpo_iters=int(grpo_iters), sft_set=sft_set,
                grpo_set=grpo_set, sft=parts["sft"], grpo=parts["grpo"],
                reward_formula=grpo.reward_formula if grpo else "", eval=ev,
                batch_size=int(batch_size), data_dir=str(data_dir), results=str(results),
                artifacts=str(artifacts), key=cell_key or key, key_parts=parts, format=fmt,
                paired=paired)


def unknown_params(unknown: Mapping) -> str:
    """The one-line error for parameters make_cell does not know (with the closest known name)."""
    known = [p for p, v in inspect.signature(make_cell).parameters.items()
             if v.kind is not inspect.Parameter.VAR_KEYWORD and p not in ("env", "log")]
    names = []
    for name in sorted(unknown):
        close = difflib.get_close_matches(name, known, n=1)
        names.append(repr(name) + (f" (did you mean {close[0]!r}?)" if close else ""))
    return f"unknown cell parameter {', '.join(names)}; known: {', '.join(known)}"


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
    only."""
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
                cells.append(make_cell(
                    rung, m, cond, format=fmt, paired=paired_plan(cfg),
                    seed=cfg.seed, sft_iters=rung_sft_iters(cfg, rung),
                    grpo_iters=cfg.grpo_iters, sft_set=cfg.sft_set, grpo_set=cfg.grpo_set,
                    reward_formula=cfg.reward_formula, gen_limit=cfg.gen_limit,
                    mem_limit=cfg.mem_limit, n=cfg.n, k=cfg.k,
                    temperature=cfg.temperature, max_tokens=cfg.max_tokens,
                    batch_size=cfg.batch_size, data_dir=cfg.data_dir,
                    results=str(Path(cfg.results_dir) / RESULTS_FILE),
                    artifacts=cfg.artifacts_dir, notebook=cfg.notebook))
    return cells
