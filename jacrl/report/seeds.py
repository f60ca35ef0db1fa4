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

The paired comparisons between groups, on the same bootstrap, are `jacrl.report.compare`'s.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from jacrl.report.rows import (
    cell_of,
    condition_label,
    in_table_order,
    line_fields,
    variant_of,
)
from jacrl.samples import COMPILED, TIERS
from jacrl.stats import wilson

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
