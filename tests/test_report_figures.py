"""The report's figures drawn from the committed rows (results/rl_ladder.jsonl) with real
matplotlib: the curves keep conditions apart (dodged Wilson error bars, one legend outside the
panels), the per-family breakdown counts each family's passes, and every figure is written as PNG,
SVG and PDF, each carrying the rows' provenance (fresh, then stale once a row is appended)."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

from jacrl import report

ROOT = Path(__file__).resolve().parent.parent
COMMITTED = ROOT / "results" / "rl_ladder.jsonl"
FIGURES = ["ladder.png", "ladder_passk.png", "ladder_families.png"]


def _rows() -> list[dict]:
    return report.load_rows(COMMITTED)


def _bars(ax) -> dict[str, list[tuple[float, float, float]]]:
    """{condition: [(x, interval low, interval high)]} of a panel's error bars."""
    out = {}
    for c in ax.containers:
        (segments,) = [lc.get_segments() for lc in c.lines[2]]
        out[c.get_label()] = [(s[0][0], s[0][1], s[1][1]) for s in segments]
    return out


def test_curves_put_conditions_side_by_side_with_their_wilson_intervals():
    rows = _rows()
    fig = report.plot_curves(rows)
    gen, mem = fig.axes
    assert gen.get_title() == "jac-tiny: holdout tasks (gen)"
    assert [ax.get_legend() for ax in fig.axes] == [None, None]  # never on the data
    (legend,) = fig.legends
    assert [t.get_text() for t in legend.get_texts()] == ["base", "sft", "sft_grpo"]
    bars = _bars(mem)
    for rung in (0, 1):  # three conditions, three x positions within each rung, none shared
        xs = [bars[c][rung][0] for c in bars]
        assert len(set(xs)) == 3 and all(abs(x - rung) < 0.4 for x in xs)
    df = report.frame(rows)
    line = df[(df.kind == "mem") & (df.condition == "sft") & (df.rung == "1")].iloc[0]
    _, lo, hi = bars["sft"][0]
    assert (round(lo, 2), round(hi, 2)) == (line.ci_lo, line.ci_hi) == (20.65, 100.0)
    assert [t.get_text() for t in mem.get_xticklabels()] == ["1\nn=1", "3\nn=3"]
    passk = report.plot_curves(rows, "passk_pct")
    assert all(not ax.containers[0].has_yerr for ax in passk.axes)  # no interval for pass@k
    assert "k = 4" in passk.get_suptitle()


def test_the_family_breakdown_counts_each_familys_passes():
    rows = _rows()
    ft = report.family_table(rows)
    r3 = ft[(ft.rung == "3") & (ft.condition == "sft") & (ft.kind == "mem")]
    assert list(zip(r3.family, r3.passed, r3.tasks, strict=True)) == [
        ("arch", 1, 1),
        ("err", 1, 1),
        ("lib", 1, 1),
    ]
    gen = ft[(ft.rung == "1") & (ft.condition == "base") & (ft.kind == "gen")]
    assert list(gen.family) == ["arch", "err", "lib", "osp", "syn", "text"]
    assert set(gen.tasks) == {1} and set(gen.passed) == {0}
    by_family_only = [{k: v for k, v in r.items() if k != "per_task"} for r in rows]
    assert report.family_table(by_family_only).equals(ft)  # rows without per-task outcomes
    fig = report.plot_families(rows)
    gen_ax, mem_ax = fig.axes[:2]
    assert [t.get_text() for t in mem_ax.get_xticklabels()] == ["arch", "err", "lib", "all"]
    assert [t.get_text() for t in mem_ax.get_yticklabels()][3:5] == ["r3 base", "r3 sft"]
    texts = {
        (round(t.get_position()[1]), round(t.get_position()[0])): t.get_text() for t in mem_ax.texts
    }
    assert texts[4, 3] == "3/3" and texts[3, 3] == "0/3" and texts[0, 1] == "·"


def test_every_figure_is_png_svg_and_pdf_each_with_the_rows_provenance(tmp_path):
    rows_file = tmp_path / "rl_ladder.jsonl"
    shutil.copy(COMMITTED, rows_file)
    figs = tmp_path / "figures"
    paths = report.write_figures(report.load_rows(rows_file), figs, rows_file)
    assert [p.name for p in paths] == FIGURES
    files = sorted(p.name for p in figs.iterdir())
    assert files == sorted(f"{Path(n).stem}{s}" for n in FIGURES for s in (".png", ".svg", ".pdf"))
    sha = hashlib.sha256(rows_file.read_bytes()).hexdigest()
    for name in files:
        rec = report.read_stamp(figs / name)
        assert rec["figure"] == name and rec["sources"][0]["sha256"] == sha, name
    assert report.stale_figures(figs) == {}
    before = {n: (figs / n).read_bytes() for n in files}
    report.write_figures(report.load_rows(rows_file), figs, rows_file)  # redrawn: same bytes
    assert {n: (figs / n).read_bytes() for n in files} == before

    with open(rows_file, "a") as f:
        f.write(json.dumps(report.load_rows(rows_file)[0]) + "\n")
    n = len(report.load_rows(COMMITTED))
    why = f"{rows_file.resolve()} changed ({n} rows when drawn, {n + 1} now)"
    assert report.stale_figures(figs) == {figs / name: why for name in files}
