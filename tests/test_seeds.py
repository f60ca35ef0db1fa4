"""Aggregation over training seeds (jacrl.report.seeds): the seeds x tasks bootstrap, the paired
comparisons over seeds and task ids, what `ladder show` prints about seeds, and the recipe's elbow
rule and GRPO-vs-SFT comparison on rows of several train seeds. Rows are copies of the committed
ladder rows (results/rl_ladder.jsonl) with their per-task outcomes and train seeds varied; the
bootstrap itself is also checked on plain matrices. Also the tables' columns and the
comparisons' seeds."""

from __future__ import annotations

import copy
import json
import math
from pathlib import Path

import numpy as np
import pytest

from jacrl import recipe as R
from jacrl import report
from jacrl.recipe import decide
from jacrl.report import compare as C
from jacrl.report import seeds as S
from jacrl.stats import wilson

ROOT = Path(__file__).resolve().parent.parent
ROWS = [
    json.loads(x)
    for x in (ROOT / "results" / "rl_ladder.jsonl").read_text().splitlines()
    if x.strip()
]


def real(tag: str) -> dict:
    """A committed row by tag (a deep copy)."""
    return copy.deepcopy(next(r for r in ROWS if r["tag"] == tag))


def seeded(row: dict, seed: int, passes: int | list[bool], n: int | None = None, **fields) -> dict:
    """`row` as trained under train seed `seed`: its per-task greedy outcomes set (the first
    `passes` tasks right, or one bool per task), over `n` tasks (the row's own ids, extended with
    suffixed copies when n is larger), pass1/pass1_pct recounted; `fields` override."""
    x = copy.deepcopy(row)
    base = x["per_task"]
    n = n or (len(passes) if isinstance(passes, list) else len(base))
    tasks = [
        dict(
            base[i % len(base)],
            id=base[i % len(base)]["id"] + (f"~{i // len(base)}" if i >= len(base) else ""),
        )
        for i in range(n)
    ]
    ok = passes if isinstance(passes, list) else [i < passes for i in range(n)]
    for t, good in zip(tasks, ok, strict=True):
        t["greedy_exact"] = bool(good)
    x.update(
        per_task=tasks,
        tasks=n,
        pass1=sum(ok),
        pass1_pct=round(100 * sum(ok) / n, 2),
        train_seed=seed,
        cell_key=f"{row['cell_key']}-s{seed}",
    )
    x.update(fields)
    return x


def group(row: dict, counts, n=None, **fields) -> list[dict]:
    return [seeded(row, s, k, n, **fields) for s, k in enumerate(counts)]


# -------------------------------------------------------------------------------------------
# the bootstrap
# -------------------------------------------------------------------------------------------


def test_the_bootstrap_is_deterministic_and_its_resamples_a_parameter():
    x = np.random.default_rng(7).random((3, 20)) < 0.4
    a, b = S.bootstrap_means(x), S.bootstrap_means(x)
    assert a.shape == (S.RESAMPLES,) and np.array_equal(a, b)
    assert S.bootstrap_means(x, resamples=50).shape == (50,)
    assert not np.array_equal(a, S.bootstrap_means(x, rng_seed=1))
    rows = group(real("r1/jac-tiny/sft/gen"), [1, 3, 5])
    first, again = S.seed_summary(rows), S.seed_summary(copy.deepcopy(rows))
    assert first.equals(again)
    assert report.show_text(rows, include_stale=True) == report.show_text(
        copy.deepcopy(rows), include_stale=True
    )
    with pytest.raises(ValueError):
        S.bootstrap_means(np.zeros((0, 3)))


def test_identical_seeds_reduce_to_the_task_only_bootstrap():
    one = (np.random.default_rng(3).random((1, 30)) < 0.5).astype(float)
    three = np.repeat(one, 3, axis=0)
    assert np.allclose(S.bootstrap_means(three), S.bootstrap_means(one))
    # on rows: three identical seeds of a real row give the interval of one seed's tasks
    row = real("r3/jac-tiny/sft/gen")
    ok = [bool(v) for v in one[0]]
    st = S.seed_stat({s: seeded(row, s, ok) for s in range(3)})
    lo, hi = S.interval(S.bootstrap_means(one))
    w = wilson(int(one.sum()), 30)  # the interval is never narrower than the tasks' Wilson one
    assert st.method == S.BOOTSTRAP and st.n_seeds == 3 and st.tasks == 30
    assert (st.lo, st.hi) == pytest.approx((min(lo, w[0]), max(hi, w[1])))
    assert st.rate == pytest.approx(one.mean()) and st.sd == 0.0
    # and that task-only interval is close to one run's Wilson interval
    assert abs(st.lo - w[0]) < 0.06 and abs(st.hi - w[1]) < 0.06


def test_seeds_that_differ_a_lot_widen_the_interval_beyond_wilson():
    rows = group(real("r1/jac-tiny/sft/gen"), [3, 15, 27], n=30)
    st = S.seed_stat(S.seed_groups(rows)[("jac-tiny", "1", "sft", "gen", "hole", False)])
    assert st.per_seed == pytest.approx((0.1, 0.5, 0.9)) and st.rate == pytest.approx(0.5)
    one_run = wilson(15, 30)  # one seed at the mean
    pooled = wilson(45, 90)  # the three seeds' tasks as if independent
    assert st.lo < one_run[0] < pooled[0] and st.hi > one_run[1] > pooled[1]
    assert st.hi - st.lo > 1.5 * (one_run[1] - one_run[0])


def test_one_seed_keeps_the_wilson_interval_of_its_counts():
    row = real("r3/jac-tiny/sft/mem")
    assert row["train_seed"] == 0 and S.train_seed(row) == 0
    assert S.train_seed({k: v for k, v in row.items() if k != "train_seed"}) == 0  # older rows
    st = S.seed_stat({0: row})
    assert st.method == S.WILSON and st.n_seeds == 1
    assert (st.lo, st.hi) == pytest.approx(wilson(row["pass1"], row["tasks"]))
    summary = S.seed_summary(ROWS)
    assert set(summary.seeds) == {1} and set(summary.interval) == {S.WILSON}
    df = report.frame(ROWS)
    assert list(summary.ci_lo) == list(df.ci_lo) and list(summary.ci_hi) == list(df.ci_hi)
    assert list(summary.pass1_pct) == list(df.pass1_pct)


def test_reruns_of_a_seed_keep_the_last_row_and_ids_are_paired():
    row = real("r1/jac-tiny/sft/gen")
    rows = group(row, [1, 2, 3]) + [seeded(row, 1, 6)]  # seed 1 rerun: 6/6
    st = S.seed_stat(S.seed_groups(rows)[("jac-tiny", "1", "sft", "gen", "hole", False)])
    assert st.seeds == (0, 1, 2) and st.per_seed == pytest.approx((1 / 6, 1.0, 3 / 6))
    short = seeded(row, 2, 3)
    short["per_task"] = short["per_task"][:4]  # graded on fewer ids: only the shared 4 count
    st = S.seed_stat({0: rows[0], 1: rows[1], 2: short})
    assert st.tasks == 4 and not st.same_ids


def test_several_seeds_without_per_task_outcomes_have_no_interval():
    rows = [
        {"tag": "r1/m/sft/gen", "pass1": k, "tasks": 10, "train_seed": s}
        for s, k in enumerate([2, 5])
    ]
    st = S.seed_stat(S.seed_groups(rows)[("m", "1", "sft", "gen", "hole", False)])
    assert st.method == S.NO_OUTCOMES and math.isnan(st.lo) and st.rate == pytest.approx(0.35)
    assert "35.0 [no interval]" in S.seed_table(S.seed_summary(rows)).to_string()


# -------------------------------------------------------------------------------------------
# paired comparisons
# -------------------------------------------------------------------------------------------


def test_a_condition_against_itself_is_zero_with_a_tight_interval():
    rows = group(real("r1/jac-tiny/sft/gen"), [3, 15, 27], n=30)
    g = S.seed_groups(rows)[("jac-tiny", "1", "sft", "gen", "hole", False)]
    st = C.paired_stat(g, g)
    assert (st.diff, st.lo, st.hi, st.above0) == (0.0, 0.0, 0.0, 0.0)
    assert st.pairing == "seed" and st.seeds == 3 and st.tasks == 30
    df = C.seed_comparisons(rows, pairs=[("sft", "sft")])
    assert len(df) == 1 and (df.diff_pct[0], df.lo[0], df.hi[0]) == (0.0, 0.0, 0.0)


def test_pairing_by_seed_sees_a_gain_the_seeds_spread_hides():
    """sft_grpo gains 3 tasks on top of each seed's sft: paired by seed and task the gain is clear,
    though the two groups' own across-seed intervals overlap."""
    n = 30
    sft = [seeded(real("r3/jac-tiny/sft/gen"), s, k, n) for s, k in enumerate([3, 13, 23])]
    grpo = [
        seeded(real("r3/jac-tiny/sft_grpo/gen"), s, k + 3, n) for s, k in enumerate([3, 13, 23])
    ]
    base = [seeded(real("r3/jac-tiny/base/gen"), 0, 0, n)]  # no training: one seed
    rows = base + sft + grpo
    summary = S.seed_summary(rows).set_index("condition")
    assert summary.loc["sft_grpo", "ci_lo"] < summary.loc["sft", "ci_hi"]  # overlap
    df = C.seed_comparisons(rows)
    got = df[(df.a == "sft") & (df.b == "sft_grpo")].iloc[0]
    assert got.pairing == "seed" and got.seeds == 3 and got.n == n
    # above0 < 1 only where a draw of seed 0 alone misses its three gained tasks
    assert got.diff_pct == pytest.approx(10.0) and got.lo > 0 and got.above0 > 0.99
    vs_base = df[(df.a == "base") & (df.b == "sft")].iloc[0]
    assert vs_base.pairing == "broadcast" and (vs_base.a_seeds, vs_base.b_seeds) == (1, 3)
    assert vs_base.diff_pct == pytest.approx(100 * 39 / 90, abs=0.01)


def test_format_comparison_over_seeds_pairs_hole_and_conversion_of_one_condition():
    row = real("r1/jac-tiny/sft/gen")
    hole = group(row, [2, 3, 4], paired=True, format="hole")
    conv = group(row, [3, 4, 5], paired=True, format="conversion")
    df = C.seed_comparisons(hole + conv)
    f = df[df.vs == "format"]
    assert list(zip(f.a, f.b, strict=True)) == [("sft/hole", "sft/conversion")]
    assert f.diff_pct.iloc[0] == pytest.approx(100 / 6, abs=0.01) and f.seeds.iloc[0] == 3
    unpaired = group(row, [2, 3, 4])  # hole-fill of an unpaired plan: not compared
    assert C.seed_comparisons(unpaired + conv).query("vs == 'format'").empty


# -------------------------------------------------------------------------------------------
# ladder show
# -------------------------------------------------------------------------------------------


def test_show_says_how_many_seeds_and_each_seeds_value():
    """Committed rows with the sft cells retrained under three seeds (only their outcomes vary,
    so the rows stay fresh)."""
    rows = [
        r
        for r in copy.deepcopy(ROWS)
        if r["tag"] not in ("r1/jac-tiny/sft/gen", "r1/jac-tiny/sft/mem")
    ]
    sft = real("r1/jac-tiny/sft/gen")
    rows += group(sft, [1, 3, 5]) + group(real("r1/jac-tiny/sft/mem"), [1, 1, 1])
    text = report.show_text(rows)
    assert "stale" not in text
    line = next(
        ln for ln in text.splitlines() if "jac-tiny" not in ln and " sft " in ln and "p@" in ln
    )
    st = S.seed_stat({s: r for s, r in enumerate(group(sft, [1, 3, 5]))})
    r1, r3 = line.split("(3 seeds)")  # the r1 cell says it; r3's, one seed, does not
    assert f"50.0 [{100 * st.lo:.0f}-{100 * st.hi:.0f}] p@4 0.0 m100/50@T0.3" in r1
    assert r3.strip() == "0.0 [0-39] p@4 0.0 m100/58@T0.3"
    assert "0: 16.7  1: 50.0  2: 83.3" in text
    assert "1 seed" in text and "seeds x tasks bootstrap" in text
    assert "paired over train seeds x task ids" in text
    assert "one run per cell: its last row, one train seed" in text
    assert "(3 seeds)" not in next(ln for ln in text.splitlines() if ln.startswith("jac-tiny"))


def test_show_on_rows_of_one_seed_says_so_and_prints_no_seed_tables():
    text = report.show_text(ROWS)
    assert "1 training seed behind every number" in text
    assert "seeds)" not in text and "across training seeds" not in text


# -------------------------------------------------------------------------------------------
# the recipe: elbow rule and GRPO vs SFT over seeds
# -------------------------------------------------------------------------------------------


class Cfg:
    rungs = ("1", "3")
    models = ("jac-tiny",)


def _curve_rows(r1: list[int], r3: list[int], n: int = 30) -> list[dict]:
    out = []
    for rung, counts in (("1", r1), ("3", r3)):
        gen = real(f"r{rung}/jac-tiny/sft/gen")
        out += [seeded(gen, s, k, n) for s, k in enumerate(counts)]
    return out


def test_the_elbow_rule_uses_the_across_seed_interval():
    """Seed 2 alone (the last row of each cell, the single-run view) rises with separated Wilson
    intervals from r1 to r3; across the three seeds the intervals overlap, so E stays r1."""
    r1, r3 = [14, 26, 2], [10, 22, 20]
    assert wilson(20, 30)[0] > wilson(2, 30)[1]
    one = [r for r in _curve_rows(r1, r3) if r["train_seed"] == 2]
    single = R.elbows(Cfg, one)["jac-tiny"]
    assert single.rung == "3" and single.still_rising
    assert "seeds" not in single.figures[0] and single.text == R.RULE_TEXT
    e = R.elbows(Cfg, _curve_rows(r1, r3))["jac-tiny"]
    assert e.rung == "1" and e.figures[0]["beaten_by"] == []
    f1, f3 = e.figures
    assert f1["seeds"] == 3 and f1["seed_rates"] == pytest.approx([14 / 30, 26 / 30, 2 / 30])
    assert (f1["k"], f1["n"]) == (42, 90) and f1["rate"] == pytest.approx(42 / 90)
    assert f3["lo"] < f1["hi"] and f1["hi"] - f1["lo"] > 0.3
    assert "3 seeds" in e.reason and e.text == R.RULE_TEXT + decide.SEEDS_TEXT


def test_the_elbow_rule_with_seeds_still_sees_a_rise_every_seed_shows():
    e = R.elbows(Cfg, _curve_rows([1, 2, 3], [26, 27, 28]))["jac-tiny"]
    assert e.rung == "3" and e.figures[0]["beaten_by"] == ["3"] and e.still_rising


def test_one_explicit_train_seed_changes_nothing():
    rows = _curve_rows([2], [20])
    bare = [{k: v for k, v in r.items() if k != "train_seed"} for r in rows]
    assert R.elbows(Cfg, rows)["jac-tiny"] == R.elbows(Cfg, bare)["jac-tiny"]
    assert R.curve(Cfg, rows, "jac-tiny") == {"1": (2, 30), "3": (20, 30)}


def test_grpo_vs_sft_at_the_elbow_pairs_seeds_and_tasks():
    rows = _curve_rows([3, 13, 23], [4, 14, 24])  # flat: E = r1
    grpo = real("r1/jac-tiny/sft_grpo/gen")
    rows += [seeded(grpo, s, k + 3, 30) for s, k in enumerate([3, 13, 23])]
    got = decide.grpo_vs_sft(Cfg, rows)["jac-tiny"]
    assert [g["condition"] for g in got] == ["sft_grpo"]  # no tuned arm's rows
    g = got[0]
    assert g["rung"] == "1" and g["seeds"] == 3 and g["pairing"] == "seed"
    assert g["diff"] == pytest.approx(0.1) and g["better"] and not g["worse"]
    assert g["mcnemar_p"] is None
    one = [r for r in rows if r["train_seed"] == 0]
    g1 = decide.grpo_vs_sft(Cfg, one)["jac-tiny"][0]
    assert g1["seeds"] == 1 and g1["mcnemar_p"] == pytest.approx(0.25)  # 3 gained, 0 lost


def test_seeds_that_all_fail_keep_the_tasks_wilson_interval():
    """A percentile bootstrap of an all-zero matrix is [0, 0]; 0/6 on three seeds still leaves
    the holdout's uncertainty, so the interval is the Wilson one of 0/6, not a point."""
    row = real("r3/jac-tiny/sft/gen")
    ids = [t["id"] for t in row["per_task"]][:6]
    row = {**row, "per_task": [t for t in row["per_task"] if t["id"] in ids], "tasks": 6}
    st = S.seed_stat({s: seeded(row, s, [False] * 6) for s in range(3)})
    assert st.rate == 0.0 and (st.lo, st.hi) == pytest.approx(wilson(0, 6))


# -- the tables' columns, the comparisons' seeds ---------------------------------------------------


def _format_pair():
    row = real("r1/jac-tiny/sft/gen")
    hole = group(row, [2, 3, 4], paired=True, format="hole")
    conv = group(row, [3, 4, 5], paired=True, format="conversion")
    return hole, conv


def test_a_format_comparison_names_its_model_and_is_seeded():
    """seed_comparisons (vs format): the record names its model, and its bootstrap uses the
    seed given (the same figures as paired_stat's with it); above0 is a share, to 4 places."""
    hole, conv = _format_pair()
    f = C.seed_comparisons(hole + conv, resamples=500, rng_seed=7).query("vs == 'format'")
    assert list(f.model) == ["jac-tiny"] and list(f.kind) == ["gen"]
    st = C.paired_stat(dict(enumerate(hole)), dict(enumerate(conv)), 500, 7)
    assert f.above0.iloc[0] == round(st.above0, 4)
    assert (f.lo.iloc[0], f.hi.iloc[0]) == (round(100 * st.lo, 2), round(100 * st.hi, 2))
    assert 0 < st.above0 < 1
    table = C.comparison_table(C.seed_comparisons(hole + conv))
    assert list(table.seeds) == ["3/3"] and list(table.columns)[5] == "seeds"


def test_the_seed_summary_and_table_columns():
    """seed_summary: `tasks` per seed; `sampled1_pct` only when every seed sampled at one
    temperature (else NaN); seed_table: each seed's value as `seed: pct`."""
    row = real("r1/jac-tiny/sft/gen")
    rows = group(row, [1, 3, 5])
    summary = S.seed_summary(rows)
    line = summary.iloc[0]
    assert line.tasks == rows[0]["tasks"] and line.train_seeds == "0,1,2"
    table = S.seed_table(summary)
    assert table["per seed"].iloc[0] == "0: 16.7  1: 50.0  2: 83.3"
    if row.get("n"):  # sampled: a second temperature makes the sampled mean meaningless
        mixed = rows[:2] + group(row, [5], temperature=row["temperature"] + 0.5)[:1]
        mixed[2] = dict(mixed[2], train_seed=2)
        assert math.isnan(S.seed_summary(mixed).iloc[0].sampled1_pct)
        assert not math.isnan(line.sampled1_pct)


def test_seeds_without_outcomes_over_one_task_count_keep_it():
    """seed_stat without per-task outcomes: seeds graded on the same number of tasks keep
    that number (and same_ids); different numbers give 0 tasks."""
    rows = [
        {"tag": "r1/m/sft/gen", "pass1": k, "tasks": 10, "train_seed": s}
        for s, k in enumerate([2, 5])
    ]
    key = ("m", "1", "sft", "gen", "hole", False)
    st = S.seed_stat(S.seed_groups(rows)[key])
    assert (st.tasks, st.same_ids) == (10, True)
    rows[1]["tasks"] = 12
    st = S.seed_stat(S.seed_groups(rows)[key])
    assert (st.tasks, st.same_ids) == (0, False)


def _base_and_sft(**fields):
    """A one-seed base group and a three-seed sft group of the same cell (gen, 6 tasks)."""
    row = real("r1/jac-tiny/sft/gen")
    base = group(row, [1], condition="base", tag="r1/jac-tiny/base/gen", **fields)
    return base, group(row, [2, 3, 5], **fields)


def test_a_condition_comparison_uses_the_seed_given():
    base, sft = _base_and_sft()
    c = C.seed_comparisons(base + sft, pairs=[("base", "sft")], resamples=500, rng_seed=7)
    st = C.paired_stat(dict(enumerate(base)), dict(enumerate(sft)), 500, 7)
    assert list(c.vs) == ["condition"] and c.above0.iloc[0] == round(st.above0, 4)
    assert (c.lo.iloc[0], c.hi.iloc[0]) == (round(100 * st.lo, 2), round(100 * st.hi, 2))
    other = C.paired_stat(dict(enumerate(base)), dict(enumerate(sft)), 500, 0)
    assert (st.lo, st.hi, st.above0) != (other.lo, other.hi, other.above0)


def test_comparisons_list_hole_fill_before_conversion():
    """Within one condition pair, the paired hole-fill comparison comes before conversion's
    (the table's format order), though "base/conversion" sorts before "base/hole" as text."""
    hole = _base_and_sft(paired=True, format="hole")
    conv = _base_and_sft(paired=True, format="conversion")
    c = C.seed_comparisons([*hole[0], *hole[1], *conv[0], *conv[1]], pairs=[("base", "sft")])
    cond = c[c.vs == "condition"]
    assert list(cond.a) == ["base/hole", "base/conversion"]
    assert list(cond.b) == ["sft/hole", "sft/conversion"]


def test_same_ids_says_whether_every_seed_graded_the_same_tasks():
    row = real("r1/jac-tiny/sft/gen")
    key = ("jac-tiny", "1", "sft", "gen", "hole", False)
    rows = group(row, [1, 3, 5])
    assert S.seed_stat(S.seed_groups(rows)[key]).same_ids is True
    rows[2] = seeded(row, 2, 5, n=7)  # one task more than the others graded
    st = S.seed_stat(S.seed_groups(rows)[key])
    assert st.same_ids is False and st.tasks == 6


def test_seeds_without_outcomes_sum_their_passes():
    rows = [
        {"tag": "r1/m/sft/gen", "pass1": k, "tasks": 10, "train_seed": s}
        for s, k in enumerate([2, 5])
    ]
    st = S.seed_stat(S.seed_groups(rows)[("m", "1", "sft", "gen", "hole", False)])
    assert st.passes == 7 and st.method == S.NO_OUTCOMES


def test_a_group_without_graded_tasks_is_skipped_and_the_rest_kept():
    ungraded = {"tag": "r1/m/base/gen", "pass1": 0, "tasks": 0}
    row = real("r1/jac-tiny/sft/gen")
    summary = S.seed_summary([ungraded, *group(row, [1, 3, 5])])
    assert list(summary.model) == ["jac-tiny"] and list(summary.seeds) == [3]


def test_the_seed_tables_columns_even_when_empty():
    assert list(S.seed_summary([]).columns) == S.SEED_COLUMNS
    row = real("r1/jac-tiny/sft/gen")
    base = group(row, [1], condition="base", tag="r1/jac-tiny/base/gen")
    table = S.seed_table(S.seed_summary([*base, *group(row, [1, 3, 5])]))
    assert list(table.columns) == [
        "model",
        "rung",
        "condition",
        "kind",
        "seeds",
        "tasks",
        "pass@1 [95% CI]",
        "per seed",
        "sd",
    ]
    assert list(table.index) == [0, 1]
    # one seed has no spread; three have the sample sd of 16.7, 50 and 83.3 %
    assert list(table.sd) == ["·", "33.3"]


def test_bootstrap_draws_tasks_as_well_as_seeds():
    from jacrl.report.seeds import bootstrap_means

    rng = np.random.default_rng(0)
    x = rng.integers(0, 2, size=(1, 40)).astype(float)  # one seed: only the tasks can vary
    means = bootstrap_means(x, resamples=4000, rng_seed=1)
    # a task bootstrap's spread: the tasks' sd / sqrt(T)
    assert means.std() == pytest.approx(x.std() / np.sqrt(40), rel=0.1)
    assert means.mean() == pytest.approx(x.mean(), abs=0.01)
    # and seeds vary on their own: identical tasks, different seeds
    y = np.repeat(rng.random((5, 1)), 30, axis=1)
    assert bootstrap_means(y, resamples=4000, rng_seed=1).std() == pytest.approx(
        y[:, 0].std() / np.sqrt(5), rel=0.1
    )


def test_a_trained_one_seed_control_pairs_with_its_own_seed():
    """An lr-0 control run at seed 0 only is its seed-0 parent's pair (equal rows: +0), not the
    mean of the parent's three seeds (which would read as a loss); base, untrained, still stands
    for every seed, and a one-seed group whose seed the other lacks is broadcast."""
    n = 30
    sft = [seeded(real("r3/jac-tiny/sft/gen"), s, k, n) for s, k in enumerate([3, 13, 23])]
    lr0 = seeded(real("r3/jac-tiny/sft_grpo/gen"), 0, 3, n, condition="sft_grpo_lr0")
    base = seeded(real("r3/jac-tiny/base/gen"), 0, 0, n)
    a = {s: r for s, r in enumerate(sft)}
    own = C.paired_stat(a, {0: lr0})
    assert own.pairing == "seed" and own.seeds == 1 and (own.diff, own.lo, own.hi) == (0, 0, 0)
    assert C.paired_stat({0: base}, a).pairing == "broadcast"
    other = C.paired_stat(a, {7: dict(lr0, train_seed=7)})
    assert other.pairing == "broadcast" and other.seeds == 3 and other.diff < 0
    # the same with the one-seed trained group on the left: its seed 7 stands for each of a's
    left = C.paired_stat({7: dict(lr0, train_seed=7)}, a)
    assert left.pairing == "broadcast" and left.seeds == 3 and left.diff == -other.diff


# -------------------------------------------------------------------------------------------
# paired comparisons on the graded measures (where pass@1 sits at its floor)
# -------------------------------------------------------------------------------------------


def graded_seed(row: dict, seed: int, tiers: list[str], rewards: list[float] | None) -> dict:
    """`row` under train seed `seed` with no exact pass, each task's greedy tier (and reward,
    unless None: a row made before rewards were kept) as given."""
    x = seeded(row, seed, [t == "exact" for t in tiers])
    for i, t in enumerate(x["per_task"]):
        t["greedy_tier"] = tiers[i]
        t.pop("greedy_reward", None)
        if rewards is not None:
            t["greedy_reward"] = rewards[i]
    return x


def test_graded_comparisons_pair_seeds_and_tasks_where_pass1_is_zero():
    """sft_grpo makes 6 more of 30 answers compile and 2 of them run on every seed, with no exact
    pass anywhere: the pass@1 comparison is 0, the graded ones see the gain, paired by seed and
    task; rows without rewards give no reward line, and an unknown measure is refused."""
    n, rows = 30, []
    for s, k in enumerate([3, 9, 15]):  # sft: k tasks compile, the rest none
        sft = ["compiles"] * k + ["none"] * (n - k)
        grpo = ["runs"] * 2 + ["compiles"] * (k + 4) + ["none"] * (n - k - 6)
        rows.append(graded_seed(real("r3/jac-tiny/sft/gen"), s, sft, [0.1] * k + [0.0] * (n - k)))
        reward = [0.3] * 2 + [0.1] * (k + 4) + [0.0] * (n - k - 6)
        rows.append(graded_seed(real("r3/jac-tiny/sft_grpo/gen"), s, grpo, reward))
    df = C.seed_comparisons(rows, pairs=[("sft", "sft_grpo")], measures=S.MEASURES)
    got = df.set_index("measure")
    assert list(got.index) == ["exact", "compile", "run", "reward"]
    assert (got.loc["exact", "diff_pct"], got.loc["exact", "hi"]) == (0.0, 0.0)
    assert got.loc["compile", "diff_pct"] == pytest.approx(100 * 6 / 30, abs=0.01)
    assert got.loc["run", "diff_pct"] == pytest.approx(100 * 2 / 30, abs=0.01)
    assert got.loc["reward", "diff_pct"] == pytest.approx(100 * (2 * 0.3 + 4 * 0.1) / 30, abs=0.01)
    assert (
        (got.seeds == 3).all() and (got.n == n).all() and (got.lo[["compile", "reward"]] > 0).all()
    )
    # two tasks gained: a resample of tasks can miss both, so run's interval reaches 0
    assert got.loc["run", "lo"] == 0 and 0.5 < got.loc["run", "above0"] < 1
    # each side's value, in percent (reward x 100), and the line's rung
    assert got.loc["compile", "a_pct"] == pytest.approx(100 * 27 / 90, abs=0.01)
    assert got.loc["compile", "b_pct"] == pytest.approx(100 * 45 / 90, abs=0.01)
    assert (got.rung == "3").all() and (got.kind == "gen").all()
    table = C.graded_comparison_table(df)
    assert list(table.measure) == ["compile", "run", "reward"]
    assert list(table.columns) == [
        "model", "rung", "kind", "measure", "a", "b", "seeds", "n",
        "a value", "b value", "b - a [95% CI]", "P(>0)",
    ]  # fmt: skip
    assert list(table["b value"]) == ["50.0", "6.7", "0.063"]
    assert table["b - a [95% CI]"].iloc[2].startswith("+0.033 [+0.0")  # reward in its units
    assert (
        list(C.comparison_table(df).columns).count("a %") == 1 and len(C.comparison_table(df)) == 1
    )
    # rows made before the reward was kept: no reward line, the tiers still compare
    old = [
        graded_seed(r, r["train_seed"], [t["greedy_tier"] for t in r["per_task"]], None)
        for r in rows
    ]
    got_old = C.seed_comparisons(old, pairs=[("sft", "sft_grpo")], measures=S.GRADED)
    assert list(got_old.measure) == ["compile", "run"]
    with pytest.raises(ValueError, match="unknown measure pass2"):
        C.seed_comparisons(rows, measures=("pass2",))


def test_show_prints_the_graded_comparisons_of_seeded_cells():
    rows = [
        r
        for r in copy.deepcopy(ROWS)
        if r["tag"] not in ("r1/jac-tiny/sft/gen", "r1/jac-tiny/sft/mem")
    ]
    sft = real("r1/jac-tiny/sft/gen")
    n = len(sft["per_task"])
    rows += [
        graded_seed(sft, s, ["compiles"] * k + ["none"] * (n - k), [0.1] * k + [0.0] * (n - k))
        for s, k in enumerate([1, 2, 3])
    ]
    text = report.show_text(rows)
    head = "the same pairs on gen's graded measures"
    assert head in text
    block = text.split(head)[1]
    assert "compile" in block and "sft" in block
    # the committed jac-tiny base rows kept no reward: its pairs have compile and run lines only
    assert " reward " not in block.split("\n\n")[0]
