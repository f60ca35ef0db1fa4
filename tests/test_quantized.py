"""Training and evaluation on a 4-bit base (jac-tiny quantized by mlx-lm's convert, the
`tiny_q4` fixture): SFT, GRPO with the shared KL reference, RFT, evaluation and `jacrl models
check`, end to end on real MLX and jaclang with tiny iteration counts. LoRA trains in fp32 over
the frozen quantized layers; the adapter holds only LoRA weights."""

import json

import mlx.core as mx
import pytest
from quick import QUICK

from jacrl import evaluate as ev
from jacrl import train as tr
from jacrl.cli import main
from jacrl.config import EvalConfig, GRPOConfig, RFTConfig


def _lora_only(adapter_dir):
    w = mx.load(str(adapter_dir / "adapters.safetensors"))
    assert w and all(k.endswith(("lora_a", "lora_b")) for k in w), sorted(w)[:4]
    assert all(v.dtype == mx.float32 for v in w.values())
    return w


def test_the_fixture_is_quantized(tiny_q4):
    from jacrl.models.registry import load

    cfg = json.loads(open(f"{tiny_q4}/config.json").read())
    assert cfg["quantization"]["bits"] == 4 and cfg["quantization"]["group_size"] == 64
    model, _ = load(tiny_q4)
    kinds = {type(m).__name__ for _, m in model.named_modules()}
    assert "QuantizedLinear" in kinds and "Linear" not in kinds, kinds


def test_models_check_on_a_4bit_model(tiny_q4, capsys):
    assert main(["models", "check", tiny_q4]) == 0
    out = capsys.readouterr().out
    assert "error" not in out.lower(), out


def test_sft_grpo_rft_and_eval_on_a_4bit_base(tiny_q4, harness_tasks, tmp_path):
    task = min(harness_tasks, key=lambda t: len(t["prompt"]) + len(t["answer"]))  # cheapest
    sft = tr.sft(tiny_q4, [task], None, QUICK, tmp_path)
    w = _lora_only(sft.adapter_path)
    assert any(mx.abs(v).max().item() > 0 for k, v in w.items() if k.endswith("lora_b"))

    row = ev.evaluate(tiny_q4, sft.adapter_path, [task], EvalConfig(n=2, k=(1, 2), max_tokens=32))
    assert row["tasks"] == 1 and row["n"] == 2 and row["isolation"] == "sandbox"
    assert set(row["pass_at_k"]) == {"1", "2"} and row["adapter"]
    assert row["provenance"]["model_hash"]  # the quantized weights, hashed like any model

    cfg = GRPOConfig(
        iters=2,
        learning_rate=1e-3,
        beta=0.04,
        group_size=2,
        batch_size=1,
        max_completion_length=32,
        grad_checkpoint=False,
        steps_per_report=1,
        temperature=1.0,
        min_group_span=0.0,
    )
    g = tr.grpo(tiny_q4, [task], None, cfg, tmp_path, parent=sft, condition="sft_grpo")
    s = g.manifest["summary"]
    assert s["reference_weights"] == "shared" and s["reference_model"] == "base + parent adapter"
    train = [json.loads(x) for x in (g.path / "metrics.jsonl").read_text().splitlines()]
    kl = [r["kl"] for r in train if r["event"] == "train"]
    assert len(kl) == 2 and kl[0] == pytest.approx(0.0, abs=1e-6) and kl[1] > 0  # it moved
    after = _lora_only(g.path)
    assert any((after[k] != w[k]).any().item() for k in w)  # the parent's adapter trained on

    r = tr.rft(
        tiny_q4,
        [task],
        None,
        RFTConfig(samples=2, temperature=1.0, max_tokens=32, threshold=0.0, sft=QUICK),
        tmp_path,
        parent=sft,
    )
    assert r.manifest["rft"]["total"] == 2 and r.manifest["rft"]["kept"] >= 1
    _lora_only(r.adapter_path)
