"""Contracts of the seeds' tables (jacrl.report.seeds) that mutants of bench/mutation.py survived
(docs/mutation.md): the columns the notebooks and `ladder show` read, and the comparisons'
seeded bootstrap. Rows are test_seeds.py's copies of the committed ladder rows."""

from __future__ import annotations

import math

from test_seeds import group, real, seeded

from jacrl.report import seeds as S


def _format_pair():
    row = real("r1/jac-tiny/sft/gen")
    hole = group(row, [2, 3, 4], paired=True, format="hole")
    conv = group(row, [3, 4, 5], paired=True, format="conversion")
    return hole, conv


def test_a_format_comparison_names_its_model_and_is_seeded():
    """seed_comparisons (vs format): the record names its model, and its bootstrap uses the
    seed given (the same figures as paired_stat's with it); above0 is a share, to 4 places."""
    hole, conv = _format_pair()
    f = S.seed_comparisons(hole + conv, resamples=500, rng_seed=7).query("vs == 'format'")
    assert list(f.model) == ["jac-tiny"] and list(f.kind) == ["gen"]
    st = S.paired_stat(dict(enumerate(hole)), dict(enumerate(conv)), 500, 7)
    assert f.above0.iloc[0] == round(st.above0, 4)
    assert (f.lo.iloc[0], f.hi.iloc[0]) == (round(100 * st.lo, 2), round(100 * st.hi, 2))
    assert 0 < st.above0 < 1
    table = S.comparison_table(S.seed_comparisons(hole + conv))
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
    c = S.seed_comparisons(base + sft, pairs=[("base", "sft")], resamples=500, rng_seed=7)
    st = S.paired_stat(dict(enumerate(base)), dict(enumerate(sft)), 500, 7)
    assert list(c.vs) == ["condition"] and c.above0.iloc[0] == round(st.above0, 4)
    assert (c.lo.iloc[0], c.hi.iloc[0]) == (round(100 * st.lo, 2), round(100 * st.hi, 2))
    other = S.paired_stat(dict(enumerate(base)), dict(enumerate(sft)), 500, 0)
    assert (st.lo, st.hi, st.above0) != (other.lo, other.hi, other.above0)


def test_comparisons_list_hole_fill_before_conversion():
    """Within one condition pair, the paired hole-fill comparison comes before conversion's
    (the table's format order), though "base/conversion" sorts before "base/hole" as text."""
    hole = _base_and_sft(paired=True, format="hole")
    conv = _base_and_sft(paired=True, format="conversion")
    c = S.seed_comparisons([*hole[0], *hole[1], *conv[0], *conv[1]], pairs=[("base", "sft")])
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
