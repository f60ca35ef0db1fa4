"""What a GRPO run did, step by step, read from its artifact: rollouts.jsonl (one line per
training rollout: step, group, task_id, completion, body, tier, reason, reward, advantage,
truncated, tokens, discarded) and the `step` events of metrics.jsonl (one per step: generation_s,
reward_s, update_s, reward_mean, exact, rollouts, groups_skipped, truncated, draws). Every function
takes the artifact's directory or the file itself; a run without the file gives empty tables and
says so in its figure.

    tier_table     step x tier counts, rollouts, mean reward, exact share
    plot_tiers     the share of each tier per step (stacked) and the mean reward line
    last_groups    the last K steps' rollouts: task, tier, reward, advantage, the body's first lines
    step_timings   seconds per step: generation, reward, update, total
    plot_timings   those as stacked bars (`draw_timings` draws them on an axes of another figure)
"""

from __future__ import annotations

import os
from pathlib import Path

import pandas as pd

from jacrl import jsonl

TIERS = ("exact", "runs", "compiles", "none", "empty")  # best first, as `jacrl.ruler.reward` grades
TIER_COLORS = {
    "exact": "tab:green",
    "runs": "tab:blue",
    "compiles": "tab:orange",
    "none": "tab:red",
    "empty": "tab:gray",
}
TIMINGS = ("generation_s", "reward_s", "update_s")


def _jsonl(path: Path) -> list[dict]:
    """The records of a run's file ([] when missing; a torn last line, as a live run leaves, is
    skipped)."""
    return jsonl.read(path) if path.is_file() else []


def _file(art: str | os.PathLike, name: str) -> Path:
    p = Path(art)
    return p / name if p.is_dir() else p


def rollouts(art: str | os.PathLike, discarded: bool = False) -> list[dict]:
    """The training rollouts of a GRPO artifact (its rollouts.jsonl, or that file): those the
    updates trained on, plus, with `discarded`, those dynamic sampling drew and passed over."""
    rows = _jsonl(_file(art, "rollouts.jsonl"))
    return rows if discarded else [r for r in rows if not r.get("discarded")]


def step_events(metrics: str | os.PathLike) -> list[dict]:
    """The per-step records (`event: step`) of an artifact's metrics.jsonl (or that file)."""
    return [r for r in _jsonl(_file(metrics, "metrics.jsonl")) if r.get("event") == "step"]


def _tiers(seen) -> list[str]:
    return [*TIERS, *sorted(set(seen) - set(TIERS))]


def tier_table(art: str | os.PathLike) -> pd.DataFrame:
    """Per step (the index): rollouts in each tier (columns in TIERS order, then any other),
    `rollouts`, `reward_mean` and `exact_share` (rounded to 4 places)."""
    df = pd.DataFrame(rollouts(art))
    if df.empty:
        return pd.DataFrame(
            columns=[*TIERS, "rollouts", "reward_mean", "exact_share"],
            index=pd.Index([], name="step"),
        )
    counts = pd.crosstab(df["step"], df["tier"]).reindex(columns=_tiers(df["tier"]), fill_value=0)
    counts.columns.name = None
    out = counts.assign(
        rollouts=counts.sum(axis=1), reward_mean=df.groupby("step")["reward"].mean().round(4)
    )
    return out.assign(exact_share=(out["exact"] / out["rollouts"]).round(4))


def _pyplot():
    import matplotlib.pyplot as plt  # headless: matplotlib falls back to Agg by itself

    return plt


def _steps_axis(ax) -> None:
    from matplotlib.ticker import MaxNLocator

    ax.set_xlabel("GRPO step")
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))


def plot_tiers(art: str | os.PathLike, title: str = ""):
    """One panel: the share of each tier among a step's rollouts (stacked bars, best tier at the
    bottom) and the step's mean reward (black line, same 0-1 scale). Returns the Figure."""
    plt = _pyplot()
    table = tier_table(art)
    fig, ax = plt.subplots(figsize=(7, 3.2))
    steps = list(table.index)
    bottom = pd.Series(0.0, index=table.index)
    for tier in [c for c in table.columns if c not in ("rollouts", "reward_mean", "exact_share")]:
        share = (table[tier] / table["rollouts"]).astype(float)
        ax.bar(steps, share, bottom=bottom, label=tier, color=TIER_COLORS.get(tier), width=0.8)
        bottom = bottom + share
    ax.plot(
        steps, table["reward_mean"].astype(float), color="black", marker="o", label="mean reward"
    )
    ax.set_ylim(0, 1.05)
    _steps_axis(ax)
    ax.set_ylabel("share of rollouts · mean reward")
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    ax.grid(alpha=0.3, axis="y")
    ax.set_title(title or ("reward by tier per step" if steps else "no rollouts.jsonl"))
    fig.tight_layout()
    return fig


def _head(body, lines: int) -> str:
    """The first `lines` non-blank lines of a body, joined by ' ⏎ ' ('' for no body)."""
    kept = [ln.rstrip() for ln in str(body or "").splitlines() if ln.strip()][:lines]
    return " ⏎ ".join(kept)


def last_groups(art: str | os.PathLike, k: int = 2, lines: int = 2) -> pd.DataFrame:
    """The rollouts of the last `k` steps, sorted by step and group: step, group, task_id, tier,
    reward, advantage, truncated, tokens and `body`, the extracted body's first `lines`
    non-blank lines."""
    cols = [
        "step",
        "group",
        "task_id",
        "tier",
        "reward",
        "advantage",
        "truncated",
        "tokens",
        "body",
    ]
    df = pd.DataFrame(rollouts(art))
    if df.empty:
        return pd.DataFrame(columns=cols)
    last = sorted(set(df["step"]))[-k:] if k > 0 else []
    df = df[df["step"].isin(last)].assign(body=lambda d: [_head(b, lines) for b in d["body"]])
    return (
        df.reindex(columns=cols)
        .sort_values(["step", "group"], kind="stable")
        .reset_index(drop=True)
    )


def step_timings(metrics: str | os.PathLike) -> pd.DataFrame:
    """Seconds per GRPO step (the index): generation_s, reward_s, update_s and total_s."""
    steps = step_events(metrics)
    df = pd.DataFrame(steps, columns=["step", *TIMINGS]).set_index("step")
    return df.assign(total_s=df[list(TIMINGS)].sum(axis=1).round(4))


def draw_timings(ax, steps: list[dict], label: str = "") -> None:
    """Stacked bars of each step's generation, reward and update seconds on `ax`."""
    df = pd.DataFrame(steps, columns=["step", *TIMINGS]).fillna(0.0)
    bottom = pd.Series(0.0, index=df.index)
    for col in TIMINGS:
        ax.bar(df["step"], df[col], bottom=bottom, label=col.removesuffix("_s"), width=0.8)
        bottom = bottom + df[col]
    what = "seconds per step"
    ax.set_title(f"{label}: {what}" if label else what, fontsize=9)
    _steps_axis(ax)
    ax.grid(alpha=0.3, axis="y")
    if steps:
        ax.set_ylim(0, 1.3 * float(bottom.max() or 1))  # headroom: the legend never covers a bar
        ax.legend(fontsize=7, ncol=3, loc="upper center", frameon=False)


def plot_timings(metrics: str | os.PathLike, title: str = ""):
    """Per-step timings of a GRPO run (generation / reward / update seconds, stacked). Returns
    the Figure."""
    plt = _pyplot()
    steps = step_events(metrics)
    fig, ax = plt.subplots(figsize=(6, 3))
    draw_timings(ax, steps)
    ax.set_ylabel("seconds")
    if title or not steps:
        ax.set_title(title or "no step events in metrics.jsonl")
    fig.tight_layout()
    return fig
