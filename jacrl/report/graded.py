"""What a result row says beyond greedy pass@1: the graded measures (greedy answers that compile,
that run, their mean reward, each with an interval over tasks), read where pass@1 sits at its floor,
and whether the cell's reward-trained stage had a learning signal at all (`signal_mark`)."""

from __future__ import annotations

import math

import pandas as pd

from jacrl.conditions import CONDITIONS, alone
from jacrl.samples import COMPILED
from jacrl.stages import STAGES
from jacrl.stats import mean_interval, wilson


def graded(row: dict) -> dict:
    """The graded measures of a row, read where pass@1 sits at its floor: greedy answers that
    compile and that run (% with 95 % Wilson intervals, over tasks) and the mean greedy reward
    (95 % t interval over tasks; NaN for rows made before it was recorded)."""
    tasks = row.get("per_task") or []
    n = len(tasks)
    out = {}
    compiled = sum(t.get("greedy_tier") in COMPILED for t in tasks)
    for name, k in (("compile", compiled), ("run", int(row.get("runs", 0)))):
        lo, hi = wilson(k, n) if n else (math.nan, math.nan)
        out[f"{name}_pct"] = round(100 * k / n, 2) if n else math.nan
        out[f"{name}_lo"], out[f"{name}_hi"] = round(100 * lo, 2), round(100 * hi, 2)
    rewards = [t["greedy_reward"] for t in tasks if "greedy_reward" in t]
    m, lo, hi = mean_interval(rewards) if len(rewards) == n and n else (math.nan,) * 3
    if n and len(rewards) == n:  # a reward lies in [0, 1]
        lo, hi = max(0.0, lo), min(1.0, hi)
    out.update(reward_mean=round(m, 4), reward_lo=round(lo, 4), reward_hi=round(hi, 4))
    return out


NO_SIGNAL, NO_UPDATE = "no signal", "no update"


def signal_mark(row: dict) -> str:
    """ "no signal" when a stage of the row's cell that learns from rewards (GRPO) had no group
    whose rewards differed on any step, "no update" when it had but its adapter did not move
    (learning rate 0: a control); "" otherwise. Such a row re-evaluates its parent: it is not a
    result of the method."""
    marks = []
    for rec in (row.get("training") or {}).values():
        if "signal_steps" not in rec:
            continue
        if not rec["signal_steps"]:
            marks.append(NO_SIGNAL)
        elif rec.get("adapter_delta") == 0:
            marks.append(NO_UPDATE)
    return ", ".join(dict.fromkeys(marks))


def fmt_graded(line: dict | None) -> str:
    """`c<compile %> [lo-hi] r<run %> [lo-hi] R<mean reward> [lo-hi][ (N seeds)]` of a frame line
    (`graded`); `·` when missing, `R·` for rows made before the reward was recorded."""
    if line is None or not line["tasks"]:
        return "·"
    out = (
        f"c{line['compile_pct']:.0f} [{line['compile_lo']:.0f}-{line['compile_hi']:.0f}] "
        f"r{line['run_pct']:.0f} [{line['run_lo']:.0f}-{line['run_hi']:.0f}]"
    )
    seeds = f" ({line['seeds']} seeds)" if line.get("seeds", 1) > 1 else ""
    if pd.isna(line.get("reward_mean", math.nan)):
        return out + " R·" + seeds
    reward = f" R{line['reward_mean']:.2f} [{line['reward_lo']:.2f}-{line['reward_hi']:.2f}]"
    return out + reward + seeds


def signal_marks(rows: list[dict]) -> dict[int, str]:
    """{id(row): its mark} (`signal_mark`); a row made before runs recorded their signal, of a
    condition that trains from rewards, is marked "no update" when its adapter's weights hash
    equals that of its parent condition's row (same model, rung and train seed): the update
    never moved it."""
    parent = {}
    for r in rows:
        cond = CONDITIONS.get(str(r.get("condition")))
        digest = (r.get("provenance") or {}).get("adapter_weights_hash")
        if cond is not None and digest and not _rewarded(cond):
            parent[(r.get("model_name"), str(r.get("rung")), r.get("train_seed"), cond.name)] = (
                digest
            )
    out = {}
    for r in rows:
        mark = signal_mark(r)
        cond = CONDITIONS.get(str(r.get("condition")))
        if (
            not mark
            and "training" not in r
            and cond is not None
            and _rewarded(cond)
            and cond.shares
        ):
            key = (r.get("model_name"), str(r.get("rung")), r.get("train_seed"), alone(cond.shares))
            digest = (r.get("provenance") or {}).get("adapter_weights_hash")
            mark = NO_UPDATE if digest and parent.get(key) == digest else ""
        out[id(r)] = mark
    return out


def _rewarded(cond) -> bool:
    """Whether a condition has a stage that learns from rollouts' rewards (GRPO)."""
    return any(STAGES[s].calibrates for s in cond.stages)
