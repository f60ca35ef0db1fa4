"""The recipe's two decisions, from result rows: the gate (stage 0) and the elbow (stage 2).

The gate. Every model's sft cell on the first rung (rung 1 by default) evaluates `mem`: greedy
decoding on the rung's own training tasks. Its pass rate must reach the threshold (0.9 for a real
model, `DEMO_GATE_THRESHOLD` for jac-tiny) on every model, or the plumbing (training, extraction,
reward, evaluation) is broken and the recipe stops.

The elbow rule. The curve is the sft cell's `gen` row per rung: greedy pass@1 = k of n holdout
tasks, with its 95 % Wilson interval. Rung b is *significantly better* than rung a when b's
interval lies entirely above a's (lo_b > hi_a). E = the smallest rung that no larger rung is
significantly better than: from E on, adding tasks brings no gain the intervals can see (in
particular no consecutive pair of rungs from E on rises with separated intervals). Comparing E with
every later rung, not only the next one, keeps a slow climb (each step inside the previous
interval, the top clearly above the start) from being read as flat. Cases:

* flat curve, or noisy with overlapping intervals: the first rung;
* rising with separated intervals at every step: the last rung (`still_rising` is set: more tasks
  might still help);
* peaked: the smallest rung that nothing after it beats (the peak, or the start of its plateau);
  a later fall does not move E;
* ties: the smaller rung (equal counts overlap; fewer tasks are cheaper);
* missing rungs (no sft gen row, or n = 0): left out and listed in `missing`; with no rung left
  there is no E and that model gets no sft_grpo arms (its raw_grpo control still runs);
* a manual override (`RecipeConfig.elbow`) wins; the record keeps the rule's own pick beside it.

Training seeds. When a rung's sft gen rows come from several training seeds (`train_seed`; a row
without one is seed 0), its point is their mean pass@1 and its interval the seeds x tasks
bootstrap of `jacrl.report.seeds` (wider than one run's Wilson interval by the between-seed
variance), and the rule compares those intervals; its figure then counts k passes of n = seeds x
tasks and adds `seeds`, `seed_rates` and `interval`. A rung whose seeds lack per-task outcomes
has no interval (NaN) and neither beats nor is beaten. With one seed nothing changes. The GRPO
arms against sft at E (`grpo_vs_sft`) are paired by train seed and task id the same way.

Rows are matched to cells by (model label, rung, condition, kind), the last one winning (per
train seed, when there are several).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from jacrl.config import _f
from jacrl.results import model_label
from jacrl.stats import mcnemar_exact, wilson

if TYPE_CHECKING:
    from jacrl.report.seeds import SeedStat

GATE_THRESHOLD = 0.9  # mem pass rate a real model's SFT must reach on the first rung
# jac-tiny (the demo): rung 1 is one task, so any threshold in (0, 1] asks that its gold body be
# reproduced; the demo's SFT does (mem 1/1 in results/rl_ladder.jsonl: its 90 iterations at LR 2e-4
# reproduce the body from iteration 50-60), so the demo requires all of it.
DEMO_GATE_THRESHOLD = 1.0
RULE = "no-later-rung-better"
RULE_TEXT = (
    "E = the smallest rung that no larger rung is significantly better than (its 95% "
    "Wilson interval of sft gen pass@1 lies entirely above E's); ties go to the smaller "
    "rung"
)
SEEDS_TEXT = (
    "; at a rung with several training seeds the interval is the seeds x tasks "
    "bootstrap of their mean pass@1"
)


@dataclass(frozen=True)
class RecipeConfig:
    """The recipe's own knobs (the ladder's configuration gives rungs, models, iterations...;
    the tuned arm is the `sft_grpo_tuned` condition of `jacrl.conditions`)."""

    gate_threshold: float = _f(
        GATE_THRESHOLD,
        "stage 0: the first rung's sft mem pass rate must "
        f"reach this (demo: {DEMO_GATE_THRESHOLD})",
    )
    elbow: str = _f(
        "",
        "manual elbow: a rung for every model ('3') or per model "
        "('jac-tiny=3,qwen=5'); '' = the rule's",
    )

    def __post_init__(self):
        if not 0.0 <= self.gate_threshold <= 1.0:
            raise ValueError(f"gate_threshold must be in [0, 1], got {self.gate_threshold}")


DEMO_RECIPE = RecipeConfig(gate_threshold=DEMO_GATE_THRESHOLD)


def rung_size(rung: str) -> float:
    """Sort key of a rung: its task count, 'all' last."""
    return float("inf") if str(rung) == "all" else float(rung)


def ordered_rungs(cfg) -> list[str]:
    return sorted((str(r) for r in cfg.rungs), key=rung_size)


def first_rung(cfg) -> str:
    return ordered_rungs(cfg)[0]


# -------------------------------------------------------------------------------------------
# rows
# -------------------------------------------------------------------------------------------


def rows_for(rows: Sequence[Mapping], keys) -> list[Mapping]:
    """The rows whose cell_key is one of `keys` (the recipe's own cells)."""
    keys = set(keys)
    return [r for r in rows if r.get("cell_key") in keys]


def index_rows(rows: Sequence[Mapping]) -> dict[tuple[str, str, str, str], Mapping]:
    """{(label, rung, condition, kind): row}; the last row of a cell and kind wins."""
    from jacrl.report import cell_of  # the one row parser; imports pandas

    out = {}
    for r in rows:
        c = cell_of(dict(r))
        if c is not None:
            out[c] = r
    return out


def rows_by_seed(rows: Sequence[Mapping]) -> dict[tuple[str, str, str, str], dict[int, Mapping]]:
    """{(label, rung, condition, kind): {train seed: row}} (seeds in order); the last row of a
    cell, kind and train seed wins."""
    from jacrl.report import cell_of
    from jacrl.report.seeds import train_seed

    out: dict[tuple[str, str, str, str], dict[int, Mapping]] = {}
    for r in rows:
        c = cell_of(dict(r))
        if c is not None:
            out.setdefault(c, {})[train_seed(r)] = r
    return {k: dict(sorted(v.items())) for k, v in out.items()}


def _count(row: Mapping | None) -> tuple[int, int] | None:
    """(greedy passes, tasks) of a row; None without one or with no tasks."""
    if row is None or not row.get("tasks"):
        return None
    return int(row.get("pass1") or 0), int(row["tasks"])


def _pct(x: float) -> str:
    return f"{x * 100:.3g}%"


# -------------------------------------------------------------------------------------------
# stage 0: the gate
# -------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Gate:
    """Stage 0's decision: may the recipe go on?"""

    status: str  # pass | fail | pending
    reason: str  # one line
    threshold: float
    rung: str
    mem: list  # per model: {model, k, n, rate} (k, n, rate None when the row is missing)

    def as_dict(self) -> dict:
        return dataclasses.asdict(self)


def gate(cfg, rows: Sequence[Mapping], threshold: float = GATE_THRESHOLD) -> Gate:
    """Every model's sft mem pass rate on the first rung >= threshold: pass; any below: fail;
    else (a row missing: the cell not run yet, or failed) pending."""
    idx, rung = index_rows(rows), first_rung(cfg)
    mem, low, absent = [], [], []
    for m in cfg.models:
        c = _count(idx.get((model_label(m), rung, "sft", "mem")))
        rate = c[0] / c[1] if c else None
        mem.append(
            {
                "model": model_label(m),
                "k": c[0] if c else None,
                "n": c[1] if c else None,
                "rate": rate,
            }
        )
        if c is None:
            absent.append(model_label(m))
        elif rate < threshold:
            low.append(f"{model_label(m)} {c[0]}/{c[1]} = {_pct(rate)}")
    where = f"sft mem on r{rung}"
    if low:
        return Gate(
            "fail",
            f"gate failed: {where} below {_pct(threshold)} for {', '.join(low)}; "
            "training, extraction, reward or evaluation is broken, so the recipe stops "
            "before the SFT curve",
            threshold,
            rung,
            mem,
        )
    if absent:
        return Gate(
            "pending",
            f"gate undecided: no sft mem row on r{rung} for "
            f"{', '.join(absent)} (cell not run yet, or failed)",
            threshold,
            rung,
            mem,
        )
    got = ", ".join(f"{x['model']} {x['k']}/{x['n']}" for x in mem)
    return Gate("pass", f"gate passed: {where} {got} >= {_pct(threshold)}", threshold, rung, mem)


# -------------------------------------------------------------------------------------------
# stages 1-2: the curve and its elbow
# -------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Elbow:
    """Stage 2's decision for one model: the rung where GRPO runs, and why."""

    rung: str | None  # E; None when no rung has a row
    rule: str  # RULE, or "manual"
    text: str  # the rule in words
    reason: str  # one line: why this rung
    figures: list  # per rung with data: {rung, k, n, rate, lo, hi, beaten_by}
    missing: list  # rungs asked for without data
    rule_pick: str | None  # what the rule chose (differs from rung under an override)
    still_rising: bool  # E is the last rung and the last step rose with separated intervals

    def as_dict(self) -> dict:
        return dataclasses.asdict(self)


def curve(cfg, rows: Sequence[Mapping], model: str) -> dict[str, tuple[int, int] | SeedStat | None]:
    """{rung: (greedy passes, tasks) of the sft gen row, or None} in rung order; a rung with sft
    gen rows of several train seeds gets their `jacrl.report.seeds.SeedStat` instead."""
    from jacrl.report.seeds import seed_stat

    idx, seeded = index_rows(rows), rows_by_seed(rows)
    out = {}
    for r in ordered_rungs(cfg):
        key = (model_label(model), r, "sft", "gen")
        by_seed = seeded.get(key, {})
        out[r] = seed_stat(by_seed) if len(by_seed) > 1 else _count(idx.get(key))
    return out


def _point(rung: str, c) -> dict | None:
    """A curve point's figure: (k, n) with its Wilson interval, or a SeedStat's mean and
    interval over seeds; None without tasks."""
    if isinstance(c, Sequence):
        if c[1] <= 0:
            return None
        lo, hi = wilson(*c)
        return {
            "rung": rung,
            "k": c[0],
            "n": c[1],
            "rate": c[0] / c[1],
            "lo": lo,
            "hi": hi,
            "beaten_by": [],
        }
    if c.tasks <= 0:
        return None
    return {
        "rung": rung,
        "k": c.passes,
        "n": c.n_seeds * c.tasks,
        "rate": c.rate,
        "lo": c.lo,
        "hi": c.hi,
        "beaten_by": [],
        "seeds": c.n_seeds,
        "seed_rates": list(c.per_seed),
        "interval": c.method,
    }


def elbow(
    points: Mapping[str, tuple[int, int] | SeedStat | None], override: str | None = None
) -> Elbow:
    """The elbow rung of a curve {rung: (k, n), a SeedStat (several train seeds) or None} (the
    rule and its cases: the module docstring); `override` (a rung of the curve) replaces the
    rule's pick. Figures are fractions; lo, hi the 95 % Wilson interval (the seeds x tasks
    bootstrap interval for a SeedStat); beaten_by the larger rungs significantly better."""
    rungs = sorted((str(r) for r in points), key=rung_size)
    if override is not None and str(override) not in rungs:
        raise ValueError(f"elbow override r{override}: not a rung of this curve ({rungs})")
    figs, missing = [], []
    for r in rungs:
        f = None if points[r] is None else _point(r, points[r])
        if f is None:
            missing.append(r)
            continue
        figs.append(f)
    for i, a in enumerate(figs):
        a["beaten_by"] = [b["rung"] for b in figs[i + 1 :] if b["lo"] > a["hi"]]
    pick = next((f for f in figs if not f["beaten_by"]), None)
    rising = bool(
        pick is not None and len(figs) > 1 and pick is figs[-1] and figs[-1]["lo"] > figs[-2]["hi"]
    )
    if pick is None:
        reason = "no rung has an sft gen row"
    elif pick is figs[0]:
        reason = "no larger rung is significantly better (flat or overlapping intervals)"
    else:
        reason = (
            f"each smaller rung has a larger one significantly above it, none is above "
            f"r{pick['rung']}"
        )
        reason += "; still rising at the last rung" if rising else ""
    if missing:
        reason += f" (no rows: {', '.join('r' + r for r in missing)})"
    seeded = [f for f in figs if f.get("seeds", 1) > 1]
    if seeded:
        reason += (
            " (intervals across training seeds: "
            + ", ".join(f"r{f['rung']} {f['seeds']} seeds" for f in seeded)
            + ")"
        )
    text = RULE_TEXT + (SEEDS_TEXT if seeded else "")
    rule_pick = pick["rung"] if pick else None
    if override is not None:
        said = f"picks r{rule_pick}" if rule_pick else "has no pick: no rows"
        return Elbow(
            str(override),
            "manual",
            "set by hand",
            f"set by hand (the rule {said})",
            figs,
            missing,
            rule_pick,
            rising,
        )
    return Elbow(rule_pick, RULE, text, reason, figs, missing, rule_pick, rising)


def parse_elbow(text: str, models: Sequence[str]) -> dict[str, str]:
    """'3' -> every model's label: '3'; 'a=3,b=5' -> {'a': '3', 'b': '5'}; '' -> {}."""
    text = str(text or "").strip()
    if not text:
        return {}
    if "=" not in text:
        return {model_label(m): text for m in models}
    out = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        name, sep, rung = part.partition("=")
        if not sep or not rung.strip():
            raise ValueError(f"elbow: expected RUNG or MODEL=RUNG,..., got {text!r}")
        out[model_label(name.strip())] = rung.strip()
    return out


def elbows(cfg, rows: Sequence[Mapping], rcfg: RecipeConfig = RecipeConfig()) -> dict[str, Elbow]:
    """{model label: its Elbow}, manual overrides applied."""
    manual = parse_elbow(rcfg.elbow, cfg.models)
    return {
        model_label(m): elbow(curve(cfg, rows, m), manual.get(model_label(m))) for m in cfg.models
    }


# -------------------------------------------------------------------------------------------
# stage 3: the GRPO arms against sft
# -------------------------------------------------------------------------------------------

ARMS = ("sft_grpo", "sft_grpo_tuned")


def grpo_vs_sft(
    cfg,
    rows: Sequence[Mapping],
    rcfg: RecipeConfig = RecipeConfig(),
    arms: Sequence[str] = ARMS,
    kind: str = "gen",
) -> dict[str, list[dict]]:
    """{model label: per arm with rows at the model's E, the arm against sft there}: greedy
    pass@1 `arm - sft` (fractions) paired by train seed and task id with its 95 % seeds x tasks
    bootstrap interval `lo`-`hi` and `above0` (`jacrl.report.compare.paired_stat`; with one seed a
    side, the bootstrap over tasks alone, and `mcnemar_p` as `ladder show`'s McNemar);
    `better` = lo > 0, `worse` = hi < 0. Each item: condition, rung, sft_seeds, arm_seeds,
    pairing, seeds, n, sft, arm, diff, lo, hi, above0, better, worse, mcnemar_p (None with
    several seeds)."""
    from jacrl.report.compare import paired_stat
    from jacrl.report.seeds import outcomes

    seeded = rows_by_seed(rows)
    out: dict[str, list[dict]] = {}
    for label, e in elbows(cfg, rows, rcfg).items():
        out[label] = []
        sft = seeded.get((label, e.rung, "sft", kind)) if e.rung else None
        for arm in arms:
            b = seeded.get((label, e.rung, arm, kind)) if e.rung else None
            st = paired_stat(sft, b) if sft and b else None
            if st is None:
                continue
            p = None
            if len(sft) == 1 and len(b) == 1:
                _, x = outcomes({0: next(iter(sft.values())), 1: next(iter(b.values()))})
                p = mcnemar_exact([bool(v) for v in x[0]], [bool(v) for v in x[1]])["p"]
            out[label].append(
                {
                    "condition": arm,
                    "rung": e.rung,
                    "sft_seeds": st.a_seeds,
                    "arm_seeds": st.b_seeds,
                    "pairing": st.pairing,
                    "seeds": st.seeds,
                    "n": st.tasks,
                    "sft": st.a_rate,
                    "arm": st.b_rate,
                    "diff": st.diff,
                    "lo": st.lo,
                    "hi": st.hi,
                    "above0": st.above0,
                    "better": st.lo > 0,
                    "worse": st.hi < 0,
                    "mcnemar_p": p,
                }
            )
    return out
