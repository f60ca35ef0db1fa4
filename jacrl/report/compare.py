"""Paired comparisons of cell groups over training seeds x task ids (`seed_comparisons`): b - a
in points, paired by train seed and task id, `jacrl.report.seeds`' two-way bootstrap over the
difference matrix giving the interval and `above0` (share of resamples above 0); a one-seed group
of an untrained condition (base), or one whose seed the other lacks, pairs its seed with each of
the other's (`broadcast`); a trained one's seed pairs with itself. Pairs as `mcnemar_vs_base`
(each condition vs base; each that continues the sft adapter vs sft) and `format_comparison`
(paired hole-fill vs conversion). On greedy pass@1 (`exact`) or a graded measure of the holdout
(`compile`, `run`, `reward`: `seeds.task_value`), the ones that still rank cells where pass@1
sits at 0."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from jacrl.conditions import CONDITIONS, alone, baseline
from jacrl.report.rows import condition_label, ranked
from jacrl.report.seeds import (
    GRADED,
    MEASURES,
    RESAMPLES,
    RNG_SEED,
    _pct,
    bootstrap_means,
    interval,
    outcomes,
    seed_groups,
)


def default_pairs() -> tuple[tuple[str, str], ...]:
    """Each condition against the baseline (base), and each that continues a shared artifact
    against the condition that trains it alone (sft_grpo against sft)."""
    base = baseline()
    return tuple(
        [(base, c) for c in CONDITIONS if c != base]
        + [(alone(cond.shares), c) for c, cond in CONDITIONS.items() if cond.shares]
    )


@dataclass(frozen=True)
class PairedStat:
    """b - a paired by train seed and task id (fractions, not percent)."""

    a_seeds: int
    b_seeds: int
    pairing: str  # "seed" (the train seeds both have) or "broadcast" (one seed against several)
    seeds: int  # seed pairs
    tasks: int  # task ids paired
    a_rate: float
    b_rate: float
    diff: float  # mean of b - a
    lo: float  # 95 % percentile interval of the bootstrap mean difference
    hi: float
    above0: float  # share of resamples whose mean difference is above 0


def paired_stat(
    a: Mapping[int, Mapping],
    b: Mapping[int, Mapping],
    resamples: int = RESAMPLES,
    rng_seed: int = RNG_SEED,
    measure: str = "exact",
) -> PairedStat | None:
    """b - a of two groups' rows ({train seed: row}) under `measure` (`task_value`; exact: greedy
    pass@1), paired by train seed and task id: on the
    seeds both have, or, when one group has a single seed and the other several, that seed
    against each of the other's (`broadcast`) where its row does not depend on a training seed
    (an untrained condition: base) or the other has not got its seed. A trained one-seed group
    whose seed the other has is paired on that seed alone: a control run at seed 0 is its seed-0
    parent's pair, not the parents' mean. None when nothing pairs (no shared seed or task id, or
    a row without per-task outcomes)."""
    if len(a) == 1 and len(b) > 1 and _broadcasts(a, b):
        pairing, seeds = "broadcast", list(b)
        a = {s: next(iter(a.values())) for s in seeds}
    elif len(b) == 1 and len(a) > 1 and _broadcasts(b, a):
        pairing, seeds = "broadcast", list(a)
        b = {s: next(iter(b.values())) for s in seeds}
    else:
        pairing, seeds = "seed", sorted(set(a) & set(b))
    if not seeds:
        return None
    na, nb = len({id(r) for r in a.values()}), len({id(r) for r in b.values()})
    both = {("a", s): a[s] for s in seeds} | {("b", s): b[s] for s in seeds}
    got = outcomes(both, measure)
    if got is None:
        return None
    _, x = got
    xa, xb = x[: len(seeds)], x[len(seeds) :]
    d = xb - xa
    means = bootstrap_means(d, resamples, rng_seed)
    sizes = (na, nb, pairing, len(seeds), x.shape[1])
    rates = (float(xa.mean()), float(xb.mean()), float(d.mean()))
    return PairedStat(*sizes, *rates, *interval(means), float(np.mean(means > 0)))


def _broadcasts(one: Mapping[int, Mapping], other: Mapping[int, Mapping]) -> bool:
    """Whether a one-seed group stands for every seed of `other` (see `paired_stat`)."""
    ((seed, row),) = one.items()
    name = str(row.get("condition", ""))
    untrained = name in CONDITIONS and not CONDITIONS[name].stages
    return untrained or seed not in other


COMPARE_COLUMNS = [
    "model",
    "rung",
    "kind",
    "measure",
    "vs",
    "a",
    "b",
    "a_seeds",
    "b_seeds",
    "pairing",
    "seeds",
    "n",
    "a_pct",
    "b_pct",
    "diff_pct",
    "lo",
    "hi",
    "above0",
]


def _rec(
    model, rung, kind, measure, vs, a_label, b_label, st: PairedStat, cond, fmt, paired
) -> dict:
    return {
        "model": model,
        "rung": rung,
        "kind": kind,
        "measure": measure,
        "vs": vs,
        "a": a_label,
        "b": b_label,
        "a_seeds": st.a_seeds,
        "b_seeds": st.b_seeds,
        "pairing": st.pairing,
        "seeds": st.seeds,
        "n": st.tasks,
        "a_pct": _pct(st.a_rate),
        "b_pct": _pct(st.b_rate),
        "diff_pct": _pct(st.diff),
        "lo": _pct(st.lo),
        "hi": _pct(st.hi),
        "above0": round(st.above0, 4),
        "condition": cond,
        "format": fmt,
        "paired": paired,
    }


def seed_comparisons(
    rows: Iterable[Mapping],
    pairs: Sequence[tuple[str, str]] | None = None,
    resamples: int = RESAMPLES,
    rng_seed: int = RNG_SEED,
    measures: Sequence[str] = ("exact",),
) -> pd.DataFrame:
    """Paired comparisons over seeds x tasks, b - a in percentage points (`diff_pct`, its 95 %
    interval `lo`-`hi`, `above0` the share of resamples above 0; for `reward` the mean reward x
    100), a line for each of `measures` (`task_value`; exact: greedy pass@1; a pair without what a
    measure needs has no line for it): `vs` `condition` for each
    (a, b) of `pairs` at the same model, rung, kind, format and paired (None: `default_pairs`);
    `vs` `format` for paired hole-fill (a) against conversion (b) of the same condition.
    `a_seeds`/`b_seeds` each side's seeds, `seeds` the seed pairs, `n` the paired task ids.
    Sorted model, rung, then b's condition order."""
    bad = [m for m in measures if m not in MEASURES]
    if bad:
        raise ValueError(f"unknown measure {', '.join(bad)} (measures: {', '.join(MEASURES)})")
    groups = seed_groups(rows)
    recs = []
    for (model, rung, cond, kind, fmt, paired), b in groups.items():
        sides = [  # (vs, a's label, a's group) for each a this group b is compared with
            (
                "condition",
                condition_label(a_cond, fmt, paired),
                (model, rung, a_cond, kind, fmt, paired),
            )
            for a_cond, b_cond in (default_pairs() if pairs is None else pairs)
            if b_cond == cond
        ]
        if fmt == "conversion":  # paired hole-fill of the same condition against it
            sides.append(
                (
                    "format",
                    condition_label(cond, "hole", True),
                    (model, rung, cond, kind, "hole", True),
                )
            )
        b_label = condition_label(cond, fmt, paired)
        for vs, a_label, a_key in sides:
            a = groups.get(a_key)
            for measure in measures if a is not None else ():
                st = paired_stat(a, b, resamples, rng_seed, measure)
                if st is not None:
                    recs.append(
                        _rec(
                            model, rung, kind, measure, vs, a_label, b_label, st, cond, fmt, paired
                        )
                    )
    df = pd.DataFrame(recs, columns=COMPARE_COLUMNS + ["condition", "format", "paired"])
    if df.empty:
        return df[COMPARE_COLUMNS]
    df = ranked(df).assign(
        _vs=df.vs.map({"condition": 0, "format": 1}).astype(int),
        _k=df.kind.map({"gen": 0, "mem": 1}),
        _m=df.measure.map({m: i for i, m in enumerate(MEASURES)}),
    )
    df = df.sort_values(["model", "_k", "_r", "_vs", "_c", "_v", "a", "_m"])
    return df[COMPARE_COLUMNS].reset_index(drop=True)


def comparison_table(comparisons: pd.DataFrame, min_seeds: int = 1) -> pd.DataFrame:
    """`seed_comparisons` for printing (those with a side of at least `min_seeds` seeds; greedy
    pass@1 only, `graded_comparison_table` prints the rest): each side's pass@1, the difference
    as `diff [lo, hi]` and `P(>0)`."""
    if comparisons.empty:
        return comparisons
    c = comparisons[comparisons[["a_seeds", "b_seeds"]].max(axis=1) >= min_seeds]
    c = c[c.measure == "exact"]
    return pd.DataFrame(
        {
            "model": c.model,
            "rung": c.rung,
            "kind": c.kind,
            "a": c.a,
            "b": c.b,
            "seeds": [f"{x}/{y}" for x, y in zip(c.a_seeds, c.b_seeds, strict=True)],
            "n": c.n,
            "a %": c.a_pct,
            "b %": c.b_pct,
            "b - a [95% CI]": [
                f"{d:+.1f} [{lo:+.1f}, {hi:+.1f}]"
                for d, lo, hi in zip(c.diff_pct, c.lo, c.hi, strict=True)
            ],
            "P(>0)": c.above0,
        }
    ).reset_index(drop=True)


def graded_comparison_table(comparisons: pd.DataFrame, min_seeds: int = 1) -> pd.DataFrame:
    """The graded lines of `seed_comparisons` (compile, run: % of tasks; reward: the mean tiered
    reward) for printing, those with a side of at least `min_seeds` seeds: each side's value, the
    difference `b - a [lo, hi]` (points; reward in its own units) and `P(>0)`."""
    if comparisons.empty:
        return comparisons
    c = comparisons[comparisons[["a_seeds", "b_seeds"]].max(axis=1) >= min_seeds]
    c = c[c.measure.isin(GRADED)]
    scale = [0.01 if m == "reward" else 1.0 for m in c.measure]
    digits = [3 if m == "reward" else 1 for m in c.measure]

    def fmt(v: float, k: float, d: int, sign: str = "") -> str:
        return f"{v * k:{sign}.{d}f}"

    return pd.DataFrame(
        {
            "model": c.model,
            "rung": c.rung,
            "kind": c.kind,
            "measure": c.measure,
            "a": c.a,
            "b": c.b,
            "seeds": [f"{x}/{y}" for x, y in zip(c.a_seeds, c.b_seeds, strict=True)],
            "n": c.n,
            "a value": [fmt(v, k, d) for v, k, d in zip(c.a_pct, scale, digits, strict=True)],
            "b value": [fmt(v, k, d) for v, k, d in zip(c.b_pct, scale, digits, strict=True)],
            "b - a [95% CI]": [
                f"{fmt(x, k, d, '+')} [{fmt(lo, k, d, '+')}, {fmt(hi, k, d, '+')}]"
                for x, lo, hi, k, d in zip(c.diff_pct, c.lo, c.hi, scale, digits, strict=True)
            ],
            "P(>0)": c.above0,
        }
    ).reset_index(drop=True)
