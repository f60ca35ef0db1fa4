"""The ladder: cells = rungs x models x conditions, each one papermill run of
notebooks/30_training.ipynb, whose executed copy is kept as the cell's record.

    jacrl ladder plan    every cell, its key, whether its rows exist, and the exact command; runs nothing
    jacrl ladder run     run the cells without rows; a failing cell is recorded and the ladder goes on
    jacrl ladder show    the pivot with Wilson CIs, McNemar vs base; writes figures/
    jacrl demo           tasks/splits if needed, a small ladder on jac-tiny, the table and figures

Conditions (SPEC §6.2): `base` (the model as is), `sft` (gold SFT on the rung's tasks), `sft_grpo`
(GRPO continuing the sft adapter — the same content-addressed SFT artifact the sft cell trained),
`raw_grpo` (GRPO on the base), and `sft_grpo_tuned`, not in the default list: sft_grpo with
GRPO learning rate 1e-5 and 2.5x the GRPO iterations (the reference's hand-made tuned run).

Each cell evaluates `gen` (the holdout, greedy + n samples) and `mem` (the rung's own tasks,
greedy) and appends one row per evaluation to results/rl_ladder.jsonl, only at the end of the
cell, each row one write + fsync, under a lock, skipping (cell key, kind) pairs already there.

Cell key = sha256 of everything that defines the cell: rung, model (name + file hashes),
condition, seed, the resolved SFT/GRPO hyperparameters (iterations and, for GRPO conditions, the
reward formula included; base and sft cells do not depend on the formula), the evaluation
settings, the hash of the tasks it trains/validates/evaluates on, the code version (jacrl/*.py)
and the training notebook's code. `run` skips a cell only when rows with its key exist for both
kinds; a cell killed mid-way (even SIGKILL) has no rows, so it runs again. Its directory
results/cells/<key>/ holds 30_training.ipynb (executed), log.txt, status.json (running | done |
failed, with the error) and the artifacts' metrics.jsonl.

Scoping: flags, else JACRL_LADDER_RUNGS / _MODELS / _CONDITIONS (comma lists) and
JACRL_LADDER_ITERS ("50" for both stages, or "sft=50,grpo=20"). Hyperparameters: the train
dataclasses' defaults (the GRPO reward formula's is JACRL_REWARD_FORMULA, else tiered), then
JACRL_SFT_* / JACRL_GRPO_* env vars, then the ladder's iterations, seed and `--reward-formula`, then
the condition's own overrides, then `--set sft.KEY=V` / `--set grpo.KEY=V`. The resolved formula
is passed to the notebook as a parameter and recorded in each row (`reward_formula`).
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime as _dt
import fcntl
import hashlib
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

NOTEBOOK = "30_training.ipynb"  # in the project's notebooks/
RUNGS = ("1", "3", "5", "10", "20", "all")
DEFAULT_CONDITIONS = ("base", "sft", "sft_grpo", "raw_grpo")
KINDS = ("gen", "mem")
RESULTS_FILE = "rl_ladder.jsonl"


def _f(default, help: str):
    """A knob: its default and its help text in one place."""
    return field(default=default, metadata={"help": help})


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
    """Every knob of a ladder run (defaults = the reference's ladder, SPEC §6)."""

    rungs: tuple[str, ...] = _f(RUNGS, "rungs: training-pool prefix sizes or 'all'")
    models: tuple[str, ...] = _f(("jac-tiny",), "registry names or MLX model dirs")
    conditions: tuple[str, ...] = _f(DEFAULT_CONDITIONS, f"of {', '.join(CONDITIONS)}")
    seed: int = _f(0, "training and sampling seed")
    sft_iters: int = _f(200, "SFT iterations (reference RFT_ITERS)")
    grpo_iters: int = _f(200, "GRPO iterations (reference GRPO_ITERS)")
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
    n: int = _f(8, "temperature samples per gen task (reference JAC_LADDER_K)")
    k: tuple[int, ...] = _f((1, 2, 4, 8), "pass@k values reported (each <= n)")
    temperature: float = _f(1.0, "gen sampling temperature (reference ladder: 1.0)")
    max_tokens: int = _f(512, "completion budget for every eval")
    batch_size: int = _f(32, "sequences decoded together (throughput only)")
    data_dir: str = _f("", "tasks.jsonl + splits/ ('' = the project's data/)")
    results_dir: str = _f("", f"{RESULTS_FILE} and cells/ ('' = the project's results/)")
    figures_dir: str = _f("", "where show writes PNGs ('' = the project's figures/)")
    artifacts_dir: str = _f("", "training artifacts ('' = the project's artifacts/)")
    notebook: str = _f("", f"the per-cell notebook ('' = the project's notebooks/{NOTEBOOK})")
    cell_timeout: int = _f(0, "seconds per cell before it is killed and marked failed (0 = none)")

    @property
    def results_file(self) -> Path:
        from jacrl.project import path_or

        return path_or(self.results_dir, "results") / RESULTS_FILE


def _csv(s: str) -> tuple[str, ...]:
    return tuple(x.strip() for x in str(s).split(",") if x.strip())


def parse_iters(s: str) -> dict[str, int]:
    """'50' -> {sft: 50, grpo: 50}; 'sft=50,grpo=20' -> as given."""
    s = str(s).strip()
    if re.fullmatch(r"\d+", s):
        return {"sft": int(s), "grpo": int(s)}
    out = {}
    for part in _csv(s):
        k, sep, v = part.partition("=")
        if not sep or k.strip() not in ("sft", "grpo") or not v.strip().isdigit():
            raise ValueError(f"iterations: expected N or sft=N,grpo=M, got {s!r}")
        out[k.strip()] = int(v)
    return out


def parse_sets(items: Sequence[str]) -> dict[str, dict[str, str]]:
    """['sft.iters=5', 'grpo.group_size=2'] -> {'sft': {...}, 'grpo': {...}}."""
    out: dict[str, dict[str, str]] = {"sft": {}, "grpo": {}}
    for it in items:
        k, sep, v = it.partition("=")
        stage, dot, name = k.strip().partition(".")
        if not sep or not dot or stage not in out:
            raise ValueError(f"--set expects sft.KEY=VALUE or grpo.KEY=VALUE, got {it!r}")
        out[stage][name] = v.strip()
    return out


def from_env(cfg: LadderConfig, env: Mapping[str, str] = os.environ) -> LadderConfig:
    """Apply JACRL_LADDER_RUNGS / _MODELS / _CONDITIONS / _ITERS."""
    ch: dict = {}
    if env.get("JACRL_LADDER_RUNGS"):
        ch["rungs"] = _csv(env["JACRL_LADDER_RUNGS"])
    if env.get("JACRL_LADDER_MODELS"):
        ch["models"] = _csv(env["JACRL_LADDER_MODELS"])
    if env.get("JACRL_LADDER_CONDITIONS"):
        ch["conditions"] = _csv(env["JACRL_LADDER_CONDITIONS"])
    if env.get("JACRL_LADDER_ITERS"):
        it = parse_iters(env["JACRL_LADDER_ITERS"])
        ch.update({f"{k}_iters": v for k, v in it.items()})
    return validate(dataclasses.replace(cfg, **ch))


def validate(cfg: LadderConfig) -> LadderConfig:
    bad = [c for c in cfg.conditions if c not in CONDITIONS]
    if bad:
        raise ValueError(f"unknown condition(s) {bad}; choose from {', '.join(CONDITIONS)}")
    from jacrl.evaluate import check_k
    from jacrl.splits import check_rung

    for r in cfg.rungs:
        check_rung(r, sys.maxsize)  # the pool's size is checked by plan()
    if not cfg.rungs or not cfg.models or not cfg.conditions:
        raise ValueError("the ladder needs at least one rung, model and condition")
    check_k(cfg.k, cfg.n)
    if cfg.reward_formula:
        from jacrl.reward import check_formula

        check_formula(cfg.reward_formula)
    return with_paths(cfg)


def with_paths(cfg: LadderConfig) -> LadderConfig:
    """Every path absolute: the ones given (relative to the working directory), else the
    project's, so cells, their notebooks and `show` agree wherever they run."""
    from jacrl.project import path_or

    paths = {f: str(path_or(getattr(cfg, f), attr).resolve()) for f, attr in (
        ("data_dir", "data"), ("results_dir", "results"), ("figures_dir", "figures"),
        ("artifacts_dir", "artifacts"))}
    paths["notebook"] = str(Path(cfg.notebook).resolve()) if cfg.notebook else \
        str(default_notebook())
    return dataclasses.replace(cfg, **paths)


def default_notebook() -> Path:
    from jacrl.project import project

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
    key: str
    key_parts: dict = field(repr=False, default_factory=dict)

    @property
    def name(self) -> str:
        return f"r{self.rung}/{self.label}/{self.condition}"

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
                "data_dir": self.data_dir, "results": self.results, "artifacts": self.artifacts,
                "cell_key": self.key}


def model_label(model: str) -> str:
    """The registry name, or the model directory's name; safe in tags and file names."""
    from jacrl.models import read_registry

    name = model if model in read_registry() and not Path(model).is_dir() else Path(model).name
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", name) or "model"


def model_fingerprint(model: str) -> str:
    from jacrl.evaluate import dir_hash
    from jacrl.models import ModelError, resolve

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


def stratified(tasks: Sequence[dict], n: int) -> list[dict]:
    """n of `tasks` taken round-robin by family (families sorted), each family's next pick being
    its first task (in the given order) from the source used least so far, so the sample spreads
    over sources too; returned in the given order. Deterministic; every family is present when
    n >= the number of families. n <= 0 or n >= len(tasks): all of them."""
    from collections import Counter

    from jacrl.evaluate import family_of

    tasks = list(tasks)
    if n <= 0 or n >= len(tasks):
        return tasks

    def source(i: int) -> str:
        t = tasks[i]
        return str((t.get("meta") or json.loads(t["answer"])).get("source", ""))

    queues: dict[str, list[int]] = {}
    for i, t in enumerate(tasks):
        queues.setdefault(family_of(t), []).append(i)
    used: Counter = Counter()
    picked: list[int] = []
    while len(picked) < n:
        for fam in sorted(queues):
            if queues[fam] and len(picked) < n:
                i = min(queues[fam], key=lambda j: used[source(j)])  # first of the least used
                queues[fam].remove(i)
                used[source(i)] += 1
                picked.append(i)
    return [tasks[i] for i in sorted(picked)]


def cell_tasks(rung: str, data_dir: str | os.PathLike | None, gen_limit: int = 0,
               mem_limit: int = 0) -> dict[str, list[dict]]:
    """{"train": the rung's tasks, "valid", "gen": gen_limit holdout tasks sampled round-robin
    by family (`stratified`; 0 = the whole holdout), "mem": train[:mem_limit]}."""
    from jacrl import splits

    train = splits.rung("all" if rung == "all" else int(rung), data_dir)
    valid = splits.load_split("valid", data_dir)
    hold = splits.load_split("holdout", data_dir)
    return {"train": train, "valid": valid, "gen": stratified(hold, gen_limit),
            "mem": train[:mem_limit] if mem_limit else train}


def stage_configs(condition: str, seed: int, sft_iters: int, grpo_iters: int,
                  sft_set: Mapping | None = None, grpo_set: Mapping | None = None,
                  env: Mapping[str, str] = os.environ, reward_formula: str = ""):
    """(SFTConfig | None, GRPOConfig | None) of a condition, resolved in the documented order.
    reward_formula "": the default, JACRL_REWARD_FORMULA in `env` (else tiered)."""
    from jacrl import train as tr
    from jacrl.reward import default_formula

    c = CONDITIONS[condition]
    sft = grpo = None
    if c.sft:
        sft = tr.configure(tr.SFTConfig(), env=env)
        sft = tr.configure(sft, {"iters": sft_iters, "seed": seed, **(sft_set or {})})
    if c.grpo:
        grpo = tr.configure(tr.GRPOConfig(reward_formula=default_formula(env)), env=env)
        own: dict = {"iters": max(1, round(grpo_iters * c.grpo_iters_scale)), "seed": seed}
        if reward_formula:
            own["reward_formula"] = reward_formula
        if c.grpo_lr is not None:
            own["learning_rate"] = c.grpo_lr
        grpo = tr.configure(grpo, {**own, **(grpo_set or {})})
    return sft, grpo


def make_cell(rung, model: str = "jac-tiny", condition: str = "base", *, seed: int = 0,
              sft_iters: int = 200, grpo_iters: int = 200, sft_set=None, grpo_set=None,
              reward_formula: str = "", gen_limit: int = 0, mem_limit: int = 0, n: int = 8,
              k=(1, 2, 4, 8),
              temperature: float = 1.0, max_tokens: int = 512, batch_size: int = 32,
              data_dir: str | None = None, results: str | None = None,
              artifacts: str | None = None, notebook: str | os.PathLike | None = None,
              env: Mapping[str, str] = os.environ, **_ignored) -> Cell:
    """Resolve one cell and compute its key. Accepts the notebook's parameters as given by
    papermill (JSON strings for the *_set dicts, a comma string for k)."""
    from jacrl.evaluate import code_version, data_hash
    from jacrl.project import path_or

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
    tasks = cell_tasks(rung, data_dir, int(gen_limit), int(mem_limit))
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
    }
    digest = hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()
    key = f"r{rung}-{label}-{condition}-{digest[:12]}"
    return Cell(rung=rung, model=str(model), label=label, condition=condition, seed=int(seed),
                sft_iters=int(sft_iters), grpo_iters=int(grpo_iters), sft_set=sft_set,
                grpo_set=grpo_set, sft=parts["sft"], grpo=parts["grpo"],
                reward_formula=grpo.reward_formula if grpo else "", eval=ev,
                batch_size=int(batch_size), data_dir=str(data_dir), results=str(results),
                artifacts=str(artifacts), key=key, key_parts=parts)


def notebook_cell(cell_key: str = "", log: Callable[[str], None] = print,
                  env: Mapping[str, str] = os.environ, **params) -> Cell:
    """The cell notebook 30 runs, from its parameters ("" paths: the project's). Run by hand (no
    `cell_key`), JACRL_NOTEBOOK_QUICK=1 scales its costly settings down (jacrl.notebooks). Run by
    the ladder, a key computed here that differs from the planned one (code or data changed since
    planning) is reported, and the cell keeps the planned key so `ladder run` finds its rows."""
    from jacrl.notebooks import scaled

    if not cell_key:
        params = scaled("30_training", params, env, log)
    cell = make_cell(env=env, **params)
    if cell_key and cell_key != cell.key:
        log(f"warning: planned as {cell_key}, computed {cell.key} here (code or data changed "
            "since planning); filing rows under the planned key")
        cell = dataclasses.replace(cell, key=cell_key)
    return cell


def rung_sft_iters(cfg: LadderConfig, rung: str) -> int:
    """The SFT iterations of a rung's cells: cfg.sft_iters, or with cfg.sft_iters_per_task > 0,
    min(cfg.sft_iters, sft_iters_per_task x the rung's tasks)."""
    if cfg.sft_iters_per_task <= 0:
        return cfg.sft_iters
    from jacrl import splits

    n = len(splits.rung("all" if rung == "all" else int(rung), cfg.data_dir or None))
    return max(1, min(cfg.sft_iters, cfg.sft_iters_per_task * n))


def plan(cfg: LadderConfig) -> list[Cell]:
    """Every cell of the ladder, in order: rung, then model, then condition. Reads only."""
    from jacrl import splits
    from jacrl.models import resolve

    cfg = validate(cfg)
    absdir = {f: getattr(cfg, f) for f in ("data_dir", "results_dir", "artifacts_dir")}
    pool = len(splits.load_split("trainpool", cfg.data_dir))
    for r in cfg.rungs:  # a rung as large as the pool would be 'all' again under another key
        if r != "all" and int(r) >= pool:
            raise ValueError(f"rung {r}: the train pool has {pool} tasks, so rung {r} would be "
                             f"'all'; choose 1..{pool - 1} or 'all'")
    for model in cfg.models:
        resolve(model)  # an unknown model fails here, not in its cells
    cells = []
    for rung in cfg.rungs:
        for model in cfg.models:
            m = model if not Path(model).expanduser().is_dir() \
                else str(Path(model).expanduser().resolve())
            for cond in cfg.conditions:
                cells.append(make_cell(
                    rung, m, cond, seed=cfg.seed, sft_iters=rung_sft_iters(cfg, rung),
                    grpo_iters=cfg.grpo_iters, sft_set=cfg.sft_set, grpo_set=cfg.grpo_set,
                    reward_formula=cfg.reward_formula, gen_limit=cfg.gen_limit,
                    mem_limit=cfg.mem_limit, n=cfg.n, k=cfg.k,
                    temperature=cfg.temperature, max_tokens=cfg.max_tokens,
                    batch_size=cfg.batch_size, data_dir=absdir["data_dir"],
                    results=str(Path(absdir["results_dir"]) / RESULTS_FILE),
                    artifacts=absdir["artifacts_dir"], notebook=cfg.notebook))
    return cells


def _root() -> Path:
    """Where cells run (papermill's --cwd): the project root."""
    from jacrl.project import find_root

    return find_root()


def cell_dir(cfg: LadderConfig, cell: Cell) -> Path:
    from jacrl.project import path_or

    return path_or(cfg.results_dir, "results").resolve() / "cells" / cell.key


def command(cfg: LadderConfig, cell: Cell) -> list[str]:
    """The papermill command that runs the cell, on the `jacrl` kernel when it is installed for
    this interpreter (jacrl.kernel; OpenBLAS preloaded), else on python3."""
    from jacrl.kernel import for_cells

    out = cell_dir(cfg, cell) / Path(cfg.notebook).name
    cmd = [sys.executable, "-m", "papermill", str(Path(cfg.notebook).resolve()), str(out),
           "--cwd", str(_root()), "--log-output", "--no-progress-bar", "-k", for_cells()]
    for name, value in cell.params().items():
        if isinstance(value, str):
            cmd += ["-r", name, value]
        else:
            cmd += ["-p", name, repr(value) if isinstance(value, float) else str(value)]
    return cmd


# -------------------------------------------------------------------------------------------
# rows
# -------------------------------------------------------------------------------------------


def rows_by_key(results: str | os.PathLike) -> dict[str, set[str]]:
    """{cell key: kinds present} in a results file (a torn line is skipped silently here;
    `show` and the analysis notebook report it)."""
    import warnings

    from jacrl.report import load_rows

    out: dict[str, set[str]] = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        rows = load_rows(results)
    for r in rows:
        if r.get("cell_key"):
            out.setdefault(r["cell_key"], set()).add(r.get("kind", ""))
    return out


def is_done(present: Mapping[str, set[str]], key: str) -> bool:
    return set(KINDS) <= present.get(key, set())


def append_cell_rows(results: str | os.PathLike, rows: Sequence[dict]) -> int:
    """Append the rows whose (cell_key, kind) is not in the file yet, each with one write + fsync
    (jacrl.evaluate.append_row), holding an exclusive lock on `<results>.lock` meanwhile so a
    straggler and a resumed run cannot both append. Returns how many were appended."""
    from jacrl.evaluate import append_row

    results = Path(results)
    results.parent.mkdir(parents=True, exist_ok=True)
    with open(results.with_name(results.name + ".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        present = rows_by_key(results)
        n = 0
        for row in rows:
            if row.get("kind") in present.get(row["cell_key"], set()):
                continue
            append_row(results, row)
            present.setdefault(row["cell_key"], set()).add(row["kind"])
            n += 1
        return n


# -------------------------------------------------------------------------------------------
# what the notebook does (one cell)
# -------------------------------------------------------------------------------------------


def train_cell(cell: Cell, log: Callable[[str], None] = print) -> dict:
    """Train (or reuse) the cell's artifacts: {"sft": Artifact, "grpo": Artifact} as needed.
    The SFT stage is labelled "sft" for every condition, so sft_grpo reuses the sft cell's one."""
    from jacrl import train as tr

    tasks = cell_tasks(cell.rung, cell.data_dir)
    arts: dict = {}
    if cell.sft is not None:
        arts["sft"] = tr.sft(cell.model, tasks["train"], tasks["valid"],
                             tr.from_dict(tr.SFTConfig, cell.sft), cell.artifacts,
                             condition="sft", log=log)
    if cell.grpo is not None:
        arts["grpo"] = tr.grpo(cell.model, tasks["train"], tasks["valid"],
                               tr.from_dict(tr.GRPOConfig, cell.grpo), cell.artifacts,
                               parent=arts.get("sft"), condition=cell.condition, log=log)
    return arts


def adapter_of(arts: Mapping) -> Path | None:
    """The adapter to evaluate: the last stage's."""
    last = arts.get("grpo") or arts.get("sft")
    return Path(last.adapter_path) if last is not None else None


def evaluate_cell(cell: Cell, arts: Mapping, log: Callable[[str], None] | None = None,
                  progress: bool = True) -> list[dict]:
    """The gen and mem rows of the cell (not yet written)."""
    from jacrl.evaluate import evaluate

    tasks = cell_tasks(cell.rung, cell.data_dir, cell.eval["gen_limit"], cell.eval["mem_limit"])
    adapter = adapter_of(arts)
    e = cell.eval
    plans = [("gen", "holdout", tasks["gen"], e["n"]), ("mem", "rung", tasks["mem"], 0)]
    it = plans
    if progress:
        from tqdm.auto import tqdm  # a widget in a notebook, text elsewhere

        it = tqdm(plans, desc=f"eval {cell.name}", unit="eval")
    rows = []
    for kind, split, ts, n in it:
        row = evaluate(cell.model, adapter, ts, n=n, temperature=e["temperature"],
                       k=e["k"] if n else (1,), seed=cell.seed, max_tokens=e["max_tokens"],
                       tag=cell.tag(kind), split=split, kind=kind, batch_size=cell.batch_size,
                       log=log)
        row.update({
            "cell_key": cell.key, "model_name": cell.label, "rung": cell.rung,
            "condition": cell.condition, "reward_formula": cell.reward_formula or None,
            "ladder": {"sft": cell.sft, "grpo": cell.grpo, "eval": cell.eval,
                       "artifacts": {s: str(a.path) for s, a in arts.items()},
                       "artifact_keys": {s: a.key for s, a in arts.items()},
                       "key_parts": {k: v for k, v in cell.key_parts.items()
                                     if k in ("model_hash", "data_hash", "code_version",
                                              "notebook")}},
        })
        rows.append(row)
    return rows


# -------------------------------------------------------------------------------------------
# running the ladder
# -------------------------------------------------------------------------------------------


def _now() -> str:
    return _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds")


def write_status(path: Path, status: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(json.dumps(status, indent=1) + "\n")
    os.replace(tmp, path)


def read_status(path: Path) -> dict:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return {}


def claim_cell(d: Path):
    """The cell's lock (an open file holding an exclusive flock), or None when another process
    runs the cell. The kernel drops a dead process's flock, so a killed run's cell is free again."""
    d.mkdir(parents=True, exist_ok=True)
    fh = open(d / "lock", "w")
    try:
        fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        fh.close()
        return None
    return fh


def cell_state(d: Path) -> str:
    """`running` (a live process holds the cell), `interrupted` (its status says running but no
    one holds it: the run was killed), else the last status written (`done`, `failed`) or ""."""
    status = read_status(d / "status.json").get("status", "")
    if status != "running":
        return status
    lock = claim_cell(d)
    if lock is None:
        return "running"
    lock.close()
    return "interrupted"


def interrupted_cells(results_dir: str | os.PathLike) -> list[str]:
    """Names of cells whose run was killed (status `running`, nobody holding them)."""
    cells = Path(results_dir) / "cells"
    return sorted(read_status(d / "status.json").get("cell", d.name)
                  for d in (cells.iterdir() if cells.is_dir() else ())
                  if d.is_dir() and cell_state(d) == "interrupted")


def notebook_error(nb_path: Path, log_path: Path) -> str:
    """`Name: message` of the first error output of an executed notebook, else the log's tail."""
    try:
        nb = json.loads(nb_path.read_text())
        for c in nb.get("cells", []):
            for o in c.get("outputs", []):
                if o.get("output_type") == "error":
                    return f"{o.get('ename')}: {o.get('evalue')}"
    except (OSError, ValueError):
        pass
    try:
        lines = [ln for ln in log_path.read_text(errors="replace").splitlines() if ln.strip()]
    except OSError:
        return "no log"
    errs = [ln for ln in lines if re.match(r"^\w*(Error|Exception)\b", ln.strip())]
    return (errs[-1] if errs else "\n".join(lines[-5:]))[-2000:]


def kernel_env() -> dict[str, str]:
    """The cell's environment: ours + OpenBLAS preloaded (Linux) + this venv first on PATH."""
    from jacrl.models import fast_blas_env

    env = {**os.environ, **fast_blas_env(), "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1",
           "PYTHONUNBUFFERED": "1"}
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    return env


def _prctl():
    """libc's prctl, looked up in the parent (the forked child must not import or lock)."""
    try:
        import ctypes

        return ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None


def _die_with_parent(prctl):
    """preexec_fn for the papermill child: SIGKILL when the ladder process dies
    (PR_SET_PDEATHSIG = 1, kept across exec); the kernel then sees its parent gone and exits, so a
    killed ladder leaves no orphan cell running. Calls only the pre-resolved function."""
    if prctl is None:
        return None
    return lambda: prctl(1, 9)


def run_cell(cfg: LadderConfig, cell: Cell, log: Callable[[str], None] = print) -> dict:
    """Run one cell through papermill; returns (and writes) its status."""
    d = cell_dir(cfg, cell)
    d.mkdir(parents=True, exist_ok=True)
    cmd = command(cfg, cell)
    status = {"key": cell.key, "cell": cell.name, "status": "running", "started": _now(),
              "pid": os.getpid(), "command": shlex.join(cmd), "params": cell.params(),
              "key_parts": cell.key_parts}
    write_status(d / "status.json", status)
    t0 = time.time()
    log_path = d / "log.txt"
    rc, error = None, ""
    with open(log_path, "w") as logf:
        proc = subprocess.Popen(cmd, stdout=logf, stderr=subprocess.STDOUT, env=kernel_env(),
                                cwd=str(_root()), start_new_session=True,
                                preexec_fn=_die_with_parent(_prctl()))  # noqa: PLW1509 (no locks)
        try:
            rc = proc.wait(timeout=cfg.cell_timeout or None)
        except subprocess.TimeoutExpired:
            error = f"timed out after {cfg.cell_timeout} s"
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, 9)
                proc.wait()
    done = is_done(rows_by_key(cell.results), cell.key)
    if rc == 0 and done:
        status.update(status="done")
    else:
        if not error:
            error = notebook_error(d / Path(cfg.notebook).name, log_path) if rc else \
                "the notebook finished without writing both rows"
        status.update(status="failed", error=error, returncode=rc)
    status.update(finished=_now(), seconds=round(time.time() - t0, 1))
    for stage, path in _artifact_paths(cell).items():
        src = Path(path) / "metrics.jsonl"
        if src.is_file():
            shutil.copy(src, d / f"metrics-{stage}.jsonl")
    write_status(d / "status.json", status)
    return status


def _artifact_paths(cell: Cell) -> dict[str, str]:
    from jacrl.report import load_rows

    for r in reversed(load_rows(cell.results)):
        if r.get("cell_key") == cell.key:
            return (r.get("ladder") or {}).get("artifacts", {})
    return {}


def _run_once(cfg: LadderConfig, cell: Cell, results: Path, head: str,
              log: Callable[[str], None]) -> dict:
    """Run the cell unless its rows exist or another process holds it (then `busy`): concurrent
    `ladder run`s split the cells instead of doubling them."""
    skipped = {"key": cell.key, "cell": cell.name, "status": "skipped"}
    if is_done(rows_by_key(results), cell.key):
        log(f"{head}: rows exist, skipped")
        return skipped
    lock = claim_cell(cell_dir(cfg, cell))
    if lock is None:
        log(f"{head}: being run by another process, skipped")
        return {**skipped, "status": "busy"}
    with lock:  # held while the cell runs
        if is_done(rows_by_key(results), cell.key):  # finished by another process meanwhile
            log(f"{head}: rows exist, skipped")
            return skipped
        log(f"{head}: running (log: {cell_dir(cfg, cell) / 'log.txt'})")
        st = run_cell(cfg, cell, log)
    log(f"{head}: {st['status']} in {st['seconds']:.0f} s"
        + (f" — {st['error']}" if st.get("error") else ""))
    return st


def run(cfg: LadderConfig, log: Callable[[str], None] = print, progress: bool = True) -> list[dict]:
    """Run every cell whose rows are missing; keep going past failures. Returns the statuses."""
    cfg = validate(cfg)
    cells = plan(cfg)
    results = cfg.results_file.resolve()
    statuses = []
    bar = None
    if progress:
        from tqdm.auto import tqdm

        bar = tqdm(total=len(cells), desc="ladder", unit="cell")
        if log is print:
            log = bar.write  # lines above the bar, not through it
    for i, cell in enumerate(cells, 1):
        head = f"[{i}/{len(cells)}] {cell.name} ({cell.key})"
        st = _run_once(cfg, cell, results, head, log)
        statuses.append(st)
        if bar is not None:
            bar.update(1)
    if bar is not None:
        bar.close()
    failed = [s for s in statuses if s["status"] == "failed"]
    log(f"ladder: {len(cells)} cells, {sum(s['status'] == 'done' for s in statuses)} run, "
        f"{sum(s['status'] == 'skipped' for s in statuses)} skipped, "
        f"{sum(s['status'] == 'busy' for s in statuses)} run elsewhere, {len(failed)} failed"
        + (f" (see {cfg.results_dir}/cells/<key>/status.json)" if failed else ""))
    return statuses


def plan_text(cfg: LadderConfig) -> str:
    cfg = validate(cfg)
    cells = plan(cfg)
    present = rows_by_key(cfg.results_file)
    lines = [f"{len(cells)} cells; rows -> {cfg.results_file}"]
    for i, c in enumerate(cells, 1):
        state = "done (rows exist)" if is_done(present, c.key) else \
            {"running": "running now", "interrupted": "interrupted (killed; to rerun)",
             "failed": "failed (to rerun)"}.get(cell_state(cell_dir(cfg, c)), "to run")
        lines.append(f"[{i}/{len(cells)}] {c.name}  key={c.key}  {state}")
        lines.append("    " + shlex.join(command(cfg, c)))
    return "\n".join(lines)


def show(results_dir: str | os.PathLike | None = None, figures_dir: str | os.PathLike | None = "",
         include_stale: bool = False) -> tuple[str, list[Path]]:
    """The printed table and the figures written (none when figures_dir is None; "" = the
    project's figures/). results_dir None: the project's results/. Stale rows (made with a model,
    adapter or tasks no longer on disk) are left out of both unless include_stale."""
    from jacrl import report
    from jacrl.project import path_or

    results = path_or(results_dir, "results")
    path = results / RESULTS_FILE
    if not path.is_file():  # a missing or empty rows file is an error, never blank figures
        raise FileNotFoundError(f"{path}: no rows file (`jacrl ladder run` writes it)")
    rows = report.load_rows(path)
    if not any(report.cell_of(r) for r in rows):
        raise ValueError(f"{path}: no ladder rows in it")
    text = report.show_text(rows, include_stale)
    killed = interrupted_cells(results)
    if killed:
        text += f"\ninterrupted (killed mid-run, no rows; rerun `ladder run`): {', '.join(killed)}"
    if not include_stale:
        rows = [r for r in report.mark_stale(rows) if not r["stale"]]
    figs = report.write_figures(rows, figures_dir or None) \
        if figures_dir is not None and rows else []
    return text, figs


# -------------------------------------------------------------------------------------------
# demo
# -------------------------------------------------------------------------------------------

# jac-tiny is a 4M-parameter test fixture, not a recipe for real models. The demo's SFT is sized
# so its plumbing gate is visible: greedy decoding must reproduce the trained gold bodies (mem).
# Measured on 2 CPU cores with OpenBLAS (seeds 0 and 1): LoRA rank 64 on every linear layer of all
# 4 blocks, constant LR 2e-4, batch 1 reproduces rung 1's body from iteration 50-60 and all 3 of
# rung 3's from 240 (2/3 from 210 with seed 0); LR >= 4e-4, or rank 128 at 2e-4, diverges. So 90
# iterations per rung task: 90 on rung 1, 270 on rung 3 (~0.5-0.7 s each). Evaluation and GRPO
# rollouts get 256 tokens: the longest rung-3 gold answer is 249 tokens + the end token. GRPO at LR
# 1e-5 (KL ~0.04 after 4 steps, mem kept); at 3e-5 or 1e-4, 4 steps undo rung 3's memorization
# (mem 3/3 -> 0/3, KL 0.2-0.9): its sampled rollouts are not the greedy answer, and GRPO
# normalizes the tiny reward differences within a group to full-size advantages.
DEMO_SFT = {"learning_rate": 2e-4, "warmup": 0, "decay_steps": 10**9, "lora_layers": -1,
            "lora_rank": 64, "grad_checkpoint": False, "batch_size": 1, "steps_per_report": 10,
            "steps_per_eval": 10**6, "val_batches": 1}
DEMO_GRPO = {"learning_rate": 1e-5, "group_size": 2, "max_completion_length": 256,
             "max_seq_length": 2048, "lora_layers": -1, "lora_rank": 8, "grad_checkpoint": False,
             "steps_per_report": 1}


def demo_config(**over) -> LadderConfig:
    base = LadderConfig(rungs=("1", "3"), models=("jac-tiny",), conditions=DEFAULT_CONDITIONS,
                        sft_iters=270, sft_iters_per_task=90, grpo_iters=4,
                        sft_set=dict(DEMO_SFT), grpo_set=dict(DEMO_GRPO), gen_limit=6, n=4,
                        k=(1, 2, 4), max_tokens=256, temperature=1.0)
    return dataclasses.replace(base, **over)


def training_runs(cfg: LadderConfig, statuses: Sequence[Mapping] | None = None,
                  ) -> list[tuple[str, Path]]:
    """(label, metrics file) of the last rung's trained cells of the first model, from the copies
    `run_cell` keeps in each cell's directory: the sft cell's SFT, then each GRPO condition's GRPO
    stage (sft_grpo's SFT stage is the sft cell's artifact). The cells are `statuses` (what `run`
    returned: the keys it ran or skipped), else `plan(cfg)`'s. Cells without one are left out."""
    cfg = validate(cfg)
    if statuses is None:
        statuses = [{"key": c.key, "cell": c.name} for c in plan(cfg)]
    cells = [(s["key"], *s["cell"].split("/")) for s in statuses
             if s.get("key") and len(s.get("cell", "").split("/")) == 3]
    cells = [c for c in cells if c[1] == f"r{cfg.rungs[-1]}"]
    out = []
    for key, rung, label, cond in cells:
        c = CONDITIONS.get(cond)
        stage = None if c is None else "grpo" if c.grpo else "sft" if c.sft else None
        path = Path(cfg.results_dir) / "cells" / key / f"metrics-{stage}.jsonl" if stage else None
        if label == cells[0][2] and path is not None and path.is_file():
            out.append((f"{rung} {cond} ({stage.upper()})", path))
    return out


def ensure_data(data_dir: str | os.PathLike | None = None,
                drivers: str | os.PathLike | None = None,
                log: Callable[[str], None] = print) -> None:
    """Build tasks.jsonl (slow: every driver runs) and splits/ when missing (defaults: the
    project's data/ and drivers/)."""
    from jacrl import splits, tasks
    from jacrl.project import path_or

    d, drivers = path_or(data_dir, "data"), path_or(drivers, "drivers")
    if not (d / "tasks.jsonl").is_file():
        log(f"building tasks from {drivers}/ into {d}/ (runs every driver; a few minutes)")
        rep = tasks.build_tasks(drivers, d, progress=True)
        for line in rep.failures:
            log(line)
        if rep.failures:
            raise ValueError(f"task build failed: {len(rep.failures)} driver(s) rejected (listed "
                             "above), nothing written")
    if not all((d / "splits" / f"{s}.jsonl").is_file() for s in splits.SPLITS):
        log(f"building splits in {d}/splits")
        splits.build_splits(d)


def demo(results_dir: str = "", figures_dir: str = "", data_dir: str = "",
         artifacts_dir: str = "", model: str = "jac-tiny",
         log: Callable[[str], None] = print) -> dict:
    """Tasks/splits if needed; the demo ladder (rungs 1 and 3, four conditions, jac-tiny);
    the table; figures/ladder.png (+ ladder_passk.png) and figures/training.png (the last rung's
    SFT and GRPO curves, `training_runs`). Returns {"seconds", "statuses", "table", "figures"}."""
    from jacrl.models import resolve

    t0 = time.time()
    resolve(model)  # before the slow task build; the error says how to build jac-tiny
    ensure_data(data_dir or None, None, log)
    cfg = from_env(demo_config(models=(model,), results_dir=results_dir, figures_dir=figures_dir,
                               data_dir=data_dir, artifacts_dir=artifacts_dir))
    statuses = run(cfg, log)
    table, figs = show(cfg.results_dir, cfg.figures_dir)
    runs = training_runs(cfg, statuses)
    if runs:
        from jacrl import report

        figs = [*figs, report.write_training_figure(
            runs, cfg.figures_dir, title=f"training curves, rung {cfg.rungs[-1]} ({model})")]
    log(table)
    for p in figs:
        log(f"wrote {p}")
    secs = round(time.time() - t0, 1)
    log(f"demo: {secs:.0f} s")
    return {"seconds": secs, "statuses": statuses, "table": table, "figures": figs}


# -------------------------------------------------------------------------------------------
# CLI
# -------------------------------------------------------------------------------------------


def add_arguments(p: argparse.ArgumentParser, figures: bool = True) -> argparse.ArgumentParser:
    """The options of `ladder plan` / `ladder run` (figures: accept --figures, which run uses)."""
    from jacrl.reward import FORMULAS

    d = LadderConfig()
    p.add_argument("--rungs", help=f"comma list (env JACRL_LADDER_RUNGS; default {','.join(d.rungs)})")
    p.add_argument("--models", help="comma list of registry names / model dirs "
                                    f"(env JACRL_LADDER_MODELS; default {','.join(d.models)})")
    p.add_argument("--conditions", help=f"comma list of {', '.join(CONDITIONS)} (env "
                                        f"JACRL_LADDER_CONDITIONS; default {','.join(d.conditions)})")
    p.add_argument("--iters", help="N or sft=N,grpo=M (env JACRL_LADDER_ITERS; default "
                                   f"sft={d.sft_iters},grpo={d.grpo_iters})")
    p.add_argument("--seed", type=int, help=_help("seed"))
    p.add_argument("--set", dest="sets", action="append", default=[], metavar="STAGE.KEY=V",
                   help="hyperparameter override, e.g. sft.learning_rate=1e-3, grpo.group_size=2")
    p.add_argument("--reward-formula", choices=FORMULAS, help=_help("reward_formula"))
    p.add_argument("--gen-limit", type=int, help=_help("gen_limit"))
    p.add_argument("--mem-limit", type=int, help=_help("mem_limit"))
    p.add_argument("-n", "--samples", type=int, help=_help("n"))
    p.add_argument("-k", help="comma list: " + _help("k") + "; with -n alone: the default's "
                   "values <= n")
    p.add_argument("--temperature", type=float, help=_help("temperature"))
    p.add_argument("--max-tokens", type=int, help=_help("max_tokens"))
    p.add_argument("--batch-size", type=int, help=_help("batch_size"))
    p.add_argument("--demo", action="store_true",
                   help="start from the demo's tiny settings (jac-tiny, rungs 1,3, few iterations)")
    _paths(p, figures)
    p.add_argument("--cell-timeout", type=int, help=_help("cell_timeout"))
    return p


def _paths(p: argparse.ArgumentParser, figures: bool = True) -> None:
    p.add_argument("--data-dir", default="", help="tasks.jsonl + splits/ (default: the "
                   "project's data/)")
    p.add_argument("--results", default="", help="results dir: rl_ladder.jsonl, cells/ "
                   "(default: the project's results/)")
    if figures:
        p.add_argument("--figures", default="", help="figures dir (default: the project's "
                       "figures/)")
    p.add_argument("--artifacts", default="", help="artifacts dir (default: the project's "
                   "artifacts/)")


def _help(name: str) -> str:
    """A knob's help and its LadderConfig default."""
    f = next(f for f in dataclasses.fields(LadderConfig) if f.name == name)
    d = ",".join(map(str, f.default)) if isinstance(f.default, tuple) else repr(f.default) \
        if f.default == "" else f.default
    return f"{f.metadata['help']} (default: {d})"


def config_from_args(args: argparse.Namespace, env: Mapping[str, str] = os.environ) -> LadderConfig:
    """Defaults (or the demo's), then JACRL_LADDER_* env vars, then flags."""
    cfg = demo_config() if args.demo else LadderConfig()
    cfg = from_env(cfg, env)
    ch: dict = {}
    if args.rungs:
        ch["rungs"] = _csv(args.rungs)
    if args.models:
        ch["models"] = _csv(args.models)
    if args.conditions:
        ch["conditions"] = _csv(args.conditions)
    if args.iters:
        ch.update({f"{k}_iters": v for k, v in parse_iters(args.iters).items()})
    sets = parse_sets(args.sets)
    from jacrl.evaluate import _int_list

    k = tuple(_int_list(args.k)) if args.k else None
    if k is None and args.samples is not None:  # -n alone: the default k that n samples give
        k = tuple(x for x in cfg.k if x <= max(args.samples, 1))
    flags = {"seed": args.seed, "gen_limit": args.gen_limit, "mem_limit": args.mem_limit,
             "n": args.samples, "k": k,
             "temperature": args.temperature, "max_tokens": args.max_tokens,
             "batch_size": args.batch_size, "cell_timeout": args.cell_timeout,
             "reward_formula": args.reward_formula}
    ch.update({name: v for name, v in flags.items() if v is not None})
    ch.update(sft_set={**cfg.sft_set, **sets["sft"]}, grpo_set={**cfg.grpo_set, **sets["grpo"]},
              data_dir=args.data_dir, results_dir=args.results,
              figures_dir=getattr(args, "figures", None) or "", artifacts_dir=args.artifacts)
    return validate(dataclasses.replace(cfg, **ch))


def _cmd_plan(args) -> int:
    print(plan_text(config_from_args(args)))
    return 0


def _cmd_run(args) -> int:
    cfg = config_from_args(args)
    statuses = run(cfg)
    if args.figures is not None:  # --figures DIR: the figures of all rows, after the run
        for p in show(cfg.results_dir, cfg.figures_dir)[1]:
            print(f"wrote {p}")
    return 1 if any(s["status"] == "failed" for s in statuses) else 0


def _cmd_show(args) -> int:
    text, figs = show(args.results or None, None if args.no_figures else args.figures)
    print(text)
    for p in figs:
        print(f"wrote {p}")
    return 0


def _cmd_demo(args) -> int:
    demo(args.results, args.figures, args.data_dir, args.artifacts, args.model)
    return 0


def add_cli(subparsers) -> None:
    """Register `ladder {plan,run,show}` and `demo` on an argparse subparsers object."""
    p = subparsers.add_parser("ladder", help="the ladder: plan / run / show",
                              description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="ladder_verb", required=True)
    q = sub.add_parser("plan", help="print every cell and its command; runs nothing")
    add_arguments(q, figures=False).set_defaults(func=_cmd_plan)
    q = sub.add_parser("run", help="run the cells without rows (resumable)")
    add_arguments(q, figures=False).set_defaults(func=_cmd_run)
    q.add_argument("--figures", default=None, metavar="DIR", help="after the run, write the "
                   "figures of all rows here (default: none written; `ladder show` writes them)")
    q = sub.add_parser("show", help="pivot with Wilson CIs, McNemar vs base; write figures")
    q.add_argument("--results", default="", help="results dir (default: the project's results/)")
    q.add_argument("--figures", default="", help="figures dir (default: the project's figures/)")
    q.add_argument("--no-figures", action="store_true", help="print the table only")
    q.set_defaults(func=_cmd_show)
    p = subparsers.add_parser("demo", help="a small ladder on jac-tiny: results/ and "
                                           "figures/ladder.png in minutes")
    _paths(p)
    p.add_argument("--model", default="jac-tiny", help="registry name or MLX model dir")
    p.set_defaults(func=_cmd_demo)
