"""Tables and figures from result rows (results/rl_ladder.jsonl): the ladder pivot with Wilson
intervals, learning curves with CI bands, paired exact McNemar of each condition against base, and
training curves from an artifact's metrics.jsonl.

A row belongs to a ladder cell through its `model_name`, `rung`, `condition` and `kind` fields, or,
for rows without them (the reference harness's), through a four-part tag `r<N>/<model>/<cond>/<kind>`.
When several rows share (model, rung, condition, kind) the last one wins (as in the earlier harness). Wilson
intervals are recomputed from the counts (`pass1`/`tasks`), never copied from a row.

| column | meaning |
|---|---|
| `pass1_pct`, `ci_lo`, `ci_hi` | greedy exact pass rate and its 95 % Wilson interval (percent) |
| `passk_pct`, `k` | unbiased pass@k (Chen et al. 2021) at the row's largest k, from its `pass_at_k` (percent); NaN when no samples were drawn. Never the rows' `greedy_or_k_pct` |
| `tasks`, `pass1` | tasks graded and greedy exact passes of the row |
| `run_pct`, `near_pct`, `avg_osim`, `truncation_pct` | as in the row (see `jacrl.evaluate`) |
| `model`, `rung`, `condition`, `kind`, `cell_key` | the ladder cell the row belongs to |
| `mem` | (pivot) the mem row's greedy pass rate on the rung's own training tasks |
| `stale` | why a row no longer describes what is on disk ("" when it does): its model, adapter or tasks changed since it was made |

Provenance is enforced, not just recorded: `show_text` leaves stale rows out (and says how many)
unless asked to include them; `stale_reasons` compares each row's recorded model, adapter and
task-data hashes with the files on disk now.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Sequence
from pathlib import Path

import pandas as pd

from jacrl.provenance import data_hash, dir_hash
from jacrl.results import KINDS, read_rows
from jacrl.splits import RUNGS
from jacrl.stats import mcnemar_exact, wilson

COND_ORDER = ("base", "sft", "sft_grpo", "sft_grpo_tuned", "raw_grpo")
COLUMNS = ["model", "rung", "condition", "kind", "tasks", "pass1", "pass1_pct", "ci_lo", "ci_hi",
           "k", "passk_pct", "run_pct", "near_pct", "avg_osim", "truncation_pct", "cell_key",
           "stale"]


def load_rows(path: str | os.PathLike) -> list[dict]:
    """Rows of a results file ([] when it does not exist); a torn last line is skipped."""
    return read_rows(path) if Path(path).is_file() else []


def cell_of(row: dict) -> tuple[str, str, str, str] | None:
    """(model, rung, condition, kind) of a ladder row, or None for rows outside the ladder."""
    if all(row.get(f) for f in ("model_name", "rung", "condition", "kind")):
        return str(row["model_name"]), str(row["rung"]), str(row["condition"]), str(row["kind"])
    parts = str(row.get("tag", "")).split("/")
    if len(parts) != 4 or not parts[0].startswith("r"):
        return None
    rung, model, cond, kind = parts[0].lstrip("r"), parts[1], parts[2], parts[3]
    return model, rung, cond, kind


def _order(values, order) -> list:
    known = [v for v in order if v in values]
    return known + sorted(v for v in values if v not in order)


def _passk(row: dict) -> tuple[float, int | None]:
    pk = row.get("pass_at_k") or {}
    if pk:
        k = max(int(x) for x in pk)
        return float(pk[str(k)]), k
    return math.nan, None


class _Disk:
    """What is on disk now, hashed once per report: model dirs, adapters, tasks by id."""

    def __init__(self):
        self._dirs: dict[str, str | None] = {}
        self._tasks: dict[str, dict] | None = None

    def dir_hash(self, path: Path) -> str | None:
        key = str(path)
        if key not in self._dirs:
            self._dirs[key] = dir_hash(path) if path.is_dir() else None
        return self._dirs[key]

    def model_dir(self, row: dict) -> Path | None:
        from jacrl.models import ModelError, resolve
        from jacrl.project import ProjectNotFound, project

        name = str(row.get("model") or row.get("model_name") or "")
        candidates = [name]
        try:
            candidates.append(str(project().root / name))
        except ProjectNotFound:
            pass
        for c in candidates:
            try:
                return resolve(c)
            except (ModelError, ProjectNotFound, OSError):
                continue
        return None

    def tasks(self) -> dict[str, dict]:
        if self._tasks is None:
            from jacrl.project import ProjectNotFound, project
            from jacrl.tasks import read_tasks

            try:
                self._tasks = {t["meta"]["id"]: t for t in read_tasks(project().tasks)}
            except (ProjectNotFound, OSError, ValueError):
                self._tasks = {}
        return self._tasks


def stale_reasons(row: dict, disk: _Disk | None = None) -> list[str]:
    """Why `row` no longer matches the disk: its model's files, its adapter's files (when the
    adapter is there to check) or the tasks it was graded on changed. [] when it matches."""
    disk = disk or _Disk()
    prov = row.get("provenance") or {}
    out = []
    if prov.get("model_hash"):
        mdir = disk.model_dir(row)
        if mdir is None:
            out.append("model missing")
        elif disk.dir_hash(mdir) != prov["model_hash"]:
            out.append("model changed")
    adapter = row.get("adapter")
    if adapter and prov.get("adapter_hash"):
        from jacrl.project import path_or

        apath = Path(adapter) if Path(adapter).is_absolute() else path_or(None, "root") / adapter
        now = disk.dir_hash(apath)
        if now is not None and now != prov["adapter_hash"]:
            out.append("adapter changed")
    ids = [t["id"] for t in row.get("per_task") or []]
    if ids and prov.get("data_hash"):
        tasks = disk.tasks()
        if not all(i in tasks for i in ids):
            out.append("tasks missing")
        elif data_hash([tasks[i] for i in ids]) != prov["data_hash"]:
            out.append("tasks changed")
    return out


def mark_stale(rows: list[dict]) -> list[dict]:
    """The rows, each with `stale` set to its reasons joined ("" when fresh)."""
    disk = _Disk()
    return [{**r, "stale": ", ".join(stale_reasons(r, disk))} for r in rows]


def frame(rows: list[dict]) -> pd.DataFrame:
    """One line per (model, rung, condition, kind), the last row winning; sorted model, rung order,
    condition order, kind."""
    latest: dict[tuple, dict] = {}
    for row in rows:
        c = cell_of(row)
        if c is not None:
            latest[c] = row
    recs = []
    for (model, rung, cond, kind), row in latest.items():
        n, p = int(row.get("tasks", 0)), int(row.get("pass1", 0))
        lo, hi = wilson(p, n) if n else (math.nan, math.nan)
        passk, k = _passk(row)
        recs.append({
            "model": model, "rung": rung, "condition": cond, "kind": kind, "tasks": n,
            "pass1": p, "pass1_pct": round(100 * p / n, 2) if n else math.nan,
            "ci_lo": round(100 * lo, 2), "ci_hi": round(100 * hi, 2), "k": k,
            "passk_pct": passk, "run_pct": row.get("run_pct"), "near_pct": row.get("near_pct"),
            "avg_osim": row.get("avg_osim"), "truncation_pct": row.get("truncation_pct"),
            "cell_key": row.get("cell_key", ""), "stale": row.get("stale", ""),
        })
    df = pd.DataFrame(recs, columns=COLUMNS)
    if df.empty:
        return df
    df["k"] = df["k"].astype("Int64")
    rung_rank = {r: i for i, r in enumerate(_order(set(df.rung), RUNGS))}
    cond_rank = {c: i for i, c in enumerate(_order(set(df.condition), COND_ORDER))}
    df = df.assign(_r=df.rung.map(rung_rank), _c=df.condition.map(cond_rank))
    return df.sort_values(["model", "_r", "_c", "kind"]).drop(columns=["_r", "_c"]) \
             .reset_index(drop=True)


def pivot(df: pd.DataFrame, value: str = "pass1_pct", kind: str = "gen") -> pd.DataFrame:
    """value of the `kind` rows: index (model, condition), columns rungs (ladder order)."""
    sub = df[df.kind == kind]
    if sub.empty:
        return pd.DataFrame()
    table = sub.pivot_table(index=["model", "condition"], columns="rung", values=value,
                            aggfunc="last", dropna=False)
    table = table.reindex(columns=_order(set(sub.rung), RUNGS))
    models = sorted(set(sub.model))
    conds = _order(set(sub.condition), COND_ORDER)
    idx = [(m, c) for m in models for c in conds if (m, c) in table.index]
    return table.reindex(pd.MultiIndex.from_tuples(idx, names=["model", "condition"]))


def fmt_cell(gen: dict | None, mem: dict | None) -> str:
    """`pass@1 [lo-hi] p@K pass@K m<mem>` from frame lines; `·` for what is missing."""
    if gen is None or not gen["tasks"]:
        head = "·"
    else:
        head = f"{gen['pass1_pct']:.1f} [{gen['ci_lo']:.0f}-{gen['ci_hi']:.0f}]"
        k = gen["k"]
        if k is not None and not pd.isna(k) and not math.isnan(gen["passk_pct"]):
            head += f" p@{int(k)} {gen['passk_pct']:.1f}"
    tail = f"m{mem['pass1_pct']:.0f}" if mem is not None and mem["tasks"] else "m·"
    return f"{head} {tail}"


def ladder_table(rows: list[dict]) -> pd.DataFrame:
    """The show pivot: rows (model, condition), columns rungs, cells as `fmt_cell` strings."""
    df = frame(rows)
    if df.empty:
        return pd.DataFrame()
    lines = {(r.model, r.rung, r.condition, r.kind): r._asdict() for r in df.itertuples()}
    models = sorted(set(df.model))
    conds = _order(set(df.condition), COND_ORDER)
    rungs = _order(set(df.rung), RUNGS)
    out = {}
    for m in models:
        for c in conds:
            if not any((m, r, c, k) in lines for r in rungs for k in KINDS):
                continue
            out[(m, c)] = {r: fmt_cell(lines.get((m, r, c, "gen")), lines.get((m, r, c, "mem")))
                           for r in rungs}
    table = pd.DataFrame.from_dict(out, orient="index", columns=rungs)
    table.index = pd.MultiIndex.from_tuples(table.index, names=["model", "condition"])
    return table


def mcnemar_vs_base(rows: list[dict]) -> pd.DataFrame:
    """Each condition against base on the same tasks (same model, rung, kind), paired by task id
    from the rows' per_task greedy results: `lost` = base right & cond wrong, `gained` = the
    reverse, `p` = exact two-sided McNemar."""
    latest: dict[tuple, dict] = {}
    for row in rows:
        c = cell_of(row)
        if c is not None and row.get("per_task"):
            latest[c] = row
    recs = []
    for (model, rung, cond, kind), row in latest.items():
        base = latest.get((model, rung, "base", kind))
        if cond == "base" or base is None:
            continue
        b = {t["id"]: bool(t["greedy_exact"]) for t in base["per_task"]}
        x = {t["id"]: bool(t["greedy_exact"]) for t in row["per_task"]}
        ids = sorted(set(b) & set(x))
        if not ids:
            continue
        m = mcnemar_exact([b[i] for i in ids], [x[i] for i in ids])
        recs.append({"model": model, "rung": rung, "condition": cond, "kind": kind, "n": len(ids),
                     "base_pass": sum(b[i] for i in ids), "cond_pass": sum(x[i] for i in ids),
                     "lost": m["b"], "gained": m["c"], "p": round(m["p"], 4)})
    cols = ["model", "rung", "condition", "kind", "n", "base_pass", "cond_pass", "lost", "gained",
            "p"]
    df = pd.DataFrame(recs, columns=cols)
    if df.empty:
        return df
    rr = {r: i for i, r in enumerate(_order(set(df.rung), RUNGS))}
    cr = {c: i for i, c in enumerate(_order(set(df.condition), COND_ORDER))}
    return df.assign(_k=df.kind.map({"gen": 0, "mem": 1}), _r=df.rung.map(rr),
                     _c=df.condition.map(cr)) \
             .sort_values(["model", "_k", "_r", "_c"]).drop(columns=["_k", "_r", "_c"]) \
             .reset_index(drop=True)


def show_text(rows: list[dict], include_stale: bool = False) -> str:
    """What `jacrl ladder show` prints: the pivot, the long table and McNemar vs base. Stale rows
    (see `stale_reasons`) are left out and counted, unless include_stale."""
    rows = mark_stale(rows)
    stale = [r for r in rows if r["stale"]]
    note = ""
    if stale:
        why = sorted({r["stale"] for r in stale})
        note = (f"{len(stale)} stale row(s) ({'; '.join(why)}) "
                + ("included, marked in the `stale` column" if include_stale else
                   "left out: made with a model, adapter or tasks that are no longer on disk "
                   "(--include-stale shows them)"))
        if not include_stale:
            rows = [r for r in rows if not r["stale"]]
    table = ladder_table(rows)
    if table.empty:
        return "no ladder rows" + (f"; {note}" if note else "")
    df = frame(rows)
    gen = df[df.kind == "gen"]
    n = sorted(set(gen.tasks)) if not gen.empty else []
    with pd.option_context("display.width", 200, "display.max_columns", 20,
                           "display.max_colwidth", 40):
        parts = [
            ("gen pass@1 % [95% Wilson CI]  p@K unbiased pass@K %  m<mem recall %>"
             f"  (holdout n = {', '.join(map(str, n)) or '·'})"),
            table.to_string(),
            "",
            ("read pass@k and the intervals: a rung differs from another only where the CIs do "
             "not overlap"),
        ]
        mc = mcnemar_vs_base(rows)
        if not mc.empty:
            parts += ["", ("paired exact McNemar vs base (same tasks; lost = base right, cond "
                           "wrong; gained = the reverse)"), mc.to_string(index=False)]
    if note:
        parts += ["", note]
    return "\n".join(parts)


# -------------------------------------------------------------------------------------------
# figures
# -------------------------------------------------------------------------------------------


def _pyplot():
    import matplotlib.pyplot as plt  # headless: matplotlib falls back to Agg by itself

    return plt


def plot_curves(rows: list[dict], value: str = "pass1_pct", band: bool = True):
    """Learning curves vs rung: one column per model, one row per kind (gen, mem), one line per
    condition, the Wilson band shaded. Returns the matplotlib Figure."""
    plt = _pyplot()
    df = frame(rows)
    models = sorted(set(df.model)) or ["(no rows)"]
    kinds = [k for k in KINDS if k in set(df.kind)] or ["gen"]
    fig, axes = plt.subplots(len(kinds), len(models), figsize=(5 * len(models), 3.2 * len(kinds)),
                             squeeze=False, sharey=True)
    rungs = _order(set(df.rung), RUNGS) if not df.empty else list(RUNGS)
    xpos = {r: i for i, r in enumerate(rungs)}
    conds_all = _order(set(df.condition), COND_ORDER) if not df.empty else []
    dodge = {c: (i - (len(conds_all) - 1) / 2) * 0.04 for i, c in enumerate(conds_all)}
    for i, kind in enumerate(kinds):
        for j, model in enumerate(models):
            ax = axes[i][j]
            sub = df[(df.kind == kind) & (df.model == model)]
            for cond in _order(set(sub.condition), COND_ORDER):
                line = sub[sub.condition == cond].sort_values("rung", key=lambda s: s.map(xpos))
                line = line[line[value].notna()]
                if line.empty:
                    continue
                x = [xpos[r] + dodge[cond] for r in line.rung]  # dodged: equal lines stay visible
                ax.plot(x, line[value], marker="o", label=cond)
                if band and value == "pass1_pct":
                    ax.fill_between(x, line.ci_lo, line.ci_hi, alpha=0.15)
            ax.set_xticks(range(len(rungs)), rungs)
            ax.set_ylim(-2, 102)
            ax.set_xlabel("rung (training tasks)")
            what = "pass@1 %" if value == "pass1_pct" else value
            ax.set_ylabel(f"{kind} {what}")
            ax.set_title(f"{model} — {'holdout' if kind == 'gen' else 'rung tasks (mem)'}")
            ax.grid(alpha=0.3)
            if ax.get_legend_handles_labels()[0]:
                ax.legend(fontsize=8)
    fig.suptitle("ladder: greedy pass@1 with 95% Wilson bands" if value == "pass1_pct"
                 else f"ladder: {value}")
    fig.tight_layout()
    return fig


def _training_records(metrics: str | os.PathLike) -> tuple[list[dict], Path]:
    path = Path(metrics)
    if path.is_dir():
        path = path / "metrics.jsonl"
    recs = [json.loads(x) for x in path.read_text().splitlines() if x.strip()] \
        if path.is_file() else []
    return recs, path


def _training_series(stage: str) -> list[tuple[str, str]]:
    if stage == "grpo":
        return [("reward_mean", "reward mean ± σ"), ("group_reward_std", "within-group σ"),
                ("kl", "KL"), ("truncated", "truncated share")]
    return [("train_loss", "train loss"), ("val_loss", "val loss")]


def _draw_training(axes, recs: list[dict], label: str = "") -> None:
    """One metrics.jsonl's curves on a row of axes (per iteration; GRPO's reward mean with its
    σ over the step's rollouts shaded)."""
    df = pd.DataFrame(recs)
    stage = recs[0].get("stage", "") if recs else ""
    for ax, (col, title) in zip(axes, _training_series(stage)):
        if not df.empty and col in df and df[col].notna().any():
            d = df[df[col].notna()]
            ax.plot(d["iteration"], d[col], marker=".")
            if col == "reward_mean" and "reward_std" in d and d["reward_std"].notna().all():
                ax.fill_between(d["iteration"], d[col] - d["reward_std"],
                                d[col] + d["reward_std"], alpha=0.2)
        ax.set_title(f"{label}: {title}" if label else title, fontsize=9)
        ax.set_xlabel("iteration")
        ax.grid(alpha=0.3)


def plot_training(metrics: str | os.PathLike, title: str = ""):
    """Training curves from an artifact's metrics.jsonl (or its directory): SFT train/val loss;
    GRPO reward mean (± σ), within-group σ, KL and truncated share. Returns the Figure."""
    plt = _pyplot()
    recs, path = _training_records(metrics)
    stage = recs[0].get("stage", "") if recs else ""
    series = _training_series(stage)
    fig, axes = plt.subplots(1, len(series), figsize=(3.6 * len(series), 2.8), squeeze=False)
    _draw_training(axes[0], recs)
    fig.suptitle(title or f"{stage or 'training'}: {path.parent.name}")
    fig.tight_layout()
    return fig


def plot_training_runs(runs: Sequence[tuple[str, str | os.PathLike]], title: str = ""):
    """Several training runs in one figure, one row per (label, metrics.jsonl or artifact dir):
    SFT rows show the losses, GRPO rows reward mean ± σ, within-group σ, KL, truncated share.
    Returns the Figure."""
    plt = _pyplot()
    loaded = [(label, _training_records(m)[0]) for label, m in runs]
    cols = max([len(_training_series(r[0].get("stage", "") if r else "")) for _, r in loaded]
               or [2])
    fig, axes = plt.subplots(max(1, len(loaded)), cols, figsize=(3.6 * cols, 2.6 * len(loaded)),
                             squeeze=False)
    for row, (label, recs) in zip(axes, loaded):
        n = len(_training_series(recs[0].get("stage", "") if recs else ""))
        _draw_training(row[:n], recs, label)
        for ax in row[n:]:
            ax.axis("off")
    fig.suptitle(title or "training curves")
    fig.tight_layout()
    return fig


def write_training_figure(runs: Sequence[tuple[str, str | os.PathLike]],
                          out_dir: str | os.PathLike | None = None,
                          name: str = "training.png", title: str = "") -> Path:
    """`plot_training_runs(runs)` saved as figures/<name> (the project's figures/ by default)."""
    from jacrl.project import path_or

    if not runs:
        raise ValueError("no training runs to plot")
    plt = _pyplot()
    out = path_or(out_dir, "figures")
    out.mkdir(parents=True, exist_ok=True)
    fig = plot_training_runs(runs, title)
    p = out / name
    fig.savefig(p, dpi=110)
    plt.close(fig)
    return p


def write_figures(rows: list[dict], out_dir: str | os.PathLike | None = None) -> list[Path]:
    """figures/ladder.png (pass@1 curves with Wilson bands) and figures/ladder_passk.png, in the
    project's figures/ by default. No ladder rows is an error (never blank figures)."""
    from jacrl.project import path_or

    if not any(cell_of(r) for r in rows):
        raise ValueError("no ladder rows to plot")
    plt = _pyplot()
    out = path_or(out_dir, "figures")
    out.mkdir(parents=True, exist_ok=True)
    paths = []
    for name, value in (("ladder.png", "pass1_pct"), ("ladder_passk.png", "passk_pct")):
        fig = plot_curves(rows, value)
        p = out / name
        fig.savefig(p, dpi=110)
        plt.close(fig)
        paths.append(p)
    return paths
