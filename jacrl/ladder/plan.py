"""Planning the ladder: every cell resolved (`make_cell`: its stages' configs, `stage_configs`,
and its key) and the plan of a `LadderConfig` (`plan`).

Nothing here trains, evaluates or writes; `plan` reads the splits and the model registry only.
"""

from __future__ import annotations

import dataclasses
import difflib
import hashlib
import inspect
import json
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from jacrl.conditions import STAGES, condition_of
from jacrl.config import GRPOConfig, RFTConfig, SFTConfig, STaRConfig, configure
from jacrl.ladder.settings import (
    DEFAULTS,
    RESULTS_FILE,
    LadderConfig,
    default_notebook,
    validate,
)
from jacrl.ladder.taskset import cell_tasks, pool_size, task_format
from jacrl.models import ModelError, resolve
from jacrl.project import path_or
from jacrl.provenance import code_version, data_hash, dir_hash
from jacrl.results import model_label
from jacrl.reward import default_formula

# -------------------------------------------------------------------------------------------
# cells
# -------------------------------------------------------------------------------------------


SET_NAMES = tuple(f"{s}_set" for s in STAGES)  # sft_set, rft_set, star_set, grpo_set
STAGE_CONFIGS = {"sft": SFTConfig, "rft": RFTConfig, "star": STaRConfig, "grpo": GRPOConfig}


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
    sets: dict  # {stage: the user's overrides}, every stage of STAGES
    stages: dict  # {stage: its resolved config's fields}, in training order ({} = base)
    reward_formula: str  # the grading stage's resolved formula; "" without one
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
    def sft(self) -> dict | None:
        """The gold SFT stage's fields (None: the condition has none)."""
        return self.stages.get("sft")

    @property
    def grpo(self) -> dict | None:
        return self.stages.get("grpo")

    @property
    def grpo_set(self) -> dict:
        return self.sets.get("grpo", {})

    @property
    def name(self) -> str:
        """r<rung>/<model>/<condition>, then /<format> unless it is hole."""
        tail = "" if self.format == "hole" else f"/{self.format}"
        return f"r{self.rung}/{self.label}/{self.condition}{tail}"

    def tag(self, kind: str) -> str:
        return f"{self.name}/{kind}"

    def as_parameter(self) -> str:
        """The cell as the one papermill parameter the ladder hands notebook 30 (`cell_json`):
        its `params()` as JSON, which `make_cell` resolves again on the node."""
        return json.dumps(self.params(), sort_keys=True)

    def params(self) -> dict:
        """make_cell's arguments that rebuild this cell, the planned key included."""
        e = self.eval
        return {"rung": self.rung, "model": self.model, "condition": self.condition,
                "seed": self.seed, "sft_iters": self.sft_iters, "grpo_iters": self.grpo_iters,
                **{f"{s}_set": json.dumps(self.sets.get(s, {}), sort_keys=True)
                   for s in STAGES},
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


def _sets(given: Mapping) -> dict:
    """{stage: overrides} from the *_set parameters (dicts, or JSON strings from papermill)."""
    return {s: json.loads(v) if isinstance(v, str) else dict(v or {})
            for s, v in ((s, given.get(f"{s}_set")) for s in STAGES)}


def key_of(parts: Mapping) -> str:
    """r<rung>-<label>-<condition>[-<format>]-<12 hex of the parts>."""
    digest = hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()
    fmt = parts.get("format", "hole")
    return (f"r{parts['rung']}-{parts['model']}-{parts['condition']}"
            f"{'' if fmt == 'hole' else '-' + fmt}-{digest[:12]}")


def make_cell(rung, model: str = DEFAULTS.models[0], condition: str = "base", *,
              seed: int = DEFAULTS.seed, sft_iters: int = DEFAULTS.sft_iters,
              grpo_iters: int = DEFAULTS.grpo_iters, sft_set=None, rft_set=None, star_set=None,
              grpo_set=None, reward_formula: str = "", gen_limit: int = 0, mem_limit: int = 0,
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
    is thus the one it had before formats existed). The key holds `sft` and `grpo` (None when
    the condition lacks them) and any other stage only when it has it, so adding a condition
    leaves the keys of the others as they were."""
    if unknown:
        raise TypeError(unknown_params(unknown))
    data_dir = str(path_or(data_dir, "data").resolve())
    results = str(path_or(results, "rows").resolve())
    artifacts = str(path_or(artifacts, "artifacts").resolve())
    rung = str(rung)
    sets = _sets({"sft_set": sft_set, "rft_set": rft_set, "star_set": star_set,
                  "grpo_set": grpo_set})
    ks = tuple(int(x) for x in (k.split(",") if isinstance(k, str) else k) if str(x).strip())
    stages = {s: dataclasses.asdict(c) for s, c in stage_configs(
        condition, int(seed), int(sft_iters), int(grpo_iters), sets, env,
        str(reward_formula or "")).items()}
    ev = {"gen_limit": int(gen_limit), "mem_limit": int(mem_limit), "n": int(n), "k": list(ks),
          "temperature": float(temperature), "max_tokens": int(max_tokens)}
    fmt, paired = task_format(format, paired)
    tasks = cell_tasks(rung, data_dir, int(gen_limit), int(mem_limit), fmt, paired)
    label = model_label(str(model))
    parts = {
        "rung": rung, "model": label, "model_hash": model_fingerprint(str(model)),
        "condition": condition, "seed": int(seed),
        "sft": stages.get("sft"), "grpo": stages.get("grpo"),
        **{s: v for s, v in stages.items() if s not in ("sft", "grpo")},
        "eval": ev,
        "data_hash": data_hash([t for name in ("train", "valid", "gen", "mem")
                                for t in tasks[name]]),
        "code_version": code_version(),
        "notebook": notebook_hash(notebook),
        **({"format": fmt} if fmt != "hole" else {"paired": True} if paired else {}),
    }
    key = key_of(parts)
    if cell_key and cell_key != key:
        log(f"warning: planned as {cell_key}, computed {key} here (code or data changed since "
            "planning); filing rows under the planned key")
    grading = [s for s in stages if s != "sft" and "reward_formula" in stages[s]]
    return Cell(rung=rung, model=str(model), label=label, condition=condition, seed=int(seed),
                sft_iters=int(sft_iters), grpo_iters=int(grpo_iters), sets=sets, stages=stages,
                reward_formula=stages[grading[-1]]["reward_formula"] if grading else "",
                eval=ev, batch_size=int(batch_size), data_dir=str(data_dir),
                results=str(results), artifacts=str(artifacts), key=cell_key or key,
                key_parts=parts, format=fmt, paired=paired)


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
                cells.append(make_cell(
                    rung, m, cond, format=fmt, paired=paired_plan(cfg),
                    seed=cfg.seed, sft_iters=rung_sft_iters(cfg, rung),
                    grpo_iters=cfg.grpo_iters, **{n: getattr(cfg, n) for n in SET_NAMES},
                    reward_formula=cfg.reward_formula, gen_limit=cfg.gen_limit,
                    mem_limit=cfg.mem_limit, n=cfg.n, k=cfg.k,
                    temperature=cfg.temperature, max_tokens=cfg.max_tokens,
                    batch_size=cfg.batch_size, data_dir=cfg.data_dir,
                    results=str(Path(cfg.results_dir) / RESULTS_FILE),
                    artifacts=cfg.artifacts_dir, notebook=cfg.notebook))
    return cells
