"""Provenance is enforced: rows made with a model, adapter or tasks that are no longer on disk are
flagged stale by `report` and left out of `ladder show` unless asked for."""

from __future__ import annotations

import copy
import hashlib
import json
import math
from pathlib import Path

from jacrl import ladder, report
from jacrl.models.registry import resolve
from jacrl.provenance import data_hash, dir_hash
from jacrl.tasks.record import read_tasks

ROOT = Path(__file__).resolve().parent.parent


def _fresh_row() -> dict:
    """A committed ladder row re-stamped with what is on disk now (model and tasks hashes)."""
    row = json.loads((ROOT / "results" / "rl_ladder.jsonl").read_text().splitlines()[0])
    tasks = {t["meta"]["id"]: t for t in read_tasks(ROOT / "data" / "tasks.jsonl")}
    ids = [t["id"] for t in row["per_task"]]
    row["model"] = "jac-tiny"
    row["adapter"] = ""
    row["provenance"] = {
        **row["provenance"],
        "model_hash": dir_hash(resolve("jac-tiny")),
        "adapter_hash": "",
        "data_hash": data_hash([tasks[i] for i in ids]),
    }
    return row


def test_a_row_matching_the_disk_is_fresh():
    assert report.stale_reasons(_fresh_row()) == []


def test_foreign_model_hash_and_changed_tasks_are_stale():
    foreign = _fresh_row()
    foreign["provenance"]["model_hash"] = "0" * 64
    assert report.stale_reasons(foreign) == ["model changed"]
    edited = _fresh_row()
    edited["per_task"] = edited["per_task"][1:]  # graded on another task list than recorded
    assert report.stale_reasons(edited) == ["tasks changed"]
    gone = _fresh_row()
    gone["model"] = gone["model_name"] = "no-such-model"
    assert report.stale_reasons(gone) == ["model missing"]


def test_a_row_graded_on_the_learnable_family_is_fresh_and_unknown_tasks_are_missing():
    """Rows of `ladder run --data learnable/data` are checked against that task set, not
    flagged "tasks missing" because data/ lacks their ids (the real-model ladder's second set)."""
    learnable = read_tasks(ROOT / "learnable" / "data" / "tasks.jsonl")[:3]
    row = _fresh_row()
    row["per_task"] = [{"id": t["meta"]["id"]} for t in learnable]
    row["provenance"]["data_hash"] = data_hash(learnable)
    assert report.stale_reasons(row) == []
    row["per_task"].append({"id": "no_such_task"})
    assert report.stale_reasons(row) == ["tasks missing"]


def test_show_leaves_stale_rows_out_and_counts_them(tmp_path):
    fresh = _fresh_row()
    foreign = {**_fresh_row(), "condition": "sft", "cell_key": "foreign"}
    foreign["provenance"] = {**foreign["provenance"], "model_hash": "f" * 64}
    res = tmp_path / "results"
    res.mkdir()
    (res / ladder.RESULTS_FILE).write_text("".join(json.dumps(r) + "\n" for r in (fresh, foreign)))
    text, figs = ladder.show(res, tmp_path / "fig")
    assert "1 stale row(s) (model changed) left out" in text
    assert "base" in text and "\nsft" not in text.split("1 stale")[0].replace("jac-tiny sft", "")
    assert [p.name for p in figs] == ["ladder.png", "ladder_passk.png", "ladder_families.png"]
    text_all, _ = ladder.show(res, None, include_stale=True)
    assert "1 stale row(s) (model changed) included" in text_all
    df = report.frame(report.mark_stale(report.load_rows(res / ladder.RESULTS_FILE)))
    assert sorted(df.stale) == ["", "model changed"]


def test_committed_rows_are_not_stale():
    """The rows the README's table comes from were made with the committed model and tasks."""
    rows = report.mark_stale(report.load_rows(ROOT / "results" / ladder.RESULTS_FILE))
    assert rows and [r["tag"] for r in rows if r["stale"]] == []


# -------------------------------------------------------------------------------------------
# figures are never older than their rows: the provenance inside each figure file
# -------------------------------------------------------------------------------------------


def _ladder_row(cond: str, passed: int, code: str = "c0de") -> dict:
    return {
        "tag": f"r1/m/{cond}/gen",
        "model_name": "m",
        "rung": "1",
        "condition": cond,
        "kind": "gen",
        "cell_key": f"{cond}-key",
        "tasks": 4,
        "pass1": passed,
        "provenance": {"code_version": code},
    }


def _append(path: Path, *rows: dict) -> None:
    with open(path, "a") as f:
        f.writelines(json.dumps(r) + "\n" for r in rows)


def test_figures_record_their_rows_and_go_stale_when_rows_are_added(tmp_path):
    rows_file = tmp_path / "rl_ladder.jsonl"
    _append(rows_file, _ladder_row("base", 1), _ladder_row("sft", 3, "beef"))
    figs = tmp_path / "figures"
    source = report.source_stamp(rows_file)
    paths = report.write_figures(report.load_rows(rows_file), figs, source)
    assert [p.name for p in paths] == ["ladder.png", "ladder_passk.png"]
    rec = report.read_stamp(paths[0])
    assert rec["figure"] == "ladder.png" and rec["drawn_rows"] == 2
    assert rec["sources"] == [
        {
            "path": str(rows_file.resolve()),
            "rows": 2,
            "sha256": hashlib.sha256(rows_file.read_bytes()).hexdigest(),
            "code_versions": ["beef", "c0de"],
        }
    ]
    assert report.stale_figures(figs) == {}
    assert all(report.figure_stale_reasons(p) == [] for p in paths)

    _append(rows_file, _ladder_row("sft_grpo", 2))  # a row the figures do not show
    why = f"{rows_file.resolve()} changed (2 rows when drawn, 3 now)"
    assert report.stale_figures(figs) == {  # each PNG and the SVG and PDF beside it
        p.with_suffix(s): why for p in paths for s in (".png", ".svg", ".pdf")
    }
    assert why in report.figures_note(figs) and "2 figure(s)" in report.figures_note(figs)

    report.write_figures(report.load_rows(rows_file), figs, rows_file)  # redrawn: fresh again
    assert report.stale_figures(figs) == {}
    rows_file.unlink()
    assert report.figure_stale_reasons(paths[0]) == [f"{rows_file.resolve()} missing"]


def test_a_figure_without_provenance_is_flagged(tmp_path):
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots()
    ax.plot([0, 1], [1, 0])
    for name in ("plain.png", "plain.svg", "plain.pdf"):
        fig.savefig(tmp_path / name)  # not through report: no provenance
    (tmp_path / "broken.png").write_bytes(b"not a png")
    plt.close(fig)
    assert report.stale_figures(tmp_path) == {
        tmp_path / n: "no provenance" for n in ("broken.png", "plain.pdf", "plain.png", "plain.svg")
    }
    memory = report.write_figures([_ladder_row("base", 1)], tmp_path / "mem")  # no rows file
    assert "rows in memory" in report.figure_stale_reasons(memory[0])[0]


def test_svg_and_pdf_figures_carry_provenance_too(tmp_path):
    import matplotlib.pyplot as plt

    rows_file = tmp_path / "rows.jsonl"
    _append(rows_file, _ladder_row("base", 1))
    src = report.source_stamp(rows_file)
    for name in ("f.svg", "f.pdf", "f.png"):
        fig, ax = plt.subplots()
        ax.set_title("a (title) with \\ and ) in it")
        p = report.save_figure(fig, tmp_path / name, [src], drawn_rows=1)
        plt.close(fig)
        assert report.read_stamp(p)["sources"] == [src], name
        assert report.figure_stale_reasons(p) == []
    _append(rows_file, _ladder_row("sft", 2))
    assert set(report.stale_figures(tmp_path)) == {
        tmp_path / n for n in ("f.svg", "f.pdf", "f.png")
    }


def test_a_project_figure_records_its_rows_relative_to_itself(tmp_path, monkeypatch):
    """Inside a project the rows path is relative to the figure's folder, so a moved checkout
    still checks (and a figure in one never points at another's rows)."""
    proj = tmp_path / "p"
    (proj / "results").mkdir(parents=True)
    (proj / "jacrl.toml").write_text("")
    monkeypatch.setenv("JACRL_ROOT", str(proj))
    _append(proj / "results" / ladder.RESULTS_FILE, _ladder_row("base", 1))
    text, figs = ladder.show(proj / "results", "")
    assert [p.parent for p in figs] == [proj / "figures"] * 2 and "figure(s)" not in text
    assert report.read_stamp(figs[0])["sources"][0]["path"] == "../results/rl_ladder.jsonl"
    moved = tmp_path / "moved"
    proj.rename(moved)
    monkeypatch.setenv("JACRL_ROOT", str(moved))
    assert report.stale_figures(moved / "figures") == {}
    _append(moved / "results" / ladder.RESULTS_FILE, _ladder_row("sft", 2))
    text, _ = ladder.show(moved / "results", None)  # no figures written: the check still runs
    assert "2 figure(s) in" in text and "ladder.png: ../results/rl_ladder.jsonl changed" in text


def test_show_lists_stale_figures_beside_the_ones_it_draws(tmp_path):
    import matplotlib.pyplot as plt

    res, figs = tmp_path / "results", tmp_path / "figures"
    res.mkdir()
    figs.mkdir()
    fig, _ = plt.subplots()
    fig.savefig(figs / "old.png")
    plt.close(fig)
    _append(res / ladder.RESULTS_FILE, _ladder_row("base", 1))
    text, written = ladder.show(res, figs)
    assert "1 figure(s) in" in text and "  old.png: no provenance" in text
    assert all(report.figure_stale_reasons(p) == [] for p in written)


# -------------------------------------------------------------------------------------------
# what a GRPO run did, per step (rollouts.jsonl, metrics.jsonl step events)
# -------------------------------------------------------------------------------------------

STEPS = {  # step -> (task, tier, reward, advantage, truncated) per rollout; groups of 2
    1: [
        ("t1", "none", 0.05, -0.02, True),
        ("t1", "compiles", 0.09, 0.02, False),
        ("t2", "empty", 0.0, 0.0, False),
        ("t2", "empty", 0.0, 0.0, False),
    ],
    2: [
        ("t1", "runs", 0.5, -0.25, False),
        ("t1", "exact", 1.0, 0.25, False),
        ("t2", "none", 0.1, -0.05, False),
        ("t2", "compiles", 0.2, 0.05, True),
    ],
    3: [
        ("t1", "exact", 1.0, 0.0, False),
        ("t1", "exact", 1.0, 0.0, False),
        ("t2", "runs", 0.6, 0.25, False),
        ("t2", "none", 0.1, -0.25, False),
    ],
}
TIMES = {1: (2.0, 0.5, 0.25), 2: (3.0, 0.75, 0.25), 3: (1.5, 0.5, 0.5)}


def _grpo_artifact(root: Path) -> Path:
    """A GRPO artifact directory as train_grpo leaves it (the files these views read)."""
    art = root / "sft_grpo-0123456789abcdef"
    art.mkdir(parents=True)
    rollouts = [
        {
            "step": s,
            "group": i // 2,
            "task_id": t,
            "completion": f"```jac\n{body}```",
            "body": body,
            "tier": tier,
            "reward": r,
            "advantage": a,
            "truncated": tr,
            "tokens": 16 if tr else 9,
        }
        for s, rs in STEPS.items()
        for i, (t, tier, r, a, tr) in enumerate(rs)
        for body in [f"\n# step {s}\nreturn {i};\nprint({i});\n" if tier != "empty" else ""]
    ]
    _append(art / "rollouts.jsonl", *rollouts)
    events = []
    for s, (g, rw, u) in TIMES.items():
        events.append(
            {
                "event": "train",
                "stage": "grpo",
                "iteration": s,
                "reward_mean": 0.1 * s,
                "reward_std": 0.05,
                "group_reward_std": 0.02,
                "kl": 0.01 * s,
                "truncated": 0.25,
            }
        )
        events.append(
            {
                "event": "step",
                "stage": "grpo",
                "time": 1.0 + s,
                "step": s,
                "advantage": "center",
                "generation_s": g,
                "reward_s": rw,
                "update_s": u,
                "reward_mean": 0.3,
                "exact": 1,
                "rollouts": 4,
                "groups_skipped": 0.0,
                "truncated": 0.25,
            }
        )
    _append(art / "metrics.jsonl", *events)
    return art


def test_reward_by_tier_per_step(tmp_path):
    art = _grpo_artifact(tmp_path)
    table = report.tier_table(art)
    assert list(table.columns) == [
        "exact",
        "runs",
        "compiles",
        "none",
        "empty",
        "rollouts",
        "reward_mean",
        "exact_share",
    ]
    assert list(table.index) == [1, 2, 3] and table.index.name == "step"
    assert table[["exact", "runs", "compiles", "none", "empty"]].values.tolist() == [
        [0, 0, 1, 1, 2],
        [1, 1, 1, 1, 0],
        [2, 1, 0, 1, 0],
    ]
    assert table.rollouts.tolist() == [4, 4, 4]
    assert table.reward_mean.tolist() == [0.035, 0.45, 0.675]
    assert table.exact_share.tolist() == [0.0, 0.25, 0.5]
    assert report.tier_table(tmp_path / "none").empty  # no rollouts.jsonl: empty, not an error

    fig = report.plot_tiers(art)
    (ax,) = fig.axes
    assert [c.get_label() for c in ax.containers] == ["exact", "runs", "compiles", "none", "empty"]
    heights = [[b.get_height() for b in c] for c in ax.containers]
    assert heights[0] == [0.0, 0.25, 0.5] and heights[4] == [0.5, 0.0, 0.0]
    assert [sum(col) for col in zip(*heights, strict=True)] == [1.0, 1.0, 1.0]  # shares stack to 1
    (line,) = ax.get_lines()
    assert line.get_label() == "mean reward" and list(line.get_ydata()) == [0.035, 0.45, 0.675]


def test_the_last_steps_groups(tmp_path):
    art = _grpo_artifact(tmp_path)
    g = report.last_groups(art, k=2, lines=2)
    assert list(g.columns) == [
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
    assert g.step.tolist() == [2] * 4 + [3] * 4 and g.group.tolist() == [0, 0, 1, 1] * 2
    assert g.task_id.tolist() == ["t1", "t1", "t2", "t2"] * 2
    assert g.tier.tolist() == [
        "runs",
        "exact",
        "none",
        "compiles",
        "exact",
        "exact",
        "runs",
        "none",
    ]
    assert g.reward.tolist() == [0.5, 1.0, 0.1, 0.2, 1.0, 1.0, 0.6, 0.1]
    assert g.advantage.tolist()[:4] == [-0.25, 0.25, -0.05, 0.05]
    assert g.truncated.tolist() == [False, False, False, True] + [False] * 4
    assert g.body[0] == "# step 2 ⏎ return 0;"  # the first two non-blank lines
    assert report.last_groups(art, k=1, lines=1).body.tolist() == ["# step 3"] * 4
    empty = _grpo_artifact(tmp_path / "e")
    (empty / "rollouts.jsonl").write_text(
        json.dumps({**json.loads((art / "rollouts.jsonl").read_text().splitlines()[2]), "step": 9})
        + "\n"
    )
    assert report.last_groups(empty, k=2).body.tolist() == [""]  # an empty body


def test_per_step_timings_and_the_training_figure_panel(tmp_path):
    art = _grpo_artifact(tmp_path)
    t = report.step_timings(art)
    assert list(t.index) == [1, 2, 3]
    assert t.to_dict("list") == {
        "generation_s": [2.0, 3.0, 1.5],
        "reward_s": [0.5, 0.75, 0.5],
        "update_s": [0.25, 0.25, 0.5],
        "total_s": [2.75, 4.0, 2.5],
    }
    (ax,) = report.plot_timings(art).axes
    assert [c.get_label() for c in ax.containers] == ["generation", "reward", "update"]
    tops = [b.get_y() + b.get_height() for b in ax.containers[-1]]
    assert tops == [2.75, 4.0, 2.5]  # stacked

    fig = report.plot_training(art)  # notebook 30's figure: the curves + the timings panel
    titles = [a.get_title() for a in fig.axes]
    assert titles == [
        "reward mean ± σ",
        "within-group σ",
        "KL",
        "truncated share",
        "seconds per step",
    ]
    assert list(fig.axes[0].get_lines()[0].get_xdata()) == [1, 2, 3]  # train events only
    assert len(fig.axes[4].containers) == 3

    sft = tmp_path / "sft-metrics.jsonl"
    _append(
        sft,
        *(
            {"event": "train", "stage": "sft", "iteration": i, "train_loss": 2.0 / i}
            for i in (1, 2)
        ),
    )
    figs = tmp_path / "figures"
    p = report.write_training_figure([("sft", sft), ("grpo", art)], figs)  # figures/training.png
    rec = report.read_stamp(p)
    assert [s["rows"] for s in rec["sources"]] == [2, 6]
    assert report.stale_figures(figs) == {}
    assert sorted(x.name for x in figs.iterdir()) == [
        "training.pdf",
        "training.png",
        "training.svg",
    ]
    sft.rename(sft.with_suffix(".gone"))  # a run's metrics are git-ignored: a clone has none
    assert report.stale_figures(figs) == {}
    sft.with_suffix(".gone").rename(sft)
    _append(art / "metrics.jsonl", {"event": "step", "stage": "grpo", "step": 4})
    assert sorted(report.stale_figures(figs)) == [
        p.with_suffix(s) for s in (".pdf", ".png", ".svg")
    ]
    grid = report.plot_training_runs([("sft", sft), ("grpo", art)])
    assert len(grid.axes) == 6 and all(a.axison for a in grid.axes)  # sft: 1 panel, no blanks
    assert [ln.get_label() for ln in grid.axes[0].get_lines()] == ["train loss"]


# -------------------------------------------------------------------------------------------
# graded measures where pass@1 sits at its floor, and GRPO runs without a learning signal
# -------------------------------------------------------------------------------------------


def _graded_row(cond: str, tiers: list[str], rewards: list[float], training=None) -> dict:
    row = {
        **_ladder_row(cond, sum(t == "exact" for t in tiers)),
        "tasks": len(tiers),
        "runs": sum(t in ("exact", "runs") for t in tiers),
        "per_task": [
            {"id": f"t{i}", "greedy_exact": t == "exact", "greedy_tier": t, "greedy_reward": r}
            for i, (t, r) in enumerate(zip(tiers, rewards, strict=True))
        ],
    }
    return {**row, "training": training} if training is not None else row


def test_graded_measures_and_their_intervals():
    """compile % counts exact, runs and compiles; run % is the row's clean exits; each with the
    Wilson interval scipy computes; the mean reward's interval is scipy's Student-t interval
    (clipped to [0, 1], where rewards lie)."""
    from scipy.stats import binomtest, sem, t

    from jacrl.report.graded import graded

    tiers = ["exact", "runs", "compiles", "none", "empty", "compiles"]
    rewards = [1.0, 0.55, 0.32, 0.12, 0.0, 0.3]
    g = graded(_graded_row("sft", tiers, rewards))
    assert g["compile_pct"] == 66.67  # 4 of 6, by hand
    for name, k in (("compile", 4), ("run", 2)):
        ci = binomtest(k, 6).proportion_ci(method="wilson")
        assert (g[f"{name}_lo"], g[f"{name}_hi"]) == (
            round(100 * ci.low, 2),
            round(100 * ci.high, 2),
        )
    mean = sum(rewards) / 6
    lo, hi = t.interval(0.95, 5, loc=mean, scale=sem(rewards))
    assert g["reward_mean"] == round(mean, 4)
    assert abs(g["reward_lo"] - max(0.0, lo)) < 1e-3 and abs(g["reward_hi"] - hi) < 1e-3
    old = _graded_row("sft", tiers, rewards)
    for p in old["per_task"]:
        del p["greedy_reward"]  # a row made before the reward was recorded: no mean, no guess
    got = graded(old)
    assert all(math.isnan(got[k]) for k in ("reward_mean", "reward_lo", "reward_hi"))
    # a row without per-task outcomes: nothing to count, every measure missing, no error
    empty = graded({"runs": 0})
    assert len(empty) == 9 and all(math.isnan(v) for v in empty.values())


def test_graded_table_pools_a_lines_training_seeds():
    """Two seeds of one cell: the graded line counts tasks x seeds (compile 3 of 8, by hand),
    says 2 seeds, and a later row of the same seed replaces that seed's (never a third seed)."""
    from jacrl.report.tables import graded_table

    s0 = _graded_row("sft", ["exact", "none", "none", "none"], [1.0, 0.0, 0.0, 0.0])
    s1 = _graded_row("sft", ["compiles", "compiles", "none", "none"], [0.3, 0.3, 0.1, 0.1])
    stale = _graded_row("sft", ["none"] * 4, [0.0] * 4)
    for r, seed in ((stale, 1), (s0, 0), (s1, 1)):
        r["train_seed"] = seed
    (line,) = graded_table([stale, s0, s1]).iloc[:, 0].tolist()
    assert line.startswith("c38 [") and "r12 [" in line and line.endswith("(2 seeds)")
    assert "R0.23 [" in line  # (1 + 0.6 + 0.2) / 8, by hand
    (alone,) = graded_table([s0]).iloc[:, 0].tolist()
    assert alone.startswith("c25 [") and "seeds" not in alone


def test_show_marks_a_grpo_cell_without_signal_or_update(tmp_path):
    """A GRPO stage none of whose groups had a reward spread (signal_steps 0) is shown as
    [no signal], an lr-0 control as [no update], one that learned without a mark; the graded
    table is printed beside the pivot."""
    base = _graded_row("base", ["none"] * 4, [0.1] * 4)
    sft = _graded_row("sft", ["exact", "compiles", "none", "none"], [1.0, 0.3, 0.1, 0.1])
    grpo = {"signal_rate": 0.0, "signal_steps": 0, "steps": 4, "adapter_delta": 0.0}
    dead = _graded_row("sft_grpo", ["exact", "compiles", "none", "none"], [1, 0.3, 0.1, 0.1])
    dead["training"] = {"grpo": grpo}
    lr0 = _graded_row("sft_grpo_lr0", ["exact", "none", "none", "none"], [1, 0.1, 0.1, 0.1])
    lr0["training"] = {"grpo": {**grpo, "signal_rate": 0.5, "signal_steps": 3}}
    raw = _graded_row("raw_grpo", ["runs", "none", "none", "none"], [0.5, 0.1, 0.1, 0.1])
    raw["training"] = {"grpo": {**grpo, "signal_steps": 2, "adapter_delta": 0.01}}
    for r in (base, sft, dead, lr0, raw):
        r["cell_key"] = f"{r['condition']}-key"
    text = report.show_text(report.mark_stale([base, sft, dead, lr0, raw]), include_stale=True)
    conds = {"base", "sft", "sft_grpo", "sft_grpo_lr0", "raw_grpo"}
    pivot = text.split("read pass@k")[0].splitlines()  # the first table's lines
    lines = {tok: ln for ln in pivot for tok in ln.split()[:2] if tok in conds}
    assert "[no signal]" in lines["sft_grpo"] and "[no update]" in lines["sft_grpo_lr0"]
    assert "[no" not in lines["raw_grpo"] and "[no" not in lines["sft"]
    assert "not a result of the method" in text
    assert "c50 [" in text and "R0.38 [" in text  # sft's graded line: 2 of 4 compile


def test_rows_made_before_the_signal_record_are_marked_by_their_adapter():
    """The committed learnable rows' sft_grpo cells predate the signal record; their adapter's
    weights hash is their sft parent's (GRPO never moved it), so show marks them [no update];
    sft_dpo's adapter moved and stays unmarked."""
    from jacrl.report.graded import NO_UPDATE, signal_marks

    rows = report.load_rows(ROOT / "results" / "smollm2-learnable" / "rl_ladder.jsonl")
    marks = signal_marks(rows)
    by_cond = {}
    for r in rows:
        by_cond.setdefault(r["condition"], set()).add(marks[id(r)])
    assert by_cond["sft_grpo"] == {NO_UPDATE} and by_cond["sft_dpo"] == {""}
    moved = copy.deepcopy(next(r for r in rows if r["condition"] == "sft_grpo"))
    moved["provenance"]["adapter_weights_hash"] = "another"  # GRPO moved this one: no mark
    assert signal_marks([*rows, moved])[id(moved)] == ""
    sft = {(r["rung"], r["kind"]): r for r in rows if r["condition"] == "sft"}
    for r in rows:  # the premise, checked by hand: equal hashes, parent by parent
        if r["condition"] == "sft_grpo":
            mine = r["provenance"]["adapter_weights_hash"]
            assert mine == sft[(r["rung"], r["kind"])]["provenance"]["adapter_weights_hash"]


def test_the_training_table_has_a_line_per_seed():
    """Each training seed of a GRPO cell is its own line (its own signal and adapter move); a
    later row of the same seed replaces that seed's line."""
    from jacrl.report.markdown import training_markdown

    def grpo_row(seed, steps):
        row = _graded_row("sft_grpo", ["exact", "none"], [1.0, 0.0])
        rec = {"signal_rate": steps / 10, "signal_steps": steps, "steps": 10}
        row.update(train_seed=seed, training={"grpo": {**rec, "adapter_delta": 0.5}})
        return row

    text = training_markdown([grpo_row(0, 2), grpo_row(1, 3), grpo_row(1, 4)])
    lines = [ln for ln in text.splitlines() if ln.startswith("| 1 | sft_grpo")]
    assert [ln.split(" | ")[2] for ln in lines] == ["0", "1"]
    assert ["2/10" in lines[0], "4/10" in lines[1]] == [True, True]


def test_the_family_breakdown_pools_seeds_and_lists_each_seed():
    """Two seeds of one cell: the family table (and its heat map) pools them (passes and tasks
    summed over seeds, by hand), the per-seed table keeps a line per seed, and a later row of a
    seed replaces that seed's; families come from the per-task records."""
    from jacrl.report.families import family_seed_table, family_table
    from jacrl.report.markdown import families_markdown

    def seeded(seed, passes):
        row = _graded_row("sft", ["exact" if p else "none" for p in passes], [1.0] * 4)
        for t, fam in zip(row["per_task"], ["arch", "arch", "syn", "syn"], strict=True):
            t["family"] = fam
        row["train_seed"] = seed
        return row

    stale = seeded(1, [0, 0, 0, 0])
    rows = [stale, seeded(0, [1, 0, 0, 0]), seeded(1, [1, 1, 1, 0])]
    ft = family_table(rows)
    assert list(zip(ft.family, ft.passed, ft.tasks, strict=True)) == [("arch", 3, 4), ("syn", 1, 4)]
    st = family_seed_table(rows)
    assert list(st.seed) == [0, 1]
    assert st[["arch", "syn", "all"]].values.tolist() == [
        ["1/2", "0/2", "1/4"],
        ["2/2", "1/2", "3/4"],
    ]
    assert (
        families_markdown(rows).splitlines()[0] == "| rung | condition | seed | arch | syn | all |"
    )
    assert family_seed_table(rows, kind="mem").empty
