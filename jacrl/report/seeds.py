"""Aggregation over training seeds. A cell trained once per seed (`train_seed`; 0 when absent)
gives replicate rows of one *cell group* (model, rung, condition, format, paired, kind); this
module reports the group's mean greedy pass@1 over seeds, each seed's value and an interval that
includes the between-seed variance, and compares groups paired by seed and task id.

The interval: a two-way bootstrap of the seeds x tasks matrix of greedy outcomes. Each resample
draws seeds with replacement as units (a seed is one trained model: its luck is shared by every
task) and, independently, tasks as units (the holdout is a sample too); the statistic is the
resampled mean, the interval its 2.5/97.5 percentiles, widened where needed to the Wilson
interval of the mean over the tasks (a bootstrap collapses at 0 and 1: 0/6 on every seed is
not [0, 0]). This is Owen's pigeonhole bootstrap for
crossed factors (Ann. Appl. Stat. 2007, mildly conservative). rliable (Agarwal et al. 2021)
resamples runs within each task and keeps tasks fixed; drawing seeds per task would average a
seed's shared luck away. With 3 seeds the interval is rough: it is what the seeds can say.

Seed and task draws come from two streams of one fixed seed (`RNG_SEED`): the report is
deterministic, and identical seeds give exactly one seed's task-only bootstrap. One seed keeps
the Wilson interval of its counts (as `frame`) and says `1 seed`. Replicates are paired on the
task ids every seed graded (`same_ids`); a rerun's last row wins; several seeds without per-task
outcomes give no interval (NaN).

Paired comparisons (`seed_comparisons`): b - a in points, paired by train seed and task id, the
same bootstrap over the difference matrix giving the interval and `above0` (share of resamples
above 0); a one-seed group of an untrained condition (base), or one whose seed the other lacks,
pairs its seed with each of the other's (`broadcast`); a trained one's seed pairs with itself.
Pairs as `mcnemar_vs_base` (each condition vs base; each that continues the sft adapter vs sft) and
`format_comparison` (paired hole-fill vs conversion).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from jacrl.conditions import CONDITIONS, alone, baseline
from jacrl.report.rows import (
    COND_ORDER,
    _order,
    _variant_rank,
    cell_of,
    condition_label,
    in_table_order,
    line_fields,
    variant_of,
)
from jacrl.samples import COMPILED, TIERS
from jacrl.stats import wilson
from jacrl.tasks.splits import RUNGS

RESAMPLES = 2000  # bootstrap resamples
RNG_SEED = 0  # the bootstrap's fixed seed: the report is deterministic
BOOTSTRAP = "seeds x tasks bootstrap"
WILSON = "wilson (1 seed)"
NO_OUTCOMES = "none (no per-task outcomes)"
RAN = TIERS[:2]  # the greedy tiers whose program ran to a clean exit (right output or not)
# what a task's greedy answer scores under each measure the comparisons can pair on: where
# pass@1 sits at its floor, the graded ones (compiles, runs, mean tiered reward) still rank
MEASURES = ("exact", "compile", "run", "reward")
GRADED = MEASURES[1:]


def task_value(task: Mapping, measure: str = "exact") -> float | None:
    """A task's greedy outcome under `measure`: 1/0 for exact, compile and run, the tiered reward
    for reward; None when the row did not record what it needs (rows made before the tier or
    the reward was kept)."""
    if measure == "exact":
        return float(bool(task["greedy_exact"]))
    if measure == "reward":
        r = task.get("greedy_reward")
        return None if r is None else float(r)
    tier = task.get("greedy_tier")
    if measure not in ("compile", "run"):
        raise ValueError(f"unknown measure {measure!r} (measures: {', '.join(MEASURES)})")
    return None if tier is None else float(tier in (COMPILED if measure == "compile" else RAN))


def default_pairs() -> tuple[tuple[str, str], ...]:
    """Each condition against the baseline (base), and each that continues a shared artifact
    against the condition that trains it alone (sft_grpo against sft)."""
    base = baseline()
    return tuple(
        [(base, c) for c in CONDITIONS if c != base]
        + [(alone(cond.shares), c) for c, cond in CONDITIONS.items() if cond.shares]
    )


def train_seed(row: Mapping) -> int:
    """A row's training seed: its `train_seed` field, 0 for rows without one."""
    s = row.get("train_seed")
    return 0 if s is None else int(s)


def seed_groups(rows: Iterable[Mapping]) -> dict[tuple, dict[int, Mapping]]:
    """{(model, rung, condition, kind, format, paired): {train seed: row}} in train seed order;
    the last row of a group and seed wins."""
    out: dict[tuple, dict[int, Mapping]] = {}
    for row in rows:
        c = cell_of(dict(row))
        if c is not None:
            out.setdefault((*c, *variant_of(dict(row))), {})[train_seed(row)] = row
    return {k: dict(sorted(v.items())) for k, v in out.items()}


# -------------------------------------------------------------------------------------------
# the bootstrap
# -------------------------------------------------------------------------------------------


def _draw_counts(rng: np.random.Generator, n: int, resamples: int) -> np.ndarray:
    """(resamples, n) counts of n draws with replacement from n units."""
    return rng.multinomial(n, np.full(n, 1.0 / n), size=resamples)


def bootstrap_means(
    x: np.ndarray, resamples: int = RESAMPLES, rng_seed: int = RNG_SEED
) -> np.ndarray:
    """The two-way bootstrap of a seeds x tasks matrix: `resamples` means, each over seeds drawn
    with replacement (whole rows) and tasks drawn with replacement (whole columns). The seed and
    task draws are independent streams of `rng_seed`; the task draws do not depend on the number
    of seeds."""
    x = np.asarray(x, dtype=float)
    if x.ndim != 2 or 0 in x.shape:
        raise ValueError(f"need a non-empty seeds x tasks matrix, got shape {x.shape}")
    if resamples < 1:
        raise ValueError(f"resamples must be >= 1, got {resamples}")
    s, t = x.shape
    seed_rng, task_rng = (
        np.random.default_rng(q) for q in np.random.SeedSequence(rng_seed).spawn(2)
    )
    ws = _draw_counts(seed_rng, s, resamples)  # (B, S)
    wt = _draw_counts(task_rng, t, resamples)  # (B, T)
    return np.einsum("bs,st,bt->b", ws, x, wt) / (s * t)


def interval(means: np.ndarray, level: float = 0.95) -> tuple[float, float]:
    """The percentile interval of bootstrap means."""
    a = (1.0 - level) / 2
    lo, hi = np.quantile(means, [a, 1.0 - a])
    return float(lo), float(hi)


def outcomes(
    by_seed: Mapping[int, Mapping], measure: str = "exact"
) -> tuple[list[str], np.ndarray] | None:
    """(task ids every seed graded, sorted; seeds x tasks matrix of greedy outcomes under
    `measure` (`task_value`), rows in the mapping's order), or None when a row has no per-task
    outcomes, a task lacks the measure, or no id is shared."""
    per = []
    for row in by_seed.values():
        if not row.get("per_task"):
            return None
        vals = {t["id"]: task_value(t, measure) for t in row["per_task"]}
        if None in vals.values():
            return None
        per.append(vals)
    ids = sorted(set.intersection(*(set(p) for p in per))) if per else []
    if not ids:
        return None
    return ids, np.array([[p[i] for i in ids] for p in per])


@dataclass(frozen=True)
class SeedStat:
    """A cell group's greedy pass@1 over its training seeds (fractions, not percent)."""

    seeds: tuple[int, ...]  # the train seeds, in order
    tasks: int  # tasks per seed the figures are over (the shared ids; a row's own with 1 seed)
    rate: float  # mean over seeds
    lo: float  # 95 % interval: Wilson with one seed, else the seeds x tasks bootstrap
    hi: float
    per_seed: tuple[float, ...]  # each seed's pass rate, in `seeds` order
    passes: int  # greedy passes summed over seeds (rate = passes / (len(seeds) * tasks))
    method: str  # WILSON, BOOTSTRAP or NO_OUTCOMES
    same_ids: bool  # every seed graded the same ids

    @property
    def n_seeds(self) -> int:
        return len(self.seeds)

    @property
    def sd(self) -> float:
        """The between-seed standard deviation of the pass rate (NaN with one seed)."""
        return float(np.std(self.per_seed, ddof=1)) if len(self.per_seed) > 1 else math.nan


def seed_stat(
    by_seed: Mapping[int, Mapping], resamples: int = RESAMPLES, rng_seed: int = RNG_SEED
) -> SeedStat | None:
    """The SeedStat of one group's rows {train seed: row}; None when it has no graded task."""
    seeds = tuple(by_seed)
    if len(seeds) == 1:
        row = by_seed[seeds[0]]
        n, k = int(row.get("tasks") or 0), int(row.get("pass1") or 0)
        if n <= 0:
            return None
        lo, hi = wilson(k, n)
        return SeedStat(seeds, n, k / n, lo, hi, (k / n,), k, WILSON, True)
    got = outcomes(by_seed)
    if got is None:
        counts = [(int(r.get("pass1") or 0), int(r.get("tasks") or 0)) for r in by_seed.values()]
        if any(n <= 0 for _, n in counts):
            return None
        rates = tuple(k / n for k, n in counts)
        same = len({n for _, n in counts}) == 1
        return SeedStat(
            seeds,
            counts[0][1] if same else 0,
            float(np.mean(rates)),
            math.nan,
            math.nan,
            rates,
            sum(k for k, _ in counts),
            NO_OUTCOMES,
            same,
        )
    ids, x = got
    lo, hi = interval(bootstrap_means(x, resamples, rng_seed))
    # a percentile bootstrap collapses at 0 or 1 (all seeds fail every task: [0, 0]); the tasks
    # alone already give the Wilson interval of the mean, so the interval is never narrower
    w_lo, w_hi = wilson(float(x.mean()) * len(ids), len(ids))
    lo, hi = min(lo, w_lo), max(hi, w_hi)
    same = all({t["id"] for t in r["per_task"]} == set(ids) for r in by_seed.values())
    return SeedStat(
        seeds,
        len(ids),
        float(x.mean()),
        lo,
        hi,
        tuple(float(v) for v in x.mean(axis=1)),
        int(x.sum()),
        BOOTSTRAP,
        same,
    )


# -------------------------------------------------------------------------------------------
# tables
# -------------------------------------------------------------------------------------------

SEED_COLUMNS = [
    "model",
    "rung",
    "condition",
    "format",
    "paired",
    "kind",
    "seeds",
    "train_seeds",
    "tasks",
    "pass1_pct",
    "ci_lo",
    "ci_hi",
    "interval",
    "seed_pct",
    "seed_sd_pct",
    "same_ids",
    "passk_pct",
    "sampled1_pct",
    "temperature",
]


def _pct(x: float) -> float:
    return round(100 * x, 2) if not math.isnan(x) else math.nan


def _mean_of(rows: Sequence[Mapping], get) -> float:
    """The mean of get(row) over rows when every row has it, else NaN."""
    vals = [get(r) for r in rows]
    if not vals or any(v is None or (isinstance(v, float) and math.isnan(v)) for v in vals):
        return math.nan
    return round(float(np.mean(vals)), 2)


def _passk(row: Mapping) -> tuple[int, float] | None:
    pk = row.get("pass_at_k") or {}
    if not pk:
        return None
    k = max(int(x) for x in pk)
    return k, float(pk[str(k)])


def seed_summary(
    rows: Iterable[Mapping], resamples: int = RESAMPLES, rng_seed: int = RNG_SEED
) -> pd.DataFrame:
    """One line per cell group: `seeds` (how many train seeds), `train_seeds` ("0,1,2"),
    `tasks` per seed, `pass1_pct` the mean greedy pass@1 over seeds with its 95 % interval
    `ci_lo`-`ci_hi` (percent; `interval` says which: Wilson with one seed, else the seeds x tasks
    bootstrap), `seed_pct` each seed's pass@1 (train seed order), `seed_sd_pct` their standard
    deviation, `same_ids`; `passk_pct` (the rows' largest k, when every seed has the same one),
    `sampled1_pct` and `temperature` (when every seed sampled at the same one) are means over
    seeds. Sorted as `frame`."""
    recs = []
    for key, by_seed in seed_groups(rows).items():
        st = seed_stat(by_seed, resamples, rng_seed)
        if st is None:
            continue
        rs = list(by_seed.values())
        pk = [_passk(r) for r in rs]
        same_k = all(pk) and len({p[0] for p in pk}) == 1
        temps = {r.get("temperature") for r in rs if r.get("n")}
        one_t = len(temps) == 1 and all(r.get("n") for r in rs)
        recs.append(
            {
                **line_fields(key),
                "seeds": st.n_seeds,
                "train_seeds": ",".join(map(str, st.seeds)),
                "tasks": st.tasks,
                "pass1_pct": _pct(st.rate),
                "ci_lo": _pct(st.lo),
                "ci_hi": _pct(st.hi),
                "interval": st.method,
                "seed_pct": tuple(_pct(v) for v in st.per_seed),
                "seed_sd_pct": _pct(st.sd),
                "same_ids": st.same_ids,
                "passk_pct": _mean_of(rs, lambda r: _passk(r)[1]) if same_k else math.nan,
                "sampled1_pct": _mean_of(rs, lambda r: (r.get("pass_at_k") or {}).get("1"))
                if one_t
                else math.nan,
                "temperature": next(iter(temps)) if one_t else math.nan,
            }
        )
    return in_table_order(pd.DataFrame(recs, columns=SEED_COLUMNS))


def seed_lines(summary: pd.DataFrame) -> dict[tuple[str, str, str, str], dict]:
    """{(model, rung, condition label, kind): the fields `fmt_cell` reads} of the groups with
    more than one seed, from `seed_summary`: what the show pivot puts in place of the last row's
    figures."""
    out = {}
    for r in summary[summary.seeds > 1].itertuples() if not summary.empty else ():
        out[(r.model, r.rung, condition_label(r.condition, r.format, r.paired), r.kind)] = {
            "pass1_pct": r.pass1_pct,
            "ci_lo": r.ci_lo,
            "ci_hi": r.ci_hi,
            "passk_pct": r.passk_pct,
            "sampled1_pct": r.sampled1_pct,
            "temperature": r.temperature,
            "seeds": r.seeds,
            "tasks": r.tasks,
        }
    return out


def _fmt_ci(pct: float, lo: float, hi: float) -> str:
    if math.isnan(lo):
        return f"{pct:.1f} [no interval]"
    return f"{pct:.1f} [{lo:.0f}-{hi:.0f}]"


def seed_table(summary: pd.DataFrame, min_seeds: int = 1) -> pd.DataFrame:
    """`seed_summary` for printing (groups with at least `min_seeds` seeds): the label, `seeds`,
    the mean as `pass@1 [lo-hi]`, each seed's value as `seed: pct`, their sd."""
    if summary.empty:
        return summary
    sub = summary[summary.seeds >= min_seeds]
    return pd.DataFrame(
        {
            "model": sub.model,
            "rung": sub.rung,
            "condition": [
                condition_label(c, f, p)
                for c, f, p in zip(sub.condition, sub.format, sub.paired, strict=True)
            ],
            "kind": sub.kind,
            "seeds": sub.seeds,
            "tasks": sub.tasks,
            "pass@1 [95% CI]": [
                _fmt_ci(*x) for x in zip(sub.pass1_pct, sub.ci_lo, sub.ci_hi, strict=True)
            ],
            "per seed": [
                "  ".join(f"{s}: {v:.1f}" for s, v in zip(ts.split(","), vals, strict=False))
                for ts, vals in zip(sub.train_seeds, sub.seed_pct, strict=True)
            ],
            "sd": [f"{v:.1f}" if not math.isnan(v) else "·" for v in sub.seed_sd_pct],
        }
    ).reset_index(drop=True)


# -------------------------------------------------------------------------------------------
# paired comparisons over seeds x tasks
# -------------------------------------------------------------------------------------------


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
        for a_cond, b_cond in default_pairs() if pairs is None else pairs:
            a = groups.get((model, rung, a_cond, kind, fmt, paired))
            if b_cond != cond or a is None:
                continue
            for measure in measures:
                st = paired_stat(a, b, resamples, rng_seed, measure)
                if st is None:
                    continue
                recs.append(
                    _rec(
                        model,
                        rung,
                        kind,
                        measure,
                        "condition",
                        condition_label(a_cond, fmt, paired),
                        condition_label(b_cond, fmt, paired),
                        st,
                        cond,
                        fmt,
                        paired,
                    )
                )
        hole = groups.get((model, rung, cond, kind, "hole", True))
        for measure in measures if fmt == "conversion" and hole is not None else ():
            st = paired_stat(hole, b, resamples, rng_seed, measure)
            if st is not None:
                recs.append(
                    _rec(
                        model,
                        rung,
                        kind,
                        measure,
                        "format",
                        condition_label(cond, "hole", True),
                        condition_label(cond, fmt, paired),
                        st,
                        cond,
                        fmt,
                        paired,
                    )
                )
    df = pd.DataFrame(recs, columns=COMPARE_COLUMNS + ["condition", "format", "paired"])
    if df.empty:
        return df[COMPARE_COLUMNS]
    df = df.assign(_vs=df.vs.map({"condition": 0, "format": 1}).astype(int))
    rr = {r: i for i, r in enumerate(_order(set(df.rung), RUNGS))}
    cr = {c: i for i, c in enumerate(_order(set(df.condition), COND_ORDER))}
    df = df.assign(
        _r=df.rung.map(rr),
        _c=df.condition.map(cr),
        _v=[_variant_rank(f, p) for f, p in zip(df.format, df.paired, strict=True)],
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
