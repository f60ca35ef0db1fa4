"""The report's tables: one line per cell and kind (`frame`), the show pivot, McNemar vs base,
hole-fill vs conversion (`format_comparison`), and what `jacrl ladder show` prints."""

from __future__ import annotations

import math
from collections.abc import Sequence

import pandas as pd

from jacrl.conditions import baseline
from jacrl.config import DEFAULT_FORMULA
from jacrl.report.compare import (
    comparison_table,
    graded_comparison_table,
    seed_comparisons,
)
from jacrl.report.graded import NO_SIGNAL, NO_UPDATE, fmt_graded, graded, signal_marks
from jacrl.report.rows import (
    COND_ORDER,
    _order,
    _passk,
    _variant_rank,
    cell_of,
    condition_label,
    in_table_order,
    latest_rows,
    line_fields,
    variant_of,
)
from jacrl.report.seeds import (
    MEASURES,
    seed_lines,
    seed_summary,
    seed_table,
)
from jacrl.report.settings import settings_parts, where_rows
from jacrl.report.stale import mark_stale
from jacrl.results import KINDS
from jacrl.stats import mcnemar_exact, wilson
from jacrl.tasks.splits import RUNGS

COLUMNS = [
    "model",
    "rung",
    "condition",
    "format",
    "paired",
    "kind",
    "tasks",
    "pass1",
    "pass1_pct",
    "ci_lo",
    "ci_hi",
    "k",
    "passk_pct",
    "run_pct",
    "near_pct",
    "avg_osim",
    "truncation_pct",
    "cell_key",
    "stale",
    "sampled1_pct",
    "temperature",
    "compile_pct",
    "compile_lo",
    "compile_hi",
    "run_lo",
    "run_hi",
    "reward_mean",
    "reward_lo",
    "reward_hi",
    "signal",
]


def frame(rows: list[dict]) -> pd.DataFrame:
    """One line per (model, rung, condition, format, paired, kind), the last row winning; sorted
    model, rung order, condition order, format (hole, paired hole, conversion), kind."""
    recs = []
    marks = signal_marks(rows)
    for key, row in latest_rows(rows).items():
        n, p = int(row.get("tasks", 0)), int(row.get("pass1", 0))
        lo, hi = wilson(p, n) if n else (math.nan, math.nan)
        passk, k = _passk(row)
        recs.append(
            {
                **line_fields(key),
                "tasks": n,
                "pass1": p,
                "pass1_pct": round(100 * p / n, 2) if n else math.nan,
                "ci_lo": round(100 * lo, 2),
                "ci_hi": round(100 * hi, 2),
                "k": k,
                "passk_pct": passk,
                "run_pct": row.get("run_pct"),
                "near_pct": row.get("near_pct"),
                "avg_osim": row.get("avg_osim"),
                "truncation_pct": row.get("truncation_pct"),
                "cell_key": row.get("cell_key", ""),
                "stale": row.get("stale", ""),
                "sampled1_pct": (row.get("pass_at_k") or {}).get("1", math.nan),
                "temperature": row.get("temperature") if row.get("n") else math.nan,
                **graded(row),
                "signal": marks.get(id(row), ""),
            }
        )
    df = pd.DataFrame(recs, columns=COLUMNS)
    if df.empty:
        return df
    df["k"] = df["k"].astype("Int64")
    return in_table_order(df)


def labels(df: pd.DataFrame) -> tuple[list[str], list[str]]:
    """The frame lines' condition labels (`condition_label`) and every label once, in order:
    condition order, then hole-fill, paired hole-fill, conversion."""
    triples = list(zip(df.condition, df.format, df.paired, strict=True))
    cond_rank = {c: i for i, c in enumerate(_order(set(df.condition), COND_ORDER))}
    order = sorted(set(triples), key=lambda t: (cond_rank[t[0]], _variant_rank(t[1], t[2])))
    return [condition_label(*t) for t in triples], [condition_label(*t) for t in order]


def pivot(df: pd.DataFrame, value: str = "pass1_pct", kind: str = "gen") -> pd.DataFrame:
    """value of the `kind` rows: index (model, condition label), columns rungs (ladder order)."""
    sub = df[df.kind == kind]
    if sub.empty:
        return pd.DataFrame()
    names, conds = labels(sub)
    sub = sub.assign(condition=names)
    table = sub.pivot_table(
        index=["model", "condition"], columns="rung", values=value, aggfunc="last", dropna=False
    )
    table = table.reindex(columns=_order(set(sub.rung), RUNGS))
    models = sorted(set(sub.model))
    idx = [(m, c) for m in models for c in conds if (m, c) in table.index]
    return table.reindex(pd.MultiIndex.from_tuples(idx, names=["model", "condition"]))


def fmt_cell(gen: dict | None, mem: dict | None) -> str:
    """`pass@1 [lo-hi] p@K pass@K m<mem>[/<sampled mem>@T<t>][ (N seeds)]` from frame lines
    (means over seeds where a line has `seeds` > 1: `seeds.seed_lines`); `·` for what is
    missing."""
    if gen is None or not gen["tasks"]:
        head = "·"
    else:
        head = f"{gen['pass1_pct']:.1f} [{gen['ci_lo']:.0f}-{gen['ci_hi']:.0f}]"
        k = gen["k"]
        if k is not None and not pd.isna(k) and not math.isnan(gen["passk_pct"]):
            head += f" p@{int(k)} {gen['passk_pct']:.1f}"
    tail = f"m{mem['pass1_pct']:.0f}" if mem is not None and mem["tasks"] else "m·"
    if mem is not None and mem["tasks"] and not pd.isna(mem.get("sampled1_pct", math.nan)):
        tail += f"/{mem['sampled1_pct']:.0f}@T{mem['temperature']:g}"  # sampled at rollout T
    seeds = max((int(x.get("seeds", 1)) for x in (gen, mem) if x is not None), default=1)
    mark = next((x["signal"] for x in (gen, mem) if x is not None and x.get("signal")), "")
    return (
        f"{head} {tail}"
        + (f" ({seeds} seeds)" if seeds > 1 else "")
        + (f" [{mark}]" if mark else "")
    )


def _seed_pooled(rows: list[dict]) -> dict[tuple, dict]:
    """{line key: a row whose per_task pools the last row of every train seed of that line (and
    whose `runs` sums theirs), `seeds` their number}: graded measures over tasks x seeds."""
    by_seed: dict[tuple, dict[int, dict]] = {}
    for row in rows:
        c = cell_of(row)
        if c is not None:
            by_seed.setdefault((*c, *variant_of(row)), {})[row.get("train_seed") or 0] = row
    return {
        key: {
            "per_task": [t for r in seeds.values() for t in (r.get("per_task") or [])],
            "runs": sum(int(r.get("runs", 0)) for r in seeds.values()),
            "seeds": len(seeds),
        }
        for key, seeds in by_seed.items()
    }


def graded_table(rows: list[dict], kind: str = "gen") -> pd.DataFrame:
    """The graded measures of every (model, condition label) x rung for `kind` (`fmt_graded`):
    how a condition ranks where pass@1 is 0 everywhere. A line trained under several seeds pools
    them (its intervals over tasks x seeds) and says how many."""
    df = frame(rows)
    df = df[df.kind == kind] if not df.empty else df
    if df.empty:
        return pd.DataFrame()
    names, conds = labels(df)
    pooled = _seed_pooled(rows)
    lines = {}
    for r, n in zip(df.itertuples(), names, strict=True):
        line = r._asdict()
        seeded = pooled[(r.model, r.rung, r.condition, r.kind, r.format, r.paired)]
        if seeded["seeds"] > 1:
            line.update(graded(seeded), seeds=seeded["seeds"], tasks=len(seeded["per_task"]))
        lines[(r.model, r.rung, n)] = line
    rungs = _order(set(df.rung), RUNGS)
    out = {
        (m, c): {r: fmt_graded(lines.get((m, r, c))) for r in rungs}
        for m in sorted(set(df.model))
        for c in conds
        if any((m, r, c) in lines for r in rungs)
    }
    table = pd.DataFrame.from_dict(out, orient="index", columns=rungs)
    table.index = pd.MultiIndex.from_tuples(table.index, names=["model", "condition"])
    return table


def ladder_table(rows: list[dict]) -> pd.DataFrame:
    """The show pivot: rows (model, condition label), columns rungs, cells as `fmt_cell`
    strings; a cell trained under several train seeds shows their mean and across-seed interval
    (`seeds.seed_summary`) and says how many seeds."""
    df = frame(rows)
    if df.empty:
        return pd.DataFrame()
    names, conds = labels(df)
    lines = {
        (r.model, r.rung, name, r.kind): r._asdict()
        for r, name in zip(df.itertuples(), names, strict=True)
    }
    for key, seeded in seed_lines(seed_summary(rows)).items():
        if key in lines:
            lines[key] = {**lines[key], **seeded}
    models = sorted(set(df.model))
    rungs = _order(set(df.rung), RUNGS)
    out = {}
    for m in models:
        for c in conds:
            if not any((m, r, c, k) in lines for r in rungs for k in KINDS):
                continue
            out[(m, c)] = {
                r: fmt_cell(lines.get((m, r, c, "gen")), lines.get((m, r, c, "mem"))) for r in rungs
            }
    table = pd.DataFrame.from_dict(out, orient="index", columns=rungs)
    table.index = pd.MultiIndex.from_tuples(table.index, names=["model", "condition"])
    return table


def _greedy(row: dict) -> dict[str, bool]:
    """{task id: greedy exact} of a row's per_task results."""
    return {t["id"]: bool(t["greedy_exact"]) for t in row["per_task"]}


def _sorted(df: pd.DataFrame, cond: str = "condition") -> pd.DataFrame:
    """Sorted model, kind (gen, mem), rung order, then the order of the `cond` column's values
    (condition order; the hidden `_v` column, when there, breaks ties)."""
    if df.empty:
        return df.drop(columns=["_v"], errors="ignore")
    rr = {r: i for i, r in enumerate(_order(set(df.rung), RUNGS))}
    cr = {c: i for i, c in enumerate(_order(set(df[cond]), COND_ORDER))}
    df = df.assign(_k=df.kind.map({"gen": 0, "mem": 1}), _r=df.rung.map(rr), _c=df[cond].map(cr))
    by = ["model", "_k", "_r", "_c"] + (["_v"] if "_v" in df else [])
    return (
        df.sort_values(by)
        .drop(columns=["_k", "_r", "_c", "_v"], errors="ignore")
        .reset_index(drop=True)
    )


def mcnemar_vs_base(rows: list[dict]) -> pd.DataFrame:
    """Each condition against base on the same tasks (same model, rung, kind, task format),
    paired by task id from the rows' per_task greedy results: `lost` = base right & cond wrong,
    `gained` = the reverse, `p` = exact two-sided McNemar. `condition` is the label
    (`condition_label`)."""
    latest: dict[tuple, dict] = {}
    for row in rows:
        c = cell_of(row)
        if c is not None and row.get("per_task"):
            latest[(*c, *variant_of(row))] = row
    recs = []
    reference = baseline()
    for (model, rung, cond, kind, fmt, paired), row in latest.items():
        base = latest.get((model, rung, reference, kind, fmt, paired))
        if cond == reference or base is None:
            continue
        b, x = _greedy(base), _greedy(row)
        ids = sorted(set(b) & set(x))
        if not ids:
            continue
        m = mcnemar_exact([b[i] for i in ids], [x[i] for i in ids])
        recs.append(
            {
                "model": model,
                "rung": rung,
                "condition": condition_label(cond, fmt, paired),
                "kind": kind,
                "n": len(ids),
                "base_pass": sum(b[i] for i in ids),
                "cond_pass": sum(x[i] for i in ids),
                "lost": m["b"],
                "gained": m["c"],
                "p": round(m["p"], 4),
                "_c0": cond,
                "_v": _variant_rank(fmt, paired),
            }
        )
    cols = [
        "model",
        "rung",
        "condition",
        "kind",
        "n",
        "base_pass",
        "cond_pass",
        "lost",
        "gained",
        "p",
        "_c0",
        "_v",
    ]
    return _sorted(pd.DataFrame(recs, columns=cols), "_c0").drop(columns=["_c0"])


FORMAT_COLUMNS = [
    "model",
    "rung",
    "condition",
    "kind",
    "n",
    "same_ids",
    "hole_pass",
    "hole_pct",
    "hole_lo",
    "hole_hi",
    "conv_pass",
    "conv_pct",
    "conv_lo",
    "conv_hi",
    "hole_only",
    "conv_only",
    "p",
]


def format_comparison(rows: list[dict]) -> pd.DataFrame:
    """Hole-fill vs conversion per (model, rung, condition, kind): the last conversion row against
    the last paired hole-fill row (from a plan with both formats, which grades both on the same
    ids: `same_ids`), paired by task id on the ids both graded, from their per_task greedy
    results. `n` paired tasks; each side's greedy passes, pass@1 % and 95 % Wilson interval over
    them; `hole_only` = hole-fill right & conversion wrong, `conv_only` = the reverse; `p` = exact
    two-sided McNemar. Unpaired hole-fill rows are not compared: their sft cells trained on other
    tasks."""
    latest: dict[tuple, dict] = {}
    for row in rows:
        c = cell_of(row)
        fmt, paired = variant_of(row)
        if c is not None and row.get("per_task") and paired:
            latest[(*c, fmt)] = row
    recs = []
    for (model, rung, cond, kind, fmt), conv in latest.items():
        hole = latest.get((model, rung, cond, kind, "hole"))
        if fmt != "conversion" or hole is None:
            continue
        h, x = _greedy(hole), _greedy(conv)
        ids = sorted(set(h) & set(x))
        if not ids:
            continue
        rec = {
            "model": model,
            "rung": rung,
            "condition": cond,
            "kind": kind,
            "n": len(ids),
            "same_ids": set(h) == set(x),
        }
        for side, d in (("hole", h), ("conv", x)):
            passed = sum(d[i] for i in ids)
            lo, hi = wilson(passed, len(ids))
            rec.update(
                {
                    f"{side}_pass": passed,
                    f"{side}_pct": round(100 * passed / len(ids), 2),
                    f"{side}_lo": round(100 * lo, 2),
                    f"{side}_hi": round(100 * hi, 2),
                }
            )
        m = mcnemar_exact([h[i] for i in ids], [x[i] for i in ids])
        rec.update(hole_only=m["b"], conv_only=m["c"], p=round(m["p"], 4))
        recs.append(rec)
    return _sorted(pd.DataFrame(recs, columns=FORMAT_COLUMNS))


def format_table(comparison: pd.DataFrame) -> pd.DataFrame:
    """`format_comparison` for printing: each side as `pass@1 [lo-hi]`."""
    if comparison.empty:
        return comparison
    ci = {
        side: [
            f"{r[f'{side}_pct']:.1f} [{r[f'{side}_lo']:.0f}-{r[f'{side}_hi']:.0f}]"
            for _, r in comparison.iterrows()
        ]
        for side in ("hole", "conv")
    }
    return comparison.assign(hole=ci["hole"], conversion=ci["conv"])[
        [
            "model",
            "rung",
            "condition",
            "kind",
            "n",
            "hole",
            "conversion",
            "hole_only",
            "conv_only",
            "p",
        ]
    ]


def _fresh_rows(rows: list[dict], include_stale: bool) -> tuple[list[dict], str]:
    """(the rows `show_text` shows, what it says about the others): stale rows (`mark_stale`)
    left out unless include_stale, and rows whose adapter is a rebuild of the same key."""
    stale = [r for r in rows if r["stale"]]
    rebuilt = [r for r in rows if r["rebuilt"] and not r["stale"]]
    note = (
        f"{len(rebuilt)} row(s) kept whose adapter on disk is a rebuild of the same key "
        f"({'; '.join(sorted({r['rebuilt'] for r in rebuilt}))}); "
        if rebuilt
        else ""
    )
    if stale:
        why = sorted({r["stale"] for r in stale})
        note += f"{len(stale)} stale row(s) ({'; '.join(why)}) " + (
            "included, marked in the `stale` column"
            if include_stale
            else "left out: made with a model, adapter or tasks that are no longer on disk "
            "(--include-stale shows them)"
        )
        if not include_stale:
            rows = [r for r in rows if not r["stale"]]
    return rows, note


def _seed_parts(rows: list[dict], summary: pd.DataFrame) -> list[str]:
    """`show_text`'s lines about cells of several train seeds: each seed's value, then the
    paired comparisons over seeds x task ids on pass@1 and on gen's graded measures."""
    parts = [
        "",
        "across training seeds: mean greedy pass@1 % [95% seeds x tasks "
        "bootstrap CI], each seed's value (train seed: %), their sd",
        seed_table(summary, min_seeds=2).to_string(index=False),
    ]
    comparisons = seed_comparisons(rows, measures=MEASURES)
    ct = comparison_table(comparisons, min_seeds=2)
    if not ct.empty:
        parts += [
            "",
            "paired over train seeds x task ids: b - a in points [95% "
            "bootstrap CI], P(>0) = share of resamples above 0 (seeds a/b: a "
            "single seed is paired with each of the other's)",
            ct.to_string(index=False),
        ]
    gt = graded_comparison_table(comparisons[comparisons.kind == "gen"], min_seeds=2)
    if not gt.empty:
        parts += [
            "",
            "the same pairs on gen's graded measures (greedy; compile, run: % of tasks, "
            "b - a in points; reward: the mean tiered reward)",
            gt.drop(columns="kind").to_string(index=False),
        ]
    return parts


def show_text(rows: list[dict], include_stale: bool = False, where: Sequence[str] = ()) -> str:
    """What `jacrl ladder show` prints: the pivot, McNemar vs base and, when there are rows of
    both formats, hole-fill vs conversion (`format_comparison`); when a cell has rows of several
    train seeds, each seed's value with the across-seed interval (`seeds.seed_table`) and the
    paired comparisons over seeds x tasks (`compare.comparison_table`). Stale rows (see
    `stale_reasons`) are left out and counted, unless include_stale. `where` (KEY=VALUE): only
    the rows made with those settings; rows of a cell made with other settings are flagged."""
    total = len(rows)
    rows, note = _fresh_rows(mark_stale(where_rows(rows, where)), include_stale)
    table = ladder_table(rows)
    if table.empty:
        return "no ladder rows" + (f"; {note}" if note else "")
    df = frame(rows)
    gen = df[df.kind == "gen"]
    n = sorted(set(gen.tasks)) if not gen.empty else []
    summary = seed_summary(rows)
    seeded = not summary.empty and bool((summary.seeds > 1).any())
    with pd.option_context(
        "display.width", 200, "display.max_columns", 20, "display.max_colwidth", 40
    ):
        parts = [
            (
                "gen pass@1 % [95% Wilson CI]  p@K unbiased pass@K %  m<mem recall %, greedy"
                "[/sampled pass@1 at the rollout temperature T]>"
                f"  (holdout n = {', '.join(map(str, n)) or '·'})"
            ),
            (
                "(N seeds): the mean over N training seeds, its CI a seeds x tasks bootstrap (each "
                "seed's value below); a cell without it: 1 seed"
                if seeded
                else "1 training seed behind every number"
            ),
            table.to_string(),
            "",
            (
                "read pass@k and the intervals: a rung differs from another only where the CIs do "
                "not overlap"
            ),
            "",
            (
                "gen graded, greedy: c = compiles %, r = runs % [95% Wilson CI], R = mean reward "
                f"[95% t interval over tasks] ({DEFAULT_FORMULA}; R· = a row made before it was "
                "recorded)"
            ),
            graded_table(rows).to_string(),
        ]
        if (df.signal != "").any():
            parts += [
                "",
                f"[{NO_SIGNAL}]: a GRPO stage none of whose groups' rewards differed on any step; "
                f"[{NO_UPDATE}]: its adapter did not move (learning rate 0, a control). Such a "
                "row re-evaluates its parent: not a result of the method",
            ]
        mc = mcnemar_vs_base(rows)
        if not mc.empty:
            parts += [
                "",
                (
                    "paired exact McNemar vs base (same tasks; lost = base right, cond "
                    "wrong; gained = the reverse)"
                )
                + ("; one run per cell: its last row, one train seed" if seeded else ""),
                mc.to_string(index=False),
            ]
        fc = format_table(format_comparison(rows))
        if not fc.empty:
            parts += [
                "",
                "hole-fill vs conversion on the same task ids: greedy pass@1 % [95% Wilson CI]",
                "(hole_only = hole-fill right, conversion wrong; conv_only = "
                "the reverse; p = exact McNemar)",
                fc.to_string(index=False),
            ]
        if seeded:
            parts += _seed_parts(rows, summary)
    parts += settings_parts(rows, where, total)
    if note:
        parts += ["", note]
    return "\n".join(parts)
