"""A ladder's rows as the markdown a doc shows (docs/real-model.md's generated regions): the show
pivot (`tables.ladder_table`) and a line per evaluation with what it cost, from the rows file and
the cell times beside it (`CELL_TIMES_FILE`, written by `jacrl.ladder.run`)."""

from __future__ import annotations

import os
from pathlib import Path

import pandas as pd

from jacrl import jsonl
from jacrl.conditions import CONDITIONS
from jacrl.project import CELL_TIMES_FILE, ROWS_FILE
from jacrl.report.compare import (
    comparison_table,
    graded_comparison_table,
    seed_comparisons,
)
from jacrl.report.families import family_seed_table
from jacrl.report.graded import signal_mark, signal_marks
from jacrl.report.rows import latest_rows, load_rows
from jacrl.report.seeds import (
    MEASURES,
    seed_groups,
    seed_summary,
    seed_table,
)
from jacrl.report.tables import graded_table, ladder_table
from jacrl.stages import STAGES


def _md(header: list[str], lines: list[list[str]]) -> str:
    out = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    out += ["| " + " | ".join(str(x) for x in line) + " |" for line in lines]
    return "\n".join(out) + "\n"


def pivot_markdown(rows: list[dict]) -> str:
    """The `jacrl ladder show` table: gen greedy pass@1 [Wilson 95 %] p@k, m<mem>/<sampled>."""
    t = ladder_table(rows)
    if t.empty:
        return "(no rows yet)\n"
    lines = [[m, c, *(t.loc[(m, c), r] for r in t.columns)] for m, c in t.index]
    return _md(["model", "condition", *(f"rung {r}" for r in t.columns)], lines)


def _times(path: Path) -> dict[str, dict]:
    return {d["cell_key"]: d for d in jsonl.read(path)} if path.is_file() else {}


def detail_markdown(rows: list[dict], times_file: str | os.PathLike) -> str:
    """A line per (rung, condition, kind): greedy passes with the Wilson interval, unbiased
    pass@k, run rates, truncation, the token budget, and the cell's wall / CPU seconds."""
    times = _times(Path(times_file))
    lines = []
    for row in latest_rows(rows).values():
        pk = row.get("pass_at_k") or {}
        k = max(pk, key=int) if pk else None
        t = times.get(row.get("cell_key", ""), {})
        lines.append(
            [
                row["rung"],
                row["condition"],
                row["kind"],
                f"{row['pass1']}/{row['tasks']} [{row['wilson_lo']:.0f}-{row['wilson_hi']:.0f}]",
                f"{pk[k]:.1f} (k={k})" if k else "·",
                f"{row['run_pct']:.0f}",
                f"{row['sample_run_pct']:.0f}" if row["n"] else "·",
                f"{row['truncation_pct']:.0f}",
                str(row.get("budget_tokens", "·")),
                f"{row['seconds']['total']:.0f}",
                f"{t['wall_s']:.0f} / {t['cpu_s']:.0f} (load {t['load'][0]:.1f}-{t['load'][1]:.1f})"
                if t
                else "·",
            ]
        )
    header = [
        "rung",
        "condition",
        "kind",
        "greedy pass [95 % CI]",
        "pass@k (unbiased, %)",
        "greedy ran %",
        "samples ran %",
        "truncated %",
        "budget (tokens)",
        "eval s",
        "cell wall / CPU s",
    ]
    return _md(header, lines)


def _frame_md(t: pd.DataFrame) -> str:
    """A printable table (seed tables, comparisons) as markdown; "(none)" when empty."""
    if t.empty:
        return "(none)\n"
    return _md(list(t.columns), [[_cell(v) for v in r] for r in t.itertuples(index=False)])


def _cell(v) -> str:
    return f"{v:.3f}" if isinstance(v, float) else str(v)


def graded_markdown(rows: list[dict]) -> str:
    """`ladder show`'s graded table (gen, greedy): compile %, run %, mean reward, intervals."""
    t = graded_table(rows)
    if t.empty:
        return "(no rows yet)\n"
    lines = [[m, c, *(t.loc[(m, c), r] for r in t.columns)] for m, c in t.index]
    return _md(["model", "condition", *(f"rung {r}" for r in t.columns)], lines)


def training_markdown(rows: list[dict]) -> str:
    """A line per cell with a reward-trained stage: its learning signal (`training_record`) —
    signal rate, steps with signal, the adapter's move, the rollouts' tiers — and its mark."""
    lines = []
    marks = signal_marks(rows)
    by_line = seed_groups(r for r in rows if r.get("kind") == "gen")
    for row in (r for by_seed in by_line.values() for r in by_seed.values()):  # a line per seed
        if "training" not in row and marks[id(row)]:  # made before the record: its adapter says
            stage = next(s for s in CONDITIONS[row["condition"]].stages if STAGES[s].calibrates)
            cells = [row["rung"], row["condition"], row.get("train_seed", 0), stage, "·", "·"]
            lines.append([*cells, "0 (its parent's weights)", "·", marks[id(row)]])
        for stage, rec in (row.get("training") or {}).items():
            if "signal_rate" not in rec:
                continue
            tiers = " ".join(f"{t} {n}" for t, n in (rec.get("tier_mix") or {}).items())
            lines.append(
                [
                    row["rung"],
                    row["condition"],
                    row.get("train_seed", 0),
                    stage,
                    f"{rec['signal_steps']}/{rec['steps']}",
                    f"{rec['signal_rate']:.3f}" if rec["signal_rate"] is not None else "·",
                    f"{rec['adapter_delta']:.4g}" if rec["adapter_delta"] is not None else "·",
                    tiers or "·",
                    signal_mark(row) or "updated",
                ]
            )
    if not lines:
        return "(no reward-trained cell with a signal record yet)\n"
    header = ["rung", "condition", "train seed", "stage", "steps with signal", "signal rate"]
    return _md(header + ["adapter move (L2)", "rollout tiers", "verdict"], lines)


def seeds_markdown(rows: list[dict]) -> str:
    """Across training seeds: each condition's mean with its seeds x tasks interval (when a cell
    has several seeds), then the paired comparisons (each condition against base and against
    the condition it continues, paired over seeds x tasks; with one seed, over tasks) on greedy
    pass@1, then on the graded measures of the holdout (gen) where the rows recorded them."""
    summary = seed_summary(rows)
    seeded = not summary.empty and bool((summary.seeds > 1).any())
    head = _frame_md(seed_table(summary)) + "\n" if seeded else "(one training seed per cell)\n\n"
    comparisons = seed_comparisons(rows, measures=MEASURES)
    out = head + _frame_md(comparison_table(comparisons))
    graded = graded_comparison_table(comparisons[comparisons.kind == "gen"])
    if graded.empty:
        return out
    note = (
        "\nThe same pairs on the holdout's graded measures (greedy; compile, run: % of tasks; "
        "reward: the mean tiered reward):\n\n"
    )
    return out + note + _frame_md(graded.drop(columns="kind"))


def families_markdown(rows: list[dict]) -> str:
    """Greedy passes per task family on the holdout (gen), a line per training seed."""
    t = family_seed_table(rows)
    return _frame_md(t.drop(columns="model")) if not t.empty else "(no per-family outcomes)\n"


def regions(results_dir: str | os.PathLike) -> dict[str, str]:
    """{suffix: markdown} of a results folder: "pivot", "detail", "graded", "training", "seeds"
    and "families"."""
    folder = Path(results_dir)
    rows = load_rows(folder / ROWS_FILE) if (folder / ROWS_FILE).is_file() else []
    return {
        "pivot": pivot_markdown(rows),
        "detail": detail_markdown(rows, folder / CELL_TIMES_FILE),
        "graded": graded_markdown(rows),
        "training": training_markdown(rows),
        "seeds": seeds_markdown(rows),
        "families": families_markdown(rows),
    }


def write_regions(
    doc: str | os.PathLike, name: str, results_dir: str | os.PathLike, *suffixes: str
) -> None:
    """Write regions NAME-<suffix> of `doc` from the results folder's rows: every suffix of
    `regions`, or only those given."""
    from jacrl.doc_regions import write_region

    for suffix, text in regions(results_dir).items():
        if not suffixes or suffix in suffixes:
            write_region(doc, f"{name}-{suffix}", text)


if __name__ == "__main__":  # python -m jacrl.report.markdown DOC NAME RESULTS_DIR [SUFFIX ...]
    import sys

    write_regions(*sys.argv[1:])
