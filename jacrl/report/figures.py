"""The report's figures: learning curves with Wilson error bars (the conditions side by side
within each rung), hole-fill vs conversion bars, the per-family breakdown (`families`), and
training curves from an artifact's metrics.jsonl (with GRPO's per-step timings when it has step
events). matplotlib is imported on first use. Every figure written to a file carries the
provenance of the rows it was drawn from (`stamp.save_figure`); the ladder's figures are written
as PNG, SVG and PDF."""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path

import pandas as pd

from jacrl.report.families import KIND_TITLES, family_table, plot_families
from jacrl.report.grpo import draw_timings
from jacrl.report.rows import _order, cell_of
from jacrl.report.stamp import rows_stamp, save_formats, source_stamp
from jacrl.report.tables import format_comparison, frame, labels
from jacrl.results import KINDS
from jacrl.tasks.splits import RUNGS


def _pyplot():
    import matplotlib.pyplot as plt  # headless: matplotlib falls back to Agg by itself

    return plt


MARKERS = "osD^vP*Xh<>p"  # one per condition label, with its colour: told apart without colour


def _styles(labels_: list[str]) -> dict[str, dict]:
    """Each condition label's look in every panel: colour and marker by condition, line by task
    format (hole-fill solid; paired hole-fill dash-dot, markers half filled; conversion dashed,
    markers hollow), so `sft/hole` and `sft/conversion` read as one condition in two formats."""
    conds = list(dict.fromkeys(lab.partition("/")[0] for lab in labels_))
    out = {}
    for lab in labels_:
        cond, _, fmt = lab.partition("/")
        i = conds.index(cond)
        out[lab] = {
            "color": f"C{i % 10}",
            "marker": MARKERS[i % len(MARKERS)],
            "linestyle": {"": "-", "hole": "-."}.get(fmt, "--"),
            "fillstyle": {"": "full", "hole": "left"}.get(fmt, "none"),
        }
    return out


def _offsets(n: int) -> list[float]:
    """x offsets within a rung for n condition labels: their intervals side by side, not on top
    of each other (at most 0.7 of the gap between two rungs)."""
    span = min(0.7, 0.13 * (n - 1))
    return [0.0] if n < 2 else [-span / 2 + span * i / (n - 1) for i in range(n)]


def _rung_ticks(ax, sub: pd.DataFrame, rungs: list[str]) -> None:
    """Each rung's tick says how many tasks its rows were graded on (what the interval width
    follows)."""

    def n_of(r):
        ns = sorted(set(sub[sub.rung == r].tasks))
        return "" if not ns else f"\nn={ns[0]}" if len(ns) == 1 else f"\nn={ns[0]}-{ns[-1]}"

    ax.set_xticks(range(len(rungs)), [f"{r}{n_of(r)}" for r in rungs])
    ax.set_xlim(-0.6, len(rungs) - 0.4)


# each value's interval columns in `tables.frame` (95 %: Wilson for a share, t for a mean)
INTERVALS = {
    "pass1_pct": ("ci_lo", "ci_hi"),
    "compile_pct": ("compile_lo", "compile_hi"),
    "run_pct": ("run_lo", "run_hi"),
    "reward_mean": ("reward_lo", "reward_hi"),
}
BARS = {"reward_mean": "t interval over tasks"}  # the others: Wilson intervals
WHAT = {
    "pass1_pct": "greedy pass@1 %",
    "passk_pct": "unbiased pass@k %",
    "compile_pct": "greedy answers that compile %",
    "run_pct": "greedy answers that run %",
    "reward_mean": "mean greedy reward",
}


def _draw_condition(
    ax, line: pd.DataFrame, x: list[float], value: str, style: dict, label: str, interval: bool
) -> None:
    """One condition's curve; with `interval` its intervals (`INTERVALS`) as error bars."""
    y = line[value].to_numpy(float)
    lo, hi = INTERVALS.get(value, ("ci_lo", "ci_hi"))
    yerr = [y - line[lo].to_numpy(float), line[hi].to_numpy(float) - y] if interval else None
    ax.errorbar(
        x,
        y,
        yerr=yerr,
        label=label,
        capsize=3,
        elinewidth=1.3,
        markersize=6,
        linewidth=1.1,
        markeredgewidth=0.8,
        **style,
    )


def _curve_panel(
    ax, sub: pd.DataFrame, conds: list[str], rungs: list[str], value: str, interval: bool
) -> None:
    xpos = {r: i for i, r in enumerate(rungs)}
    offsets = dict(zip(conds, _offsets(len(conds)), strict=True))
    styles = _styles(conds)
    for cond in conds:
        line = sub[(sub.condition == cond) & sub[value].notna()]
        if line.empty:
            continue
        line = line.sort_values("rung", key=lambda s: s.map(xpos))
        x = [xpos[r] + offsets[cond] for r in line.rung]  # dodged within the rung
        _draw_condition(ax, line, x, value, styles[cond], cond, interval)
    _rung_ticks(ax, sub, rungs)
    absent = [c for c in conds if sub[(sub.condition == c) & sub[value].notna()].empty]
    if absent:  # every condition accounted for: those without a value here are named
        ax.text(
            0.01,
            0.98,
            f"no value here: {', '.join(absent)}",
            transform=ax.transAxes,
            fontsize=7,
            va="top",
            color="0.35",
        )
    if value == "reward_mean":  # a mean reward in [0, 1]
        ax.set_ylim(-0.04, 1.04)
    else:
        ax.set_ylim(-4, 104)
        ax.set_yticks(range(0, 101, 20))
    ax.grid(alpha=0.3, axis="y")


def _figure_legend(fig, axes, order: list[str]) -> None:
    """One legend for every panel, below them all (never on the data), in `order`."""
    seen: dict = {}
    for ax in axes.flat:  # each label once, from whichever panel has it
        for h, name in zip(*ax.get_legend_handles_labels(), strict=True):
            seen.setdefault(name, h)
    names = [c for c in order if c in seen]
    if names:
        fig.legend(
            [seen[c] for c in names],
            names,
            loc="outside lower center",
            ncol=min(len(names), 4),
            title="condition",
            frameon=False,
            fontsize=9,
        )


def _temperatures(sub: pd.DataFrame, value: str) -> str:
    """The sampling temperature(s) of a panel's sampled values, for its title ("" for greedy)."""
    if value != "passk_pct" or "temperature" not in sub:  # every other value is greedy
        return ""
    ts = sorted({float(t) for t in sub.temperature.dropna()})
    return f" (T {', '.join(f'{t:g}' for t in ts)})" if ts else ""


def plot_curves(rows: list[dict], value: str = "pass1_pct", band: bool = True):
    """Learning curves vs rung: one column per model, one row per kind (gen, mem), one curve per
    condition label (`_styles`: colour and marker per condition, line per format) with, for
    pass@1 and `band`, its 95 % Wilson interval as error bars. Within a rung the conditions sit
    side by side (small x offsets), so equal values and overlapping intervals stay visible; one
    legend for the figure, outside the panels. Returns the matplotlib Figure."""
    plt = _pyplot()
    df = frame(rows)
    names, conds = labels(df) if not df.empty else ([], [])
    df = df.assign(condition=names)
    models = sorted(set(df.model)) or ["(no rows)"]
    kinds = [k for k in KINDS if k in set(df.kind)] or ["gen"]
    rungs = _order(set(df.rung), RUNGS) if not df.empty else list(RUNGS)
    fig, axes = plt.subplots(
        len(kinds),
        len(models),
        squeeze=False,
        sharey=True,
        figsize=(1.2 + 4.8 * len(models), 1.4 + 3.0 * len(kinds)),
        layout="constrained",
    )
    interval = band and value in INTERVALS
    what = WHAT.get(value, value)
    for i, kind in enumerate(kinds):
        for j, model in enumerate(models):
            ax = axes[i][j]
            _curve_panel(
                ax, df[(df.kind == kind) & (df.model == model)], conds, rungs, value, interval
            )
            ax.set_title(
                f"{model}: {KIND_TITLES.get(kind, kind)}"
                + _temperatures(df[(df.kind == kind) & (df.model == model)], value),
                fontsize=10,
            )
            ax.set_ylabel(f"{kind} {what}" if j == 0 else "")
            ax.set_xlabel("rung (training tasks); n = tasks graded" if i == len(kinds) - 1 else "")
    _figure_legend(fig, axes, conds)
    k = sorted({int(x) for x in df.k.dropna()}) if value == "passk_pct" and not df.empty else []
    fig.suptitle(
        f"ladder: {what}"
        + (f" (k = {', '.join(map(str, k))})" if k else "")
        + (
            f"\nbars: 95 % {BARS.get(value, 'Wilson interval')}"
            if interval
            else "\nno interval drawn"
        )
        + "; conditions side by side within each rung",
        fontsize=10,
    )
    return fig


def _training_records(metrics: str | os.PathLike) -> tuple[list[dict], Path]:
    path = Path(metrics)
    if path.is_dir():
        path = path / "metrics.jsonl"
    recs = (
        [json.loads(x) for x in path.read_text().splitlines() if x.strip()]
        if path.is_file()
        else []
    )
    return recs, path


def _training_series(recs: list[dict]) -> list[tuple[str, str]]:
    """A metrics file's panels: (column, title); a stage that logged rollout rewards (GRPO) has
    its reward, spread, KL and truncation panels, any other one panel of train and val loss."""
    if any("reward_mean" in r for r in recs):
        return [
            ("reward_mean", "reward mean ± σ"),
            ("group_reward_std", "within-group σ"),
            ("kl", "KL"),
            ("truncated", "truncated share"),
        ]
    return [("train_loss", "loss (every logged point)")]


EXTRA = {"train_loss": ("val_loss",)}  # drawn on the same panel, each with its own label


def _stage(recs: list[dict]) -> str:
    return recs[0].get("stage", "") if recs else ""


def _panels(recs: list[dict]) -> int:
    """Panels a metrics file fills: its stage's curves, + GRPO's per-step timings."""
    steps = any(r.get("event") == "step" for r in recs)
    return len(_training_series(recs)) + steps


def _draw_training(axes, recs: list[dict], label: str = "") -> None:
    """One metrics.jsonl's curves on a row of axes (per iteration, from its train and val
    reports; GRPO's reward mean with its σ over the step's rollouts shaded), then, when it has
    GRPO step events, the seconds per step (generation / reward / update, stacked)."""
    steps = [r for r in recs if r.get("event") == "step"]
    df = pd.DataFrame([r for r in recs if r.get("event") != "step"])
    series = _training_series(recs)
    for ax, (col, title) in zip(axes, series, strict=False):
        if not df.empty and col in df and "iteration" in df and df[col].notna().any():
            d = df[df[col].notna()]
            ax.plot(d["iteration"], d[col], marker=".", label=col.replace("_", " "))
            for more in (m for m in EXTRA.get(col, ()) if m in df and df[m].notna().any()):
                e = df[df[more].notna()]
                ax.plot(e["iteration"], e[more], marker="o", ls="--", label=more.replace("_", " "))
                ax.legend(fontsize=7, frameon=False)
            if col == "reward_mean" and "reward_std" in d and d["reward_std"].notna().all():
                ax.fill_between(
                    d["iteration"],
                    (d[col] - d["reward_std"]).clip(0, 1),
                    (d[col] + d["reward_std"]).clip(0, 1),
                    alpha=0.2,
                )  # rewards: 0..1
        ax.set_title(f"{label}: {title}" if label else title, fontsize=9)
        ax.set_xlabel("iteration")
        ax.grid(alpha=0.3)
    if steps and len(axes) > len(series):
        draw_timings(axes[len(series)], steps, label)


def plot_training(metrics: str | os.PathLike, title: str = ""):
    """Training curves from an artifact's metrics.jsonl (or its directory): SFT train/val loss;
    GRPO reward mean (± σ), within-group σ, KL, truncated share and, when the file has step
    events, the seconds per step. Returns the Figure."""
    plt = _pyplot()
    recs, path = _training_records(metrics)
    n = _panels(recs)
    fig, axes = plt.subplots(1, n, figsize=(3.6 * n, 2.8), squeeze=False)
    _draw_training(axes[0], recs)
    fig.suptitle(title or f"{_stage(recs) or 'training'}: {path.parent.name}")
    fig.tight_layout()
    return fig


def plot_training_runs(runs: Sequence[tuple[str, str | os.PathLike]], title: str = ""):
    """Several training runs in one figure, one row per (label, metrics.jsonl or artifact dir):
    SFT rows show the losses, GRPO rows reward mean ± σ, within-group σ, KL, truncated share and
    (with step events) the seconds per step. Returns the Figure."""
    plt = _pyplot()
    loaded = [(label, _training_records(m)[0]) for label, m in runs]
    cols = max([_panels(r) for _, r in loaded] or [1])
    fig = plt.figure(figsize=(3.6 * cols, 2.7 * max(1, len(loaded))), layout="constrained")
    # a row per run, as wide as the figure: each row has the panels its stage has, no blanks
    for sf, (label, recs) in zip(
        fig.subfigures(max(1, len(loaded)), 1, squeeze=False)[:, 0], loaded, strict=False
    ):
        _draw_training(sf.subplots(1, max(1, _panels(recs)), squeeze=False)[0], recs, label)
    fig.suptitle(title or "training curves")
    return fig


def write_training_figure(
    runs: Sequence[tuple[str, str | os.PathLike]],
    out_dir: str | os.PathLike | None = None,
    name: str = "training.png",
    title: str = "",
) -> Path:
    """`plot_training_runs(runs)` saved as figures/<name> (the project's figures/ by default) and,
    beside it, as .svg and .pdf, with each run's metrics file as a source of its provenance. The
    metrics live in git-ignored folders (results/cells/, artifacts/), so they are marked `local`:
    a clone has none, and a missing local source is not a stale figure (a changed one is)."""
    from jacrl.project import path_or

    if not runs:
        raise ValueError("no training runs to plot")
    plt = _pyplot()
    out = path_or(out_dir, "figures")
    out.mkdir(parents=True, exist_ok=True)
    files = [_training_records(m)[1] for _, m in runs]
    # stamped before drawing what they hold
    sources = [{**source_stamp(f), "local": True} for f in files if f.is_file()]
    fig = plot_training_runs(runs, title)
    p = save_formats(fig, out / name, sources, drawn_rows=sum(s["rows"] for s in sources))
    plt.close(fig)
    return p


def plot_formats(rows: list[dict]):
    """Hole-fill vs conversion (`format_comparison`): one panel per kind and model, a pair of bars
    per rung and condition (greedy pass@1 on the same ids, 95 % Wilson error bars), the exact
    McNemar p above each pair. Returns the Figure."""
    plt = _pyplot()
    fc = format_comparison(rows)
    models = sorted(set(fc.model)) or ["(no rows)"]
    kinds = [k for k in KINDS if k in set(fc.kind)] or ["gen"]
    width = max(6.0, 1.5 * max([len(fc[fc.kind == k]) for k in kinds] or [1]))
    fig, axes = plt.subplots(
        len(kinds),
        len(models),
        squeeze=False,
        sharey=True,
        figsize=(width * len(models), 3.2 * len(kinds)),
    )
    for i, kind in enumerate(kinds):
        for j, model in enumerate(models):
            ax, sub = axes[i][j], fc[(fc.kind == kind) & (fc.model == model)]
            sub = sub.reset_index(drop=True)
            for off, side, name in ((-0.2, "hole", "hole-fill"), (0.2, "conv", "conversion")):
                pct = sub[f"{side}_pct"]
                ax.bar(
                    sub.index + off,
                    pct,
                    width=0.4,
                    label=name,
                    capsize=3,
                    yerr=[pct - sub[f"{side}_lo"], sub[f"{side}_hi"] - pct],
                )
            for x, r in sub.iterrows():
                ax.annotate(f"p={r.p:.2g}", (x, 102), ha="center", va="bottom", fontsize=7)
            ax.set_xticks(
                sub.index,
                [f"r{r.rung} {r.condition} (n={r.n})" for r in sub.itertuples()],
                fontsize=7,
            )
            ax.set_ylim(0, 135)
            ax.set_yticks(range(0, 101, 20))
            ax.set_ylabel(f"{kind} pass@1 %")
            ax.set_title(f"{model} — {'holdout' if kind == 'gen' else 'rung tasks (mem)'}")
            ax.grid(alpha=0.3, axis="y")
            if ax.get_legend_handles_labels()[0]:
                ax.legend(fontsize=7, loc="upper center", ncol=2)
    fig.suptitle("hole-fill vs conversion, same task ids (exact McNemar p)")
    fig.tight_layout()
    return fig


def write_figures(
    rows: list[dict],
    out_dir: str | os.PathLike | None = None,
    source: str | os.PathLike | dict | None = None,
) -> list[Path]:
    """figures/ladder.png (pass@1 curves with Wilson error bars) and figures/ladder_passk.png, in
    the project's figures/ by default; ladder_compile/_run/_reward.png (the graded measures with
    their intervals) when the rows record them; figures/formats.png (`plot_formats`) when the
    rows hold a hole-fill vs conversion comparison; figures/ladder_families.png
    (`plot_families`) when they recorded task families. Returns the PNGs; each has an .svg and
    a .pdf beside it (`stamp.save_formats`). No ladder rows is an error (never blank figures).
    Each file carries the provenance of `source`, the rows file they come from (a path, stamped
    now, or `stamp.source_stamp` taken before the rows were read); without one, of the rows
    themselves (which no later check can compare with a file)."""
    from jacrl.project import path_or

    if not any(cell_of(r) for r in rows):
        raise ValueError("no ladder rows to plot")
    src = (
        source
        if isinstance(source, dict)
        else source_stamp(source)
        if source is not None
        else rows_stamp(rows)
    )
    plt = _pyplot()
    out = path_or(out_dir, "figures")
    out.mkdir(parents=True, exist_ok=True)
    figs = [
        ("ladder.png", lambda: plot_curves(rows, "pass1_pct")),
        ("ladder_passk.png", lambda: plot_curves(rows, "passk_pct")),
    ]
    if not frame(rows).reward_mean.isna().all():  # rows that record the graded measures
        figs += [  # how conditions rank where pass@1 sits at its floor
            (f"ladder_{name}.png", lambda v=value: plot_curves(rows, v))
            for name, value in (
                ("compile", "compile_pct"),
                ("run", "run_pct"),
                ("reward", "reward_mean"),
            )
        ]
    if not format_comparison(rows).empty:
        figs.append(("formats.png", lambda: plot_formats(rows)))
    if not family_table(rows).empty:
        figs.append(("ladder_families.png", lambda: plot_families(rows)))
    paths = []
    for name, draw in figs:
        fig = draw()
        paths.append(save_formats(fig, out / name, [src], drawn_rows=len(rows)))
        plt.close(fig)
    return paths
