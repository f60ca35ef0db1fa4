"""A GRPO run stopped part way goes on from its last report (jacrl.train.checkpoint): real GRPO on
jac-tiny with the sandboxed reward, stopped at step 3 of 4 and built again, writes the same
adapter bytes, rollouts and step records as the run that never stopped, without calibrating its
temperature again; a checkpoint of another key is not used."""

from __future__ import annotations

import importlib
import json
import shutil

import pytest

from jacrl.config import GRPOConfig
from jacrl.train import checkpoint, grpo, grpo_loop

grpo_mod = importlib.import_module("jacrl.train.grpo")  # the module (jacrl.train.grpo: a function)

CFG = GRPOConfig(
    iters=4,
    learning_rate=1e-3,
    beta=0.04,
    group_size=4,
    batch_size=1,
    max_completion_length=24,
    lora_layers=2,
    steps_per_report=2,
    temperature=0.0,  # calibrated: a resumed run takes the checkpoint's, not a second calibration
    temperature_grid=(1.0, 0.7),
    min_group_span=0.0,  # every group trains, so the adapter moves every step
)


def _read(path):
    return [json.loads(x) for x in path.read_text().splitlines()]


def _steps(art):
    drop = {"time", "generation_s", "reward_s", "update_s"}
    return [
        {k: v for k, v in r.items() if k not in drop}
        for r in _read(art.path / "metrics.jsonl")
        if r["event"] == "step"
    ]


def test_a_stopped_run_goes_on_where_it_stopped(tiny, harness_tasks, tmp_path, monkeypatch):
    tasks = harness_tasks[:3]
    whole = grpo(tiny, tasks, None, CFG, tmp_path / "whole", condition="res")
    assert whole.manifest["summary"]["adapter_delta"] > 0
    assert whole.manifest["summary"]["resumed_from_step"] is None

    real_draw, calls = grpo_loop.draw, []

    def draw_then_stop(policy, tok, records, tasks, rollouts, seed):
        if seed == CFG.seed * grpo_loop.SEED_STRIDE + 3:  # step 3: after step 2's checkpoint
            raise KeyboardInterrupt
        return real_draw(policy, tok, records, tasks, rollouts, seed)

    monkeypatch.setattr(grpo_loop, "draw", draw_then_stop)
    with pytest.raises(KeyboardInterrupt):
        grpo(tiny, tasks, None, CFG, tmp_path / "stopped", condition="res")
    (resume,) = (tmp_path / "stopped").glob(".res-*.resume")
    assert (resume / "latest").read_text().strip() == "step-000002"
    assert not list((tmp_path / "stopped").glob(".res-*.tmp-*"))  # the build's temp dir went

    monkeypatch.setattr(grpo_loop, "draw", real_draw)
    calibrate = grpo_mod.calibrate_temperature
    monkeypatch.setattr(
        grpo_mod, "calibrate_temperature", lambda *a, **k: calls.append(1) or calibrate(*a, **k)
    )
    again = grpo(tiny, tasks, None, CFG, tmp_path / "stopped", condition="res")
    assert calls == []  # the temperature came from the checkpoint
    summary = again.manifest["summary"]
    assert summary["resumed_from_step"] == 2
    assert summary["temperature"] == whole.manifest["summary"]["temperature"]
    assert (
        summary["temperature_calibration"] == whole.manifest["summary"]["temperature_calibration"]
    )
    assert again.manifest["weights_hash"] == whole.manifest["weights_hash"]
    assert summary["adapter_delta"] == whole.manifest["summary"]["adapter_delta"]
    assert _steps(again) == _steps(whole) and [s["step"] for s in _steps(again)] == [1, 2, 3, 4]
    assert _read(again.path / "rollouts.jsonl") == _read(whole.path / "rollouts.jsonl")
    trains = [r for r in _read(again.path / "metrics.jsonl") if r["event"] == "train"]
    assert [r["iteration"] for r in trains] == [2, 4]
    assert summary["signal_steps"] == whole.manifest["summary"]["signal_steps"]
    assert not resume.exists()  # the artifact is complete: nothing left to resume


def test_a_checkpoint_of_another_key_is_not_used(tmp_path):
    root = tmp_path / ".sft-0123.resume"
    (root / "step-000010").mkdir(parents=True)
    (root / "step-000010" / "state.json").write_text(json.dumps({"key": "k1", "step": 10}))
    (root / "latest").write_text("step-000010\n")
    assert checkpoint.latest(root, "k1").step == 10
    assert checkpoint.latest(root, "k2") is None and not root.exists()
    assert checkpoint.latest(root, "k1") is None  # nothing there any more


def test_the_resume_dir_is_named_for_the_artifact(tmp_path):
    assert checkpoint.resume_dir(tmp_path / ".grpo-ab12.tmp-77") == tmp_path / ".grpo-ab12.resume"
    with pytest.raises(ValueError, match="not a build's temp dir"):
        checkpoint.resume_dir(tmp_path / "grpo-ab12")


# --- the module's parts on a two-layer MLX model (mutation testing found them untested) --------


def _policy():
    """A two-layer model (its optimizer state holds a list, as a LoRA model's layers do), Adam,
    and a function that trains it n steps."""
    import mlx.core as mx
    import mlx.nn as nn
    import mlx.optimizers as optim

    class Two(nn.Module):
        def __init__(self):
            super().__init__()
            self.layers = [nn.Linear(3, 3), nn.Linear(3, 2)]

        def __call__(self, x):
            for layer in self.layers:
                x = layer(x)
            return x

    mx.random.seed(0)
    model, opt = Two(), optim.Adam(learning_rate=0.1)
    step = nn.value_and_grad(model, lambda m: (m(mx.ones((1, 3))) ** 2).sum())

    def train(n):
        for _ in range(n):
            _, grads = step(model)
            opt.update(model, grads)
            mx.eval(model.parameters(), opt.state)

    return model, opt, train


def _flat(tree):
    import numpy as np
    from mlx.utils import tree_flatten

    return {k: np.array(v) for k, v in tree_flatten(tree)}


def _same(a, b):
    import numpy as np

    return a.keys() == b.keys() and all(np.array_equal(a[k], b[k]) for k in a)


def test_save_keeps_the_last_checkpoint_only_and_restore_puts_the_run_back(tmp_path):
    model, opt, train = _policy()
    out, root = tmp_path / "run", tmp_path / ".grpo-ab.resume"
    out.mkdir()
    metrics, rollouts = out / "metrics.jsonl", out / "rollouts.jsonl"
    train(2)
    metrics.write_text('{"event": "step", "step": 2}\n')
    checkpoint.save(root, "k", 2, model, opt, [metrics, rollouts], temperature=0.7)
    weights, state = _flat(model.trainable_parameters()), _flat(opt.state)
    assert "layers.1.weight.m" in state  # Adam's moments, under the list of layers
    train(1)
    checkpoint.save(root, "k", 3, model, opt, [metrics, rollouts])
    assert sorted(p.name for p in root.iterdir()) == ["latest", "step-000003"]  # older ones go

    # a kill between a checkpoint's rename and its `latest`: the step is saved again, over it
    (root / "latest").write_text("step-000002\n")
    shutil.copytree(root / "step-000003", root / "step-000002")
    model, opt, train = _policy()
    train(2)
    checkpoint.save(root, "k", 2, model, opt, [metrics, rollouts], temperature=0.7)
    ck = checkpoint.latest(root, "k")
    assert (ck.step, ck.state["temperature"]) == (2, 0.7)
    assert sorted(p.name for p in ck.path.iterdir()) == [
        "adapters.safetensors",
        "metrics.jsonl",
        "optimizer.safetensors",
        "state.json",
    ]  # no rollouts.jsonl: the run had written none

    train(3)  # the killed run went on, and left logs the checkpoint does not hold
    metrics.write_text('{"event": "step", "step": 5}\n')
    rollouts.write_text("{}\n")
    fresh, fresh_opt, _ = _policy()
    checkpoint.restore(ck, fresh, fresh_opt, out, [metrics, rollouts])
    assert _same(_flat(fresh.trainable_parameters()), weights)
    assert _same(_flat(fresh_opt.state), state)
    assert metrics.read_text() == '{"event": "step", "step": 2}\n'
    assert not rollouts.exists()
    checkpoint.restore(ck, fresh, fresh_opt, out, [metrics, rollouts])  # nothing to remove: fine
    assert not rollouts.exists()


def test_reload_gives_the_callback_each_kind_of_record(tmp_path):
    from types import SimpleNamespace

    metrics = SimpleNamespace(train=[], val=[], steps=[])
    path = tmp_path / "metrics.jsonl"
    recs = [{"event": "train", "iteration": 2}, {"event": "val", "iteration": 2}]
    recs.append({"event": "step", "step": 2})
    path.write_text("".join(json.dumps(r) + "\n" for r in recs))
    checkpoint.reload(metrics, path)
    assert (metrics.train, metrics.val, metrics.steps) == ([recs[0]], [recs[1]], [recs[2]])
    checkpoint.reload(metrics, tmp_path / "none.jsonl")  # a run that had logged nothing yet
    assert len(metrics.train) + len(metrics.val) + len(metrics.steps) == 3


def test_assign_walks_dicts_by_key_and_lists_by_index():
    tree = {"a": [{"b": 1}, 2], "c": 3}
    checkpoint._assign(tree, ["a", "0", "b"], 10)
    checkpoint._assign(tree, ["a", "1"], 20)
    checkpoint._assign(tree, ["c"], 30)
    assert tree == {"a": [{"b": 10}, 20], "c": 30}
