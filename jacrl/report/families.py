"""The per-family breakdown: greedy passes per task family for each ladder line (model, rung,
condition label, kind), from the rows' per-task outcomes, pooled over the line's training seeds
(`family_table`), its figure, one heat map per model and kind (`plot_families`, written by
`write_figures` as figures/ladder_families.png), and a line per training seed
(`family_seed_table`: where seeds of one condition agree and where they part).

A task's family is what the row's evaluation recorded: its per-task `family` (the task's
`meta.family`, else the task id's prefix before the first `_`: `jacrl.tasks.record.family_of`), or,
for rows without per-task outcomes, their `by_family` counts. Rows that recorded neither are left
out (no figure when no row has them).
"""

from __future__ import annotations

import math

import pandas as pd

from jacrl.report.rows import (
    COND_ORDER,
    _order,
    _variant_rank,
    condition_label,
)
from jacrl.report.seeds import seed_groups
from jacrl.results import KINDS
from jacrl.tasks.splits import RUNGS

FAMILY_COLUMNS = ["model", "rung", "condition", "kind", "family", "passed", "tasks"]
ALL = "all"  # the column of a line's whole task set
KIND_TITLES = {"gen": "holdout tasks (gen)", "mem": "the rung's own tasks (mem)"}


def _family_counts(row: dict) -> dict[str, list[int]]:
    """{family: [greedy passes, tasks]} of one row, from the families its evaluation recorded
    ({} for a row that recorded none)."""
    tasks = row.get("per_task") or []
    if tasks and all(t.get("family") for t in tasks):
        out: dict[str, list[int]] = {}
        for t in tasks:
            c = out.setdefault(str(t["family"]), [0, 0])
            c[0] += bool(t.get("greedy_exact"))
            c[1] += 1
        return out
    return {f: [int(p), int(n)] for f, (p, n) in (row.get("by_family") or {}).items()}


def _pooled_counts(by_seed: dict[int, dict]) -> dict[str, list[int]]:
    """{family: [passes, tasks]} summed over a line's seeds (each seed's last row)."""
    out: dict[str, list[int]] = {}
    for row in by_seed.values():
        for fam, (p, n) in _family_counts(row).items():
            c = out.setdefault(fam, [0, 0])
            c[0], c[1] = c[0] + int(p), c[1] + int(n)
    return out


def family_table(rows: list[dict]) -> pd.DataFrame:
    """One line per (model, rung, condition label, kind, family): greedy `passed` of `tasks`,
    pooled over the line's training seeds (tasks x seeds, each seed's last row winning, as the
    graded table pools them); sorted model, kind, rung order, condition order, family. Empty when
    no row has per-task or per-family outcomes."""
    recs = [
        {
            "model": m,
            "rung": r,
            "condition": condition_label(c, fmt, paired),
            "kind": k,
            "family": fam,
            "passed": p,
            "tasks": n,
            "_c": c,
            "_v": _variant_rank(fmt, paired),
        }
        for (m, r, c, k, fmt, paired), by_seed in seed_groups(rows).items()
        for fam, (p, n) in sorted(_pooled_counts(by_seed).items())
    ]
    df = pd.DataFrame(recs, columns=FAMILY_COLUMNS + ["_c", "_v"])
    if df.empty:
        return df.drop(columns=["_c", "_v"])
    rr = {r: i for i, r in enumerate(_order(set(df.rung), RUNGS))}
    cr = {c: i for i, c in enumerate(_order(set(df._c), COND_ORDER))}
    df = df.assign(
        _k=df.kind.map({k: i for i, k in enumerate(KINDS)}), _r=df.rung.map(rr), _o=df._c.map(cr)
    )
    return (
        df.sort_values(["model", "_k", "_r", "_o", "_v", "family"])
        .drop(columns=["_c", "_v", "_k", "_r", "_o"])
        .reset_index(drop=True)
    )


def family_seed_table(rows: list[dict], kind: str = "gen") -> pd.DataFrame:
    """A line per (model, rung, condition label, training seed) of `kind`'s rows, a column per
    family and `all`: that seed's greedy passes/tasks; in `family_table`'s order, seeds
    ascending. Empty when no row of `kind` has per-task or per-family outcomes."""
    ft = family_table(rows)
    order = list(dict.fromkeys(zip(ft.model, ft.rung, ft.condition, strict=True)))
    fams = sorted(set(ft.family[ft.kind == kind])) if not ft.empty else []
    recs = []
    for (m, r, c, k, fmt, paired), by_seed in seed_groups(rows).items():
        if k != kind:
            continue
        for seed, row in by_seed.items():
            counts = _family_counts(row)
            if not counts:
                continue
            line = {
                "model": m,
                "rung": r,
                "condition": condition_label(c, fmt, paired),
                "seed": seed,
            }
            for fam in fams:
                p, n = counts.get(fam, (0, 0))
                line[fam] = f"{p}/{n}" if n else "·"
            line[ALL] = f"{sum(p for p, _ in counts.values())}/{sum(n for _, n in counts.values())}"
            recs.append(line)
    df = pd.DataFrame(recs, columns=["model", "rung", "condition", "seed", *fams, ALL])
    if df.empty:
        return df
    rank = {k: i for i, k in enumerate(order)}
    keys = zip(df.model, df.rung, df.condition, strict=True)
    df = df.assign(_o=[rank.get(k, len(rank)) for k in keys])
    return df.sort_values(["_o", "seed"], kind="stable").drop(columns="_o").reset_index(drop=True)


def _grid(sub: pd.DataFrame) -> tuple[list[str], list[str], dict]:
    """(line labels, families + `all`, {(line, family): (passed, tasks)}) of one panel."""
    lines = list(dict.fromkeys(f"r{r} {c}" for r, c in zip(sub.rung, sub.condition, strict=True)))
    fams = sorted(set(sub.family))
    cells = {(f"r{r.rung} {r.condition}", r.family): (r.passed, r.tasks) for r in sub.itertuples()}
    for line in lines:
        got = [cells[line, f] for f in fams if (line, f) in cells]
        cells[line, ALL] = (sum(p for p, _ in got), sum(n for _, n in got))
    return lines, fams + [ALL], cells


def _heat_panel(ax, sub: pd.DataFrame, cmap):
    """One model and kind: a line per (rung, condition), a column per family, each cell its
    passes/tasks on the colour of their share. Returns the image (for the colour bar)."""
    lines, fams, cells = _grid(sub)
    share = [
        [
            cells[ln, f][0] / cells[ln, f][1] if cells.get((ln, f), (0, 0))[1] else math.nan
            for f in fams
        ]
        for ln in lines
    ]
    im = ax.imshow(share, cmap=cmap, vmin=0, vmax=1, aspect="auto")
    for i, ln in enumerate(lines):
        for j, f in enumerate(fams):
            p, n = cells.get((ln, f), (0, 0))
            dark = n and p / n > 0.6  # white text on the dark end of the scale
            ax.text(
                j,
                i,
                f"{p}/{n}" if n else "·",
                ha="center",
                va="center",
                fontsize=8,
                color="white" if dark else "black",
                weight="bold" if f == ALL else None,
            )
    ax.set_xticks(range(len(fams)), fams, fontsize=8)
    ax.set_yticks(range(len(lines)), lines, fontsize=8)
    ax.axvline(len(fams) - 1.5, color="black", linewidth=1.2)  # the `all` column apart
    rungs = [ln.split(" ", 1)[0] for ln in lines]
    for i in range(1, len(lines)):
        if rungs[i] != rungs[i - 1]:  # a rule between rungs
            ax.axhline(i - 0.5, color="0.35", linewidth=1)
    ax.tick_params(length=0)
    return im


def plot_families(rows: list[dict]):
    """The per-family breakdown (`family_table`): a heat map per model (rows of panels) and kind
    (columns): a line per rung and condition label, a column per task family and one for all
    its tasks, each cell `passes/tasks` on the colour of greedy pass@1. Returns the Figure."""
    import matplotlib.pyplot as plt

    ft = family_table(rows)
    models = sorted(set(ft.model)) or ["(no rows)"]
    kinds = [k for k in KINDS if k in set(ft.kind)] or ["gen"]
    n_lines = [
        max(1, len(set(zip(ft[ft.model == m].rung, ft[ft.model == m].condition, strict=True))))
        for m in models
    ]  # each model's panels as tall as its lines need
    n_fams = [len(set(ft[ft.kind == k].family)) + 1 for k in kinds]
    height = 0.9 + sum(0.8 + 0.26 * n for n in n_lines)
    fig, axes = plt.subplots(
        len(models),
        len(kinds),
        squeeze=False,
        layout="constrained",
        figsize=(1.8 + 0.62 * sum(n_fams) + 1.6 * len(kinds), height),
        gridspec_kw={"width_ratios": n_fams, "height_ratios": [0.8 + 0.26 * n for n in n_lines]},
    )
    cmap = plt.get_cmap("Blues").with_extremes(bad="#eeeeee")
    im = None
    for i, model in enumerate(models):
        for j, kind in enumerate(kinds):
            sub = ft[(ft.model == model) & (ft.kind == kind)]
            if sub.empty:
                axes[i][j].axis("off")
                continue
            im = _heat_panel(axes[i][j], sub, cmap)
            axes[i][j].set_title(f"{model}: {KIND_TITLES.get(kind, kind)}", fontsize=10)
    if im is not None:
        fig.colorbar(
            im, ax=axes, shrink=min(0.6, 3.5 / height), label="greedy pass@1 (share of the tasks)"
        )
    fig.suptitle(
        "greedy passes / tasks per task family (family: the task id's prefix)", fontsize=10
    )
    return fig
