"""Tests for jacrl.models.registry (resolution, the cached loader), jacrl.blas (fast BLAS) and
jacrl.models.tiny_model (the offline jac-tiny build).

Real MLX, no mocks of the model stack; the build test uses tiny dimensions so it runs in seconds.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import mlx.core as mx
import pytest

from jacrl import blas
from jacrl.cli.models import run_tiny_model
from jacrl.models import registry as models
from jacrl.models import tiny_model
from jacrl.models.registry import ModelError
from jacrl.models.tiny_model import TinyModelConfig
from jacrl.project import project

JAC_TINY = project().models / models.TINY

# A build small enough for a unit test: 20 files, 1 layer of width 32, 3 steps.
TINY_KNOBS = dict(
    steps=3,
    max_files=20,
    vocab_size=400,
    hidden_size=32,
    num_layers=1,
    num_heads=2,
    num_kv_heads=1,
    intermediate_size=64,
    batch_size=2,
    seq_len=32,
    eval_every=3,
    eval_windows=2,
    log_every=1,
)


def _fake_model(path: Path) -> Path:
    path.mkdir(parents=True)
    (path / "config.json").write_text("{}")
    return path


def _registry(root: Path, body: str) -> Path:
    reg = root / "models" / "registry.toml"
    reg.parent.mkdir(parents=True, exist_ok=True)
    reg.write_text(body)
    return reg


# ---------------------------------------------------------------------------- resolve


def test_resolve_by_path(tmp_path):
    d = _fake_model(tmp_path / "m")
    assert models.resolve(d) == d.resolve()
    assert models.resolve(str(d)) == d.resolve()


def test_resolve_by_name_relative_to_repo_root(tmp_path):
    d = _fake_model(tmp_path / "models" / "foo")
    reg = _registry(tmp_path, '[models.foo]\npath = "models/foo"\nnotes = "x"\n')
    assert models.resolve("foo", registry=reg) == d.resolve()


def test_resolve_unknown_name_names_registry(tmp_path):
    reg = _registry(tmp_path, '[models.foo]\npath = "models/foo"\n')
    with pytest.raises(ModelError) as e:
        models.resolve("no-such-model", registry=reg)
    msg = str(e.value)
    assert "no-such-model" in msg and "registry.toml" in msg and "foo" in msg
    assert "\n" not in msg


def test_resolve_missing_config(tmp_path):
    (tmp_path / "models" / "foo").mkdir(parents=True)
    reg = _registry(tmp_path, '[models.foo]\npath = "models/foo"\n')
    with pytest.raises(ModelError, match="no config.json"):
        models.resolve("foo", registry=reg)
    with pytest.raises(ModelError, match="no config.json"):
        models.resolve(tmp_path / "models" / "foo")


def test_repo_registry_has_jac_tiny():
    entry = models.read_registry()["jac-tiny"]
    assert entry["path"] == "models/jac-tiny"


def test_resolve_jac_tiny_by_name():
    assert models.resolve("jac-tiny") == JAC_TINY.resolve()


# ---------------------------------------------------------------------------- load / generate


@pytest.fixture(scope="module")
def jac_tiny():
    return models.load("jac-tiny")


def test_load_chat_template_and_generate(jac_tiny):
    from mlx_lm import generate

    model, tok = jac_tiny
    assert os.environ["HF_HUB_OFFLINE"] == "1" and os.environ["TRANSFORMERS_OFFLINE"] == "1"
    msgs = [
        {"role": "system", "content": "You write Jac code."},
        {"role": "user", "content": "Write a walker."},
    ]
    ids = tok.apply_chat_template(msgs, add_generation_prompt=True)
    text = tok.decode(ids)
    assert text.startswith("<|im_start|>system\nYou write Jac code.<|im_end|>\n")
    assert text.endswith("<|im_start|>user\nWrite a walker.<|im_end|>\n<|im_start|>assistant\n")
    assert tok.eos_token == "<|im_end|>" and tok.eos_token_id in tok.eos_token_ids

    # Seeded sampling: greedy decoding of a model this small collapses to its most frequent token
    # (indentation), which says nothing about whether generation works.
    import mlx.core as mx
    from mlx_lm.sample_utils import make_sampler

    mx.random.seed(0)
    out = generate(
        model,
        tok,
        prompt=tok.encode("walker Visitor {", add_special_tokens=False),
        max_tokens=24,
        sampler=make_sampler(temp=0.8),
    )
    assert isinstance(out, str) and out.strip()


def test_load_is_cached_and_fresh_is_a_private_copy():
    first = models.load("jac-tiny")
    assert models.load("jac-tiny") is first
    assert models.load(first) is first  # a loaded pair passes through
    model, _ = models.load("jac-tiny", fresh=True)
    assert model is not first[0] and models.load("jac-tiny") is first


def test_tokenizer_roundtrip_on_jac_file(jac_tiny):
    from tokenizers import Tokenizer

    _, tok = jac_tiny
    raw = Tokenizer.from_file(str(JAC_TINY / "tokenizer.json"))
    root, files = tiny_model.jaclang_jac_files()
    for path in files[:3] + files[-2:]:
        text = path.read_text(encoding="utf-8")
        ids = tok.encode(text, add_special_tokens=False)
        assert ids == raw.encode(text).ids  # transformers must not re-tokenize
        assert tok.decode(ids) == text


# ---------------------------------------------------------------------------- data split


def test_split_is_deterministic_and_disjoint():
    root, files = tiny_model.jaclang_jac_files()
    assert files and all(p.suffix == ".jac" for p in files)
    assert not any(
        ("drivers" in p.parts or "data" in p.parts) and project().root in p.parents for p in files
    )
    train, val = tiny_model.split_files(root, files, 0.05)
    rtrain, rval = tiny_model.split_files(root, files[::-1], 0.05)
    assert (set(rtrain), set(rval)) == (set(train), set(val))
    assert set(train).isdisjoint(val) and len(train) + len(val) == len(files)
    assert 0 < len(val) < 0.15 * len(files)
    # A file's side does not depend on which other files exist.
    sub_train, sub_val = tiny_model.split_files(root, files[::2], 0.05)
    assert set(sub_val) <= set(val) or len(sub_val) == 1


# ---------------------------------------------------------------------------- fast BLAS


def test_fast_blas_env_shape():
    env = blas.fast_blas_env()
    # empty exactly where no OpenBLAS is installed (then MLX keeps its bundled BLAS)
    assert bool(env) == (blas.find_openblas() is not None)
    assert not env or set(env) == {"LD_PRELOAD", "OPENBLAS_NUM_THREADS"}
    assert not env or (Path(env["LD_PRELOAD"]).is_file() and int(env["OPENBLAS_NUM_THREADS"]) >= 1)


def test_ensure_fast_blas_reexecs_once(monkeypatch):
    calls = []
    monkeypatch.setattr(blas, "find_openblas", lambda: "/lib/libopenblasp-r0.so")
    monkeypatch.setattr(blas.os, "execve", lambda *a: calls.append(a))
    monkeypatch.delenv("LD_PRELOAD", raising=False)
    monkeypatch.delenv("JACRL_NO_FAST_BLAS", raising=False)
    monkeypatch.delenv(blas.REEXEC_GUARD, raising=False)
    blas.ensure_fast_blas()
    ((exe, argv, env),) = calls
    assert env["LD_PRELOAD"] == "/lib/libopenblasp-r0.so" and env[blas.REEXEC_GUARD] == "1"
    assert argv[0] == exe

    # Already re-exec'd, already preloaded, or opted out: no-op.
    for var, val in [
        (blas.REEXEC_GUARD, "1"),
        ("LD_PRELOAD", "/x.so"),
        ("JACRL_NO_FAST_BLAS", "1"),
    ]:
        monkeypatch.setenv(var, val)
        blas.ensure_fast_blas()
        monkeypatch.delenv(var)
    assert len(calls) == 1


# ---------------------------------------------------------------------------- build


def test_tiny_build_is_deterministic_and_loadable(tmp_path):
    a = tiny_model.build_tiny_model(tmp_path / "a", log=lambda m: None, **TINY_KNOBS)
    b = tiny_model.build_tiny_model(tmp_path / "b", log=lambda m: None, **TINY_KNOBS)
    assert a.sha256 == b.sha256
    assert a.train_loss == b.train_loss and a.val_loss == b.val_loss
    assert len(a.train_loss) == 3 and [s for s, _ in a.val_loss] == [0, 3]

    files = {p.name for p in (tmp_path / "a").iterdir()}
    assert {"config.json", "model.safetensors", "tokenizer.json", "MODEL_CARD.md"} <= files
    assert not (tmp_path / "a.building").exists()
    cfg = json.loads((tmp_path / "a" / "config.json").read_text())
    assert cfg["model_type"] == "qwen2" and cfg["hidden_size"] == 32 and cfg["eos_token_id"] == 2
    card = (tmp_path / "a" / "MODEL_CARD.md").read_text()
    assert "final validation loss" in card and a.sha256 in card

    model, tok = models.load(tmp_path / "a")
    ids = tok.apply_chat_template(
        [{"role": "system", "content": "s"}, {"role": "user", "content": "u"}],
        add_generation_prompt=True,
    )
    assert model(mx.array([ids])).shape == (1, len(ids), cfg["vocab_size"])

    c = tiny_model.build_tiny_model(tmp_path / "c", log=lambda m: None, **{**TINY_KNOBS, "seed": 1})
    assert c.sha256 != a.sha256


def test_build_refuses_to_overwrite_non_model_dir(tmp_path):
    (tmp_path / "keep.txt").write_text("precious")
    with pytest.raises(ModelError, match="not a model directory"):
        tiny_model.build_tiny_model(tmp_path, log=lambda m: None, **TINY_KNOBS)
    assert (tmp_path / "keep.txt").exists()


def test_cli_parser():
    from jacrl.cli import build_parser

    args = build_parser().parse_args(["tiny-model", "--steps", "7", "--seed", "3"])
    assert (args.steps, args.seed, args.func) == (7, 3, run_tiny_model)
    assert args.out is None  # resolved to the project's models/jac-tiny when run
    assert TinyModelConfig().steps == build_parser().parse_args(["tiny-model"]).steps


def test_folded_decode_attention_gives_the_same_logits():
    """`fold_gqa`: the loader folds jac-tiny's attention (Qwen2, 4 query heads on 2 key/value
    heads); one-token steps over a batch with a left-padded cache (as BatchGenerator keeps it)
    give logits bit for bit equal to mlx-lm's own attention, and prefill and training shapes
    take mlx-lm's path. Folding twice changes nothing; a module of another class is left as is."""
    import mlx.nn as nn
    from mlx_lm.models import qwen2
    from mlx_lm.models.cache import BatchKVCache

    from jacrl.models.attention import FOLDED, fold_gqa

    model, _ = models.load("jac-tiny", fresh=True)
    attn = [layer.self_attn for layer in model.model.layers]
    assert all(type(a) is FOLDED[qwen2.Attention] for a in attn)
    assert fold_gqa(model) == len(attn)  # idempotent
    mx.random.seed(0)
    prompt = mx.random.randint(0, 4000, (3, 9))

    def logits(folded: bool) -> list:
        for a in attn:
            a.__class__ = FOLDED[qwen2.Attention] if folded else qwen2.Attention
        cache = [BatchKVCache(left_padding=[0, 2, 4]) for _ in attn]
        out = [model(prompt, cache=cache)]  # prefill: mlx-lm's path either way
        for t in range(4):  # one-token steps: the folded path
            out.append(model(mx.array([[5 + t], [6 + t], [7 + t]]), cache=cache))
        mx.eval(out)
        return out

    plain, folded = logits(False), logits(True)
    assert all(mx.array_equal(p, f).item() for p, f in zip(plain, folded, strict=True))
    other = nn.Sequential(nn.Linear(2, 2))
    assert fold_gqa(other) == 0 and type(other.layers[0]) is nn.Linear
