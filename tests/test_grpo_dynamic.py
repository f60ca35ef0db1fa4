"""GRPO's dynamic sampling (DAPO: a step trains on groups whose rewards differ, drawn from more
prompts than its batch, at most max_draws draws) and what a GRPO run prints: real GRPO on jac-tiny
with the sandboxed reward, tiny iteration counts."""

import json
from types import SimpleNamespace

import pytest

from jacrl.config import GRPOConfig, configure
from jacrl.train import grpo
from jacrl.train.grpo_compat import fill_batch, has_signal


def _draws(*rewards_per_draw):
    """A draw() handing out hand-made groups (one list of rewards each), draw by draw."""
    it = iter(rewards_per_draw)
    return lambda: [SimpleNamespace(rewards=r) for r in next(it)]


def test_fill_batch_keeps_groups_with_signal_and_caps_the_draws():
    draw = _draws([[0, 0], [0.5, 0.5]], [[0, 1], [0.2, 0.25]], [[1, 0], [0.3, 0.9]])
    kept, passed, draws = fill_batch(draw, 2, 0.1, 5)
    assert draws == 3  # the first two draws held one group with signal: a third was needed
    assert [g.rewards for g in kept] == [[0, 1], [1, 0]]
    # the groups that agreed, the one below the span and the surplus one with signal
    assert [g.rewards for g in passed] == [[0, 0], [0.5, 0.5], [0.2, 0.25], [0.3, 0.9]]
    # a task set whose groups all agree: the cap holds, the latest groups fill the batch
    flat = _draws([[1, 1], [0, 0]], [[0.5, 0.5], [0.2, 0.2]], [[9, 9], [9, 9]])
    kept, passed, draws = fill_batch(flat, 2, 0.1, 2)
    assert draws == 2 and [g.rewards for g in kept] == [[0.5, 0.5], [0.2, 0.2]]
    assert [g.rewards for g in passed] == [[1, 1], [0, 0]]
    assert not has_signal([0.3, 0.3], 0.0) and has_signal([0.3, 0.31], 0.0)


def test_dynamic_sampling_is_a_config_knob(monkeypatch):
    monkeypatch.setenv("JACRL_GRPO_DYNAMIC_SAMPLING", "1")
    monkeypatch.setenv("JACRL_GRPO_MAX_DRAWS", "3")
    cfg = configure(GRPOConfig(), env=__import__("os").environ, prefix="JACRL_GRPO_")
    assert cfg.dynamic_sampling is True and cfg.max_draws == 3
    with pytest.raises(ValueError, match="max_draws"):
        GRPOConfig(max_draws=0)


def _read(path):
    return [json.loads(x) for x in path.read_text().splitlines()]


def _run(tiny, tasks, out_root, **over):
    cfg = GRPOConfig(
        **{
            "iters": 3,
            "learning_rate": 1e-4,
            "beta": 0.04,
            "group_size": 4,
            "batch_size": 1,
            "max_completion_length": 32,
            "lora_layers": 2,
            "steps_per_report": 1,
            "temperature": 1.0,
            "dynamic_sampling": True,
            "max_draws": 4,
            **over,
        }
    )
    art = grpo(tiny, tasks, None, cfg, out_root, condition="dyn")
    steps = [r for r in _read(art.path / "metrics.jsonl") if r["event"] == "step"]
    return cfg, art, steps, _read(art.path / "rollouts.jsonl")


def _span(rows):
    return max(r["reward"] for r in rows) - min(r["reward"] for r in rows)


def test_dynamic_sampling_trains_on_groups_with_signal(tiny, harness_tasks, tmp_path, capfd):
    """Garbage rollouts of the untrained model differ only by their similarity (spans ~0.004 to
    0.012 at 32 tokens): a span of 0.008 keeps some groups and discards others. Each step
    draws max_draws groups together; the group trained on spans >= 0.008 when one did (else all
    spanned less and the last fills the batch), and the discarded rollouts are in rollouts.jsonl,
    marked, with advantage 0. The terminal keeps the
    progress bar and the per-step summary but not mlx-lm-lora's per-step Clipping line (its
    ratios are in metrics.jsonl)."""
    cfg, art, steps, rollouts = _run(tiny, harness_tasks, tmp_path, min_group_span=0.008)
    out = capfd.readouterr()
    terminal = out.out + out.err
    assert "Clipping:" not in terminal
    assert "Training:" in terminal and "Iter 3:" in terminal and "KL Divergence" in terminal
    train = [r for r in _read(art.path / "metrics.jsonl") if r["event"] == "train"]
    assert len(train) == 3 and all("train_clip_ratio_total" in r for r in train)

    assert [s["step"] for s in steps] == [1, 2, 3]
    for s in steps:
        mine = [r for r in rollouts if r["step"] == s["step"]]
        used = [r for r in mine if not r["discarded"]]
        dropped = [r for r in mine if r["discarded"]]
        assert len(used) == cfg.group_size and s["rollouts"] == len(used)
        # over-sampled once up front: max_draws batches drawn together every step
        assert s["rollouts_discarded"] == len(dropped) == (cfg.max_draws - 1) * cfg.group_size
        assert s["draws"] == cfg.max_draws and s["groups_drawn"] == s["draws"]
        groups = [dropped[i : i + cfg.group_size] for i in range(0, len(dropped), cfg.group_size)]
        if s["groups_kept"] == 1:  # a group with signal was found: it trained
            assert _span(used) >= cfg.min_group_span
            assert any(r["advantage"] != 0 for r in used)
        else:  # none had signal: the last group drawn fills the batch, advantage 0
            assert all(_span(g) < cfg.min_group_span for g in groups + [used])
            assert all(r["advantage"] == 0 for r in used)
        assert s["groups_skipped"] == pytest.approx(
            1 - s["groups_kept"] / s["groups_drawn"], abs=1e-4
        )
        assert all(r["advantage"] == 0.0 and r["group"] is None for r in dropped)
        assert s["reward_mean"] == pytest.approx(
            sum(r["reward"] for r in used) / len(used), abs=1e-5
        )
    assert any(r["discarded"] for r in rollouts)  # both kinds happened, so both were checked
    assert any(s["groups_kept"] for s in steps)
    summary = art.manifest["summary"]
    assert summary["dynamic_sampling"] is True
    assert summary["rollouts_discarded"] == sum(r["discarded"] for r in rollouts)


def test_dynamic_sampling_draw_cap_holds_when_every_group_agrees(tiny, harness_tasks, tmp_path):
    """One-token rollouts all score the same: no group ever has signal, so every step makes
    exactly max_draws draws, trains on its last one with advantage 0, and ends."""
    cfg, art, steps, rollouts = _run(
        tiny,
        harness_tasks,
        tmp_path,
        iters=2,
        max_draws=3,
        max_completion_length=1,
        min_group_span=0.1,
    )
    assert len({r["reward"] for r in rollouts}) == 1  # the premise: every rollout agrees
    assert [s["draws"] for s in steps] == [3, 3]
    assert all(s["groups_kept"] == 0 and s["groups_skipped"] == 1.0 for s in steps)
    assert len(rollouts) == 2 * 3 * cfg.group_size
    assert sum(r["discarded"] for r in rollouts) == 2 * 2 * cfg.group_size
    assert all(r["advantage"] == 0.0 for r in rollouts)
    assert art.manifest["summary"]["draws_mean"] == 3


def test_reports_read_what_the_updates_trained_on(tmp_path):
    """jacrl.report.grpo's tables count the rollouts trained on; the discarded ones on request."""
    from jacrl import jsonl
    from jacrl.report import grpo as report

    rows = [
        {
            "step": 1,
            "group": 0,
            "task_id": "t",
            "completion": "",
            "body": "",
            "tier": "exact",
            "reward": 1.0,
            "advantage": 0.5,
            "truncated": False,
            "tokens": 3,
            "discarded": False,
        },
        {
            "step": 1,
            "group": None,
            "task_id": "u",
            "completion": "",
            "body": "",
            "tier": "none",
            "reward": 0.0,
            "advantage": 0.0,
            "truncated": True,
            "tokens": 9,
            "discarded": True,
        },
    ]
    (tmp_path / "rollouts.jsonl").write_text("".join(jsonl.dumps(r) for r in rows))
    assert [r["task_id"] for r in report.rollouts(tmp_path)] == ["t"]
    assert len(report.rollouts(tmp_path, discarded=True)) == 2
    table = report.tier_table(tmp_path)
    assert table.loc[1, "rollouts"] == 1 and table.loc[1, "exact_share"] == 1.0
