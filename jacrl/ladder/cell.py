"""One ladder cell, as notebook 30 runs it: resolve the cell from the notebook's parameters, train
(or reuse) its artifacts, and evaluate `gen` and `mem`. Appending the rows is
`jacrl.results.append_cell_rows`.
"""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Callable, Mapping
from pathlib import Path
from types import ModuleType

from tqdm.auto import tqdm  # a widget in a notebook, text elsewhere

from jacrl.conditions import condition_of, parent_stage
from jacrl.config import EvalConfig, configure, env_formula
from jacrl.evaluate import evaluate
from jacrl.ladder.eval_cache import EVALS, cached, eval_key
from jacrl.ladder.plan import Cell, make_cell
from jacrl.ladder.settings import LadderConfig
from jacrl.ladder.taskset import cell_tasks, grpo_tasks
from jacrl.notebooks import scaled, unknown_params
from jacrl.project import path_or, project
from jacrl.provenance import artifact_inputs
from jacrl.samples import cell_samples_path
from jacrl.stages import STAGES, function_of, trainer_of

KEY_PARTS_IN_ROWS = ("model_hash", "data_hash", "code_version", "notebook")


def notebook_params(namespace: Mapping) -> dict:
    """The parameters in a notebook's namespace (pass `globals()`): the public names bound before
    the first module, i.e. by the parameters cell and papermill's injected cell, which run before
    the notebook's imports. The kernel's own names (IPython's `user_ns_hidden`, which include
    startup files') are left out. Every papermill parameter thus reaches `make_cell`, so one the
    cell does not know is an error, not ignored; names the notebook binds after its imports (a
    cell rerun by hand) are not parameters."""
    shell = namespace.get("get_ipython")
    hidden = set(shell().user_ns_hidden) if callable(shell) and shell() is not None else set()
    out = {}
    for name, value in namespace.items():
        if name.startswith("_") or name in hidden:
            continue
        if isinstance(value, ModuleType):
            break
        out[name] = value
    return out


PICK = ("rung", "model", "condition", "format", "paired", "train_seed")  # a cell of the grid


def notebook_cell(
    cell_json: str = "",
    cell_key: str = "",
    log: Callable[[str], None] = print,
    env: Mapping[str, str] = os.environ,
    **params,
) -> Cell:
    """The cell notebook 30 runs. Run by the ladder: `cell_json` (`Cell.to_json`) is the whole
    cell and the other parameters are not read; its rows are filed under the planned key in it
    (see `make_cell`). By hand: `PICK` picks the cell and every other parameter is a
    `LadderConfig` field (one that is not is an error); with no `results_dir` the rows go to the
    project's results/scratch/, never the ladder's own rows; JACRL_NOTEBOOK_QUICK=1 scales the
    costly settings down (jacrl.notebooks) unless a `cell_key` is given."""
    if cell_json:
        return Cell.from_json(cell_json, env=env, log=log)
    if not cell_key:
        params = scaled("30_training", params, env, log)
    pick = {k: params.pop(k) for k in PICK if k in params}
    sets = _json(params.pop("sets", {}))
    for stage in STAGES:  # <stage>_set: one stage's overrides (the parameters' older spelling)
        if f"{stage}_set" in params:
            sets[stage] = {**sets.get(stage, {}), **_json(params.pop(f"{stage}_set"))}
    known = {f.name for f in dataclasses.fields(LadderConfig)}
    if set(params) - known:
        raise TypeError(unknown_params(set(params) - known, known | set(PICK), "cell parameter"))
    if not params.get("reward_formula"):  # "" in the notebook: the environment's, else default
        params["reward_formula"] = env_formula(env)
    cfg = configure(LadderConfig(), {**params, "sets": sets})
    if not cfg.results_dir:
        cfg = dataclasses.replace(cfg, results_dir=str(project().scratch))
    return make_cell(cfg, cell_key=cell_key, env=env, log=log, **pick)


def _json(value) -> dict:
    """A notebook parameter that is a mapping, or its JSON text."""
    return dict(json.loads(value) if isinstance(value, str) else value or {})


def _train_stage(cell: Cell, stage: str, tasks: Mapping, parent, log) -> object:
    """One stage's artifact, continuing or sampling from `parent` (the previous stage's), by the
    stage table's trainer."""
    st = STAGES[stage]
    args = (cell.model, tasks["train"], tasks["valid"], cell.stages[stage], cell.cfg.artifacts_dir)
    kw = {
        "log": log,
        "report_to": cell.cfg.report_to or None,  # None: the trainers' default
        # a shared stage is labelled with its own name, so every condition reuses one build
        "condition": stage if st.shared else cell.condition,
        **({"parent": parent} if st.parent != "none" else {}),
    }
    out = trainer_of(stage)(*args, **kw)
    return out[-1] if isinstance(out, list) else out  # rounds (star): the last


def train_cell(cell: Cell, log: Callable[[str], None] = print) -> dict:
    """Train (or reuse) the cell's artifacts: {stage: Artifact} in the condition's order, each
    stage continuing the previous one's (`jacrl.conditions`)."""
    tasks = cell_tasks(cell.rung, cell.cfg.data_dir, format=cell.format, paired=cell.paired)
    cond = condition_of(cell.condition)
    arts: dict = {}
    for stage in cell.stages:
        parent = arts.get(parent_stage(cond, stage))  # the previous stage's artifact, or None
        own = tasks
        if STAGES[stage].calibrates and cell.cfg.grpo_prompts != "rung":  # rollouts' prompts
            c = cell.cfg
            own = {
                **tasks,
                "train": grpo_tasks(
                    c.grpo_prompts, cell.rung, c.data_dir, cell.format, cell.paired
                ),
            }
        arts[stage] = _train_stage(cell, stage, own, parent, log)
    return arts


def adapter_of(arts: Mapping) -> Path | None:
    """The adapter to evaluate: the last stage's."""
    last = next(reversed(arts.values()), None) if arts else None
    return Path(last.adapter_path) if last is not None else None


def rollout_temperature(cell: Cell, arts: Mapping, tasks: list[dict]) -> float | None:
    """The temperature mem is also sampled at: the rollout temperature of the cell's last stage
    that samples rollouts (the table's `calibrates`: GRPO), as its artifact recorded it; for a
    cell with an adapter but no such stage (sft, sft_rft, star), the one that stage calibrates
    on that adapter with the config the cell's evaluation reads (`eval_reads`) — so sft and
    sft_grpo compare at the temperature sft_grpo trained at; None for the base model, or when
    the cell reads no calibrating config (mem is then greedy only). The config read is the
    cell's, resolved once (`make_cell`: JACRL_GRPO_*, the ladder's formula and sets), and in its
    key."""
    sampled = [s for s in arts if STAGES[s].calibrates]
    if sampled:
        return float(arts[sampled[-1]].manifest["summary"]["temperature"])
    adapter = adapter_of(arts)
    calibrating = [s for s in cell.reads if STAGES[s].calibrates]
    if adapter is None or not tasks or not calibrating:
        return None
    from jacrl.models.registry import load

    cfg = cell.reads[calibrating[0]]
    if cfg.temperature > 0:
        return cfg.temperature
    lm, tok = load(cell.model, str(adapter))
    calibrate = function_of(STAGES[calibrating[0]].calibrates)
    return calibrate(lm, tok, tasks, cfg, log=lambda _: None)[0]


SIGNAL_FIELDS = ("signal_rate", "signal_steps", "steps", "adapter_delta", "tier_mix")
EARLY_STOP_FIELDS = (
    "keep_best",
    "best_by",
    "best_iter",
    "best_val_loss",
    "best_val_reward",
    "final_val_loss",
)


def training_record(arts: Mapping) -> dict:
    """{stage: what its run says about itself} for the row: a stage that learns from rollouts'
    rewards (its summary has `signal_rate`, `jacrl.train.grpo.signal`) its learning signal,
    with `learned` False when no step had a group whose rewards differed or the adapter did
    not move (its row then re-evaluates the parent: not a result of the method); an SFT run
    its validation choice (`keep_best`: the iteration whose adapter it kept)."""
    out = {}
    for stage, art in arts.items():
        summary = art.manifest.get("summary") or {}
        if "signal_rate" in summary:
            rec = {f: summary.get(f) for f in SIGNAL_FIELDS}
            rec["learned"] = bool(rec["signal_steps"]) and rec["adapter_delta"] != 0
            out[stage] = rec
        elif "best_iter" in summary:
            out[stage] = {f: summary.get(f) for f in EARLY_STOP_FIELDS}
    return out


def evaluate_cell(
    cell: Cell, arts: Mapping, log: Callable[[str], None] | None = None, progress: bool = True
) -> list[dict]:
    """The gen rows (the holdout sample, greedy + n samples at the eval temperature) and mem rows
    (the rung's tasks, greedy + n samples at the rollout temperature when the cell has an
    adapter, see `rollout_temperature`) of the cell, in its task format, filed under its key (not
    yet written)."""
    c = cell.cfg
    tasks = cell_tasks(cell.rung, c.data_dir, c.gen_limit, c.mem_limit, cell.format, cell.paired)
    adapter = adapter_of(arts)
    mem_t = rollout_temperature(cell, arts, tasks["mem"]) if c.n else None
    plans = [
        ("gen", "holdout", tasks["gen"], c.n, c.temperature),
        ("mem", "rung", tasks["mem"], c.n if mem_t else 0, mem_t or c.temperature),
    ]
    shared = {
        f.name: getattr(c, f.name) for f in dataclasses.fields(EvalConfig) if hasattr(c, f.name)
    }  # the ladder's eval knobs named like EvalConfig's
    rows = []
    for kind, split, ts, n, temp in tqdm(
        plans, desc=f"eval {cell.name}", unit="eval", disable=not progress
    ):
        cfg = configure(
            EvalConfig(), {**shared, "n": n, "k": c.k if n else (1,), "temperature": temp}
        )
        path = cell_samples_path(cell.results, cell.key, kind)
        row, reused = cached(
            path_or(c.artifacts_dir or None, "artifacts") / EVALS,
            eval_key(cell.model, adapter, ts, cfg, kind, split),
            path,
            lambda ts=ts, cfg=cfg, kind=kind, split=split, path=path: evaluate(
                cell.model,
                adapter,
                ts,
                cfg,
                tag=cell.tag(kind),
                split=split,
                kind=kind,
                log=log,
                samples=path,
            ),
            cell.tag(kind),
        )
        if reused and log:
            log(f"{cell.tag(kind)}: the same evaluation as {row['eval_reused'][:12]}: reused")
        if row.get("samples"):  # relative to the rows file's folder: the same on every engine
            row["samples"] = os.path.relpath(row["samples"], Path(cell.results).parent)
        row.update(
            {
                "cell_key": cell.key,
                "model_name": cell.label,
                "rung": cell.rung,
                "train_seed": cell.train_seed,
                "condition": cell.condition,
                "format": cell.format,
                "paired": cell.paired,
                "reward_formula": cell.reward_formula or None,
                "training": training_record(arts),
                "ladder": {
                    **dict.fromkeys(STAGES),
                    "eval": cell.eval,  # None: a stage it lacks
                    **{s: dataclasses.asdict(sc) for s, sc in cell.stages.items()},
                    "artifacts": {s: str(a.path) for s, a in arts.items()},
                    "artifact_keys": {s: a.key for s, a in arts.items()},
                    # what each key is made of: a rebuild's verdict names the input that changed
                    "artifact_inputs": {
                        s: artifact_inputs(a.manifest.get("key_parts") or {})
                        for s, a in arts.items()
                    },
                    "key_parts": {
                        k: v for k, v in cell.key_parts.items() if k in KEY_PARTS_IN_ROWS
                    },
                },
            }
        )
        rows.append(row)
    return rows
