"""The recipe's decision record (results/recipe/<plan-key>.json) and its plan text.

The record is recomputed from the rows each time it is written, so a resumed recipe rewrites it
with the same decisions: the gate's mem figures, the sft curve with its Wilson intervals, each
model's elbow with the rule (or the hand override) that chose it, and every stage's cells with
their state; `arms` are stage 3's cells, the GRPO runs the decisions launched.

The plan key names one recipe: a hash of the ladder configuration's fields that change what the
cells compute (rungs, models, seed, iterations, hyperparameter overrides, evaluation settings;
not paths, throughput or the condition list the recipe replaces) and of the tuned arm's scales
(the `sft_grpo_tuned` condition's).
The gate threshold and the elbow override are decisions, not identity: changing them rewrites the
same record.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from jacrl.conditions import CONDITIONS, ORDER
from jacrl.models.registry import display_path
from jacrl.provenance import now
from jacrl.recipe.decide import RecipeConfig, elbows, gate, index_rows
from jacrl.recipe.steps import STEPS, CellSpec, planned_cells
from jacrl.results import model_label

RECIPE = "smart"
# LadderConfig fields that do not change what the recipe's cells compute
NOT_IN_KEY = frozenset(
    {
        "conditions",
        "results_dir",
        "figures_dir",
        "artifacts_dir",
        "data_dir",
        "notebook",
        "cell_timeout",
        "batch_size",
        "recipe",
    }
)
RECORD_DIR = "recipe"  # under the results directory


def _fields(cfg) -> dict:
    d = dataclasses.asdict(cfg) if dataclasses.is_dataclass(cfg) else dict(vars(cfg))
    return json.loads(json.dumps(d, sort_keys=True, default=str))  # tuples -> lists


def _portable(fields: dict) -> dict:
    """Folder fields project-relative, so a committed record reads the same on every checkout."""
    return {
        k: display_path(v) if v and (k.endswith("_dir") or k == "notebook") else v
        for k, v in fields.items()
    }


def plan_key(cfg, rcfg: RecipeConfig = RecipeConfig()) -> str:
    """'smart-<12 hex>' (see the module docstring)."""
    ident = {
        "ladder": {k: v for k, v in _fields(cfg).items() if k not in NOT_IN_KEY},
        "tuned": [float(v) for v in CONDITIONS["sft_grpo_tuned"].scale["grpo"].values()],
    }
    digest = hashlib.sha256(json.dumps(ident, sort_keys=True).encode()).hexdigest()
    return f"{RECIPE}-{digest[:12]}"


def record_path(results_dir: str | os.PathLike, key: str) -> Path:
    return Path(results_dir) / RECORD_DIR / f"{key}.json"


def _state(idx: Mapping, spec: CellSpec) -> str:
    done = all((spec.label, spec.rung, spec.condition, k) in idx for k in ("gen", "mem"))
    return "done" if done else "to run"


def stages(
    cfg,
    rows: Sequence[Mapping],
    rcfg: RecipeConfig = RecipeConfig(),
    env: Mapping[str, str] = os.environ,
    state: Callable[[CellSpec], str] | None = None,
) -> list[dict]:
    """Per stage: number, name, what it runs, what it needs, its status and its cells (each a
    CellSpec dict with `state`: `state(spec)` when given, else done | to run from the rows).
    Stage 3's sft_grpo arms of a model without an elbow appear as r<E> cells that wait."""
    idx, g = index_rows(rows), gate(cfg, rows, rcfg.gate_threshold)
    el = elbows(cfg, rows, rcfg)
    state = state or (lambda s: _state(idx, s))
    labels = [model_label(m) for m in cfg.models]
    out = []
    for st in STEPS:
        specs = planned_cells(st.number, cfg, rcfg, {m: e.rung for m, e in el.items()}, env)
        cells = [{**s.as_dict(), "state": state(s)} for s in specs]
        if st.number == 3:
            cells += [
                {
                    "stage": 3,
                    "cell": f"rE/{m}/{c}",
                    "rung": None,
                    "model": m,
                    "condition": c,
                    "state": "waits for the elbow",
                }
                for m, e in el.items()
                if e.rung is None
                for c in ("sft_grpo", "sft_grpo_tuned")
            ]
            cells.sort(
                key=lambda c: (labels.index(model_label(c["model"])), ORDER.index(c["condition"]))
            )
        done = sum(c["state"] == "done" for c in cells)
        if st.number == 0:
            status = g.status
        elif g.status != "pass":
            status = "stopped: the gate failed" if g.status == "fail" else "waits for the gate"
        elif st.number == 2:
            status = (
                "waits for stage 1"
                if not all(e.rung for e in el.values())
                else "decided"
                if out[1]["status"] == "done"
                else "decided on the rows so far (stage 1 incomplete)"
            )
        else:
            status = "done" if done == len(cells) else f"{done} of {len(cells)} cells have rows"
        out.append(
            {
                "stage": st.number,
                "name": st.name,
                "runs": st.runs,
                "needs": st.needs,
                "status": status,
                "cells": cells,
            }
        )
    return out


def build_record(
    cfg,
    rows: Sequence[Mapping],
    rcfg: RecipeConfig = RecipeConfig(),
    keys: Mapping[str, str] | None = None,
    env: Mapping[str, str] = os.environ,
    state: Callable[[CellSpec], str] | None = None,
) -> dict:
    """The decision record from the rows so far. `keys`: {cell name (r<rung>/<label>/<cond>): cell
    key} added to the cells the runner has keys for."""
    g = gate(cfg, rows, rcfg.gate_threshold)
    el = elbows(cfg, rows, rcfg)
    st = stages(cfg, rows, rcfg, env, state)
    for s in st:
        for c in s["cells"]:
            if keys and c["cell"] in keys:
                c["key"] = keys[c["cell"]]
    return {
        "recipe": RECIPE,
        "plan_key": plan_key(cfg, rcfg),
        "config": {"ladder": _portable(_fields(cfg)), "recipe": dataclasses.asdict(rcfg)},
        "gate": g.as_dict(),
        "curve": {m: e.figures for m, e in el.items()},
        "elbow": {
            m: {k: v for k, v in e.as_dict().items() if k != "figures"} for m, e in el.items()
        },
        "arms": [c for c in st[3]["cells"] if c["rung"] is not None] if g.status == "pass" else [],
        "stages": st,
        "stopped": None if g.status == "pass" else g.reason,
    }


def write_record(results_dir: str | os.PathLike, record: Mapping) -> Path:
    """Write results/recipe/<plan_key>.json atomically (temp file, fsync, rename), stamped with
    the time; returns its path."""
    path = record_path(results_dir, record["plan_key"])
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with open(tmp, "w") as f:
        f.write(json.dumps({**record, "written": now()}, indent=1) + "\n")
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    return path


def read_record(results_dir: str | os.PathLike, key: str) -> dict | None:
    """The record of plan `key`, or None when none was written."""
    path = record_path(results_dir, key)
    return json.loads(path.read_text()) if path.is_file() else None


def read_records(results_dir: str | os.PathLike) -> list[dict]:
    """Every record under results/recipe/, oldest written first ([] when there is none)."""
    d = Path(results_dir) / RECORD_DIR
    recs = [json.loads(p.read_text()) for p in sorted(d.glob("*.json"))] if d.is_dir() else []
    return sorted(recs, key=lambda r: r.get("written", ""))


def _figure(f: Mapping) -> str:
    return (
        f"r{f['rung']} {f['k']}/{f['n']} {f['rate'] * 100:.0f}% "
        f"[{f['lo'] * 100:.0f}-{f['hi'] * 100:.0f}]"
    )


def record_text(record: Mapping) -> str:
    """A record for a reader: the gate, each model's curve (sft gen pass@1, 95% Wilson) and
    elbow, the arms launched and their state, or why the recipe stopped."""
    lines = [
        f"recipe {record['recipe']} (plan {record['plan_key']}, written "
        f"{record.get('written', '?')})",
        f"gate: {record['gate']['reason'].removeprefix('gate ')}",
    ]
    for m, figs in record["curve"].items():
        e = record["elbow"][m]
        lines.append(f"curve {m}: " + ("  ".join(map(_figure, figs)) or "no rows yet"))
        pick = (
            f"E = r{e['rung']} ({e['rule']}): {e['reason']}"
            if e["rung"]
            else f"no E yet: {e['reason']}"
        )
        if record.get("stopped") is None:  # a stopped recipe decides no elbow
            lines.append(f"elbow {m}: {pick}")
    for c in record["arms"]:
        extra = _overrides(c)
        lines.append(f"arm {c['cell']}: {c['state']}" + (f" ({extra})" if extra else ""))
    if record.get("stopped"):
        lines.append("stopped after the gate (stage 0): no curve, elbow or GRPO arm")
    return "\n".join(lines)


def _overrides(cell: Mapping) -> str:
    """The cell's overrides (stage.knob=value) and its condition's scales (stage.knob x f)."""
    o = cell.get("overrides") or {}
    scale = CONDITIONS[cell["condition"]].scale if cell["condition"] in CONDITIONS else {}
    return " ".join(
        [f"{stage}.{k}={v}" for stage in sorted(o) for k, v in sorted((o.get(stage) or {}).items())]
        + [
            f"{stage}.{k} x{f:g}"
            for stage in sorted(scale)
            for k, f in sorted(scale[stage].items())
        ]
    )


def plan_text(
    cfg,
    rows: Sequence[Mapping],
    rcfg: RecipeConfig = RecipeConfig(),
    env: Mapping[str, str] = os.environ,
    state: Callable[[CellSpec], str] | None = None,
    results_dir: str | os.PathLike | None = None,
) -> str:
    """What each stage would run, its state, and which decision each later stage waits on."""
    key = plan_key(cfg, rcfg)
    where = record_path(results_dir, key) if results_dir else f"<results>/{RECORD_DIR}/{key}.json"
    g, el = gate(cfg, rows, rcfg.gate_threshold), elbows(cfg, rows, rcfg)
    lines = [f"recipe {RECIPE} (plan {key}); decisions -> {where}"]
    for s in stages(cfg, rows, rcfg, env, state):
        lines.append(
            f"stage {s['stage']} {s['name']}: {s['runs']}  [needs {s['needs']}; {s['status']}]"
        )
        for c in s["cells"]:
            extra = _overrides(c)
            lines.append(f"    {c['cell']}  {c['state']}" + (f"  ({extra})" if extra else ""))
        if s["stage"] == 0:
            lines.append(f"  -> {g.reason}")
        if s["stage"] == 2:
            for m in cfg.models:
                e = el[model_label(m)]
                pick = f"E = r{e.rung} ({e.rule})" if e.rung else "no E yet"
                lines.append(f"  -> {model_label(m)}: {pick}: {e.reason}")
        if s["stage"] == 3:
            lines.append(
                "  -> sft_grpo and sft_grpo_tuned run at each model's E (stage 2); "
                "raw_grpo needs only the gate"
            )
    return "\n".join(lines)
