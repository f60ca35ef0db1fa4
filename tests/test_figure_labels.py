"""The ladder figures say what they show: pass@k without an interval says so, each sampled panel
names its temperature, a condition with no value in a panel is named there, and GRPO's reward
band stays inside [0, 1]."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from jacrl import report

ROOT = Path(__file__).resolve().parents[1]


def test_passk_panels_name_temperature_absent_conditions_and_no_interval():
    rows = report.load_rows(ROOT / "results" / "rl_ladder.jsonl")  # base mem is never sampled
    fig = report.plot_curves(rows, "passk_pct")
    assert "no interval drawn" in fig._suptitle.get_text()
    gen, mem = fig.axes[:2]
    assert gen.get_title().endswith("(T 1)")
    temps = sorted({r["temperature"] for r in rows if r["kind"] == "mem" and r["n"]})
    assert mem.get_title().endswith(f"(T {', '.join(f'{t:g}' for t in temps)})")
    assert [t.get_text() for t in mem.texts] == ["no value here: base"]
    assert list(gen.texts) == []
    greedy = report.plot_curves(rows)
    assert "Wilson" in greedy._suptitle.get_text() and "(T" not in greedy.axes[0].get_title()


def test_reward_band_is_clipped_to_0_1(tmp_path):
    metrics = tmp_path / "metrics.jsonl"
    metrics.write_text(
        "".join(
            json.dumps(
                {
                    "event": "train",
                    "stage": "grpo",
                    "iteration": i,
                    "reward_mean": m,
                    "reward_std": 0.4,
                }
            )
            + "\n"
            for i, m in ((1, 0.1), (2, 0.9))
        )
    )
    fig = report.plot_training(metrics)
    band = fig.axes[0].collections[0].get_paths()[0].vertices[:, 1]
    assert np.nanmin(band) >= 0 and np.nanmax(band) <= 1
